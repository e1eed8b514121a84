// Simulator for noise_scale.stan: tau_sq (unless given), mu and sigma from the
// prior, then y.
data {
  int<lower=0> N;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real<lower=0> tau_sq_given;
}
generated quantities {
  real<lower=0> tau_sq = hyper_given ? tau_sq_given[1] : inv_gamma_rng(1, 1);
  real mu = normal_rng(0, sqrt(tau_sq));
  real<lower=0> sigma = lognormal_rng(0, 0.1);
  vector[N] y = to_vector(normal_rng(rep_vector(mu, N), sigma));
}

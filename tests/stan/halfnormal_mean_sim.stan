// Simulator for halfnormal_mean.stan: tau half-normal(0, 2), mu given tau, then y.
data {
  int<lower=0> N;
}
generated quantities {
  real<lower=0> tau = abs(normal_rng(0, 2));
  real mu = normal_rng(0, tau);
  vector[N] y = to_vector(normal_rng(rep_vector(mu, N), 1));
}

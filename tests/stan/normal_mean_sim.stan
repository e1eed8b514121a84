// Simulator for normal_mean.stan: mu from its prior, then y given mu.
data {
  int<lower=0> N;
  real<lower=0> sigma;
  real<lower=0> tau;
}
generated quantities {
  real mu = normal_rng(0, tau);
  vector[N] y = to_vector(normal_rng(rep_vector(mu, N), sigma));
}

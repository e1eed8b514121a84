// Simulator for normal_mean.stan with the prior scale of mu multiplied by the data
// variable `factor` (factor = 1: the right simulator; 1.2: the "prior scale 1.2x"
// planted bug of the simulator check's tests and power study).
data {
  int<lower=0> N;
  real<lower=0> sigma;
  real<lower=0> tau;
  real<lower=0> factor;
}
generated quantities {
  real mu = normal_rng(0, factor * tau);
  vector[N] y = to_vector(normal_rng(rep_vector(mu, N), sigma));
}

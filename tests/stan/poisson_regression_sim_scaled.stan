// Simulator for poisson_regression.stan with the Poisson rate multiplied by the data
// variable `factor` (factor = 1: the right simulator; 2: the "Poisson rate 2x" planted
// bug of the simulator check).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  real<lower=0> factor;
}
generated quantities {
  real alpha = normal_rng(0, 1);
  vector[K] beta = to_vector(normal_rng(rep_vector(0, K), 0.5));
  array[N] int y = poisson_log_rng(alpha + X * beta + log(factor));
}

// Simulator for stan_models/linear_regression.stan whose data noise sd is
// multiplied by the data variable `factor` (factor = 1: the right simulator; 1.25:
// the "likelihood noise 1.25x" planted bug of the simulator check).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  real<lower=0> factor;
}
generated quantities {
  real<lower=0> sigma_sq = inv_gamma_rng(1, 1);
  real<lower=0> scale_sq = inv_gamma_rng(1, 1);
  real alpha = normal_rng(0, sqrt(scale_sq));
  vector[K] beta = to_vector(normal_rng(rep_vector(0, K), sqrt(scale_sq)));
  vector[N] y = to_vector(normal_rng(alpha + X * beta, factor * sqrt(sigma_sq)));
}

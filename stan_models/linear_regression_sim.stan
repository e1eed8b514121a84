// Simulator for linear_regression.stan: hyperparameters (unless given), then
// coefficients from the prior, then y given the covariates X.
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real<lower=0> sigma_sq_given;
  array[hyper_given] real<lower=0> scale_sq_given;
}
generated quantities {
  real<lower=0> sigma_sq = hyper_given ? sigma_sq_given[1] : inv_gamma_rng(1, 1);
  real<lower=0> scale_sq = hyper_given ? scale_sq_given[1] : inv_gamma_rng(1, 1);
  real alpha = normal_rng(0, sqrt(scale_sq));
  vector[K] beta;
  for (k in 1:K) {
    beta[k] = normal_rng(0, sqrt(scale_sq));
  }
  vector[N] y = to_vector(normal_rng(alpha + X * beta, sqrt(sigma_sq)));
}

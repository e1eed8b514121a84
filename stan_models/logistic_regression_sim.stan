// Simulator for logistic_regression.stan.
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real<lower=0> scale_sq_given;
}
generated quantities {
  real<lower=0> scale_sq = hyper_given ? scale_sq_given[1] : inv_gamma_rng(1, 1);
  real alpha = normal_rng(0, sqrt(scale_sq));
  vector[K] beta;
  for (k in 1:K) {
    beta[k] = normal_rng(0, sqrt(scale_sq));
  }
  array[N] int y = bernoulli_logit_rng(alpha + X * beta);
}

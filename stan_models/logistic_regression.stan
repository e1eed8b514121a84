// Bayesian logistic regression (SPEC section 5): y ~ bernoulli_logit(alpha + X beta),
// alpha, beta_k ~ normal(0, scale), hyperparameter scale_sq ~ inv_gamma(1, 1).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> scale_sq;
  real alpha;
  vector[K] beta;
}
model {
  scale_sq ~ inv_gamma(1, 1);
  alpha ~ normal(0, sqrt(scale_sq));
  beta ~ normal(0, sqrt(scale_sq));
  if (!prior_only) {
    y ~ bernoulli_logit(alpha + X * beta);
  }
}

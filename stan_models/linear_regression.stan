// Bayesian linear regression (SPEC section 5): y ~ normal(alpha + X beta, sigma),
// alpha, beta_k ~ normal(0, scale), hyperparameters sigma_sq, scale_sq ~ inv_gamma(1, 1).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> sigma_sq;
  real<lower=0> scale_sq;
  real alpha;
  vector[K] beta;
}
model {
  sigma_sq ~ inv_gamma(1, 1);
  scale_sq ~ inv_gamma(1, 1);
  alpha ~ normal(0, sqrt(scale_sq));
  beta ~ normal(0, sqrt(scale_sq));
  if (!prior_only) {
    y ~ normal(alpha + X * beta, sqrt(sigma_sq));
  }
}

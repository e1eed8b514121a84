// Conjugate test model: y_i ~ normal(mu, sigma) with mu ~ normal(0, tau),
// sigma and tau known, so log p(y) is a multivariate normal density.
data {
  int<lower=0> N;
  vector[N] y;
  real<lower=0> sigma;
  real<lower=0> tau;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
}
model {
  mu ~ normal(0, tau);
  if (!prior_only) {
    y ~ normal(mu, sigma);
  }
}

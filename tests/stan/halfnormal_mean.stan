// Test model for the Gaussian-base path: y_i ~ normal(mu, 1), mu ~ normal(0, tau),
// tau ~ half-normal(0, 2) written as normal(0, 2) on a positive tau, so the program's
// prior integrates to c = 1/2.  log p(y) = log of the integral over tau of
// N(y; 0, I + tau^2 11') times the half-normal density: a 1-D quadrature.
data {
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> tau;
  real mu;
}
model {
  tau ~ normal(0, 2);
  mu ~ normal(0, tau);
  if (!prior_only) {
    y ~ normal(mu, 1);
  }
}

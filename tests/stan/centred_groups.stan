// Test model without a posterior mode: J centred group means theta[j] ~ normal(mu, tau)
// with J >= 2, so that in the unconstrained space (mu, log tau, theta) the joint density
// grows like tau^(1 - J) as tau -> 0 with every theta[j] = mu: no Laplace fit.
// tau ~ half-normal(0, 2) written as normal(0, 2) on a positive tau (the program's prior
// integrates to c = 1/2).  y[j] ~ N(mu, 1 + tau^2) given mu and tau, and mu ~ N(0, 1), so
// log p(y) is a 1-D quadrature over tau of N(y; 0, (1 + tau^2) I + 11').
data {
  int<lower=2> J;
  vector[J] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] theta;
}
model {
  mu ~ normal(0, 1);
  tau ~ normal(0, 2);
  theta ~ normal(mu, tau);
  if (!prior_only) {
    y ~ normal(theta, 1);
  }
}

// Test model for the real-data protocol: y_n ~ normal(mu, sigma) with
// mu ~ normal(0, sqrt(tau_sq)), hyperparameter tau_sq ~ inv_gamma(1, 1), and a
// parameter (not a hyperparameter) sigma ~ lognormal(0, 0.1): the prior all but
// fixes the noise scale near 1, so data with noise sd 5 conflict with it.
data {
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> tau_sq;
  real mu;
  real<lower=0> sigma;
}
model {
  tau_sq ~ inv_gamma(1, 1);
  mu ~ normal(0, sqrt(tau_sq));
  sigma ~ lognormal(0, 0.1);
  if (!prior_only) {
    y ~ normal(mu, sigma);
  }
}

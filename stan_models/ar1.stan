// Autoregressive model of order 1 (SPEC section 5):
//   y[n] ~ normal(alpha + beta * y[n - 1], sigma),
// alpha ~ normal(0, 1), beta ~ normal(1, 0.1), sigma_sq ~ inv_gamma(1, 1);
// all three unknowns are hyperparameters (there are no lower-level parameters).
// The first observation y0 is conditioned on, not modelled: the data are y0 and
// the N observations after it, y[1..N], and the likelihood is
// p(y | y0, alpha, beta, sigma). The simulator keeps y0 from the data and draws
// y[1..N] forward from it, so its joint is exactly this model's.
data {
  int<lower=1> N;
  real y0;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
transformed data {
  // Lagged series: y_lag[n] is the observation before y[n].
  vector[N] y_lag = append_row(rep_vector(y0, 1), y[1:(N - 1)]);
}
parameters {
  real alpha;
  real beta;
  real<lower=0> sigma_sq;
}
model {
  alpha ~ normal(0, 1);
  beta ~ normal(1, 0.1);
  sigma_sq ~ inv_gamma(1, 1);
  if (!prior_only) {
    y ~ normal(alpha + beta * y_lag, sqrt(sigma_sq));
  }
}

// Two-component Gaussian mixture in D dimensions (SPEC section 5; D = 2 for
// Old Faithful) with spherical within-cluster variance sigma_sq:
//   y[n] ~ w[1] normal(mu[1], sigma I) + w[2] normal(mu[2], sigma I),
// mu[k] ~ normal(0, scale) per coordinate, w ~ dirichlet(1, 1);
// hyperparameters scale_sq, sigma_sq ~ inv_gamma(1, 1). The cluster
// assignments are summed out (log_sum_exp), so they are not parameters.
//
// The prior is exchangeable in the two components (no ordering constraint), as
// SPEC states, so the posterior has two symmetric modes (label switching). An
// exact posterior draw from the simulator lies in either mode at random; a
// sampler that stays in one mode misses half the posterior mass, which the
// divergence bound is meant to show rather than hide. Do not add an ordering.
data {
  int<lower=1> N;
  int<lower=1> D;
  matrix[N, D] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> scale_sq;
  real<lower=0> sigma_sq;
  simplex[2] w;
  array[2] vector[D] mu;
}
model {
  scale_sq ~ inv_gamma(1, 1);
  sigma_sq ~ inv_gamma(1, 1);
  w ~ dirichlet(rep_vector(1, 2));
  for (k in 1:2) {
    mu[k] ~ normal(0, sqrt(scale_sq));
  }
  if (!prior_only) {
    // log normal(y[n] | mu[k], sigma I) for all n at once, per component k.
    real log_norm = -0.5 * D * log(2 * pi() * sigma_sq);
    vector[N] lp1 = log(w[1]) + log_norm
                    - rows_dot_self(y - rep_matrix(mu[1]', N)) / (2 * sigma_sq);
    vector[N] lp2 = log(w[2]) + log_norm
                    - rows_dot_self(y - rep_matrix(mu[2]', N)) / (2 * sigma_sq);
    target += sum(log_sum_exp(lp1, lp2));
  }
}

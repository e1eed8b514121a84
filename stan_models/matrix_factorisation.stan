// Bayesian matrix factorisation (SPEC section 5): the observed entries of
// Y (N x D) ~ normal(U V, sigma), U (N x K) ~ normal(0, sigma_u),
// V (K x D) ~ normal(0, sigma_v); hyperparameters sigma_sq, sigma_u_sq,
// sigma_v_sq ~ inv_gamma(1, 1). No intercept: the data are expected centred.
// The observed cells come as a long list (obs_row[i], obs_col[i], y[i]).
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> K;
  int<lower=0> n_obs;
  array[n_obs] int<lower=1, upper=N> obs_row;
  array[n_obs] int<lower=1, upper=D> obs_col;
  vector[n_obs] y;
  int<lower=0, upper=1> prior_only;
}
transformed data {
  // Position of each observed cell in to_vector() of an N x D matrix
  // (column-major), so the likelihood is one matrix product and one gather.
  array[n_obs] int obs_cell;
  for (i in 1:n_obs) {
    obs_cell[i] = (obs_col[i] - 1) * N + obs_row[i];
  }
}
parameters {
  real<lower=0> sigma_sq;
  real<lower=0> sigma_u_sq;
  real<lower=0> sigma_v_sq;
  matrix[N, K] U;
  matrix[K, D] V;
}
model {
  sigma_sq ~ inv_gamma(1, 1);
  sigma_u_sq ~ inv_gamma(1, 1);
  sigma_v_sq ~ inv_gamma(1, 1);
  to_vector(U) ~ normal(0, sqrt(sigma_u_sq));
  to_vector(V) ~ normal(0, sqrt(sigma_v_sq));
  if (!prior_only) {
    y ~ normal(to_vector(U * V)[obs_cell], sqrt(sigma_sq));
  }
}

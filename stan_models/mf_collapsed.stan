// Representation study (SPEC section 5), collapsed form: U integrated out of
// mf_uncollapsed.stan. With U[i] ~ normal(0, sigma_u I_K), each row of Y is
//   Y[i] ~ multi_normal(0, sigma_u^2 V' V + sigma^2 I_D),
// independently given V; V (K x D) ~ normal(0, sigma_v). Hyperparameters fixed:
// sigma = sigma_u = sigma_v = 1. The study uses N = 50, K = 5, D = 25.
// One Cholesky factor of the D x D covariance per evaluation, shared by all N
// rows in one vectorised multi_normal_cholesky call.
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> K;
  matrix[N, D] Y;
  int<lower=0, upper=1> prior_only;
}
transformed data {
  real sigma = 1;
  real sigma_u = 1;
  real sigma_v = 1;
  array[N] row_vector[D] Y_rows;
  for (i in 1:N) {
    Y_rows[i] = Y[i];
  }
  row_vector[D] zero = rep_row_vector(0, D);
}
parameters {
  matrix[K, D] V;
}
model {
  to_vector(V) ~ normal(0, sigma_v);
  if (!prior_only) {
    matrix[D, D] L = cholesky_decompose(
        add_diag(square(sigma_u) * crossprod(V), square(sigma)));
    Y_rows ~ multi_normal_cholesky(zero, L);
  }
}

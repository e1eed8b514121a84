// A mean with a multi_normal prior, an LKJ Cholesky factor and half-normal scales;
// vector observations y[n] ~ multi_normal_cholesky(mu, diag_pre_multiply(tau, L)).
data {
  int<lower=1> D;
  int<lower=0> N;
  array[N] vector[D] y;
  cov_matrix[D] prior_cov;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector[D] mu;
  cholesky_factor_corr[D] L;
  vector<lower=0>[D] tau;
}
model {
  mu ~ multi_normal(rep_vector(0, D), prior_cov);
  L ~ lkj_corr_cholesky(2);
  tau ~ normal(0, 1);
  if (!prior_only) {
    y ~ multi_normal_cholesky(mu, diag_pre_multiply(tau, L));
  }
}

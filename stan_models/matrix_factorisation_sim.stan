// Simulator for matrix_factorisation.stan: hyperparameters (unless given), then
// U and V from the prior, then y at the observed cells (obs_row, obs_col).
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> K;
  int<lower=0> n_obs;
  array[n_obs] int<lower=1, upper=N> obs_row;
  array[n_obs] int<lower=1, upper=D> obs_col;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real<lower=0> sigma_sq_given;
  array[hyper_given] real<lower=0> sigma_u_sq_given;
  array[hyper_given] real<lower=0> sigma_v_sq_given;
}
generated quantities {
  real<lower=0> sigma_sq = hyper_given ? sigma_sq_given[1] : inv_gamma_rng(1, 1);
  real<lower=0> sigma_u_sq = hyper_given ? sigma_u_sq_given[1] : inv_gamma_rng(1, 1);
  real<lower=0> sigma_v_sq = hyper_given ? sigma_v_sq_given[1] : inv_gamma_rng(1, 1);
  matrix[N, K] U = to_matrix(normal_rng(rep_vector(0, N * K), sqrt(sigma_u_sq)), N, K);
  matrix[K, D] V = to_matrix(normal_rng(rep_vector(0, K * D), sqrt(sigma_v_sq)), K, D);
  vector[n_obs] y;
  {
    matrix[N, D] UV = U * V;
    for (i in 1:n_obs) {
      y[i] = normal_rng(UV[obs_row[i], obs_col[i]], sqrt(sigma_sq));
    }
  }
}

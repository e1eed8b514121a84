// Shared simulator for mf_uncollapsed.stan and mf_collapsed.stan: V and U from
// the prior, then the fully observed Y = U V + noise, with
// sigma = sigma_u = sigma_v = 1 fixed. V is a parameter of both programs, U of
// the uncollapsed one only (for the collapsed program it is an extra output and
// ignored), so one simulated (V, U, Y) gives an exact posterior draw for both.
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> K;
  // No hyperparameters (all fixed to 1): declared only because the toolkit
  // supplies hyper_given to every simulator; it has no effect here.
  int<lower=0, upper=1> hyper_given;
}
transformed data {
  real sigma = 1;
  real sigma_u = 1;
  real sigma_v = 1;
}
generated quantities {
  matrix[K, D] V = to_matrix(normal_rng(rep_vector(0, K * D), sigma_v), K, D);
  matrix[N, K] U = to_matrix(normal_rng(rep_vector(0, N * K), sigma_u), N, K);
  matrix[N, D] Y = to_matrix(normal_rng(to_vector(U * V), sigma), N, D);
}

// Representation study (SPEC section 5), uncollapsed form: fully observed
// Y (N x D) ~ normal(U V, sigma), U (N x K) ~ normal(0, sigma_u),
// V (K x D) ~ normal(0, sigma_v), with sigma = sigma_u = sigma_v = 1 fixed
// (no hyperparameters). The study uses N = 50, K = 5, D = 25. Same joint over
// (V, Y) as mf_collapsed.stan, which integrates U out; mf_pair_sim.stan
// simulates for both.
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
}
parameters {
  matrix[N, K] U;
  matrix[K, D] V;
}
model {
  to_vector(U) ~ normal(0, sigma_u);
  to_vector(V) ~ normal(0, sigma_v);
  if (!prior_only) {
    to_vector(Y) ~ normal(to_vector(U * V), sigma);
  }
}

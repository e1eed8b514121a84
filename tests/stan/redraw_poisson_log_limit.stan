// poisson_log_rng refuses log rates above 20.79 (2^30), which poisson_log_lpmf accepts:
// a failure the model does not share, so no redraw is exact.
data {
  int<lower=0> N;
  array[N] int<lower=0> y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real eta;
}
model {
  eta ~ normal(0, 30);
  if (!prior_only) {
    y ~ poisson_log(eta);
  }
}

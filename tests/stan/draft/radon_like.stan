// A centred hierarchical intercept model shaped like posteriordb's
// radon_hierarchical_intercept_centered: J group intercepts under a half-normal scale,
// a half-normal noise scale.  c = 1/4 exactly (the two half-normals).
data {
  int<lower=1> J;
  int<lower=0> N;
  array[N] int<lower=1, upper=J> g;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector[J] alpha;
  real mu_alpha;
  real<lower=0> sigma_alpha;
  real<lower=0> sigma_y;
}
model {
  sigma_alpha ~ normal(0, 1);
  sigma_y ~ normal(0, 1);
  mu_alpha ~ normal(0, 10);
  alpha ~ normal(mu_alpha, sigma_alpha);
  if (!prior_only) {
    y ~ normal(alpha[g], sigma_y);
  }
}

// Bayesian linear regression with known noise sd, the conjugate case of
// bread_stan/conjugate.py (LinearRegression): w ~ normal(0, prior_sd),
// y ~ normal(X w, noise_sd).  log p(y) is known in closed form, so AIS through
// the Stan bridge can be checked against the exact value.  The transformed
// parameter and the generated quantities do not touch the density; they are
// there for the tests of names and of seeded generated quantities.
data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] X;
  vector[N] y;
  real<lower=0> prior_sd;
  real<lower=0> noise_sd;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector[K] w;
}
transformed parameters {
  real w_norm_sq = dot_self(w);
}
model {
  w ~ normal(0, prior_sd);
  if (!prior_only) {
    y ~ normal(X * w, noise_sd);
  }
}
generated quantities {
  vector[N] y_rep = to_vector(normal_rng(X * w, noise_sd));
}

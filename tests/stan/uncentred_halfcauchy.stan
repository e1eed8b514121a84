// Test model for path="auto": a small regression with an uncentred predictor (x in the
// thousands) and a half-Cauchy noise scale, y ~ normal(a + b * x, sigma), a, b ~
// normal(0, 100), sigma ~ half-Cauchy(0, 2.5).  Its log likelihood varies by far more
// than 1e12 nats over prior draws, so tempering from the prior strands chains.
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real a;
  real b;
  real<lower=0> sigma;
}
model {
  a ~ normal(0, 100);
  b ~ normal(0, 100);
  sigma ~ cauchy(0, 2.5);
  if (!prior_only) {
    y ~ normal(a + b * x, sigma);
  }
}

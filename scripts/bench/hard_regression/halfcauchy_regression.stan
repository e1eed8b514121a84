// A regression with an uncentred predictor and a half-Cauchy scale (scripts/bench/bench_hard.py):
// y ~ normal(alpha + beta * x, sigma), alpha, beta ~ normal(0, 100), sigma ~ half-Cauchy(0, 2.5).
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real alpha;
  real beta;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 100);
  beta ~ normal(0, 100);
  sigma ~ cauchy(0, 2.5);
  if (!prior_only) {
    y ~ normal(alpha + beta * x, sigma);
  }
}

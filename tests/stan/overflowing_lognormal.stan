// Positive effects under a lognormal with a half-Cauchy(0, 100) scale: a few percent of
// the prior's draws overflow to inf (exp of a normal with sd in the hundreds), though no
// _rng refuses its arguments.
data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real<lower=0> sigma;
  vector<lower=0>[3] a;
}
model {
  sigma ~ cauchy(0, 100);
  a ~ lognormal(0, sigma);
  y ~ normal(atan(sum(a)), 1);
}

// Hand-written prior of mixed_loop.stan (reference for the split test).
data {
  int<lower=1> G;
  real<lower=0> scale;
}
parameters {
  vector[G] a;
  real<lower=0> s;
  real<lower=0, upper=1> w;
}
model {
  target += normal_lpdf(s | 0, scale) - normal_lccdf(0 | 0, scale);
  target += normal_lpdf(a | 0, 1);
  target += beta_lpdf(w | 2, 2);
}

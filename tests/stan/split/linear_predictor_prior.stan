// The prior of linear_predictor.stan, written by hand.
data {
  int<lower=1> N;
  vector[N] x;
  vector[N] y;
  array[N] int<lower=0, upper=1> z;
}
parameters {
  real a;
  real b;
  real log_s;
}
model {
  real s = exp(log_s);
  log_s ~ normal(0, 1);
  a ~ normal(0, s);
  b ~ normal(0, 1);
}

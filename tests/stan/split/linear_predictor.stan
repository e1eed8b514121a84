// Likelihood work outside the likelihood statements: a linear predictor declared with
// its value, a loop filling probabilities from it, a scale the prior reads too.
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
  vector[N] eta = a + b * x;
  vector[N] p;
  real s = exp(log_s);
  log_s ~ normal(0, 1);
  a ~ normal(0, s);
  b ~ normal(0, 1);
  for (n in 1:N) {
    p[n] = inv_logit(eta[n]);
  }
  y ~ normal(eta, s);
  z ~ bernoulli(p);
}

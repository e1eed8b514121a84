// A normal mean under a gamma(0.001, 0.001) precision, as in BUGS examples: about half
// of the prior's precision draws underflow to 0, so normal_rng(0, 1 / sqrt(tau)) is given
// an infinite scale and the prior cannot be simulated from (the model's own normal_lpdf
// refuses that scale too).
data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real<lower=0> tau;
  real mu;
}
model {
  tau ~ gamma(0.001, 0.001);
  mu ~ normal(0, 1 / sqrt(tau));
  y ~ normal(mu, 1);
}

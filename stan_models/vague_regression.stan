// A hard regression for AIS (issue 15): vague normal(0, 100) priors on three
// coefficients, an uncentred predictor x (values about 70-140) and a binary one z.
// The posterior is about 1e5 times narrower than the prior (in volume, far more)
// and the intercept and the slope on x are correlated near -1.
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] z;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector[3] b;
  real<lower=0> sigma;
}
model {
  b ~ normal(0, 100);
  sigma ~ normal(0, 20);
  if (!prior_only) {
    y ~ normal(b[1] + b[2] * z + b[3] * x, sigma);
  }
}

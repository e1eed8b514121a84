// sigma has an unbounded normal(0, 1) prior; normal_lpdf (and normal_rng) refuse
// sigma <= 0, so the model's joint distribution is the prior conditioned on sigma > 0
// (prior mass 1/2): the simulator redraws the other half.
data {
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real sigma;
}
model {
  mu ~ normal(0, 1);
  sigma ~ normal(0, 1);
  if (!prior_only) {
    y ~ normal(mu, sigma);
  }
}

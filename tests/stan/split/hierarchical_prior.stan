// Hand-written prior of hierarchical.stan (reference for the split test).
data {
  int<lower=0> J;
}
parameters {
  real mu;
  real<lower=0> tau;
  array[J] real theta;
}
model {
  target += normal_lpdf(mu | 0, 5) + cauchy_lpdf(tau | 0, 5)
            + normal_lpdf(theta | mu, tau);
}

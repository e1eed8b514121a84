// Eight schools, centred (the funnel that NUTS struggles with; tests/stan/eight_schools.stan
// is the non-centred form of the same model): no prior_only flag and no simulator.
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  array[J] real theta;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}

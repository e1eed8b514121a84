// Eight schools, centred: theta[j] ~ normal(mu, tau) in a loop, half-Cauchy tau.
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> tau;
  array[J] real theta;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  for (j in 1:J) {
    theta[j] ~ normal(mu, tau);
  }
  if (!prior_only) {
    y ~ normal(theta, sigma);
  }
}

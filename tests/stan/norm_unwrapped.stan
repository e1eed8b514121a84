// normal_mean.stan with a careless mistake: prior_only is declared but the
// likelihood is not inside `if (!prior_only)`, so the prior and joint agree.
data {
  int<lower=0> N;
  vector[N] y;
  real<lower=0> sigma;
  real<lower=0> tau;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
}
model {
  mu ~ normal(0, tau);
  y ~ normal(mu, sigma);
}

// normal_mean.stan with a careless mistake: mu has no prior statement, so the
// prior is flat (improper) on the real line.
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
  if (!prior_only) {
    y ~ normal(mu, sigma);
  }
}

// A prior truncated by its declared bound where the mass cut away depends on other
// parameters: theta ~ normal(mu, kappa) on theta > 0 keeps Phi(mu / kappa), so
// c = 1/2 (the half-normal kappa) times E[Phi(mu / kappa)] over mu and kappa.
data {
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> kappa;
  real<lower=0> theta;
}
model {
  mu ~ normal(0.5, 1);
  kappa ~ normal(0, 1);
  theta ~ normal(mu, kappa);
  if (!prior_only) {
    y ~ normal(theta, 1);
  }
}

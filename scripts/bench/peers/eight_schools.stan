// Eight schools, non-centred (tests/stan/eight_schools.stan) with the prior_only split, for
// scripts/bench/bench_peers.py: y_j ~ normal(mu + tau * theta_tilde_j, sigma_j), mu ~ normal(0, 5),
// tau ~ half-Cauchy(0, 5), theta_tilde_j ~ normal(0, 1); the sigma_j are the schools'.
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> tau;
  array[J] real theta_tilde;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta_tilde ~ normal(0, 1);
  if (!prior_only) {
    for (j in 1:J) {
      y[j] ~ normal(mu + tau * theta_tilde[j], sigma[j]);
    }
  }
}

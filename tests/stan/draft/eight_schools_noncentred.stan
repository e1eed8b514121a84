// Eight schools, non-centred: theta is a transformed parameter, recomputed in the
// simulator; the likelihood is a loop over the schools.
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] theta_tilde;
}
transformed parameters {
  vector[J] theta = mu + tau * theta_tilde;
}
model {
  theta_tilde ~ std_normal();
  tau ~ normal(0, 5);
  mu ~ normal(0, 5);
  if (!prior_only) {
    for (j in 1:J) {
      y[j] ~ normal(theta[j], sigma[j]);
    }
  }
}

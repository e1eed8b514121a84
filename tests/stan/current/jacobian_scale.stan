// Stan 2.36+ `jacobian +=` (issue 43): the noise scale sigma = exp(log_sigma) with its
// Jacobian stated by hand, so that sigma ~ lognormal(0, 1) is the prior of sigma (and
// log_sigma ~ normal(0, 1)).  No prior_only: the run splits it; the drafter refuses
// jacobian +=, so the simulator is jacobian_scale_sim.stan.
data {
  int<lower=1> N;
  vector[N] y;
}
parameters {
  real log_sigma;
}
transformed parameters {
  real<lower=0> sigma = exp(log_sigma);
  jacobian += log_sigma;
}
model {
  sigma ~ lognormal(0, 1);
  y ~ normal(0, sigma);
}

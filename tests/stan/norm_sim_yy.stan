// normal_mean_sim.stan with a careless mistake: the data are written under the
// name yy, which the model does not read.
data {
  int<lower=0> N;
  real<lower=0> sigma;
  real<lower=0> tau;
}
generated quantities {
  real mu = normal_rng(0, tau);
  vector[N] yy = to_vector(normal_rng(rep_vector(mu, N), sigma));
}

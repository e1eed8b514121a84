// Simulator for noise_scale.stan with the scale of the hyperprior of tau_sq
// multiplied by the data variable `factor` (inv_gamma(1, factor); factor = 1: the
// right simulator; 2: the "hyperprior scale 2x" planted bug of the simulator check).
data {
  int<lower=0> N;
  real<lower=0> factor;
}
generated quantities {
  real<lower=0> tau_sq = inv_gamma_rng(1, factor);
  real mu = normal_rng(0, sqrt(tau_sq));
  real<lower=0> sigma = lognormal_rng(0, 0.1);
  vector[N] y = to_vector(normal_rng(rep_vector(mu, N), sigma));
}

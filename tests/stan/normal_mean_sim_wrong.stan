// A deliberately wrong simulator for normal_mean.stan: it reports one prior draw
// of mu but generates the data from another, independent one (the bug of a
// simulator that forgets to use its own parameter).  The reported mu is then a
// prior draw, not a posterior draw given the simulated y, typically a dozen
// posterior standard deviations (sigma / sqrt(N) = 0.22 for N = 20) away from
// the posterior, and BREAD's consistency check must fire.
data {
  int<lower=0> N;
  real<lower=0> sigma;
  real<lower=0> tau;
}
generated quantities {
  real mu = normal_rng(0, tau);
  vector[N] y = to_vector(normal_rng(rep_vector(normal_rng(0, tau), N), sigma));
}

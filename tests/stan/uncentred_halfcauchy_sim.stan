// Simulator for uncentred_halfcauchy.stan (no hyperparameters).
data {
  int<lower=0> N;
  vector[N] x;
  int<lower=0, upper=1> hyper_given;
}
generated quantities {
  real a = normal_rng(0, 100);
  real b = normal_rng(0, 100);
  real<lower=0> sigma = abs(cauchy_rng(0, 2.5));
  vector[N] y = to_vector(normal_rng(a + b * x, sigma));
}

// Simulator for halfcauchy_regression.stan (no hyperparameters).
data {
  int<lower=0> N;
  vector[N] x;
  int<lower=0, upper=1> hyper_given;
}
generated quantities {
  real alpha = normal_rng(0, 100);
  real beta = normal_rng(0, 100);
  real<lower=0> sigma = abs(cauchy_rng(0, 2.5));
  vector[N] y = to_vector(normal_rng(alpha + beta * x, sigma));
}

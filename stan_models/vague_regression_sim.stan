// Simulator for vague_regression.stan (no hyperparameters).
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] z;
  int<lower=0, upper=1> hyper_given;
}
generated quantities {
  vector[3] b;
  for (k in 1:3) {
    b[k] = normal_rng(0, 100);
  }
  real<lower=0> sigma = abs(normal_rng(0, 20));
  vector[N] y = to_vector(normal_rng(b[1] + b[2] * z + b[3] * x, sigma));
}

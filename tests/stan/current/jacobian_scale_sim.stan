// Simulator for jacobian_scale.stan: log_sigma from its prior (unless given), then y.
data {
  int<lower=1> N;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real log_sigma_given;
}
generated quantities {
  real log_sigma = hyper_given ? log_sigma_given[1] : normal_rng(0, 1);
  vector[N] y = to_vector(normal_rng(rep_vector(0, N), exp(log_sigma)));
}

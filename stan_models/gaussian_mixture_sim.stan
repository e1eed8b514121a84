// Simulator for gaussian_mixture.stan: scale_sq, sigma_sq (unless given), then
// w and the means from the prior, then for each point a component z[n] ~ w and
// y[n] ~ normal(mu[z[n]], sigma I). z is an extra output (the model sums it out).
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real<lower=0> scale_sq_given;
  array[hyper_given] real<lower=0> sigma_sq_given;
}
generated quantities {
  real<lower=0> scale_sq = hyper_given ? scale_sq_given[1] : inv_gamma_rng(1, 1);
  real<lower=0> sigma_sq = hyper_given ? sigma_sq_given[1] : inv_gamma_rng(1, 1);
  simplex[2] w = dirichlet_rng(rep_vector(1, 2));
  array[2] vector[D] mu;
  for (k in 1:2) {
    mu[k] = to_vector(normal_rng(rep_vector(0, D), sqrt(scale_sq)));
  }
  array[N] int<lower=1, upper=2> z;
  matrix[N, D] y;
  for (n in 1:N) {
    z[n] = categorical_rng(w);
    y[n] = to_row_vector(normal_rng(mu[z[n]], sqrt(sigma_sq)));
  }
}

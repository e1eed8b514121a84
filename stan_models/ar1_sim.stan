// Simulator for ar1.stan: alpha, beta, sigma_sq (unless given), then
// y[1..N] forward from the observed starting value y0 (conditioned on, as in
// the model).
data {
  int<lower=1> N;
  real y0;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real alpha_given;
  array[hyper_given] real beta_given;
  array[hyper_given] real<lower=0> sigma_sq_given;
}
generated quantities {
  real alpha = hyper_given ? alpha_given[1] : normal_rng(0, 1);
  real beta = hyper_given ? beta_given[1] : normal_rng(1, 0.1);
  real<lower=0> sigma_sq = hyper_given ? sigma_sq_given[1] : inv_gamma_rng(1, 1);
  vector[N] y;
  {
    real previous = y0;
    for (n in 1:N) {
      y[n] = normal_rng(alpha + beta * previous, sqrt(sigma_sq));
      previous = y[n];
    }
  }
}

// Scales on <lower=0> with half-normal, exponential and half-Cauchy priors, a
// probability on <lower=0, upper=1> with a beta prior, and a uniform on its bounds.
data {
  int<lower=0> N;
  vector[N] y;
  array[N] int<lower=0, upper=1> hit;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> sigma_half_normal;
  real<lower=0> rate;
  real<lower=0> sigma_half_cauchy;
  real<lower=0, upper=1> p;
  real<lower=-2, upper=2> shift;
}
model {
  sigma_half_normal ~ normal(0, 1);
  rate ~ exponential(2);
  sigma_half_cauchy ~ cauchy(0, 0.5);
  p ~ beta(2, 3);
  shift ~ uniform(-2, 2);
  if (!prior_only) {
    y ~ normal(shift, sigma_half_normal + sigma_half_cauchy + 1 / (1 + rate));
    hit ~ bernoulli(p);
  }
}

// Poisson regression for the simulator check: y_n ~ poisson_log(alpha + X_n beta),
// alpha ~ normal(0, 1), beta ~ normal(0, 0.5).
data {
  int<lower=0> N;
  int<lower=0> K;
  matrix[N, K] X;
  array[N] int<lower=0> y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real alpha;
  vector[K] beta;
}
model {
  alpha ~ normal(0, 1);
  beta ~ normal(0, 0.5);
  if (!prior_only) {
    y ~ poisson_log(alpha + X * beta);
  }
}

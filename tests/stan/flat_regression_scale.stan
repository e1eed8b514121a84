// y = a + X b + e, e ~ normal(0, sigma), a and b flat (improper), sigma ~ half-normal(0, 2).
data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] X;
  vector[N] y;
}
parameters {
  real a;
  vector[K] b;
  real<lower=0> sigma;
}
model {
  sigma ~ normal(0, 2);
  y ~ normal(a + X * b, sigma);
}

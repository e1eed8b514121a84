// y = X b + e, e ~ normal(0, sigma), b flat (improper), sigma known (data):
// the posterior of b and its normaliser int p(y | b) db are closed-form.
data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] X;
  real<lower=0> sigma;
  vector[N] y;
}
parameters {
  vector[K] b;
}
model {
  y ~ normal(X * b, sigma);
}

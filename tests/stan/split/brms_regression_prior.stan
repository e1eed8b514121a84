// Hand-written prior of brms_regression.stan (reference for the split test).
data {
  int<lower=1> K;
}
parameters {
  vector[K - 1] b;
  real Intercept;
  real<lower=0> sigma;
}
model {
  target += normal_lpdf(b | 0, 1);
  target += student_t_lpdf(Intercept | 3, 8, 10);
  target += student_t_lpdf(sigma | 3, 0, 10) - student_t_lccdf(0 | 3, 0, 10);
}

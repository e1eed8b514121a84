// Hand-written prior of glm_logistic.stan (reference for the split test).
data {
  int<lower=1> K;
}
parameters {
  real alpha;
  vector[K] beta;
}
model {
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
}

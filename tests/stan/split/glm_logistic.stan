// A logistic regression through the glm likelihood, priors in one sum.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] x;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real alpha;
  vector[K] beta;
}
model {
  target += normal_lpdf(alpha | 0, 2.5) + normal_lpdf(beta | 0, 1)
            + bernoulli_logit_glm_lpmf(y | x, alpha, beta);
}

// 250 standard normal means, the data informing only their average: a model whose
// Gaussian q needs a 250 x 250 Hessian per mode search.
data {
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector[250] mu;
}
model {
  mu ~ normal(0, 1);
  if (!prior_only) {
    y ~ normal(mean(mu), 1);
  }
}

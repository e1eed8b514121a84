// A loop mixing priors and likelihood, a local block, an if/else and a truncation.
data {
  int<lower=1> N;
  int<lower=1> G;
  array[N] int<lower=1, upper=G> g;
  vector<lower=0>[N] y;
  real<lower=0> scale;
}
parameters {
  vector[G] a;
  real<lower=0> s;
  real<lower=0, upper=1> w;
}
model {
  vector[N] mu;
  s ~ normal(0, scale) T[0, ];
  for (j in 1:G) {
    a[j] ~ normal(0, 1);
  }
  for (n in 1:N) {
    mu[n] = exp(a[g[n]]);
    if (n % 2 == 0)
      y[n] ~ lognormal(log(mu[n]), s);
    else
      target += gamma_lpdf(y[n] | 2, 2 / mu[n]);
  }
  {
    real lw = log(w);
    target += beta_lpdf(w | 2, 2) + lw - lw;
  }
}

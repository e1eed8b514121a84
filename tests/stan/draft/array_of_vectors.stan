// Groups of K-vectors: z[g] ~ normal(m, s) per group, y[g] ~ normal(z[g], 1).
data {
  int<lower=1> G;
  int<lower=1> K;
  array[G] vector[K] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector[K] m;
  real<lower=0> s;
  array[G] vector[K] z;
}
model {
  m ~ normal(0, 1);
  s ~ exponential(1);
  for (g in 1:G) {
    z[g] ~ normal(m, s);
  }
  if (!prior_only) {
    for (g in 1:G) {
      y[g] ~ normal(z[g], 1);
    }
  }
}

// Hierarchical logistic and binomial: group intercepts with offset/multiplier, a
// half-Student-t group scale, a likelihood loop with a local, and a matrix of effects.
data {
  int<lower=0> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> g;
  vector[N] x;
  array[N] int<lower=0, upper=1> y;
  array[N] int<lower=0> trials;
  array[N] int<lower=0> k;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> sigma_a;
  vector<offset=0, multiplier=sigma_a>[J] a;
  array[2] real<lower=0> s;
  real beta;
  matrix[2, J] Z;
}
model {
  sigma_a ~ student_t(3, 0, 2.5);
  a ~ normal(0, sigma_a);
  s ~ gamma(2, 2);
  beta ~ logistic(0, 1);
  to_vector(Z) ~ std_normal();
  if (!prior_only) {
    for (n in 1:N) {
      real eta = a[g[n]] + beta * x[n] + Z[1, g[n]];
      y[n] ~ bernoulli_logit(eta);
    }
    k ~ binomial(trials, inv_logit(a[g] * s[1]));
  }
}

// A sum_to_zero_vector whose normal prior's scale is a parameter: the program's prior
// weights tau by (2 pi tau^2)^(-1/2) (the normal integrates over J - 1 dimensions, not
// J), so the drafter refuses it.
data {
  int<lower=1> N;
  int<lower=2> J;
  array[N] int<lower=1, upper=J> g;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> tau;
  sum_to_zero_vector[J] a;
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 1);
  a ~ normal(0, tau);
  y ~ normal(mu + a[g], 1);
}

// Functions from an #include, offset/multiplier, half-normals written with T[0, ],
// a transformed parameter, a likelihood local and nested loops over a matrix of data.
functions {
  #include twice.stanfunctions
}
data {
  int<lower=0> N;
  int<lower=0> M;
  matrix[N, M] y;
  vector[N] x;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<offset=1, multiplier=2> a;
  real<lower=0> sigma;
  real<lower=0> s2;
}
transformed parameters {
  real b = twice(a);
}
model {
  a ~ normal(1, 2);
  sigma ~ normal(0, 1) T[0, ];
  s2 ~ std_normal() T[0, ];
  if (!prior_only) {
    vector[N] mu = b + x;
    for (i in 1:N) {
      for (j in 1:M) {
        y[i, j] ~ normal(mu[i], sigma + s2);
      }
    }
  }
}
generated quantities {
  real z = normal_rng(0, 1);
}

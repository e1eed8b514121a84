// A simplex with a Dirichlet prior; categorical observations in a loop.
data {
  int<lower=1> K;
  int<lower=0> N;
  vector<lower=0>[K] concentration;
  array[N] int<lower=1, upper=K> y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  simplex[K] theta;
}
model {
  theta ~ dirichlet(concentration);
  if (!prior_only) {
    for (n in 1:N) {
      y[n] ~ categorical(theta);
    }
  }
}

// Stan 2.36+ stochastic matrices (issue 43): a column-stochastic transition matrix P
// and a row-stochastic matrix Q with Dirichlet priors, and counts y of each column.
data {
  int<lower=2> K;
  array[K, K] int<lower=0> y;
  array[K] int<lower=0> z;
}
parameters {
  column_stochastic_matrix[K, K] P;
  row_stochastic_matrix[2, K] Q;
}
model {
  for (k in 1:K) {
    P[:, k] ~ dirichlet(rep_vector(2, K));
    y[k] ~ multinomial(P[:, k]);
  }
  for (i in 1:2) {
    Q[i]' ~ dirichlet(rep_vector(1, K));
  }
  z ~ multinomial(Q[1]');
}

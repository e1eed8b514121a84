// Stan 2.36+ zero-sum types (issue 43): an intercept mu, group effects a that sum to
// zero and cell effects m whose rows and columns sum to zero, with given scales tau,
// s and sigma, so the model is Gaussian-linear and log p(y) is closed form.  No
// prior_only: the run splits it and drafts its simulator.
data {
  int<lower=1> N;
  int<lower=2> J;
  array[N] int<lower=1, upper=J> g;
  int<lower=2> R;
  int<lower=2> C;
  array[N] int<lower=1, upper=R> rr;
  array[N] int<lower=1, upper=C> cc;
  vector[N] y;
  real<lower=0> tau;
  real<lower=0> s;
  real<lower=0> sigma;
}
parameters {
  real mu;
  sum_to_zero_vector[J] a;
  sum_to_zero_matrix[R, C] m;
}
model {
  mu ~ normal(0, 2);
  a ~ normal(0, tau);
  to_vector(m) ~ normal(0, s);
  for (n in 1:N) {
    y[n] ~ normal(mu + a[g[n]] + m[rr[n], cc[n]], sigma);
  }
}

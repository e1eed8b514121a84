// A model with a vector hyperparameter: group means mu[g] ~ normal(0, tau[g]) with
// per-group scales tau[g] ~ inv_gamma(3, 2), and y_n ~ normal(mu[group[n]], 1).
data {
  int<lower=1> N;
  int<lower=1> G;
  array[N] int<lower=1, upper=G> group;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  vector<lower=0>[G] tau;
  vector[G] mu;
}
model {
  tau ~ inv_gamma(3, 2);
  mu ~ normal(0, tau);
  if (!prior_only) {
    y ~ normal(mu[group], 1);
  }
}

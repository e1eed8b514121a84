// A flat location mu and a log rate under normal(mu, 100): given mu at its fitted value,
// log_lambda's prior draws exceed poisson_log_rng's limit (20.79) about four times in
// ten, which poisson_log_lpmf accepts, so the simulation breaks where the model does not.
data {
  int<lower=1> N;
  array[N] int<lower=0> y;
}
parameters {
  real mu;
  real log_lambda;
}
model {
  log_lambda ~ normal(mu, 100);
  y ~ poisson_log(log_lambda);
}

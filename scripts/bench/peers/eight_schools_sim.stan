// Simulator for eight_schools.stan: mu, tau (unless given), the school effects, then y.
data {
  int<lower=0> J;
  array[J] real<lower=0> sigma;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] real mu_given;
  array[hyper_given] real<lower=0> tau_given;
}
generated quantities {
  real mu = hyper_given ? mu_given[1] : normal_rng(0, 5);
  real<lower=0> tau = hyper_given ? tau_given[1] : abs(cauchy_rng(0, 5));
  array[J] real theta_tilde = normal_rng(rep_vector(0, J), 1);
  array[J] real y;
  for (j in 1:J) {
    y[j] = normal_rng(mu + tau * theta_tilde[j], sigma[j]);
  }
}

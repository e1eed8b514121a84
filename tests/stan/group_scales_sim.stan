// Simulator for group_scales.stan; the vector hyperparameter tau is given as
// tau_given[1] (a vector of the shape of tau) when hyper_given = 1.
data {
  int<lower=1> N;
  int<lower=1> G;
  array[N] int<lower=1, upper=G> group;
  int<lower=0, upper=1> hyper_given;
  array[hyper_given] vector<lower=0>[G] tau_given;
}
generated quantities {
  vector<lower=0>[G] tau = hyper_given ? tau_given[1]
                                       : to_vector(inv_gamma_rng(rep_vector(3, G), 2));
  vector[G] mu = to_vector(normal_rng(rep_vector(0, G), tau));
  vector[N] y = to_vector(normal_rng(mu[group], 1));
}

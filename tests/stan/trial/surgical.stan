// posteriordb's surgical_model (hierarchical binomial, BUGS "Surgical"), with the
// prior_only split and proper priors in place of normal(0, 1000) and inv_gamma(0.001,
// 0.001), whose prior draws overflow Stan's _rng functions.
data {
  int<lower=0> N;
  array[N] int r;
  array[N] int n;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> sigmasq;
  array[N] real b;
}
transformed parameters {
  real<lower=0> sigma;
  array[N] real<lower=0, upper=1> p;
  sigma = sqrt(sigmasq);
  for (i in 1 : N) {
    p[i] = inv_logit(b[i]);
  }
}
model {
  mu ~ normal(-2, 1.5);
  sigmasq ~ inv_gamma(2, 1);
  b ~ normal(mu, sigma);
  if (!prior_only) {
    r ~ binomial_logit(n, b);
  }
}
generated quantities {
  real pop_mean;
  pop_mean = inv_logit(mu);
}

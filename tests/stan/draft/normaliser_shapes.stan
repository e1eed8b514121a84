// Priors whose normaliser the drafter knows in closed form: sorted iid draws of an
// ordered vector (1/K!), a simplex and a bounded vector without a density (1/Gamma(K),
// (U - L)^2), a half-normal stated with T[0, ] (Stan normalises it: 1) and half-t
// scales (1/2 each).  With K = 3: log c = -log 6 - log 2 + 2 log 3 + 3 log(1/2).
data {
  int<lower=2> K;
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  ordered[K] cut;
  simplex[K] w;
  vector<lower=-1, upper=2>[2] b;
  real<lower=0> s_t;
  vector<lower=0>[3] s;
}
model {
  cut ~ normal(0, 2);
  s_t ~ normal(0, 1) T[0, ];
  s ~ student_t(4, 0, 1);
  if (!prior_only) {
    y ~ normal(cut[1] + w[1] + b[1] + s_t + sum(s), 1);
  }
}

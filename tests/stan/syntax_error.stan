// Fails stanc on purpose: the sampling statement lacks its semicolon.
parameters {
  real x;
}
model {
  x ~ normal(0, 1)
}

// Throws on purpose (tests of error handling): reject() in the prior for
// x > 3, reject() in the likelihood for x > 1, an index error for x < -1.
data {
  int<lower=0, upper=1> prior_only;
}
parameters {
  real x;
}
model {
  if (x > 3) reject("bread_stan test: x is far too big: ", x);
  x ~ normal(0, 1);
  if (!prior_only) {
    if (x > 1) reject("bread_stan test: x is too big: ", x);
    if (x < -1) {
      array[2] real a = {1.0, 2.0};
      target += a[size(a) + 1];
    }
  }
}

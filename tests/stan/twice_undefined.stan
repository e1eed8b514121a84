// A function declared without a body (stanc --allow-undefined); its C++
// definition is in twice_undefined.hpp, passed as user_header.
functions { real twice(real x); }
data { int<lower=0, upper=1> prior_only; }
parameters { real y; }
model {
  y ~ normal(0, 1);
  if (!prior_only) 0 ~ normal(twice(y), 1);
}

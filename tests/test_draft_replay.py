"""Drafted simulators that replay the likelihood in the model's statement order
(:mod:`bread_stan.stan.draft.replay`): sequential outcomes (an element's density reads
earlier elements, directly, through transformed data or through transformed
parameters) and partly modelled outcomes (elements no ``~`` draws keep their observed
values).

* An AR(1) conditioned on its first observation, in three forms: the simulated y has
  the closed-form Gaussian mean and covariance (within 5 Monte Carlo standard errors)
  and y[1] equals the observed value.  Deliberate break, done once: the replay starting
  from ``y = 2 * y_observed;`` (text assertion set aside) failed the y[1] assertion;
  starting from nothing (the line left out), y[1] was NaN and the simulator failed.
* A learning model (posteriordb's dogs, one conditioned first trial per dog, counts of
  earlier outcomes in transformed data): the frequencies of the 8 histories of each
  dog agree with exact enumeration (chi-square, p > 0.001), and the model program
  evaluated at the simulated data (its transformed data recomputed from them) gives the
  enumerated log probability.  Deliberate break, done once: dropping the recomputation
  after each draw (the ``@refresh@`` lines) made the simulator reject its own draws
  ("this density changed after later draws"), failing the test.
* A density that reads a LATER element, and an element given two densities, are
  rejected by the simulator at run time with the statement's line; loops or conditions
  steered by the simulated data are refused when drafting.  Deliberate break, done
  once: the pass-2 comparison always true made the first of these not raise.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from bread_stan.errors import DraftError, StanDataError
from bread_stan.stan.compile import Program, compile_model
from bread_stan.stan.draft import draft_simulator
from bread_stan.stan.model import StanModel
from bread_stan.stan.simulator import Simulator

_AR = """
data {{ int<lower=2> N; vector[N] y; int<lower=0, upper=1> prior_only; }}
{extra}
parameters {{ real phi; real<lower=0> sigma; }}
{tp}
model {{
  phi ~ normal(0.5, 0.2);
  sigma ~ normal(0, 1);
  for (t in 2:N) {{
    if (!prior_only) {{ y[t] ~ normal({mean}, sigma); }}
  }}
}}
"""
AR_FORMS = {
    "direct": dict(extra="", tp="", mean="phi * y[t - 1]"),
    "transformed data": dict(
        extra="transformed data { vector[N] lag = rep_vector(0, N);\n"
              "  for (t in 2:N) lag[t] = y[t - 1]; }", tp="", mean="phi * lag[t]"),
    "transformed parameters": dict(
        extra="", tp="transformed parameters { vector[N] mu = rep_vector(0, N);\n"
                     "  for (t in 2:N) mu[t] = phi * y[t - 1]; }", mean="mu[t]"),
}
Y_OBS = [2.0, 0.3, -1.0, 5.0]
PHI, SIGMA = 0.6, 1.5


def _ar_moments(y1: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of y[2..n] given y[1] for y[t] = phi y[t-1] + sigma e[t]."""
    t = np.arange(2, n + 1)
    mean = PHI ** (t - 1) * y1
    cov = np.empty((n - 1, n - 1))
    for a, s in enumerate(t):
        for b, u in enumerate(t):
            m = min(s, u) - 1       # noise terms shared
            cov[a, b] = SIGMA ** 2 * PHI ** abs(s - u) * (1 - PHI ** (2 * m)) / (1 - PHI ** 2)
    return mean, cov


@pytest.mark.parametrize("form", list(AR_FORMS))
def test_autoregression_conditioned_on_its_first_value(form):
    text = draft_simulator(Program(_AR.format(**AR_FORMS[form]), "ar_replay"))
    assert "y = y_observed;" in text
    sim = Simulator(Program(text, "ar_replay_sim"), {"N": 4, "y": Y_OBS},
                    hyper={"phi": PHI, "sigma": SIGMA})
    n = 4000
    y = sim.simulate(n, seed=11)["y"]
    assert np.all(y[:, 0] == Y_OBS[0])                    # conditioned on, not drawn
    mean, cov = _ar_moments(Y_OBS[0], 4)
    drawn = y[:, 1:]
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(drawn.mean(0) - mean) < 5 * se_mean), (drawn.mean(0), mean)
    # Gaussian sample covariance: var(S_ab) = (C_aa C_bb + C_ab^2) / n
    se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / n)
    assert np.all(np.abs(np.cov(drawn.T) - cov) < 5 * se_cov), (np.cov(drawn.T), cov)


_DOGS = """
data {
  int<lower=0> n_dogs;
  int<lower=0> n_trials;
  array[n_dogs, n_trials] int<lower=0, upper=1> y;
  int<lower=0, upper=1> prior_only;
}
transformed data {
  int J = n_dogs;
  int T = n_trials;
  matrix[J, T] prev_shock;
  matrix[J, T] prev_avoid;
  for (j in 1:J) {
    prev_shock[j, 1] = 0;
    prev_avoid[j, 1] = 0;
    for (t in 2:T) {
      prev_shock[j, t] = prev_shock[j, t - 1] + y[j, t - 1];
      prev_avoid[j, t] = prev_avoid[j, t - 1] + 1 - y[j, t - 1];
    }
  }
}
parameters { real<lower=0, upper=1> a; real<lower=0, upper=1> b; }
model {
  for (j in 1:J) {
    for (t in 2:T) {
      real p = a ^ prev_shock[j, t] * b ^ prev_avoid[j, t];
      if (!prior_only) { y[j, t] ~ bernoulli(p); }
    }
  }
}
"""
A, B = 0.7, 0.4
DOGS_DATA = {"n_dogs": 2, "n_trials": 4, "y": [[1, 0, 0, 1], [0, 1, 1, 1]]}


def _log_prob(history: tuple[int, ...]) -> float:
    """log P(y[2..T] | y[1]) of one dog's history, by the model's recursion."""
    shock = avoid = 0
    total = 0.0
    for prev, now in zip(history[:-1], history[1:]):
        shock, avoid = shock + prev, avoid + 1 - prev
        p = A ** shock * B ** avoid
        total += math.log(p if now else 1 - p)
    return total


def test_learning_model_matches_exact_enumeration():
    text = draft_simulator(Program(_DOGS, "dogs_replay"))
    sim = Simulator(Program(text, "dogs_replay_sim"), DOGS_DATA, hyper={"a": A, "b": B})
    n = 20000
    y = sim.simulate(n, seed=5)["y"]
    for j in range(2):
        first = DOGS_DATA["y"][j][0]
        assert np.all(y[:, j, 0] == first)
        rest = list(itertools.product([0, 1], repeat=3))
        expected = np.array([math.exp(_log_prob((first, *r))) for r in rest])
        assert abs(expected.sum() - 1) < 1e-12
        codes = y[:, j, 1] * 4 + y[:, j, 2] * 2 + y[:, j, 3]
        observed = np.bincount(codes, minlength=8)
        p_value = stats.chisquare(observed, n * expected).pvalue
        assert p_value > 1e-3, (observed, n * expected)
    # the model program at a simulated data set: its transformed data are recomputed
    # from the simulated y, so its log density is the enumerated log probability
    model = compile_model(Program(_DOGS, "dogs_replay_model"))
    for i in range(3):
        data = {**DOGS_DATA, "y": y[i].tolist(), "prior_only": 0}
        target = StanModel(model, data)
        u = target.param_unconstrain({"a": A, "b": B})
        lp = target.log_density(u, jacobian=False)
        exact = sum(_log_prob(tuple(row)) for row in y[i].tolist())
        assert lp == pytest.approx(exact, abs=1e-10)


_ORDER = """
data { int<lower=2> N; vector[N] y; int mode; int<lower=0, upper=1> prior_only; }
parameters { real<lower=0> sigma; }
model {
  sigma ~ normal(0, 1);
  if (!prior_only) {
    if (mode == 1) {
      for (t in 1:(N - 1)) y[t] ~ normal(0.5 * y[t + 1], sigma);
    } else {
      for (t in 1:N) y[t] ~ normal(0, sigma);
      y[1] ~ normal(0, sigma);
    }
  }
}
"""


def test_reading_a_later_element_or_drawing_twice_is_rejected_by_the_simulator():
    text = draft_simulator(Program(_ORDER, "order_replay"))
    compiled = compile_model(Program(text, "order_replay_sim"))
    data = {"N": 5, "y": [0.1, 0.2, 0.3, 0.4, 0.5]}
    with pytest.raises(StanDataError, match=r"line 8 `y\[t\] ~ normal\(0.5 \* y\[t \+ 1\], "
                                            r"sigma\);`: this density changed after later "
                                            r"draws: it reads an element of y drawn after it"):
        Simulator(compiled, {**data, "mode": 1}).simulate(1, seed=1)
    with pytest.raises(StanDataError, match=r"replay rejects line 11 `y\[1\] ~ normal\(0, "
                                            r"sigma\);`: it would draw an element of y a "
                                            r"second time"):
        Simulator(compiled, {**data, "mode": 2}).simulate(1, seed=1)


@pytest.mark.parametrize("likelihood, message", [
    ("for (t in 2:N) if (y[t - 1] > 0) y[t] ~ normal(0, sigma);",
     r"line 7 `y\[t\] ~ normal\(0, sigma\);`: which elements this ~ draws depends on y"),
    ("y[1] ~ normal(0, sigma); y ~ normal(0, sigma);",
     r"y is on the left of ~ more than once"),
    ("for (t in 2:N) y[t] ~ normal(0, sigma); y ~ normal(mean(y), sigma);",
     r"y appears on both sides of ~"),
])
def test_replays_that_cannot_be_exact_are_refused_when_drafting(likelihood, message):
    program = ("data { int<lower=2> N; vector[N] y; int<lower=0, upper=1> prior_only; }\n"
               "parameters { real<lower=0> sigma; }\n"
               "model {\n"
               "  sigma ~ normal(0, 1);\n"
               "  if (!prior_only) {\n"
               "    \n"
               f"    {likelihood}\n"
               "  }\n"
               "}\n")
    with pytest.raises(DraftError, match=message) as caught:
        draft_simulator(Program(program, "refused_replay"))
    assert "\n" not in str(caught.value)


def test_a_loop_over_an_alias_of_the_declared_size_covers_the_variable():
    """``int N = n;`` in transformed data: ``for (i in 1:N) y[i] ~ ...`` draws each element
    once, translated directly (no replay).  Deliberate break, done once: Coverage
    without the aliases sent this program to the replay (``y = y_observed;``)."""
    program = ("data { int<lower=0> n; vector[n] y; int<lower=0, upper=1> prior_only; }\n"
               "transformed data { int N = n; }\nparameters { real mu; }\n"
               "model { mu ~ normal(0, 1);\n"
               "  if (!prior_only) { for (i in 1:N) y[i] ~ normal(mu, 1); } }\n")
    text = draft_simulator(Program(program, "alias"))
    assert "y[i] = normal_rng(mu, 1);" in text and "y_observed" not in text
    reassigned = program.replace("int N = n; }", "int N = n; N = n - 1; }")
    assert "y = y_observed;" in draft_simulator(Program(reassigned, "alias2"))


@pytest.mark.parametrize("likelihood", [
    "for (n in 2:N) y[n] ~ normal(mu, sigma);",                 # y[1] conditioned on
    "if (N > 3) y ~ normal(mu, sigma);",                         # y conditioned when N <= 3
    "if (N > 3) y ~ normal(mu, sigma); else y ~ student_t(3, mu, sigma);"])
def test_partly_modelled_outcomes_are_replayed(likelihood):
    """Refused before the replay (the drafter could not tell that every element is
    drawn once); now the elements no ~ draws keep their observed values."""
    program = ("data { int<lower=0> N; vector[N] y; int<lower=0, upper=1> prior_only; }\n"
               "parameters { real mu; real<lower=0> sigma; }\n"
               "model { mu ~ normal(0, 1); sigma ~ exponential(1);\n"
               f"  if (!prior_only) {{ {likelihood} }} }}\n")
    text = draft_simulator(Program(program, "partial"))
    assert "vector[N] y_observed;" in text and "y = y_observed;" in text

"""Drafting zero-inflated mixtures, copied parameters and bounded data (issue 26).

Exact tier: the draft lines of each form, and one-line refusals of near misses (a
condition that is not "the outcome is all zero", weights that are not the two sides
of one coin, a transformed parameter with arithmetic, data bounds the likelihood
crosses).  Statistical tier: the drafted simulators' draws against closed forms, and
the toolkit's simulator check on the split model with its drafted simulator.

Deliberate breaks, done once each:
* comparing only the coins' families, not their parameters (``coin[0] !=
  complement[0]`` for ``coin[:2] != complement[:2]``), let ``bernoulli_lpmf(1 | psi)``
  with ``bernoulli_lpmf(0 | psi0)`` and ``log(lambda)`` with ``log1m(theta)`` through:
  ``test_zero_inflated_near_misses_are_refused[other coin]`` and
  ``test_zero_inflated_poisson_near_misses[other coin]`` failed.
* tossing the wrong side (``bernoulli_rng(theta)`` for the weight ``log1m(theta)``) made
  the frequency of zeros in ``test_zero_inflated_draws_match_the_model`` 0.535 against
  0.689 (47 standard errors).
* the splitter ignoring the conditions around a term (``condition_on_data`` never
  true) made ``test_terms_under_a_condition_on_the_data_are_likelihood`` and
  ``test_zero_inflated_forms_are_drafted_as_a_coin_then_the_outcome`` fail (the
  branches' ``bernoulli_lpmf(1 | psi)`` read as a prior).
* writing the copies back negated (``a[k] = -pair[k, 1]``) made
  ``test_copied_parameters_are_drawn_from_the_density_of_the_copy`` fail (mean of a
  0.96 against -1).
"""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.errors import StanDataError
from bread_stan.stan.compile import Program
from bread_stan.stan.draft import (DraftError, draft_program, draft_simulator,
                                   relax_data_bounds, split_model)
from bread_stan.stan.simulator import Simulator
from bread_stan.workflows.bread import SamplerSettings
from bread_stan.workflows.simulator_check import CheckSettings, check_simulator

# The User's Guide's zero-inflated Poisson, written without prior_only.
ZIP = """
data {
  int<lower=0> N;
  array[N] int<lower=0> y;
}
parameters {
  real<lower=0, upper=1> theta;
  real<lower=0> lambda;
}
model {
  lambda ~ gamma(3, 2);
  for (n in 1:N) {
    if (y[n] == 0) {
      target += log_sum_exp(log(theta), log1m(theta) + poisson_lpmf(y[n] | lambda));
    } else {
      target += log1m(theta) + poisson_lpmf(y[n] | lambda);
    }
  }
}
"""

# Rows of detections with data augmentation, the row totals in transformed data.
ROWS = """
data {
  int<lower=1> R;
  int<lower=1> K;
  array[R, K] int<lower=0, upper=1> d;
}
transformed data {
  array[R] int<lower=0> tot;
  int<lower=0> seen = 0;
  for (r in 1:R) {
    tot[r] = sum(d[r]);
    if (tot[r] > 0) seen += 1;
  }
}
parameters {
  real<lower=0, upper=1> psi;
  vector<lower=0, upper=1>[K] q;
}
model {
  for (r in 1:R) {
    if (tot[r] > 0) {
      target += bernoulli_lpmf(1 | psi) + bernoulli_lpmf(d[r] | q);
    } else {
      target += log_sum_exp(bernoulli_lpmf(1 | psi) + bernoulli_lpmf(d[r] | q),
                            bernoulli_lpmf(0 | psi));
    }
  }
}
"""


def _draft(program: str) -> str:
    return draft_simulator(split_model(Program(program, "zi_case")).program)


def test_zero_inflated_forms_are_drafted_as_a_coin_then_the_outcome():
    split = split_model(Program(ZIP, "zip"))
    assert [r.role for r in split.rows] == ["prior", "likelihood", "likelihood"]
    assert ("if (bernoulli_rng(1 - (theta))) y[n] = poisson_rng(lambda); "
            "else y[n] = 0;") in _draft(ZIP)
    text = _draft(ROWS)
    assert ("if (bernoulli_rng(psi)) d[r] = bernoulli_rng(q); "
            "else d[r] = rep_array(0, K);") in text
    assert "transformed data" not in text      # the totals of d are not needed
    # the branches' weight terms are likelihood, not a prior on psi
    assert all(r.role == "likelihood" for r in split_model(Program(ROWS, "rows")).rows)


def test_binomial_row_total_is_drawn_as_its_row():
    """binomial_lpmf(tot[r] | K, q) of the row total tot[r] = sum(d[r]) of d in {0, 1}:
    the split reads it as a density on d, the draft draws d[r] elementwise (the total of
    K bernoulli(q) is binomial(K, q)); a total of rows not in {0, 1}, or a binomial of
    another size, is refused."""
    program = ROWS.replace("vector<lower=0, upper=1>[K] q;", "real<lower=0, upper=1> q;")
    program = program.replace("bernoulli_lpmf(d[r] | q)", "binomial_lpmf(tot[r] | K, q)", 1)
    program = program.replace("bernoulli_lpmf(d[r] | q)", "binomial_lpmf(0 | K, q)")
    split = split_model(Program(program, "totals"))
    assert split.modelled_data == ["d"] and all(r.role == "likelihood" for r in split.rows)
    assert ("if (bernoulli_rng(psi)) d[r] = bernoulli_rng(rep_array(q, K)); "
            "else d[r] = rep_array(0, K);") in _draft(program)
    for change in (("int<lower=0, upper=1> d", "int<lower=0, upper=2> d"),
                   ("| K, q)", "| K + 1, q)")):
        with pytest.raises(DraftError, match="translated only as binomial_lpmf"):
            _draft(program.replace(*change))


def test_terms_under_a_condition_on_the_data_are_likelihood():
    """A condition that reads the modelled data (directly, or through transformed data)
    makes its branches' terms likelihood; one on a covariate leaves a prior a prior."""
    program = ("data { int N; vector[N] y; int<lower=0, upper=1> flag; }\n"
               "transformed data { real m = mean(y); }\n"
               "parameters { real mu; }\n"
               "model { if (flag) mu ~ normal(0, 1); else mu ~ normal(0, 2);\n"
               "if (m > 0) target += normal_lpdf(mu | 0, 1);\n"
               "y ~ normal(mu, 1); }\n")
    split = split_model(Program(program, "conditions"))
    assert [(r.line, r.role) for r in split.rows] == [
        (4, "prior"), (4, "prior"), (5, "likelihood"), (6, "likelihood")]


@pytest.mark.parametrize("change, message", [
    (("tot[r] > 0) {\n      target", "tot[r] > 1) {\n      target"),
     "needs the condition to say exactly that d\\[r\\] is not all zero"),
    (("tot[r] = sum(d[r]);", "tot[r] = sum(d[r]) + 1;"), "needs the condition to say"),
    (("tot[r] = sum(d[r]);", "tot[r] = d[r, 1];"), "needs the condition to say"),
    (("bernoulli_lpmf(0 | psi)", "bernoulli_lpmf(1 | psi)"),
     "to be the log probabilities of the two sides of one coin"),
    (("array[R, K] int<lower=0, upper=1> d;", "array[R, K] int<lower=0, upper=1> d; "
      "real<lower=0, upper=1> psi0;"), None),
    (("bernoulli_lpmf(d[r] | q),\n", "bernoulli_lpmf(d[r] | 0.5 * q),\n"),
     "needs the same weight and density in both branches"),
], ids=["total above 1", "total plus 1", "one column", "one side twice", "other coin",
        "other density"])
def test_zero_inflated_near_misses_are_refused(change, message):
    if message is None:       # a coin of a different parameter on one side
        program = ROWS.replace(*change).replace("bernoulli_lpmf(0 | psi)",
                                                "bernoulli_lpmf(0 | psi0)")
        message = "to be the log probabilities of the two sides of one coin"
    else:
        program = ROWS.replace(*change)
    assert program != ROWS
    with pytest.raises(DraftError, match=message) as caught:
        _draft(program)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("change, message", [
    (("if (y[n] == 0)", "if (y[n] > 0)"), "with the log_sum_exp branch taken when it is zero"),
    (("log_sum_exp(log(theta)", "log_sum_exp(log(lambda)"), "two sides of one coin"),
    (("array[N] int<lower=0> y;", "array[N] int y;"), "declared int<lower=0>"),
], ids=["branches swapped", "other coin", "no lower bound"])
def test_zero_inflated_poisson_near_misses(change, message):
    with pytest.raises(DraftError, match=message):
        _draft(ZIP.replace(*change))


def test_zero_inflated_draws_match_the_model():
    """P(y = 0) = theta + (1 - theta) exp(-lambda) for the Poisson form and
    P(row all zero) = 1 - psi + psi / 2^K for the rows (q uniform, so E prod(1 - q_k) =
    2^-K), from 20,000 outcomes each (400 draws of 50); tolerance 4.5 standard errors
    (a false alarm has probability 7e-6): binomial for the Poisson form's iid outcomes,
    the spread of the 400 independent per-draw frequencies for the rows (the rows of
    one draw share q).  The mean of the nonzero counts is lambda / (1 -
    exp(-lambda)), within 4.5 standard errors of its sample mean."""
    zip_sim = Simulator(Program(_draft(ZIP), "zip_sim"), {"N": 50},
                        hyper={"theta": 0.6, "lambda": 1.5})
    y = zip_sim.simulate(400, seed=11)["y"].ravel()
    p0 = 0.6 + 0.4 * np.exp(-1.5)
    assert abs(np.mean(y == 0) - p0) < 4.5 * np.sqrt(p0 * (1 - p0) / y.size)
    nonzero = y[y > 0]
    assert abs(nonzero.mean() - 1.5 / (1 - np.exp(-1.5))) < \
        4.5 * nonzero.std() / np.sqrt(nonzero.size)
    rows_sim = Simulator(Program(_draft(ROWS), "rows_sim"), {"R": 50, "K": 3},
                         hyper={"psi": 0.7})
    d = rows_sim.simulate(400, seed=12)["d"]
    per_draw = (d.sum(axis=2) == 0).mean(axis=1)   # rows of one draw share q: not iid
    p0 = 1 - 0.7 + 0.7 / 2 ** 3
    assert abs(per_draw.mean() - p0) < 4.5 * per_draw.std(ddof=1) / np.sqrt(per_draw.size)


SAMPLER = SamplerSettings(pilot_chains=16, pilot_grid=6, pilot_steps=20)


def test_drafted_zero_inflated_simulator_passes_the_check():
    """The toolkit's simulator check (alpha = 0.01) on the split ZIP model and its
    draft; a right draft is flagged at one seed with probability at most 0.01, so a
    flag at seed 0 is retried once at seed 1 (as in test_draft_simulator)."""
    rng = np.random.default_rng(5)
    data = {"N": 30, "y": (rng.poisson(2.0, 30) * (rng.random(30) < 0.7)).tolist()}
    model = Program(split_model(Program(ZIP, "zip")).program, "zip_split")
    sim = Program(_draft(ZIP), "zip_sim")
    result = check_simulator(model, sim, data, sampler=SAMPLER,
                             settings=CheckSettings(seed=0))
    if not result.passed:
        result = check_simulator(model, sim, data, sampler=SAMPLER,
                                 settings=CheckSettings(seed=1))
    assert result.ran and result.passed, result.message


# -- transformed parameters that copy parameter elements

PAIRS = """
data {
  int<lower=1> G;
  vector[2] m;
  cov_matrix[2] S;
  int<lower=1> N;
  array[N] int<lower=1, upper=G> g;
  vector[N] z;
}
parameters {
  vector[G] a;
  vector[G] b;
  real<lower=0> sigma;
}
transformed parameters {
  array[G] vector[2] pair;
  vector[G] ea;
  for (k in 1:G) {
    pair[k, 1] = a[k];
    pair[k, 2] = b[k];
    ea[k] = exp(pair[k, 1]);
  }
}
model {
  for (k in 1:G) pair[k] ~ multi_normal(m, S);
  sigma ~ normal(0, 1);
  z ~ normal(a[g] + b[g], sigma);
}
"""


def test_copied_parameters_are_drafted_through_the_copy():
    text = _draft(PAIRS)
    assert "pair[k] = multi_normal_rng(m, S);" in text
    assert "for (k in 1:G) a[k] = pair[k, 1];" in text
    assert "for (k in 1:G) b[k] = pair[k, 2];" in text
    assert "ea[k] = exp(pair[k, 1]);" in text
    for change, message in [
            (("pair[k, 2] = b[k];", "pair[k, 2] = 2 * b[k];"), "is not a copy of a parameter"),
            (("pair[k, 2] = b[k];", "pair[k, 1] = b[k];"), "do not fill each element"),
            (("pair[k, 2] = b[k];", "pair[k, 2] = a[k];"), "copied by more than one"),
            (("vector[G] b;", "vector<lower=0>[G] b;"), "whose bounds differ from pair.s"),
            (("  sigma ~ normal(0, 1);", "  sigma ~ normal(0, 1); a ~ normal(0, 1);"),
             "a is on the left of ~ more than once")]:
        with pytest.raises(DraftError, match=message):
            _draft(PAIRS.replace(*change))


def test_copied_parameters_are_drawn_from_the_density_of_the_copy():
    """(a[k], b[k]) ~ multi_normal(m, S): means, standard deviations and correlation of
    4000 draws of (a[1], b[1]) within 4.5 standard errors (correlation: (1 - rho^2) /
    sqrt(n))."""
    data = {"G": 2, "m": [-1.0, 2.0], "S": [[1.0, 0.6], [0.6, 4.0]], "N": 3,
            "g": [1, 2, 1]}
    draws = Simulator(Program(_draft(PAIRS), "pairs_sim"), data,
                      hyper={"sigma": 1.0}).simulate(4000, seed=7)
    a, b = draws["a"][:, 0], draws["b"][:, 0]
    n = a.size
    assert abs(a.mean() + 1) < 4.5 / np.sqrt(n) and abs(b.mean() - 2) < 4.5 * 2 / np.sqrt(n)
    assert abs(a.std() - 1) < 4.5 * 1 / np.sqrt(2 * n)
    assert abs(np.corrcoef(a, b)[0, 1] - 0.3) < 4.5 * (1 - 0.09) / np.sqrt(n)
    assert np.allclose(draws["ea"][:, 0], np.exp(a))


# -- data whose declared bounds the likelihood crosses

def test_data_bounds_crossed_by_the_likelihood_are_dropped_not_refused():
    """A data-block bound only checks the input: normal on a <lower=0> w is drafted as
    normal on the whole line, the simulator declares w without the bound and says why,
    and a likelihood that stays inside the bound keeps it."""
    program = ("data { int N; vector<lower=0>[N] w; }\n"
               "parameters { real mu; real<lower=0> s; }\n"
               "model { mu ~ normal(0, 1); s ~ normal(0, 1); w ~ normal(mu, s); }\n")
    drafted = draft_program(split_model(Program(program, "zi_case")).program)
    assert drafted.relaxed_bounds == {"w": "line 3: normal can draw w below w's declared "
                                           "lower=0; the bound checks the input and is not "
                                           "part of the density"}
    assert "  vector[N] w;" in drafted.text and "// Declared without its data-block " \
        "bounds: line 3: normal can draw w below" in drafted.text
    assert relax_data_bounds(program, ["w"]).splitlines()[0] == "data { int N; vector[N] w; }"
    inside = draft_program(split_model(Program(program.replace("w ~ normal", "w ~ lognormal"),
                                               "zi_case")).program)
    assert inside.relaxed_bounds == {} and "vector<lower=0>[N] w;" in inside.text
    upper = program.replace("w ~ normal", "w ~ beta").replace("<lower=0>[N] w",
                                                              "<lower=0, upper=0.5>[N] w")
    drafted = draft_program(split_model(Program(upper, "zi_case")).program)
    assert "beta can draw w above w's declared upper=0.5" in drafted.relaxed_bounds["w"]


def test_simulated_value_outside_its_bound_is_named():
    """A hand-written simulator whose draw breaks a declared bound stops with one line
    naming the variable and its bound."""
    sim = Program("generated quantities { real<lower=0> w = normal_rng(-5, 1); }\n",
                  "out_of_bounds_sim")
    with pytest.raises(StanDataError, match=r"w was drawn outside its declared bound "
                                            r"lower=0: a distribution in the model") as caught:
        Simulator(sim).simulate(3, seed=0)
    assert "\n" not in str(caught.value)

"""Modelled data that reach the model only through transformed data (issue 45).

``vector[N] log_earn = log(earn); log_earn ~ normal(...)``: the split promotes
``log_earn`` to modelled data (declared in the data block of the run's programs, its
definition removed, ``earn`` dropped), and the real data's value is computed by the
program's own transformed data.  Unit tests on the source (no stanc), and one known
answer: log p(ly) of a conjugate normal model in closed form lies inside the sandwich
(tolerance 3.5 Monte Carlo standard errors, as tests/test_current_stan.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bread_stan.errors import DraftError
from bread_stan.stan.draft.split import split_program

Z = 3.5

EARNINGS = """data { int<lower=0> N; vector[N] earn; vector[N] height; }
transformed data {
  vector[N] log_earn;
  log_earn = log(earn);
}
parameters { vector[2] beta; real<lower=0> sigma; }
model { log_earn ~ normal(beta[1] + beta[2] * height, sigma); }
"""

LSAT = """data {
  int<lower=0> N; int<lower=0> R; int<lower=0> T;
  array[R] int<lower=0> culm; array[R, T] int<lower=0> response;
}
transformed data {
  array[T, N] int r;
  vector[N] ones;
  for (j in 1 : culm[1]) { for (k in 1 : T) { r[k, j] = response[1, k]; } }
  for (i in 2 : R) {
    for (j in (culm[i - 1] + 1) : culm[i]) { for (k in 1 : T) { r[k, j] = response[i, k]; } }
  }
  for (i in 1 : N) { ones[i] = 1.0; }
}
parameters { array[T] real alpha; vector[N] theta; real<lower=0> beta; }
model {
  alpha ~ normal(0, 100.); theta ~ normal(0, 1); beta ~ normal(0.0, 100.);
  for (k in 1 : T) { r[k] ~ bernoulli_logit(beta * theta - alpha[k] * ones); }
}
"""

# x is both in z's definition and a covariate: drawing z with x fixed is not the model
MIXED = """data { int<lower=0> N; vector[N] y; vector[N] x; }
transformed data { vector[N] z = log(y) - x; }
parameters { real a; real b; }
model { a ~ normal(0, 1); b ~ normal(0, 1); z ~ normal(a + b * x, 1); }
"""

CONJUGATE = """data { int<lower=0> N; vector<lower=0>[N] y; }
transformed data { vector[N] ly = log(y); }
parameters { real mu; }
model { mu ~ normal(0, 1); ly ~ normal(mu, 1); }
"""


def test_earnings_promote_log_earn_and_drop_earn():
    split = split_program(EARNINGS, {})
    assert split.modelled_data == ["log_earn"]
    assert split.promotion.promoted == {"log_earn": ["earn"]}
    assert split.promotion.dropped == ["earn"]
    data_block = split.program.split("transformed data")[0]
    assert "vector[N] log_earn;" in data_block and "earn;" not in data_block.replace(
        "log_earn;", "")
    assert "log(earn)" not in split.program            # the definition is gone
    assert split.program.count("\n") == EARNINGS.count("\n")   # line numbers kept
    assert [r.role for r in split.rows] == ["likelihood"]
    assert "log(earn)" in split.promotion.data_program
    assert "log p(y) is of log_earn" in split.promotion.sentence()


def test_lsat_promotes_the_int_array_and_drops_its_sources():
    split = split_program(LSAT, {})
    assert split.promotion.promoted == {"r": ["response"]}
    assert split.promotion.dropped == ["R", "culm", "response"]   # R sized culm alone
    assert split.promotion.integers == ["r"]
    assert "array[T, N] int r;" in split.program.split("transformed data")[0]
    assert "ones[i] = 1.0" in split.program and "response" not in split.program


def test_mixed_source_that_is_also_a_covariate_is_refused():
    with pytest.raises(DraftError, match="the data x, from which z is computed, are also "
                                         "read here"):
        split_program(MIXED, {})


@pytest.mark.parametrize("tdata, message", [
    ("vector[N] z = log(y) + normal_rng(0, 1);", "z is computed with normal_rng"),
    ("vector[N] z; vector[N] w; for (n in 1:N) { z[n] = log(y[n]); w[n] = 1; }",
     "also computes w"),
])
def test_promotions_that_cannot_be_honoured_are_refused(tdata, message):
    program = (MIXED.replace("vector[N] z = log(y) - x;", tdata)
               .replace("z ~ normal(a + b * x, 1)", "z ~ normal(a, exp(b))"))
    with pytest.raises(DraftError, match=message):
        split_program(program, {})


def test_programs_without_promotion_are_unchanged():
    plain = CONJUGATE.replace("transformed data { vector[N] ly = log(y); }\n", "").replace(
        "ly ~", "y ~")
    split = split_program(plain, {})
    assert split.promotion is None
    assert split.program.startswith("data { int<lower=0> N; vector<lower=0>[N] y;  "
                                    "int<lower=0, upper=1> prior_only; }")


def _log_ml(ly: np.ndarray) -> float:
    """ly = mu + e, mu ~ normal(0, 1), e ~ normal(0, I): ly ~ normal(0, I + 11')."""
    n = ly.size
    return stats.multivariate_normal(np.zeros(n), np.eye(n) + np.ones((n, n))).logpdf(ly)


@pytest.mark.stan
def test_promoted_program_end_to_end_contains_the_closed_form_log_ml(tmp_path):
    """The real data's ly is log(y) (1e-12); bread on the program as it is (split with ly
    promoted, simulator drafted) draws ly and its sandwich contains log p(ly) at the
    simulated ly.  Breaks tried: the real value computed as 2 log(y) fails the first
    check; keeping ly's definition in transformed data fails the split's type check."""
    from bread_stan.stan.prepare import prepare_programs
    from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

    y = [0.5, 1.0, 2.0, 3.0, 0.8]
    p = prepare_programs(CONJUGATE, None, tmp_path, name="promoted")
    real = p.run_data({"N": 5, "y": y})
    assert set(real) == {"N", "ly"}
    assert np.max(np.abs(np.asarray(real["ly"]) - np.log(y))) < 1e-12
    result = bread(CONJUGATE, None, {"N": 5, "y": y}, name="promoted",
                   sampler=SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16,
                                           pilot_grid=6, pilot_steps=20),
                   run=RunSettings(steps=(20,), chains=100, seed=1, progress=False,
                                   path="prior"))
    assert "log p(y) is of ly" in result.extra["programs"]["promoted"]
    exact = _log_ml(np.asarray(result.extra["simulated_data"]["ly"]))
    for row in result.summary().itertuples():
        assert row.log_ml_lower <= exact + Z * row.log_ml_lower_se
        assert row.log_ml_upper >= exact - Z * row.log_ml_upper_se


@pytest.mark.stan
def test_programs_compared_read_one_data_set_or_are_refused(tmp_path):
    """``compare`` runs its programs on one data set: two programs whose splits promote
    ly alike run on the promoted data (before, compare passed the user's data on
    unconverted, and the promoted programs found no ly); a program that reads log-normal
    y as given beside one that promotes ly reads other data, and is refused in one line.
    Breaks tried: compare without the conversion (the first run fails: its data hold y,
    not the ly its programs model); comparing only the first program's data (the
    refusal test fails)."""
    from bread_stan.errors import InputError
    from bread_stan.workflows.bread import RunSettings, SamplerSettings, compare

    lognormal = (CONJUGATE.replace("transformed data { vector[N] ly = log(y); }\n", "")
                 .replace("ly ~ normal(mu, 1)", "y ~ lognormal(mu, 1)"))
    data = {"N": 5, "y": [0.5, 1.0, 2.0, 3.0, 0.8]}
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=4,
                              pilot_steps=10)
    run = RunSettings(steps=(10,), chains=20, seed=1, progress=False, path="prior",
                      check_simulator=False)
    results = compare({"a": CONJUGATE, "b": CONJUGATE}, None, data, sampler=sampler,
                      run=run, out_dir=tmp_path / "same")
    assert [r.steps[0].n_steps for r in results.values()] == [10, 10]
    with pytest.raises(InputError, match="programs 'a' and 'b' read different data"):
        compare({"a": CONJUGATE, "b": lognormal}, None, data, sampler=sampler, run=run,
                out_dir=tmp_path / "other")

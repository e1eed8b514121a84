"""brms's "vector versions of real parameters": bounded copies sized by data (issue 26).

brms writes a GP's scale and length-scale twice: as the bounded parameters and as
bounded transformed parameters of a size read from data (``Kgp_1``, one per sub-GP),
copied element by element, and puts the prior on the copies (posteriordb's accel_gp)::

    vector<lower=0>[K] vsd;            vsd[1] = sd_1;
    array[K] vector<lower=0>[1] vl;    vl[1, 1] = l;
    target += student_t_lpdf(vsd | 3, 0, 2.5) - 1 * student_t_lccdf(0 | 3, 0, 2.5);
    target += inv_gamma_lpdf(vl[1] | 4, 3);

With K = 1 each copy is a re-indexing of the parameter with the same bounds, so the
drafter draws the copy from its prior and writes it back; the simulator checks K = 1 on
the data (with K = 2 the model's second elements would have no density at all).

Exact tier: the drafted lines and the refusals of near misses.  Statistical tier: the
drafted draws of sd_1 and l against their closed-form quantiles.

Deliberate breaks, done once each:
* dropping the size checks (the simulator's lines without ``Coverage.size_checks``) made
  ``test_a_size_read_from_data_is_checked_by_the_simulator`` fail (no reject line);
* the simulator not knowing the size check's marker (``SIZE_REJECTED``) made the same
  test fail (the vague-priors hint appended);
* accepting a copy whose bounds differ (the support comparison skipped) made the
  "bounds differ" case of ``test_near_misses_are_refused_in_one_line`` fail;
* writing the copies back doubled (``sd_1 = 2 * vsd[1];``) made
  ``test_the_copies_draws_follow_their_priors`` fail (frequency of sd_1 below the
  half-t median 0.262 against 0.5, 30 standard errors);
* iterating the copies' names as a set again (no ``sorted``) made
  ``test_the_draft_is_the_same_under_any_hash_seed`` fail (two texts).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from bread_stan.errors import BreadStanError
from bread_stan.stan.compile import Program
from bread_stan.stan.draft import DraftError, draft_simulator, split_model
from bread_stan.stan.simulator import Simulator

BRMS_GP = """
data {
  int<lower=1> N;
  vector[N] Y;
  vector[N] x;
  int<lower=1> K;
}
parameters {
  real Intercept;
  real<lower=0> sd_1;
  real<lower=0> l;
  real<lower=0> sigma;
}
transformed parameters {
  vector<lower=0>[K] vsd;
  array[K] vector<lower=0>[1] vl;
  vsd[1] = sd_1;
  vl[1, 1] = l;
}
model {
  vector[N] mu = Intercept + vsd[1] * sin(x / vl[1, 1]);
  target += normal_lpdf(Intercept | 0, 2);
  target += student_t_lpdf(vsd | 3, 0, 2.5) - 1 * student_t_lccdf(0 | 3, 0, 2.5);
  target += inv_gamma_lpdf(vl[1] | 4, 3);
  target += exponential_lpdf(sigma | 1);
  target += normal_lpdf(Y | mu, sigma);
}
"""

DATA = {"N": 3, "Y": [0.1, -0.2, 0.4], "x": [0.0, 1.0, 2.0], "K": 1}


def _draft(program: str) -> str:
    return draft_simulator(split_model(Program(program, "brms_case")).program)


def test_bounded_copies_are_drawn_and_written_back():
    text = _draft(BRMS_GP)
    assert "vsd = to_vector(abs(student_t_rng(" in text
    assert "vl[1] = to_vector(inv_gamma_rng(" in text
    assert "sd_1 = vsd[1];" in text and "l = vl[1, 1];" in text


def test_a_size_read_from_data_is_checked_by_the_simulator():
    """With K = 2 the simulator stops with the size check's message alone (not the
    hint about vague priors that other _rng failures get)."""
    text = _draft(BRMS_GP)
    assert text.count("if (K != 1) reject(") == 1
    simulator = Simulator(Program(text, "brms_case_sim"), {**DATA, "K": 2})
    with pytest.raises(BreadStanError, match="holds only where K = 1: it draws 1 "
                                             "element.*these data have K = 2") as caught:
        simulator.simulate(2, seed=1)
    assert "vague" not in str(caught.value)    # not blamed on the priors


@pytest.mark.parametrize("change, message", [
    (("real<lower=0> sd_1;", "real sd_1;"), "whose bounds differ from vsd's"),
    (("vector<lower=0>[K] vsd;", "vector<lower=0>[K + 1] vsd;"),
     "a size that is an expression"),
    (("vl[1, 1] = l;", "vl[1, 1] = 2 * l;"), "is not a copy of a parameter element"),
])
def test_near_misses_are_refused_in_one_line(change, message):
    with pytest.raises(DraftError, match=message) as caught:
        _draft(BRMS_GP.replace(*change))
    assert "\n" not in str(caught.value)


def test_the_copies_draws_follow_their_priors():
    """4000 draws: the frequency of sd_1 below the half-t(3, 0, 2.5) median and of l
    below the inv_gamma(4, 3) median, each 0.5 within 4.5 binomial standard errors
    (sqrt(0.25 / 4000) = 0.0079)."""
    draws = Simulator(Program(_draft(BRMS_GP), "brms_case_sim"), DATA).simulate(4000, seed=11)
    sd_1, l = draws["sd_1"].ravel(), draws["l"].ravel()
    se = np.sqrt(0.25 / sd_1.size)
    half_t_median = 2.5 * stats.t(3).ppf(0.75)
    assert abs(np.mean(sd_1 < half_t_median) - 0.5) < 4.5 * se
    assert abs(np.mean(l < stats.invgamma(4, scale=3).median()) - 0.5) < 4.5 * se
    assert np.all(sd_1 > 0) and np.all(l > 0)


def test_the_draft_is_the_same_under_any_hash_seed(tmp_path):
    """The copies are written back in one order whatever Python's string hashing (the
    names once came from a set): the same text in processes of hash seeds 0 and 1,
    so the compiled simulator's cache key is stable."""
    model = tmp_path / "brms_case.stan"
    model.write_text(BRMS_GP)
    script = ("import sys; from bread_stan.stan.compile import Program; "
              "from bread_stan.stan.draft import draft_simulator, split_model; "
              "sys.stdout.write(draft_simulator(split_model(Program(open(sys.argv[1]).read(), "
              "'brms_case')).program))")
    texts = {subprocess.run([sys.executable, "-c", script, str(model)], check=True,
                            capture_output=True, text=True,
                            env={**os.environ, "PYTHONHASHSEED": seed}).stdout
             for seed in ("0", "1")}
    assert len(texts) == 1

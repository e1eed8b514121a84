"""Subjective divergence (SPEC 7.2) against known answers.

- Conjugate regression (tests/stan/conjugate_regression.stan with prior_only = 0, one fixed
  data set used as real data, no truth): with exact posterior draws as the reference, the
  log Z sandwich from the Gaussian base contains the closed-form log p(y), for a base fitted
  to the reference and for a Laplace base; likewise from the prior base on the normal-mean
  model (tests/stan/normal_mean.stan and its simulator).
- The same with a deliberately poor reference (too narrow, shifted): the reverse estimates
  still upper-bound log p(y) (Proposition 3 holds) and D_SBJ exceeds the exact-reference
  value (so it still bounds J: Proposition 2), and the result says the reference is suspect.
- The exact 7 x 7 grid: with exact reference draws (thinned as a reference is), the mean
  subjective divergence equals the oracle's E[B].

Tolerances: 3.5 standard errors for the Gaussian checks (test_ais.py), 4 for the grid
(test_exact.py); with fixed seeds the outcomes are deterministic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bread_stan.ais import engine
from bread_stan.errors import PriorOnlyMissingError
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.exact.grid import GridTarget, grid_log_f
from bread_stan.exact.oracle import NeighbourMetropolis, grid_bounds, linear_schedule
from bread_stan.kernels.grid_mh import GridMetropolis
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.workflows.bread import ResumeMismatchError, RunSettings, SamplerSettings
from bread_stan.workflows.subjective import (BaseSettings, Reference, ReferenceError,
                                             reference_check, subjective)

N_SE = 3.5
STAN = Path(__file__).resolve().parent / "stan"
# Pinned to the sigmoid schedule these tests were calibrated with: with the adaptive
# schedule (the workflow default since issue 15) the poor-reference test's margins fail
# (D_poor - D_exact 0.087 < 3.5 se; shifted reference: mean U 0.77 below log p(y)).
# Open question for the subjective divergence: which schedule/mixing assumption
# Propositions 2-3 need.  Pinned likewise to HMC (the default kernel until NUTS
# replaced it): the excess D_poor - D_exact comes from reverse chains that are slow
# to forget their poor start, and NUTS forgets the shifted one faster (excess 0.26
# nats against the 0.39 that 3.5 standard errors need).
RUN = RunSettings(steps=(10, 100), chains=100, progress=False, threads=1,
                  schedule=ScheduleSpec("sigmoid"))
SAMPLER = SamplerSettings(kernel="hmc", pilot_chains=16)


@pytest.fixture(scope="module")
def problem(compiled):
    model, _ = simulate_regression(20, 3, correlation=0.6, prior_sd=1.2, noise_sd=0.7, seed=11)
    data = {"N": 20, "K": 3, "X": model.X, "y": model.y, "prior_sd": model.prior_sd,
            "noise_sd": model.noise_sd}
    post = model.sample_posterior(np.random.default_rng(0), 1000).reshape(4, 250, 3)
    return {"model": model, "data": data, "post": post, "program": compiled["conjugate_regression"],
            "log_ml": model.log_marginal_likelihood()}


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


def _run(problem, reference, **kw):
    return subjective(problem["program"], problem["data"], reference={"w": reference},
                      run=kw.pop("run", RUN), sampler=SAMPLER, **kw)


@pytest.mark.parametrize("fit", ["reference", "laplace"])
def test_exact_reference_sandwiches_the_closed_form_log_ml(problem, fit):
    result = _run(problem, problem["post"], base=BaseSettings(fit=fit))
    step = result.step(100)
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    assert step.sandwich().contains(problem["log_ml"], n_se=N_SE)
    assert L.mean() < problem["log_ml"] + N_SE * _se(L)
    assert U.mean() > problem["log_ml"] - N_SE * _se(U)
    info = result.extra["subjective"]
    assert not info["suspect"] and result.consistent
    assert info["reverse_chains"] == 100 and info["reference_draws"] == 1000
    assert "SUSPECT" not in result.headline() and "R-hat" in result.headline()
    assert "conditional on the one exact draw" not in result.headline()


@pytest.fixture(scope="module")
def exact_d(problem):
    step = _run(problem, problem["post"]).step(100)
    return step.bound().estimate, step.bound().std_error


@pytest.mark.parametrize("kind", ["narrow", "shifted"])
def test_a_poor_reference_still_bounds_but_is_called_suspect(problem, exact_d, kind):
    post = problem["post"]
    centre, sd = post.mean(axis=(0, 1)), post.std(axis=(0, 1))
    # Narrowed to 0.1 of its spread: at 0.3 the excess of D_SBJ (about 0.3 nats) was
    # about 3 standard errors, so passing 3.5 turned on the kernels' last bits of rounding.
    poor = centre + 0.1 * (post - centre) if kind == "narrow" else post + 2 * sd
    result = _run(problem, poor)
    step = result.step(100)
    U = step.reverse.log_estimates
    # Proposition 3: the reverse chains from the poor reference still upper-bound log p(y).
    assert U.mean() > problem["log_ml"] - N_SE * _se(U)
    # Proposition 2: D_SBJ exceeds its exact-reference value, itself >= J in expectation.
    d, se = step.bound().estimate, step.bound().std_error
    assert d - exact_d[0] > N_SE * np.hypot(se, exact_d[1])
    assert result.extra["subjective"]["suspect"]
    assert "THE REFERENCE IS SUSPECT" in result.headline()


def test_reference_check_sees_a_narrow_or_shifted_sample_and_passes_a_fair_one():
    rng = np.random.default_rng(1)
    a, fair = rng.normal(size=(100, 3)), rng.normal(size=(100, 3))
    assert reference_check(a, fair)["passed"]
    narrow = reference_check(a, 0.3 * fair)
    assert not narrow["passed"] and narrow["sd_ratio"] < 0.5
    assert not reference_check(a, fair + [0, 1, 0])["passed"]
    assert reference_check(a, fair + [0, 1, 0])["coordinate"] == 1


def test_resume_and_refusal_of_other_settings(problem, tmp_path):
    run = RunSettings(steps=(10,), chains=20, progress=False, threads=1)
    first = _run(problem, problem["post"], run=run, out_dir=tmp_path)
    more = _run(problem, problem["post"], out_dir=tmp_path,
                run=RunSettings(steps=(10, 20), chains=20, progress=False, threads=1))
    np.testing.assert_array_equal(more.step(10).forward.log_estimates,
                                  first.step(10).forward.log_estimates)
    assert [s.n_steps for s in more.steps] == [10, 20]
    with pytest.raises(ResumeMismatchError):
        _run(problem, problem["post"] + 0.1, run=run, out_dir=tmp_path)


def test_bad_references_are_refused_with_the_reason(problem):
    with pytest.raises(ReferenceError, match="lack the model parameter 'w'"):
        subjective(problem["program"], problem["data"], reference={"v": problem["post"]},
                   run=RUN)
    with pytest.raises(ReferenceError, match="shape"):
        _run(problem, problem["post"][..., :2])
    with pytest.raises(ReferenceError, match="do not vary in w.1"):
        _run(problem, np.repeat(problem["post"][:1, :1], 10, axis=1))
    with pytest.raises(ValueError, match="unknown base"):
        BaseSettings(kind="uniform")


def test_exact_reference_reproduces_the_exact_bound_on_the_grid():
    """With exact reference draws the expected subjective divergence is E[B] (SPEC 6)."""
    T, n = 20, 4000
    exact = grid_bounds("barrier", T, kernel=NeighbourMetropolis((7, 7), 1))
    target = GridTarget(grid_log_f("barrier"))
    rng = np.random.default_rng(3)
    reference = Reference.rate(target.sample_posterior(rng, n).reshape(4, n // 4, 2), "exact")
    starts, stride = reference.thinned()
    assert stride <= 2  # independent draws: about one per draw kept
    result = engine.run(target, GridMetropolis(), target.sample_prior(rng, n), starts, seed=3,
                        config=engine.RunConfig(steps=(T,), schedule=_Linear()))
    step = result.steps[0]
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    se = np.hypot(exact.forward_sd / np.sqrt(L.size), exact.reverse_sd / np.sqrt(U.size))
    assert abs(U.mean() - L.mean() - exact.bound) < 4.0 * se, (U.mean() - L.mean(), exact.bound)


class _Linear:
    """The oracle's linear schedule as a ScheduleSpec stand-in."""

    def betas(self, T):
        return linear_schedule(T)


@pytest.fixture(scope="module")
def normal_mean():
    """y_i ~ normal(mu, 1.5), mu ~ normal(0, 2): a prior_only split and a simulator."""
    rng = np.random.default_rng(7)
    n, sigma, tau = 12, 1.5, 2.0
    y = rng.normal(1.0, sigma, n)
    cov = sigma ** 2 * np.eye(n) + tau ** 2
    v = 1 / (1 / tau ** 2 + n / sigma ** 2)
    return {"data": {"N": n, "y": y, "sigma": sigma, "tau": tau},
            "log_ml": stats.multivariate_normal(np.zeros(n), cov).logpdf(y),
            "post": rng.normal(v * y.sum() / sigma ** 2, np.sqrt(v), (4, 250))}


def test_prior_base_sandwiches_the_closed_form_log_ml(normal_mean):
    result = subjective(STAN / "normal_mean.stan", normal_mean["data"], base=BaseSettings("prior"),
                        simulator=STAN / "normal_mean_sim.stan", run=RUN, sampler=SAMPLER,
                        reference={"mu": normal_mean["post"]})
    assert result.extra["subjective"]["base"]["kind"] == "prior"
    for step in result.steps:
        assert step.sandwich().contains(normal_mean["log_ml"], n_se=N_SE), step.n_steps
    assert not result.extra["subjective"]["suspect"]


def test_prior_base_needs_a_simulator_and_the_split(normal_mean):
    with pytest.raises(ValueError, match="simulator"):
        subjective(STAN / "normal_mean.stan", normal_mean["data"], base=BaseSettings("prior"),
                   reference={"mu": normal_mean["post"]})
    with pytest.raises(PriorOnlyMissingError):
        subjective(STAN / "no_prior_only.stan", {"N": 12, "y": normal_mean["data"]["y"]},
                   base=BaseSettings("prior"), simulator=STAN / "normal_mean_sim.stan",
                   reference={"mu": normal_mean["post"]})

"""AIS from a Laplace Gaussian base with the prior's normaliser estimated
(bread_stan.ais.gaussian_path, ``RunSettings(path="gaussian")``).

Statistical: on the conjugate regression (closed-form log p(y)) whose program prior is
off by a constant c = e^-3, the path's forward and reverse runs sandwich log p(y) itself,
not log(c p(y)): 3.5 standard errors of the chains' means (a false failure is a < 1e-3
event per comparison), and c puts log(c p(y)) about 30 standard errors away; the
estimated log c is within 4 of its own standard errors of -3.  Exact: the estimates are
the raw AIS weights shifted by log c_hat in both directions (so the bound B does not
depend on c); a block of chains gives the numbers of the batch; same seed, same numbers.
Workflow: bread(..., path="gaussian") on a Stan model with a half-normal scale
(c = 1/2; log p(y) by a 1-D quadrature to 1e-9) sandwiches log p(y), not log(p(y)/2),
with a hand-written simulator (c by importance sampling) and with the drafted one (c
exact, from the simulator).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from bread_stan.ais import engine, gaussian_path
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.ais.estimators import consistency_check, log_ml_sandwich
from bread_stan.ais.tuning import TuningConfig
from bread_stan.kernels import HMC, HMCParams
from bread_stan.stan.compile import compile_many
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread
from shifted_regression import LOG_C, ShiftedPrior, regression_model

N_SE = 3.5
TEST_STAN = Path(__file__).resolve().parent / "stan"
CONFIG = engine.RunConfig(steps=(40,), schedule=ScheduleSpec("adaptive"), increment_blocks=5)


@pytest.fixture(scope="module")
def regression():
    return regression_model()


@pytest.fixture(scope="module")
def path(regression):
    rng = np.random.default_rng(7)
    return gaussian_path.fit_gaussian_path(
        ShiftedPrior(regression), HMC(), HMCParams(0.1, 6), regression.sample_prior(rng, 16),
        regression.sample_prior(rng, 512), seed=3,
        config=TuningConfig(pilot_grid=6, pilot_steps=10))


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


def test_the_normaliser_is_estimated_within_its_standard_errors(path):
    c = path.normaliser
    assert abs(c.log_c - LOG_C) < 4 * c.se and c.trustworthy and c.se < 0.05


def test_the_sandwich_is_of_log_ml_itself_not_of_c_times_it(regression, path):
    rng = np.random.default_rng(11)
    n = 200
    model = ShiftedPrior(regression)
    L_run, U_run = runs.run_both(path, model, HMC(), CONFIG, 40, path.forward_starts(5, n),
        regression.sample_posterior(rng, 1), seed=4)
    L, U = L_run.log_estimates, U_run.log_estimates
    log_ml = regression.log_marginal_likelihood()
    assert L.mean() < log_ml + N_SE * _se(L)
    assert U.mean() > log_ml - N_SE * _se(U)
    assert log_ml_sandwich(L, U).contains(log_ml, n_se=N_SE)
    assert consistency_check(L, U).passed
    assert abs(LOG_C) > 5 * N_SE * max(_se(L), _se(U))  # the test can tell c apart
    # The estimates are the raw weights shifted by log c_hat, in both directions.
    np.testing.assert_allclose(L, L_run.log_weights - path.log_c, rtol=1e-12)
    np.testing.assert_allclose(U, -U_run.log_weights - path.log_c, rtol=1e-12)
    np.testing.assert_allclose(L_run.cumulative[:, -1], L, rtol=1e-12, atol=1e-9)


def test_a_block_of_chains_gives_the_numbers_of_the_batch_and_seeds_repeat(regression, path):
    model, start = ShiftedPrior(regression), path.forward_starts(8, 6)
    np.testing.assert_array_equal(start, path.forward_starts(8, 6))
    x_star = regression.sample_posterior(np.random.default_rng(12), 1)[0]
    whole = runs.run_direction(path, model, HMC(), CONFIG, 12, "forward", start, seed=9)
    part = runs.run_direction(path, model, HMC(), CONFIG, 12, "forward", start[4:], seed=9,
                                 first_chain=4)
    np.testing.assert_array_equal(whole.log_estimates[4:], part.log_estimates)
    rev = runs.run_direction(path, model, HMC(), CONFIG, 12, "reverse", x_star, seed=9, n_chains=6)
    rev_part = runs.run_direction(path, model, HMC(), CONFIG, 12, "reverse", x_star, seed=9,
                                     n_chains=2, first_chain=4)
    np.testing.assert_array_equal(rev.log_estimates[4:], rev_part.log_estimates)


def test_the_runs_log_their_progress_when_asked(regression, path, caplog):
    """Under pytest stderr is not a terminal, so ``progress=True`` gives lines, not a bar,
    on the Gaussian path as on the prior path; the same numbers either way."""
    model, start = ShiftedPrior(regression), path.forward_starts(4, 6)
    x_star = regression.sample_posterior(np.random.default_rng(12), 1)[0]
    with caplog.at_level(logging.INFO, logger="bread_stan"):
        loud = runs.run_both(path, model, HMC(), CONFIG, 12, start, x_star,
                                                 seed=9, progress=True)
    assert any("AIS forward+reverse, 12 distributions: 11 of 11 transitions" in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bread_stan"):
        quiet = runs.run_both(path, model, HMC(), CONFIG, 12, start,
                                                  x_star, seed=9)
    assert not [r for r in caplog.records if "transitions" in r.getMessage()]
    for a, b in zip(loud, quiet):
        np.testing.assert_array_equal(a.log_estimates, b.log_estimates)


def _halfnormal_mean_log_ml(y: np.ndarray) -> float:
    """log p(y) of halfnormal_mean.stan: 1-D quadrature over tau of the closed form."""
    n = y.size

    def integrand(tau):
        cov = np.eye(n) + tau ** 2 * np.ones((n, n))
        return np.exp(stats.multivariate_normal(np.zeros(n), cov).logpdf(y) + shift
                      + np.log(2) + stats.norm(0, 2).logpdf(tau))

    shift = -stats.multivariate_normal(np.zeros(n), np.eye(n) + np.ones((n, n))).logpdf(y)
    value, err = integrate.quad(integrand, 0, np.inf, epsabs=0, epsrel=1e-11, limit=200)
    assert err < 1e-9 * value
    return float(np.log(value) - shift)


def test_the_checks_prior_end_is_tuned_on_the_prior_not_at_q(regression, path):
    prior_draws = regression.sample_prior(np.random.default_rng(11), 16)
    end = gaussian_path.tune_prior_end(ShiftedPrior(regression), HMC(), HMCParams(0.1, 6),
                                       path, prior_draws, seed=3,
                                       config=TuningConfig(pilot_grid=6, pilot_steps=10))
    np.testing.assert_array_equal(end.grid_betas, [0.0])
    assert end.dense == path.leg.dense
    # the prior is far wider than q (the posterior's Laplace fit) in every coordinate
    variances = (lambda m: np.diagonal(m) if m.ndim == 2 else m)  # noqa: E731
    assert np.all(variances(end.inv_metric[0]) > 10 * variances(path.leg.inv_metric[0]))
    both = path.endpoints(end)
    np.testing.assert_array_equal(both.grid_betas, [0.0, 1.0])
    assert both.step_size[0] == end.step_size[0]
    assert both.step_size[1] == path.leg.step_size[-1]
    np.testing.assert_array_equal(both.inv_metric[0], end.inv_metric[0])
    np.testing.assert_array_equal(both.inv_metric[1], path.leg.inv_metric[-1])
    np.testing.assert_array_equal(path.endpoints().inv_metric[0], path.leg.inv_metric[0])


@pytest.mark.stan
def test_bread_on_the_gaussian_path_sandwiches_log_ml_with_a_half_normal_scale():
    model = TEST_STAN / "halfnormal_mean.stan"
    simulator = TEST_STAN / "halfnormal_mean_sim.stan"
    compile_many([model, simulator], workers=2)
    data = {"N": 10}
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6)
    run = RunSettings(steps=(300,), chains=100, seed=1, progress=False, path="gaussian")
    result = bread(model, simulator, data, sampler=sampler, run=run)
    y = np.asarray(result.extra["simulated_data"]["y"])
    exact = _halfnormal_mean_log_ml(y)
    c = result.extra["tuning"]["normaliser"]
    assert abs(c["log_c"] - np.log(0.5)) < 4 * c["se"]
    assert result.extra["path_choice"]["path"] == "gaussian"
    assert "different sampler" in result.extra["path_choice"]["reason"]
    (step,) = result.steps
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    assert L.mean() <= exact + N_SE * _se(L) and U.mean() >= exact - N_SE * _se(U)
    assert log_ml_sandwich(L, U).contains(exact, n_se=N_SE)
    assert np.log(2) > 5 * N_SE * max(_se(L), _se(U))  # log(p(y)/2) would be caught
    again = bread(model, simulator, data, sampler=sampler, run=run)
    np.testing.assert_array_equal(L, again.steps[0].forward.log_estimates)


def _drafted_gaussian_run(tmp_path, name: str, data: dict, progress: bool = False):
    """bread on ``tests/stan/NAME.stan`` with a drafted simulator, on the Gaussian path:
    HMC, 100 chains, T = 300, seed 1."""
    from bread_stan.stan.draft import draft_program

    model = TEST_STAN / f"{name}.stan"
    simulator = tmp_path / f"{name}_drafted_sim.stan"
    simulator.write_text(draft_program(model).text)
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6)
    run = RunSettings(steps=(300,), chains=100, seed=1, progress=progress, path="gaussian")
    return bread(model, simulator, data, sampler=sampler, run=run)


@pytest.mark.stan
def test_a_drafted_simulator_gives_the_exact_normaliser_and_the_sandwich_holds(tmp_path):
    """The drafted simulator computes c = 1/2 (the half-normal tau) itself: the run takes
    it (method "exact", se 0) instead of importance sampling, says so on its path line,
    and sandwiches log p(y)."""
    result = _drafted_gaussian_run(tmp_path, "halfnormal_mean", {"N": 10})
    c = result.extra["tuning"]["normaliser"]
    assert c["method"] == "exact" and c["se"] == 0 and c["log_c"] == pytest.approx(
        np.log(0.5), abs=1e-12)
    assert "computed exactly by the drafted simulator" in result.extra["path_choice"]["reason"]
    y = np.asarray(result.extra["simulated_data"]["y"])
    exact = _halfnormal_mean_log_ml(y)
    (step,) = result.steps
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    assert log_ml_sandwich(L, U).contains(exact, n_se=N_SE)
    assert np.log(2) > 5 * N_SE * max(_se(L), _se(U))  # log(p(y)/2) would be caught


def _centred_groups_log_ml(y: np.ndarray) -> float:
    """log p(y) of centred_groups.stan: 1-D quadrature over tau of the closed form."""
    n = y.size

    def log_f(tau):
        cov = (1 + tau ** 2) * np.eye(n) + np.ones((n, n))
        return (stats.multivariate_normal(np.zeros(n), cov).logpdf(y) + np.log(2)
                + stats.norm(0, 2).logpdf(tau))

    shift = -log_f(1.0)
    value, err = integrate.quad(lambda t: np.exp(log_f(t) + shift), 0, np.inf, epsabs=0,
                                epsrel=1e-11, limit=200)
    assert err < 1e-9 * value
    return float(np.log(value) - shift)


@pytest.mark.stan
def test_without_a_mode_q_is_pathfinders_and_the_sandwich_holds(tmp_path, caplog):
    """centred_groups.stan has no posterior mode (the density grows like tau^-3 toward
    tau = 0), so no Laplace fit: q is the Pathfinder Gaussian, recorded and named on the
    path line, and AIS from it sandwiches log p(y) (1-D quadrature) within 3.5 standard
    errors and not log(p(y)/2); the same seed refits the same q (of the four Pathfinder
    runs, the one of largest ELBO); the run logs its progress."""
    from bread_stan.ais.waypoint import WaypointError, fit_base
    from bread_stan.stan.tempered import StanTarget
    from bread_stan.workflows.base_fit import fit_q

    model = TEST_STAN / "centred_groups.stan"
    with caplog.at_level(logging.INFO, logger="bread_stan"):
        result = _drafted_gaussian_run(tmp_path, "centred_groups", {"J": 4}, progress=True)
    # the run's progress, through the shards (lines: stderr is not a terminal here)
    assert any("AIS forward+reverse, 300 distributions: 299 of 299" in r.getMessage()
               for r in caplog.records)
    y = np.asarray(result.extra["simulated_data"]["y"])
    target = StanTarget(model, {"J": 4, "y": y.tolist()})
    pilot = np.random.default_rng(0).normal(0, 1, (8, target.dim))
    with pytest.raises(WaypointError):
        fit_base(target, pilot)  # no Laplace fit
    base, record = fit_q(target, pilot, seed=5)
    assert record["fit"] == "pathfinder" and record["widen"] == 1.5
    np.testing.assert_array_equal(fit_q(target, pilot, seed=5)[0].cov, base.cov)
    assert "a Pathfinder Gaussian" in result.extra["path_choice"]["reason"]
    exact = _centred_groups_log_ml(y)
    (step,) = result.steps
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    assert log_ml_sandwich(L, U).contains(exact, n_se=N_SE)
    assert not log_ml_sandwich(L, U).contains(exact - np.log(2), n_se=N_SE)  # c caught
    # q is usable: a gap of 0.45 nats here; a q in the funnel's neck (the one Pathfinder
    # run from the draw of highest joint density ends there) gave 29,000
    assert U.mean() - L.mean() < 1.0


def test_settings_and_other_workflows_refuse_the_gaussian_path_in_one_line():
    from bread_stan.errors import InputError
    from bread_stan.workflows.auto_path import prior_path_only

    with pytest.raises(InputError, match="AIS only"):
        RunSettings(path="gaussian", algorithm="smc")
    with pytest.raises(InputError, match="exact_draws=1"):
        RunSettings(path="gaussian", exact_draws=2)
    with pytest.raises(InputError, match="for bread and compare"):
        prior_path_only(SamplerSettings(), RunSettings(path="gaussian"), "protocol")
    assert SamplerSettings().for_path("gaussian").metric_ridge == "relative"

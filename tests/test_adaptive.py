"""The adaptive (thermodynamic-length) schedule and dense-metric tuning.

Known answer: on the conjugate Gaussian regression the log likelihood is a
quadratic form ``c + b'w - w'Aw / 2`` (A = X'X / sigma^2, b = X'y / sigma^2) and
the tempered posterior is N(m_beta, C_beta) in closed form, so
``Var_beta[log lik] = g'C g + tr((A C)^2) / 2`` with ``g = b - A m_beta``.
From that exact curve at the pilot's grid betas, every step of the adaptive
schedule must carry the same length ``int sqrt(Var_beta) d beta`` (computed by
quadrature of the exact curve) up to the interpolation between grid points.
"""

import numpy as np
import pytest
from scipy.integrate import quad

from bread_stan.ais import engine as ais
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleError, ScheduleSpec, sigmoidal, thermodynamic
from bread_stan.ais.estimators import log_ml_sandwich
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.ais.pilot_grid import grid_betas
from bread_stan.ais.tuning import TunedKernel, TuningConfig, tune
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams

Z_TOL = 4.5


@pytest.fixture(scope="module")
def informative():
    """Prior sd 10, 200 rows with correlated predictors (correlation 0.9): the
    log likelihood's sd falls by 5 orders of magnitude from beta = 0 to 1."""
    model, _ = simulate_regression(200, 3, prior_sd=10.0, correlation=0.9, seed=3)
    a = model._gram / model.noise_sd ** 2
    b = model._xty / model.noise_sd ** 2

    def sd(beta):
        m, c = model.tempered_posterior(beta)
        g = b - a @ m
        return float(np.sqrt(g @ c @ g + 0.5 * np.trace(a @ c @ a @ c)))
    return model, sd


def _step_lengths(betas, sd):
    return np.array([quad(sd, lo, hi)[0] for lo, hi in zip(betas[:-1], betas[1:])])


@pytest.mark.parametrize("T", [2, 3, 10, 1000])
def test_adaptive_schedule_is_a_valid_schedule(informative, T):
    _, sd = informative
    grid = grid_betas(16, 1e-3)
    b = thermodynamic(T, grid, [sd(x) for x in grid])
    assert b.shape == (T,) and b[0] == 0.0 and b[-1] == 1.0
    assert np.all(np.diff(b) > 0)


@pytest.mark.parametrize("T", [10, 200])
def test_adaptive_schedule_equalises_thermodynamic_length(informative, T):
    """Each step's exact length within 20% of every other's (interpolating the
    curve between 16 grid points costs about 15%); the sigmoid schedule's step
    lengths differ by factors over 100."""
    _, sd = informative
    grid = grid_betas(16, 1e-3)
    b = thermodynamic(T, grid, [sd(x) for x in grid])
    lengths = _step_lengths(b, sd)
    assert lengths.max() / lengths.min() < 1.2, lengths
    sig = _step_lengths(sigmoidal(T), sd)
    assert sig.max() / sig.min() > 100
    # The first-order gap sum(length^2) / 2 is smaller than the sigmoid's.
    assert np.sum(lengths ** 2) < 0.5 * np.sum(sig ** 2)


@pytest.mark.parametrize("b_star, floor", [(1e-5, 1e-3), (1e-12, 1e-11)])
def test_closed_form_pieces_are_exact_for_their_shapes(b_star, floor):
    """A curve c / (b + b*) is the first interval's shape and nearly a power law in
    the others, so each step carries log(1 + 1/b*) / (T - 1) to 2%, also when
    the curve spans twelve decades (a vague prior)."""
    grid = grid_betas(16, floor)
    b = thermodynamic(50, grid, 3.0 / (grid + b_star))
    lengths = np.array([3.0 * np.log((hi + b_star) / (lo + b_star))
                        for lo, hi in zip(b[:-1], b[1:])])
    np.testing.assert_allclose(lengths, 3.0 * np.log1p(1 / b_star) / 49, rtol=0.02)
    np.testing.assert_allclose(thermodynamic(5, grid, np.full(16, 2.0)), [0, .25, .5, .75, 1],
                               atol=1e-12)


def test_adaptive_spec_needs_the_pilot_and_a_measured_curve():
    with pytest.raises(ScheduleError, match="pilot"):
        ScheduleSpec("adaptive").betas(10)
    with pytest.raises(ScheduleError, match="not all zero"):
        thermodynamic(10, [0.0, 0.5, 1.0], [0.0, 0.0, 0.0])
    with pytest.raises(ScheduleError, match="matching"):
        thermodynamic(10, [0.0, 0.5, 1.0], [1.0, 2.0])


@pytest.mark.slow  # a few seconds: out of the fast tier's minute
def test_pilot_measures_the_loglik_curve(informative):
    """The pilot's sd of the log likelihood tracks the exact curve over its five
    decades: median error under 15%, none over 50%.  (Each grid beta pools 320
    autocorrelated values from 32 chains; with a log likelihood shaped like a
    chi-square on 3 degrees of freedom, kurtosis 7, the sd's relative standard
    error is about sqrt(6 / (4 * 32)) = 22% if only the chains count as
    independent, so 50% is over 2 standard errors of that pessimistic figure.)"""
    model, sd = informative
    tuned = tune(model, HMC(), HMCParams(0.1, 10),
                 model.sample_prior(np.random.default_rng(1), 32), seed=2,
                 config=TuningConfig(metric="dense", adapt_metric=True, pilot_steps=40,
                                     pilot_floor=1e-3))
    exact = np.array([sd(x) for x in tuned.grid_betas])
    error = np.abs(np.log(tuned.loglik_sd / exact))
    assert np.median(error) < np.log(1.15) and error.max() < np.log(1.5), error
    assert tuned.dense and tuned.inv_metric.shape == (16, 3, 3)
    # At beta = 1 the tuned dense metric is close to the posterior covariance.
    _, cov = model.tempered_posterior(1.0)
    np.testing.assert_allclose(tuned.inv_metric[-1], cov, rtol=0.5, atol=0.2 * np.sqrt(
        np.outer(np.diag(cov), np.diag(cov))).max())


@pytest.mark.parametrize("metric, dense", [("dense", True), ("auto", True), ("diag", False)])
def test_metric_choice(metric, dense):
    """Predictors with correlation 0.95 give posterior correlations near -0.95:
    auto picks dense there."""
    model, _ = simulate_regression(100, 3, correlation=0.95, seed=5)
    tuned = tune(model, HMC(), HMCParams(0.1, 5),
                 model.sample_prior(np.random.default_rng(2), 32), seed=3,
                 config=TuningConfig(pilot_grid=4, pilot_steps=20, adapt_metric=True,
                                     metric=metric, pilot_floor=1e-3))
    assert tuned.dense == dense
    with pytest.raises(ValueError, match="unknown metric"):
        TuningConfig(metric="full")


def test_auto_keeps_the_diagonal_without_correlation():
    model, _ = simulate_regression(100, 3, correlation=0.0, seed=5)
    tuned = tune(model, HMC(), HMCParams(0.1, 5),
                 model.sample_prior(np.random.default_rng(2), 32), seed=3,
                 config=TuningConfig(pilot_grid=4, pilot_steps=20, adapt_metric=True,
                                     metric="auto", pilot_floor=1e-3))
    assert not tuned.dense and tuned.inv_metric.shape == (4, 3)


@pytest.mark.parametrize("kernel, base", [  # NUTS in the slow tier (the fast tier's minute)
    (HMC(), HMCParams(0.1, 8)), pytest.param(NUTS(), NUTSParams(0.1), marks=pytest.mark.slow)])
def test_adaptive_dense_sandwich_contains_exact_log_ml(kernel, base):
    """Forward and reverse AIS with the adaptive schedule and a dense metric on a
    correlated conjugate regression: each mean on the right side of the exact
    log p(y) and the log-ML sandwich containing it, within 4.5 standard errors."""
    model, _ = simulate_regression(60, 3, correlation=0.9, noise_sd=0.5, seed=11)
    rng = np.random.default_rng(12)
    tuned = tune(model, kernel, base, model.sample_prior(rng, 32), seed=13,
                 config=TuningConfig(pilot_grid=8, pilot_steps=20, adapt_metric=True,
                                     metric="dense", pilot_floor=1e-3))
    result = runs.run(model, kernel, model.sample_prior(rng, 200),
                     model.sample_posterior(rng, 200), seed=14, path=tuned,
                     config=ais.RunConfig(steps=(50,), schedule=ScheduleSpec("adaptive")))
    step = result.steps[0]
    np.testing.assert_array_equal(step.betas, ScheduleSpec("adaptive").betas(50, tuned))
    log_ml = model.log_marginal_likelihood()
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    se = lambda x: np.std(x, ddof=1) / np.sqrt(x.size)  # noqa: E731
    assert L.mean() < log_ml + Z_TOL * se(L)
    assert U.mean() > log_ml - Z_TOL * se(U)
    assert log_ml_sandwich(L, U).contains(log_ml, n_se=Z_TOL)
    # The gap depends on the pilot's dense metric estimate (32 chains): over six
    # pilot/run seeds it ranged 2.2-3.5 nats with HMC and 1.3-1.6 with NUTS.
    assert U.mean() - L.mean() < 4.0


def test_dense_tuned_kernel_and_schedule_round_trip(tmp_path):
    model, _ = simulate_regression(50, 2, correlation=0.9, seed=7)
    tuned = tune(model, NUTS(), NUTSParams(0.1, max_depth=4),
                 model.sample_prior(np.random.default_rng(0), 16), seed=1,
                 config=TuningConfig(pilot_grid=4, pilot_steps=6, adapt_metric=True,
                                     metric="dense", pilot_floor=1e-3))
    tuned.save(tmp_path / "tuning.json")
    again = TunedKernel.load(tmp_path / "tuning.json")
    np.testing.assert_array_equal(again.loglik_sd, tuned.loglik_sd)
    betas = ScheduleSpec("adaptive").betas(30, again)
    np.testing.assert_array_equal(betas, ScheduleSpec("adaptive").betas(30, tuned))
    schedule = again.schedule(betas)
    assert schedule.inv_metric.shape == (30, 2, 2)
    # Interpolated in the matrix logarithm: symmetric positive definite, and the
    # grid betas' own matrices come back.
    assert np.all(np.linalg.eigvalsh(schedule.inv_metric) > 0)
    at_grid = tuned.schedule(tuned.grid_betas).inv_metric
    np.testing.assert_allclose(at_grid, tuned.inv_metric, rtol=1e-9)
    loaded = KernelSchedule.from_json(schedule.to_json())
    np.testing.assert_array_equal(loaded.inv_metric, schedule.inv_metric)
    assert loaded.params_at(3).inv_metric.shape == (1, 2, 2)


def test_automatic_floor_reaches_down_to_where_the_likelihood_starts_to_matter():
    """Prior sd 1000: the log likelihood at prior draws has sd ~1e8, so the pilot's
    floor is 1 / that sd and the grid keeps 8 points per three decades; with a
    fixed floor nothing changes."""
    model, _ = simulate_regression(100, 2, prior_sd=1000.0, seed=9)
    prior = model.sample_prior(np.random.default_rng(1), 16)
    config = TuningConfig(pilot_grid=8, pilot_steps=4, burn_in=0, pilot_floor=None,
                          adapt_metric=False, metric="diag")
    tuned = tune(model, HMC(), HMCParams(0.1, 3), prior, seed=2, config=config)
    sd = np.std(model.evaluate(prior, gradient=False).log_lik, ddof=1)
    assert tuned.beta_floor == pytest.approx(1 / sd)
    decades = np.log10((1 + tuned.beta_floor) / tuned.beta_floor)
    assert tuned.grid_betas.size == round(8 * decades / np.log10(1001))
    assert tuned.grid_betas[1] < 1e-6
    fixed = tune(model, HMC(), HMCParams(0.1, 3), prior, seed=2,
                 config=TuningConfig(pilot_grid=8, pilot_steps=4, burn_in=0, adapt_metric=False,
                                     pilot_floor=1e-3, metric="diag"))
    np.testing.assert_array_equal(fixed.grid_betas, grid_betas(8, 1e-3))
    with pytest.raises(ValueError, match="pilot_floor"):
        TuningConfig(pilot_floor=0.0)


def test_auto_stays_diagonal_in_high_dimension(monkeypatch):
    """Above AUTO_DENSE_MAX_DIM parameters "auto" runs the diagonal pilot (and
    kernel) even when the draws are correlated: same result as "diag"."""
    from bread_stan.ais import tuning
    monkeypatch.setattr(tuning, "AUTO_DENSE_MAX_DIM", 2)
    model, _ = simulate_regression(100, 3, correlation=0.95, seed=5)
    prior = model.sample_prior(np.random.default_rng(2), 32)
    runs = [tune(model, HMC(), HMCParams(0.1, 5), prior, seed=3,
                 config=TuningConfig(pilot_grid=4, pilot_steps=20, adapt_metric=True, metric=m,
                                     pilot_floor=1e-3))
            for m in ("auto", "diag")]
    assert not runs[0].dense
    np.testing.assert_array_equal(runs[0].inv_metric, runs[1].inv_metric)

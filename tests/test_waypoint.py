"""AIS through a Gaussian waypoint (bread_stan.ais.waypoint): prior -> q -> posterior.

Exact: leg 1's target is the geometric path from the prior to q; the legs share one
kernel at q; T splits into T_1 + T_2 - 1; the "relative" metric ridge is scale-free.
Statistical: on the conjugate regression (closed-form log p(y)) whose program prior is
off by a constant c (as ``sigma ~ cauchy(0, 2.5)`` on a positive sigma is off by 1/2),
forward and reverse runs sandwich log p(y) itself, not log(c p(y)): 3.5 standard errors
(a false failure is a < 1e-3 event per comparison under a correct implementation), and
c = e^-3 puts log(c p(y)) about 30 standard errors away.  A block of chains gives the
numbers of the whole batch.  Workflow: ``RunSettings(path="waypoint")`` on the
normal-mean Stan model sandwiches its closed-form log p(y) (4 standard errors).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bread_stan.ais import engine, waypoint
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.ais.estimators import consistency_check, log_ml_sandwich
from bread_stan.ais.gaussian_base import GaussianBase
from bread_stan.ais.metric_estimates import regularised_covariance, regularised_variance
from bread_stan.ais.tuning import TuningConfig
from bread_stan.errors import InputError
from bread_stan.kernels import HMC, HMCParams
from bread_stan.stan.compile import compile_many
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread
from shifted_regression import LOG_C, ShiftedPrior, regression_model
from bread_stan.workflows.common import fingerprints

N_SE = 3.5
TEST_STAN = Path(__file__).resolve().parent / "stan"


@pytest.fixture(scope="module")
def regression():
    return regression_model()


@pytest.fixture(scope="module")
def path(regression):
    pilot = regression.sample_prior(np.random.default_rng(7), 16)
    return waypoint.fit_waypoint(ShiftedPrior(regression), HMC(), HMCParams(0.1, 6), pilot,
                                 seed=3, config=TuningConfig(pilot_grid=6, pilot_steps=10))


CONFIG = engine.RunConfig(steps=(40,), schedule=ScheduleSpec("adaptive"), increment_blocks=5)


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


def test_leg_one_is_the_geometric_path_from_the_prior_to_q(regression):
    base = GaussianBase(np.array([0.5, -1.0, 2.0]), np.diag([0.1, 0.2, 0.3]))
    leg = waypoint.PriorToBase(regression, base)
    x = np.random.default_rng(1).normal(size=(5, 3))
    ev, prior = leg.evaluate(x), regression.evaluate(x)
    log_q, grad_q = base.log_density(x)
    for s in (0.0, 0.4, 1.0):
        np.testing.assert_allclose(ev.log_prior + s * ev.log_lik,
                                   (1 - s) * prior.log_prior + s * log_q, rtol=1e-12)
        np.testing.assert_allclose(ev.grad_prior + s * ev.grad_lik,
                                   (1 - s) * prior.grad_prior + s * grad_q, atol=1e-12)


def test_the_legs_share_one_kernel_at_q_and_split_T(path):
    for T in (3, 40, 1001):
        t1, t2 = path.split(T)
        assert t1 + t2 - 1 == T and t1 >= 2 and t2 >= 2
    (b1, s1, _), (b2, s2, _) = path.schedules(CONFIG, 40)
    assert len(b1) + len(b2) - 1 == 40
    tied, first = s1.params_at(len(b1) - 1), s2.params_at(0)  # the junction's kernel
    assert tied.step_size == first.step_size
    np.testing.assert_array_equal(tied.inv_metric, first.inv_metric)
    assert s1.inner.params_at(len(b1) - 1).step_size != first.step_size  # leg 1's own
    assert s1.params_at(0).step_size == s1.inner.params_at(0).step_size
    betas = path.betas(CONFIG, 40)
    assert betas.size == 40 and betas[0] == 0 and betas[-1] == 1 and np.all(np.diff(betas) > 0)
    with pytest.raises(InputError, match="at least 3"):
        path.split(2)


def test_relative_ridge_is_scale_free_and_stan_ridge_is_not():
    draws = np.random.default_rng(2).normal(size=(40, 3)) @ np.array(
        [[1.0, 0.9, 0.0], [0.0, 0.4, 0.0], [0.0, 0.0, 2.0]])
    scale = 1e-5
    np.testing.assert_allclose(regularised_covariance(scale * draws, "relative"),
                               scale ** 2 * regularised_covariance(draws, "relative"),
                               rtol=1e-12)
    np.testing.assert_allclose(regularised_variance(scale * draws, "relative"),
                               scale ** 2 * regularised_variance(draws, "relative"), rtol=1e-12)
    stan = regularised_variance(scale * draws)
    assert np.all(stan > 1e3 * scale ** 2 * np.var(draws, axis=0))  # the ridge swamps it
    with pytest.raises(InputError, match="ridge"):
        TuningConfig(metric_ridge="absolute")


def test_waypoint_ais_sandwiches_log_ml_itself_not_the_shifted_normaliser(regression, path):
    rng = np.random.default_rng(11)
    n = 200
    model = ShiftedPrior(regression)
    L_run, U_run = runs.run_both(path, model, HMC(), CONFIG, 300, regression.sample_prior(rng, n),
        regression.sample_posterior(rng, n), seed=4)
    L, U = L_run.log_estimates, U_run.log_estimates
    log_ml = regression.log_marginal_likelihood()
    assert L.mean() < log_ml + N_SE * _se(L)
    assert U.mean() > log_ml - N_SE * _se(U)
    assert log_ml_sandwich(L, U).contains(log_ml, n_se=N_SE)
    assert consistency_check(L, U).passed
    assert abs(LOG_C) > 5 * N_SE * max(_se(L), _se(U))  # the test can tell c apart
    # The running estimates end at the estimates, over both legs' blocks.
    np.testing.assert_allclose(L_run.cumulative[:, -1], L, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(U_run.cumulative[:, -1], U, rtol=1e-12, atol=1e-9)
    assert L_run.cumulative_at[-1] == 299


def test_a_block_of_chains_gives_the_numbers_of_the_batch(regression, path):
    rng = np.random.default_rng(12)
    model, start = ShiftedPrior(regression), regression.sample_prior(rng, 6)
    x_star = regression.sample_posterior(rng, 1)[0]
    whole = runs.run_direction(path, model, HMC(), CONFIG, 12, "forward", start, seed=9)
    part = runs.run_direction(path, model, HMC(), CONFIG, 12, "forward", start[4:], seed=9, first_chain=4)
    np.testing.assert_array_equal(whole.log_estimates[4:], part.log_estimates)
    rev = runs.run_direction(path, model, HMC(), CONFIG, 12, "reverse", x_star, seed=9, n_chains=6)
    rev_part = runs.run_direction(path, model, HMC(), CONFIG, 12, "reverse", x_star, seed=9, n_chains=2,
                                first_chain=4)
    np.testing.assert_array_equal(rev.log_estimates[4:], rev_part.log_estimates)


def test_settings_refuse_bad_combinations_and_keep_old_fingerprints():
    with pytest.raises(InputError, match="AIS only"):
        RunSettings(path="waypoint", algorithm="smc")
    with pytest.raises(InputError, match="exact_draws=1"):
        RunSettings(path="waypoint", exact_draws=2)
    with pytest.raises(InputError, match="unknown path"):
        RunSettings(path="laplace")
    with pytest.raises(InputError, match="metric_ridge"):
        SamplerSettings(metric_ridge="big")
    old_sampler = {k: v for k, v in asdict(SamplerSettings()).items() if k != "metric_ridge"}
    old_run = {k: v for k, v in RunSettings().scored().items() if k != "path"}
    assert (fingerprints(sampler=asdict(SamplerSettings()), run=RunSettings().scored())
            == fingerprints(sampler=old_sampler, run=old_run))
    assert (fingerprints(run=RunSettings(path="waypoint").scored())
            != fingerprints(run=RunSettings().scored()))


@pytest.mark.stan
def test_bread_on_the_waypoint_path_sandwiches_the_exact_log_ml(tmp_path):
    model, simulator = TEST_STAN / "normal_mean.stan", TEST_STAN / "normal_mean_sim.stan"
    compile_many([model, simulator], workers=2)
    data = {"N": 20, "sigma": 1.0, "tau": 2.0}
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                              metric_ridge="relative")
    run = RunSettings(steps=(3, 30), chains=40, seed=1, progress=False, path="waypoint")
    result = bread(model, simulator, data, sampler=sampler, run=run, out_dir=tmp_path)
    y = np.asarray(result.extra["simulated_data"]["y"])
    n = y.size
    exact = stats.multivariate_normal(np.zeros(n), np.eye(n) + 4.0 * np.ones((n, n))).logpdf(y)
    assert result.extra["tuning"]["path"] == "waypoint"
    assert result.extra["simulator_check"]["ran"]  # with the path's end kernels
    for s in result.steps:
        L, U = s.forward.log_estimates, s.reverse.log_estimates
        assert L.mean() <= exact + 4 * _se(L) and U.mean() >= exact - 4 * _se(U)
        assert s.betas.size == s.n_steps
    again = bread(model, simulator, data, sampler=sampler, run=run, out_dir=tmp_path)
    for a, b in zip(result.steps, again.steps):  # loaded, not rerun
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)


def test_other_workflows_refuse_the_waypoint_path_in_one_line():
    from bread_stan.workflows.aide import aide
    from bread_stan.workflows.protocol import protocol
    from bread_stan.workflows.subjective import subjective

    run = RunSettings(path="waypoint")
    for call in (lambda: protocol("m.stan", "s.stan", {}, run=run),
                 lambda: subjective("m.stan", {}, run=run), lambda: aide("m.stan", {}, run=run)):
        with pytest.raises(InputError, match="bread and compare"):
            call()


class _TwoModes:
    """Prior N(0, 3^2) on each of 2 coordinates; the likelihood a mixture of two normals
    (sd 0.3) at (-3, -3) and (3, 3) with weights ``1 - minor`` and ``minor``."""

    dim = 2

    def __init__(self, minor: float):
        self.minor = minor

    def evaluate(self, x, gradient=True):
        from bread_stan.target import Evaluation
        low = np.log1p(-self.minor) - 0.5 * np.sum(((x + 3) / 0.3) ** 2, axis=1)
        high = np.log(self.minor) - 0.5 * np.sum(((x - 3) / 0.3) ** 2, axis=1)
        log_lik = np.logaddexp(low, high)
        w = np.exp(high - log_lik)[:, None]
        grad_lik = ((1 - w) * -(x + 3) + w * -(x - 3)) / 0.09
        return Evaluation(-0.5 * np.sum((x / 3) ** 2, axis=1), log_lik, -x / 9, grad_lik)


def test_separate_modes_refuse_one_gaussian_and_a_negligible_one_does_not():
    """Searches started near each mode find both: at equal weights (28 of the Laplace fit's sds
    apart, equal mass) the Gaussian base is refused in one line (the automatic path
    then tempers from the prior, as for a program without a mode); at weight 1e-3 the second mode holds about
    0.1% of the mass (below the 1% that counts) and the best mode is fitted."""
    starts = np.array([[-2.5, -3.2], [3.1, 2.8], [-3.3, -2.9], [2.7, 3.3]])
    with pytest.raises(waypoint.WaypointError, match="separate modes .*100% of the first"):
        waypoint.fit_base(_TwoModes(0.5), starts)
    base, record = waypoint.fit_base(_TwoModes(1e-3), starts)
    np.testing.assert_allclose(base.mean, -3 * (1 / 0.09) / (1 / 0.09 + 1 / 9), rtol=1e-4)
    assert record["failed_searches"] == 0


class _Correlated:
    """Prior N(0, 10^2 I) on d = 30 coordinates; a Gaussian likelihood whose posterior
    pairs coordinates with correlation 0.99 (sd about 0.1): a diagonal metric sees sds
    0.1 where the narrow direction is 0.1 * sqrt(0.01) = 0.01 wide."""

    dim = 30

    def __init__(self):
        pair = np.array([[1.0, 0.99], [0.99, 1.0]]) * 0.01
        self.precision = np.kron(np.eye(15), np.linalg.inv(pair))

    def evaluate(self, x, gradient=True):
        from bread_stan.target import Evaluation
        shifted = x - 1.0
        g = -shifted @ self.precision
        return Evaluation(-0.5 * np.sum((x / 10) ** 2, axis=1), 0.5 * np.sum(g * shifted, axis=1),
                          -x / 100, g)


@pytest.mark.slow  # a few seconds: out of the fast tier's minute
def test_a_strongly_correlated_base_is_the_metric_of_its_leg():
    """Above 20 parameters "auto" estimates a diagonal metric; where q is strongly
    correlated its covariance is the leg's metric at every beta instead, recorded once
    (the leg names it).  The step size at the posterior is then several times the
    diagonal metric's (about 0.1 / 0.01 = 10 in theory; 3 is asserted)."""
    from bread_stan.ais.tuning import metric_from_base, tune
    from bread_stan.kernels import NUTS, NUTSParams
    model = _Correlated()
    pilot = np.random.default_rng(0).normal(0, 10, (32, model.dim))
    base, _ = waypoint.fit_base(model, pilot)
    config = TuningConfig(pilot_grid=6, pilot_steps=12)
    leg_target = waypoint.base_leg_target(model, base)
    leg = waypoint.tune_base_leg(leg_target, NUTS(), NUTSParams(0.5, max_depth=8), base, 32,
                                 seed=1, config=config)
    assert leg.dense and leg.inv_metric.shape == (1, 30, 30)
    np.testing.assert_array_equal(leg.inv_metric[0], base.cov)
    assert waypoint.leg_record(leg, base)["inv_metric"] == waypoint.BASE_METRIC
    step, metric = leg.interpolate(np.array([0.0, 0.5, 1.0]))
    assert metric.shape == (3, 30, 30) and np.array_equal(metric[2], base.cov)
    diagonal = waypoint.tune_base_leg(leg_target, NUTS(), NUTSParams(0.5, max_depth=8), base,
                                      32, seed=1, config=TuningConfig(pilot_grid=6, pilot_steps=12,
                                                                      metric="diag"))
    assert not diagonal.dense and leg.step_size[-1] > 3 * diagonal.step_size[-1]
    # the rule: only where "auto" would go diagonal, and only for strong correlation
    assert metric_from_base(base.cov, config, 32) is not None
    assert metric_from_base(np.diag(np.diag(base.cov)), config, 32) is None
    assert metric_from_base(base.cov[:2, :2], config, 32) is None  # d = 2: auto estimates
    assert metric_from_base(base.cov, TuningConfig(metric="diag"), 32) is None


def test_a_diagonal_prior_end_beside_q_covariance_stays_diagonal():
    """The simulator check runs at the two ends only: with q's dense covariance on the
    leg and a diagonal metric tuned at the prior end, each end keeps its own kind (a
    diagonal stored as a dense matrix would cost O(d^2) a leapfrog step), with the
    stored values; any other beta is refused."""
    from bread_stan.ais.tuning import TunedKernel
    d = 3
    cov = np.array([[1.0, 0.9, 0.0], [0.9, 1.0, 0.0], [0.0, 0.0, 2.0]])
    leg = TunedKernel("nuts", np.array([0.0, 0.5, 1.0]), np.array([0.4, 0.3, 0.2]), cov[None],
                      {"max_depth": 8}, 1e-3, np.full(3, 0.8))
    prior_end = TunedKernel("nuts", np.zeros(1), np.array([0.7]), np.array([[1.0, 2.0, 3.0]]),
                            {"max_depth": 8}, 1e-3, np.full(1, 0.8))
    ends = waypoint.EndKernels.of(prior_end, leg).schedule(np.array([0.0, 1.0]))
    at_prior, at_posterior = ends.params_at(0), ends.params_at(1)
    np.testing.assert_allclose(at_prior.inv_metric, [1.0, 2.0, 3.0], rtol=1e-15)  # exp(log)
    assert at_prior.step_size == 0.7 and at_posterior.step_size == 0.2
    np.testing.assert_array_equal(at_posterior.inv_metric, cov[None])
    assert np.shape(at_prior.inv_metric) == (d,)
    with pytest.raises(InputError, match="betas 0 and 1"):
        ends.schedule(np.array([0.0, 0.5, 1.0]))

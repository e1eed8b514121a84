"""Tests that fail when the kernel machinery breaks (issue 13, item 4).

Each test here was written against a deliberate break of the code and seen to
fail on it (the note of issue 13 lists which break each one catches):

- per-temperature kernel schedules: reverse (or forward) AIS using the kernel
  settings of a neighbouring temperature is caught on the exact grid oracle
  (a lazy grid kernel whose laziness differs by temperature) and, entry by
  entry, by a spy kernel on the conjugate Gaussian, whose log p(y) sandwich must
  also hold with a tuned per-temperature schedule;
- HMC and NUTS with a non-identity diagonal metric (momentum drawn with the
  wrong metric): moments and two-sample tests against exact draws of a Gaussian
  whose scales differ by a factor 1000;
- a rescue step size that depends on the state: a long-run test with exact
  moments, where such a rule has a large bias;
- the sign of the infinity a reverse chain through zero likelihood carries.

Tolerances: z-scores against exact values use standard errors from exact
standard deviations; |z| < Z_TOL = 4.5 (two-sided p ~ 7e-6 per statistic, so
a false alarm in a test of at most ~20 statistics is below 1e-4) and
two-sample p-values above P_MIN = 1e-4 (Bonferroni over the coordinates).
Seeds are fixed, so each test is deterministic.
"""

import numpy as np
import pytest
from scipy import stats

from bread_stan.ais import engine as ais
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec, sigmoidal
from bread_stan.ais.estimators import log_ml_sandwich
from bread_stan.ais.tuning import TuningConfig, tune
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.exact.grid import GridTarget, grid_log_f
from bread_stan.exact.oracle import NeighbourMetropolis, grid_bounds, linear_schedule
from bread_stan.kernels.grid_mh import GridMetropolis, GridMHParams
from bread_stan.kernels.base import StepInfo, initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.target import Evaluation

Z_TOL = 4.5
P_MIN = 1e-4


# --- per-temperature kernel schedules: the exact grid oracle ------------------------------

class _LazyGridSchedule:
    """A frozen grid-kernel schedule with a stay probability per temperature.

    The engine takes any object with ``betas``, ``steps_per_temperature`` and
    ``params_at(t)``; :class:`KernelSchedule` holds HMC/NUTS settings only.
    """

    def __init__(self, betas, stay_prob, steps_per_temperature):
        self.betas = np.asarray(betas, dtype=float)
        self.stay_prob = np.asarray(stay_prob, dtype=float)
        self.steps_per_temperature = steps_per_temperature

    def params_at(self, t):
        return GridMHParams(stay_prob=float(self.stay_prob[t]))

    # What ais.run needs of ``tuned``: a schedule for its betas, and a record.
    def schedule(self, betas, steps_per_temperature):
        assert np.array_equal(betas, self.betas)
        return self

    def to_dict(self):
        return {"stay_prob": self.stay_prob.tolist()}


# Lazy at the two hottest temperatures, not at the others, five MH steps per
# temperature: on the "hard" 7x7 target, a kernel one temperature off moves E[L]
# or E[U] by at least 11 standard errors of a 4000-chain mean (the oracle says
# so below), and every forward and reverse kernel except the last reverse one
# (after the last weight update, at b = 0) matters.
GRID_NAME, GRID_T, GRID_STEPS = "hard", 5, 5
GRID_STAY = np.array([0.95, 0.95, 0.0, 0.0, 0.0])
GRID_CHAINS = 4000


def _grid_exact(stay):
    return grid_bounds(GRID_NAME, GRID_T, kernel=NeighbourMetropolis((7, 7), GRID_STEPS, stay))


def _mean_z(L, U, exact):
    n = L.size
    return {"forward": (L.mean() - exact.forward_mean) / (exact.forward_sd / np.sqrt(n)),
            "reverse": (U.mean() - exact.reverse_mean) / (exact.reverse_sd / np.sqrt(n))}


def test_a_schedule_one_temperature_off_would_move_the_exact_grid_means():
    """Power of the next test: the oracle's means under misaligned laziness."""
    exact = _grid_exact(GRID_STAY)
    n = GRID_CHAINS
    for offset in (1, -1):
        shifted = GRID_STAY[np.clip(np.arange(GRID_T) + offset, 0, GRID_T - 1)]
        wrong = _grid_exact(shifted)
        z_fwd = (wrong.forward_mean - exact.forward_mean) / (exact.forward_sd / np.sqrt(n))
        z_rev = (wrong.reverse_mean - exact.reverse_mean) / (exact.reverse_sd / np.sqrt(n))
        assert min(abs(z_fwd), abs(z_rev)) > 2 * Z_TOL, (offset, z_fwd, z_rev)


@pytest.mark.parametrize("combined", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_per_temperature_grid_schedule_reproduces_the_exact_means(combined):
    """Forward and reverse AIS with a per-temperature lazy grid kernel against the
    oracle with the same laziness at each temperature, separately and in one batch."""
    target = GridTarget(grid_log_f(GRID_NAME))
    schedule = _LazyGridSchedule(linear_schedule(GRID_T), GRID_STAY, GRID_STEPS)
    draws = np.random.default_rng(21)
    prior = target.sample_prior(draws, GRID_CHAINS)
    post = target.sample_posterior(draws, GRID_CHAINS)
    kernel = GridMetropolis()
    if combined:
        config = ais.RunConfig(steps=(GRID_T,), schedule=ScheduleSpec("linear"),
                               steps_per_temperature=GRID_STEPS, increment_blocks=None)
        step = runs.run(target, kernel, prior, post, seed=22, path=schedule, config=config).steps[0]
        L, U = step.forward.log_estimates, step.reverse.log_estimates
    else:
        L = ais.forward(target, kernel, schedule, prior, seed=22).log_estimates
        U = ais.reverse(target, kernel, schedule, post, seed=22).log_estimates
    exact = _grid_exact(GRID_STAY)
    z = _mean_z(L, U, exact)
    assert all(abs(v) < Z_TOL for v in z.values()), z
    bound_se = np.hypot(exact.forward_sd, exact.reverse_sd) / np.sqrt(GRID_CHAINS)
    assert abs(U.mean() - L.mean() - exact.bound) < Z_TOL * bound_se


def test_lazy_grid_kernel_validates_its_setting():
    with pytest.raises(ValueError, match="stay_prob"):
        GridMHParams(stay_prob=1.0)
    with pytest.raises(ValueError, match="stay_prob"):
        NeighbourMetropolis((3, 3), stay_prob=[0.5, -0.1])
    with pytest.raises(ValueError, match="stay probabilities for 4 betas"):
        grid_bounds("easy", 4, kernel=NeighbourMetropolis((7, 7), stay_prob=np.zeros(3)))


# --- per-temperature kernel schedules: the conjugate Gaussian ------------------------------

class _SpyHMC(HMC):
    """HMC that records, for every call, each chain's beta, step size and inverse metric."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def step(self, rng, state, target, beta, params, chains=None):
        n, d = state.position.shape
        metric = np.ones((n, d)) if params.inv_metric is None else np.broadcast_to(
            params.inv_metric, (n, d))
        self.calls.append((np.broadcast_to(beta, (n,)).copy(),
                           np.broadcast_to(params.step_size, (n,)).copy(), np.array(metric)))
        return super().step(rng, state, target, beta, params, chains)


@pytest.fixture(scope="module")
def gaussian():
    model, _ = simulate_regression(30, 3, correlation=0.5, noise_sd=0.5, seed=31)
    rng = np.random.default_rng(32)
    tuned = tune(model, HMC(), HMCParams(0.5, 8), model.sample_prior(rng, 64), seed=33,
                 config=TuningConfig(pilot_grid=8, pilot_steps=30, adapt_metric=True,
                                     pilot_floor=1e-3, metric="diag"))
    return {"model": model, "tuned": tuned, "prior": model.sample_prior(rng, 400),
            "post": model.sample_posterior(rng, 400)}


def _temperature_of(beta, betas):
    t = np.searchsorted(betas, beta)
    assert np.array_equal(betas[t], beta), "a kernel ran at a beta outside the schedule"
    return t


@pytest.mark.parametrize("combined", [False, True])
def test_each_temperature_gets_its_own_kernel_params_in_both_directions(gaussian, combined):
    """Entry by entry: the kernel at temperature t gets step_size[t] and inv_metric[t],
    forward at t = 1 .. T-1 in that order, reverse at t = T-2 .. 0."""
    T, spt, n = 12, 2, 3
    schedule = gaussian["tuned"].schedule(sigmoidal(T), spt)
    assert np.unique(schedule.step_size).size == T  # every entry differs: a shift shows
    assert np.unique(schedule.inv_metric[:, 0]).size == T
    spy = _SpyHMC()
    model, prior, post = gaussian["model"], gaussian["prior"][:n], gaussian["post"][:n]
    if combined:
        config = ais.RunConfig(steps=(T,), schedule=ScheduleSpec("sigmoid"),
                               steps_per_temperature=spt, increment_blocks=None)
        runs.run(model, spy, prior, post, seed=1, path=gaussian["tuned"], config=config)
        directions = {"forward": slice(0, n), "reverse": slice(n, 2 * n)}
        calls = {name: [tuple(a[sl] for a in call) for call in spy.calls]
                 for name, sl in directions.items()}
    else:
        ais.forward(model, spy, schedule, prior, seed=1)
        fwd_calls, spy.calls = spy.calls, []
        ais.reverse(model, spy, schedule, post, seed=1)
        calls = {"forward": fwd_calls, "reverse": spy.calls}
    expected_order = {"forward": np.arange(1, T), "reverse": np.arange(T - 2, -1, -1)}
    for direction, records in calls.items():
        assert len(records) == (T - 1) * spt
        visited = []
        for beta, step_size, metric in records:
            t = _temperature_of(beta, schedule.betas)
            assert np.unique(t).size == 1
            np.testing.assert_array_equal(step_size, schedule.step_size[t], err_msg=direction)
            np.testing.assert_array_equal(metric, schedule.inv_metric[t], err_msg=direction)
            visited.append(t[0])
        np.testing.assert_array_equal(visited, np.repeat(expected_order[direction], spt),
                                      err_msg=direction)


def test_tuned_per_temperature_schedule_sandwiches_exact_log_ml(gaussian):
    """Forward and reverse AIS with the tuned schedule (step size and metric vary with
    beta) bound the exact log p(y): each mean and the log-ML sandwich within 4.5 standard
    errors, and the sandwich narrower than 1 nat."""
    model = gaussian["model"]
    log_ml = model.log_marginal_likelihood()
    schedule = gaussian["tuned"].schedule(sigmoidal(60))
    assert schedule.step_size.max() > 3 * schedule.step_size.min()
    L = ais.forward(model, HMC(), schedule, gaussian["prior"], seed=3).log_estimates
    U = ais.reverse(model, HMC(), schedule, gaussian["post"], seed=3).log_estimates
    se = lambda x: np.std(x, ddof=1) / np.sqrt(x.size)  # noqa: E731
    assert L.mean() < log_ml + Z_TOL * se(L)
    assert U.mean() > log_ml - Z_TOL * se(U)
    sandwich = log_ml_sandwich(L, U)
    assert sandwich.contains(log_ml, n_se=Z_TOL)
    assert sandwich.width < 1.0


# --- HMC and NUTS with a non-identity diagonal metric -------------------------------------

class _ScaledGaussian:
    """Independent normals with sds 0.01, 1 and 10 (as the prior; the likelihood is flat).

    With the inverse metric sd^2 the kernel sees a standard normal; with any other
    metric a step size of 0.5 is unstable in the first coordinate or useless in
    the last.
    """

    mean = np.array([1.0, -2.0, 30.0])
    sd = np.array([0.01, 1.0, 10.0])
    dim = 3

    def evaluate(self, points, *, gradient=True):
        z = (points - self.mean) / self.sd
        log_prior = -0.5 * np.einsum("ij,ij->i", z, z)
        log_lik = np.zeros(points.shape[0])
        if not gradient:
            return Evaluation(log_prior, log_lik)
        return Evaluation(log_prior, log_lik, -z / self.sd, np.zeros_like(points))

    def sample(self, rng, n):
        return self.mean + self.sd * rng.standard_normal((n, self.dim))


def _moment_z(x, mean, sd):
    """z-scores of sample means and variances of independent normal draws x (n, d)."""
    n = x.shape[0]
    z_mean = (x.mean(0) - mean) / (sd / np.sqrt(n))
    z_var = (((x - mean) ** 2).mean(0) - sd ** 2) / (sd ** 2 * np.sqrt(2.0 / n))
    return np.concatenate([z_mean, z_var])


@pytest.mark.parametrize("kernel, params", [
    (HMC(), HMCParams(step_size=0.5, n_leapfrog=4, inv_metric=_ScaledGaussian.sd ** 2,
                      step_size_jitter=0.3)),
    (NUTS(), NUTSParams(step_size=0.5, inv_metric=_ScaledGaussian.sd ** 2, max_depth=5)),
])
def test_kernels_with_a_diagonal_metric_keep_exact_draws_exact(kernel, params):
    """2000 chains from exact draws, 10 transitions each: the final states are
    independent exact draws if the kernel is right.  Means and variances within
    Z_TOL standard errors, a two-sample Kolmogorov-Smirnov test per coordinate
    against 2000 fresh exact draws above P_MIN / 3, and most proposals accepted
    (a metric the kernel ignored would make the step size unstable)."""
    target, n = _ScaledGaussian(), 2000
    rng = np.random.default_rng(41)
    state = initial_state(target, target.sample(rng, n))
    chain_rng = ChainRandom.from_seed(42, n)
    accept = []
    for _ in range(10):
        state, info = kernel.step(chain_rng, state, target, np.ones(n), params)
        accept.append(info.accept_stat.mean())
    x = state.position
    z = _moment_z(x, target.mean, target.sd)
    assert np.all(np.abs(z) < Z_TOL), z
    exact = target.sample(rng, n)
    p = [stats.ks_2samp(x[:, j], exact[:, j]).pvalue for j in range(target.dim)]
    assert min(p) > P_MIN / target.dim, p
    assert np.mean(accept) > 0.6, accept


# --- rescue steps must not depend on the state ---------------------------------------------

class _StandardNormal:
    """A d-dimensional standard normal as the prior; the likelihood is flat."""

    def __init__(self, dim):
        self.dim = dim

    def evaluate(self, points, *, gradient=True):
        log_prior = -0.5 * np.einsum("ij,ij->i", points, points)
        log_lik = np.zeros(points.shape[0])
        if not gradient:
            return Evaluation(log_prior, log_lik)
        return Evaluation(log_prior, log_lik, -points, np.zeros_like(points))


def test_rescue_steps_are_chosen_independently_of_the_state():
    """Rescue steps are a state-independent mixture, so exact draws must stay exact.

    A rescued transition barely moves (step size times 10^-U(0, 3)), so a rule
    that rescues more often in some region (where the gradient is steep, say)
    or shrinks the step by the local gradient acts as state-dependent laziness
    and reweights the chain's stationary law.  The invariance test in
    test_kernels.py passed such rules for want of power: its rescue_prob 0.3
    lets a rule move the rescue rate by at most 0.3, and its unrescued
    trajectories (0.4 x 7 = 2.8 time units on a unit-scale target, near half a
    period) map x to about -x, keeping |x|, which is what such rules key on.
    On this target, rescue_prob 0.9 with that trajectory left a |grad|-driven
    rule at 2.3 standard errors.  Here rescue_prob is 0.9 and the unrescued
    trajectory is a quarter period (0.5 x 3), which mixes |x| in about one
    step; 4000 chains from exact draws make 100 transitions, and their final
    states are independent draws from the kernel's stationary law.  Checked:
    mean, variance, the mass beyond |x| = 1.5, and a one-sample KS test against
    N(0, 1).  Rescuing only where |grad| > 1, only where |grad| < 1, with
    probability growing with |grad|, or dividing the rescue step by |grad| each
    move some statistic by 20 to 42 standard errors.
    """
    target, n = _StandardNormal(1), 4000
    params = HMCParams(step_size=0.5, n_leapfrog=3, rescue_prob=0.9)
    state = initial_state(target, np.random.default_rng(51).standard_normal((n, 1)))
    chain_rng = ChainRandom.from_seed(52, n)
    for _ in range(100):
        state, _ = HMC().step(chain_rng, state, target, np.ones(n), params)
    x = state.position
    z = _moment_z(x, np.zeros(1), np.ones(1))
    tail = 2 * stats.norm.sf(1.5)
    z_tail = (np.mean(np.abs(x) > 1.5) - tail) / np.sqrt(tail * (1 - tail) / n)
    assert np.all(np.abs(np.append(z, z_tail)) < Z_TOL), (z, z_tail)
    assert stats.kstest(x[:, 0], "norm").pvalue > P_MIN


# --- which infinity a reverse chain can carry (the estimators' docstring) ------------------

class _ZeroLikelihoodAbove0:
    """Prior N(0, 1); likelihood N(0, 1) for x <= 0 and zero for x > 0."""

    dim = 1

    def evaluate(self, points, *, gradient=True):
        x = points[:, 0]
        return Evaluation(-0.5 * x ** 2, np.where(x > 0, -np.inf, -0.5 * x ** 2))


class _Stay:
    """The identity kernel (leaves every distribution invariant)."""

    needs_gradient = False

    def step(self, rng, state, target, beta, params=None, chains=None):
        z = np.zeros(state.n_chains)
        return state, StepInfo(z, z.astype(bool), z, z.astype(np.int64), z.astype(np.int64))


def test_a_reverse_chain_through_zero_likelihood_has_upper_estimate_minus_infinity():
    """logw_rev adds (b_{t-1} - b_t) log f <= 0 times -inf = +inf, so U = -inf: an
    impossible upper bound, refused; a forward chain there has L = -inf, accepted."""
    start = np.array([[1.0], [-1.0]])
    betas = np.linspace(0.0, 1.0, 4)
    rev = ais.reverse(_ZeroLikelihoodAbove0(), _Stay(), betas, start, seed=0)
    fwd = ais.forward(_ZeroLikelihoodAbove0(), _Stay(), betas, start, seed=0)
    assert rev.log_weights[0] == np.inf and rev.log_estimates[0] == -np.inf
    assert fwd.log_estimates[0] == -np.inf
    assert log_ml_sandwich(fwd.log_estimates, [0.0, 1.0]).lower == pytest.approx(-0.5 - np.log(2))
    with pytest.raises(ValueError, match="reverse estimates: 1 of 2 chains have an invalid"):
        log_ml_sandwich([0.0, 1.0], rev.log_estimates)

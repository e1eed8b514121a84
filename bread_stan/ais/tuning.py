"""Pilot tuning of HMC/NUTS step sizes (and optionally metrics) as a function of beta.

Pilot chains, started from exact prior draws and never scored, are annealed
along a grid of betas, each beta warm-started from the chains and step size of
the one before.  On arriving at a new grid beta the chains first make a few
transitions there with the previous step size and metric (``burn_in``; never
scored, never adapted), so that the metric estimate and the acceptance
statistics that steer the step size come from chains closer to that beta's
distribution.  Then a round of dual averaging (Stan's
settings: gamma 0.05, t0 10, kappa 0.75; the acceptance statistic averaged
over the pilot chains) sets the step size toward a target acceptance; with
``adapt_metric`` the inverse metric is first set to the pilot chains'
regularised variance there (diagonal) or regularised covariance (dense, as
Stan's ``dense_e``), and the step size adapted in two windows.

Pooling the chains measures the spread of the whole tempered distribution, which
is the scale each chain needs only when that distribution has one mode.  Where
the chains sit in separate modes (label switching in a mixture: each chain in
its own ordering of the components), the pooled spread is the distance between
the modes, not their width, and a metric that wide makes the step size as small
as the ratio and every NUTS tree as deep as allowed.  So after the first window
the pilot compares, coordinate by coordinate, the variance of all the window's
draws with the mean variance within each chain: where one is more than
``SEPARATED_RATIO`` (100) times the other (modes more than about ten widths apart)
the metric comes from the spread within each chain instead, and the next grid
beta starts from it.  A single, well-mixed mode is never near that ratio, and
the metric there is the pooled one, as before.  The test also fires where chains
in one mode mix too slowly to meet within a window, as in the funnel of a centred
hierarchical prior (chains in its neck and its mouth): the metric is then the
mean of the chains' own spreads, not the spread between them.

The pilot also records, at each grid beta, the standard deviation of the log
likelihood over the pilot chains during the last window: the curve from which
the adaptive schedule (:func:`~bread_stan.ais.betas.thermodynamic`) places its
betas.  Schedule and kernel alike are functions of the pilot chains only, so
scored chains never influence them.

The result, a :class:`TunedKernel`, interpolates log step size linearly in
``log(beta + beta_floor)`` (a diagonal metric likewise in log; a dense one by
its matrix logarithm) and turns any schedule of betas into a frozen
:class:`~bread_stan.ais.frozen_kernels.InterpolatedSchedule` (each temperature's
params interpolated when the run reaches it, so memory is flat in T), shared by
the forward and reverse runs; the tuned kernel is saved with the results.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NamedTuple
from dataclasses import asdict, dataclass, replace
from functools import cached_property

import numpy as np

from .frozen_kernels import InterpolatedSchedule, kind_of
from .path import OneLeg
from .pilot_grid import (DEFAULT_FLOOR, auto_floor, grid_betas, loglik_sd,
                         pilot_transitions)
from .metric_estimates import (arrival_metric, chains_separated, strongly_correlated,
                               window_metric)
from ..kernels.adaptation import DualAveraging
from ..kernels.base import Kernel, initial_state
from ..kernels.registry import KERNELS
from ..linalg import interpolate_spd, spd_log
from ..rng import ChainRandom, Stream
from ..deadline import OverBudget, keep_pace
from ..progress import PaceLog, progress_bar
from ..target import Target
from ..errors import InputError

__all__ = ["TuningConfig", "TunedKernel", "tune", "PILOT_STREAM",
           "PilotAbandoned", "metric_from_base", "METRICS", "RIDGES", "FINGERPRINT_NAMES",
           "fingerprint_fields"]

log = logging.getLogger(__name__)

PILOT_STREAM = int(Stream.PILOT)  # random stream of the pilot chains (kept as a public name)
METRICS = ("diag", "dense", "auto")  # metric estimates the pilot knows
AUTO_DENSE_MAX_DIM = 20  # "auto" never goes dense above this many parameters
_SANE_STEP = (1e-8, 1e6)   # step sizes outside this range flag a broken density
_SANE_RATIO = 1e6          # nor should they vary more than this along beta
RIDGES = ("stan", "relative")  # regularisations of the metric estimate
_PACE_AFTER = 3  # pilot transitions before their pace is read against a deadline


class PilotAbandoned(Exception):
    """A pilot stopped by its ``give_up`` rule (the message says why); not an error."""


@dataclass(frozen=True)
class TuningConfig:
    """Pilot settings.  ``target_accept`` None means the kernel's default in
    :data:`~bread_stan.kernels.registry.KERNELS` (0.65 for HMC, 0.8 for NUTS).

    The fields a user sets carry the names of
    :class:`~bread_stan.workflows.settings.SamplerSettings` (``pilot_grid``,
    ``pilot_steps``, ``pilot_floor``, ``metric_ridge``, ``metric``, ``adapt_metric``,
    ``target_accept``), whose defaults are read from this class: a 20-transition
    pilot, an "auto" metric, the floor chosen from the prior draws; so :func:`tune`
    called directly tunes as :func:`~bread_stan.bread` does.  The others
    (``burn_in``, ``stream``, ``dense_correlation``, ``floor_min``) are the
    engine's alone.  Saved runs fingerprint these settings under their names from
    before the rename (:func:`fingerprint_fields`).

    At each grid beta after the first, ``burn_in`` unadapted transitions precede
    the ``pilot_steps`` transitions of dual averaging.

    The grid runs from 0 through betas equally spaced in ``log(beta +
    pilot_floor)`` up to 1.  ``pilot_floor=None`` chooses the floor from the pilot's
    prior draws: ``1 / sd(log lik)`` (clipped to [floor_min, 1e-3]), the beta at which
    the likelihood first reweights the prior by about e; below it the tempered
    density is still close to the prior.  The grid then grows to keep ``pilot_grid``
    points per three decades of beta, so a likelihood far more informative than
    the prior (a vague prior) gets pilot betas where its posterior takes shape.  The
    floor used is the tuned kernel's ``beta_floor``.

    ``metric`` (with ``adapt_metric``): "diag", "dense" or "auto".  "auto" uses a
    dense metric at a grid beta when the pilot draws there are strongly
    correlated (some absolute correlation above ``dense_correlation``) and plentiful
    enough to estimate a covariance (at least ``10 d`` pooled draws), and the
    diagonal of the same estimate otherwise; the kernel is dense if any grid
    beta chose dense.  Beyond ``AUTO_DENSE_MAX_DIM`` = 20 parameters "auto" is
    "diag": a dense kernel costs O(d^3) per transition and its frozen schedule
    O(T d^2) memory.

    ``metric_ridge``: how the metric estimate is regularised.  "stan" (the default) is
    Stan's ``n / (n + 5) S + 1e-3 * 5 / (n + 5) I``, whose absolute ridge swamps a
    parameter with a posterior sd far below 0.03 (a coefficient of an uncentred
    predictor: sd 1e-5 gets a metric variance 1e5 times too large, so the step
    size collapses).  "relative" shrinks toward ``1e-3`` times the estimate's own
    diagonal instead: the same metric in any units.  ``floor_min`` is the smallest
    automatic floor (the clip of ``1 / sd(log lik)``).
    """

    pilot_grid: int = 16
    pilot_steps: int = 20
    burn_in: int = 5
    target_accept: float | None = None
    adapt_metric: bool = True
    pilot_floor: float | None = None
    stream: int = PILOT_STREAM
    metric: str = "auto"
    dense_correlation: float = 0.5
    metric_ridge: str = "stan"
    floor_min: float = 1e-12

    def __post_init__(self):
        if self.metric_ridge not in RIDGES:
            raise InputError(f"unknown metric_ridge {self.metric_ridge!r}; use 'stan' or "
                             "'relative'")
        if not 0 < self.floor_min <= DEFAULT_FLOOR:
            raise InputError(f"floor_min must be in (0, {DEFAULT_FLOOR}], got {self.floor_min}")
        if self.pilot_floor is not None and not 0 < self.pilot_floor < 1:
            raise InputError(f"pilot_floor must be in (0, 1) or None (automatic), "
                             f"got {self.pilot_floor}")
        if self.metric not in METRICS:
            raise InputError(f"unknown metric {self.metric!r}; use 'diag', 'dense' or 'auto'")


# The names under which saved runs fingerprint the pilot's settings.  Before issue 41
# TuningConfig named four of its fields differently from SamplerSettings (n_grid,
# adapt_steps, beta_floor, ridge; IMHTuningConfig's ridge too); a run's fingerprint
# hashes these settings, so they keep the old names there, and a run directory written
# before the rename resumes.  Never change this mapping: it would refuse every saved run.
FINGERPRINT_NAMES = {"pilot_grid": "n_grid", "pilot_steps": "adapt_steps",
                     "pilot_floor": "beta_floor", "metric_ridge": "ridge"}


def fingerprint_fields(config) -> dict:
    """A pilot's settings (a :class:`TuningConfig` or an
    :class:`~bread_stan.ais.imh_tuning.IMHTuningConfig`) as the resume fingerprint
    hashes them: ``asdict(config)``, in field order, under the names of
    :data:`FINGERPRINT_NAMES`."""
    return {FINGERPRINT_NAMES.get(k, k): v for k, v in asdict(config).items()}


@dataclass(frozen=True, eq=False)
class TunedKernel(OneLeg):
    """Step size (and inverse metric) at grid betas, for any schedule by interpolation.

    ``inv_metric`` is (G, d) diagonal, (G, d, d) dense, (1, d, d) (one dense metric
    at every grid beta) or None; ``loglik_sd`` (G,)
    is the pilot's standard deviation of the log likelihood at each grid beta
    (None for kernels tuned before it was recorded), used by the adaptive
    schedule.
    """

    kind: str
    grid_betas: np.ndarray
    step_size: np.ndarray
    inv_metric: np.ndarray | None
    fixed: dict
    beta_floor: float
    accept: np.ndarray  # mean pilot acceptance at each grid beta during the final window
    seconds_per_transition: float = float("nan")  # pilot wall time per chain and transition
    loglik_sd: np.ndarray | None = None
    # NUTS: share of the final window's transitions whose tree reached the maximum depth
    max_depth_share: np.ndarray | None = None
    # the pilot's mean gradient evaluations per chain and transition (a machine-free cost)
    gradients_per_transition: float = float("nan")
    pilot_gradients: float = float("nan")  # the pilot's gradient evaluations, all chains
    # grid betas at which the pilot chains sat apart (metric from the spread within chains)
    separated: np.ndarray | None = None

    what = "a tuned kernel"

    def _coord(self, betas) -> np.ndarray:
        return np.log(np.asarray(betas, dtype=float) + self.beta_floor)

    @property
    def dense(self) -> bool:
        """Whether the tuned inverse metric is dense."""
        return self.inv_metric is not None and np.ndim(self.inv_metric) == 3

    def schedule(self, betas, steps_per_temperature: int = 1) -> InterpolatedSchedule:
        """The frozen kernel schedule for these betas (an array or a lazy
        :class:`~bread_stan.ais.betas.Betas`), its params interpolated on demand
        so that memory does not grow with the number of betas."""
        width = 0 if self.inv_metric is None else int(np.prod(np.shape(self.inv_metric)[1:]))
        return InterpolatedSchedule(betas, self.interpolate, self.kind, dict(self.fixed),
                                    width, steps_per_temperature)

    def interpolate(self, betas) -> tuple[np.ndarray, np.ndarray | None]:
        """Step sizes (m,) and inverse metrics ((m, d), (m, d, d) or None) at ``betas``;
        each entry depends only on its own beta."""
        x, grid = self._coord(betas), self._coord(self.grid_betas)
        step = np.exp(np.interp(x, grid, np.log(self.step_size)))
        metric = None
        if self.dense and len(self.inv_metric) == 1:  # one metric at every beta
            metric = np.broadcast_to(self.inv_metric, (x.size, *self.inv_metric.shape[1:]))
        elif self.dense:
            metric = interpolate_spd(x, grid, self._log_metrics)
        elif self.inv_metric is not None:
            log_m = np.log(self.inv_metric)
            metric = np.exp(np.stack([np.interp(x, grid, log_m[:, j])
                                      for j in range(log_m.shape[1])], axis=1))
        return step, metric

    @cached_property
    def _log_metrics(self) -> np.ndarray:
        """The matrix logarithms of the dense inverse metrics (G, d, d), computed once."""
        return spd_log(self.inv_metric)

    def to_dict(self) -> dict:
        lst = lambda a: None if a is None else np.asarray(a).tolist()  # noqa: E731
        return {"kind": self.kind, "grid_betas": lst(self.grid_betas),
                "step_size": lst(self.step_size), "inv_metric": lst(self.inv_metric),
                "fixed": self.fixed, "beta_floor": self.beta_floor, "accept": lst(self.accept),
                "seconds_per_transition": self.seconds_per_transition,
                "loglik_sd": lst(self.loglik_sd), "max_depth_share": lst(self.max_depth_share),
                "gradients_per_transition": self.gradients_per_transition,
                "pilot_gradients": self.pilot_gradients, "separated": lst(self.separated)}

    @classmethod
    def from_dict(cls, data: dict) -> "TunedKernel":
        arr = lambda a: None if a is None else np.asarray(a, dtype=float)  # noqa: E731
        return cls(data["kind"], arr(data["grid_betas"]), arr(data["step_size"]),
                   arr(data.get("inv_metric")), dict(data.get("fixed") or {}),
                   float(data["beta_floor"]), arr(data.get("accept")),
                   float(data.get("seconds_per_transition", float("nan"))),
                   arr(data.get("loglik_sd")), arr(data.get("max_depth_share")),
                   float(data.get("gradients_per_transition", float("nan"))),
                   float(data.get("pilot_gradients", float("nan"))),
                   None if data.get("separated") is None
                   else np.asarray(data["separated"], dtype=bool))

    def problems(self) -> list[str]:
        """Signs that a tempered density is improper or absurdly scaled: step sizes
        that no sane tuning produces (a kernel that cannot move at some beta
        has its step size driven toward 0, one on a flat density toward infinity)."""
        out = []
        low, high = float(np.min(self.step_size)), float(np.max(self.step_size))
        if not (_SANE_STEP[0] <= low and high <= _SANE_STEP[1]) or high > _SANE_RATIO * low:
            out.append(f"tuned step sizes range from {low:.3g} to {high:.3g} along beta: "
                       "a density this badly scaled usually means a parameter without a "
                       "(proper) prior or a likelihood that does not depend on it")
        return out

    def depth_note(self, most: float = 0.5) -> str | None:
        """A sentence when the pilot's NUTS trees reached the maximum depth in more than
        ``most`` of the transitions at some grid betas (what makes a run slow), else None."""
        share = self.max_depth_share
        if share is None or not np.any(share > most):
            return None
        depth = int(self.fixed.get("max_depth", 0))
        hit = share > most
        return (f"the pilot's NUTS trees reached the maximum depth {depth} "
                f"({2 ** depth - 1} leapfrog steps a transition) in {np.max(share):.0%} of "
                f"transitions at worst, at {int(hit.sum())} of {share.size} grid betas "
                f"(beta {self.grid_betas[hit].min():.3g} to {self.grid_betas[hit].max():.3g}): "
                "a metric that does not fit the posterior there, such as one pooled over "
                "several modes (label switching), makes every transition that long")

    def separated_note(self) -> str | None:
        """A sentence when the pilot chains sat apart at some grid betas (the metric
        there measures the spread within each chain), else None."""
        if self.separated is None or not np.any(self.separated):
            return None
        at = self.grid_betas[self.separated]
        return (f"the pilot chains sat apart at {int(at.size)} of "
                f"{self.separated.size} grid betas (beta {at.min():.3g} to {at.max():.3g}; "
                "some coordinate spread more than 100 times as much across chains as "
                "within them, as in separate modes or a slowly mixing funnel): the metric "
                "there comes from the spread within each chain, not between chains")


def metric_from_base(cov: np.ndarray, config: TuningConfig, n_draws: int
                     ) -> np.ndarray | None:
    """The covariance ``cov`` (d, d) of the Gaussian a path starts from, as the fixed
    dense inverse metric of that path's pilot, when "auto" would estimate a diagonal
    one (more than ``AUTO_DENSE_MAX_DIM`` parameters, or fewer than 10 d pooled pilot
    draws) and the Gaussian is strongly correlated (some absolute correlation above
    ``dense_correlation``); else None.  A diagonal metric on a strongly correlated
    posterior makes the step size as small as the narrowest direction, in units of
    the coordinates' sds, and every NUTS tree as deep as allowed; the Gaussian's own
    covariance is exact at its end of the path and near the posterior's at the other
    (the step size takes up the Gaussian's widening)."""
    cov = np.asarray(cov, dtype=float)
    if (config.metric != "auto" or not config.adapt_metric
            or _auto_may_be_dense(config, n_draws, cov.shape[0])):
        return None
    return cov if strongly_correlated(cov, config.dense_correlation) else None


def _auto_may_be_dense(config: TuningConfig, n: int, d: int) -> bool:
    """Whether "auto" may estimate a dense metric from ``n`` pilot chains in ``d``
    dimensions: at most ``AUTO_DENSE_MAX_DIM`` parameters and at least 10 d draws pooled
    over a window of half the ``pilot_steps``."""
    pooled = n * max(config.pilot_steps // 2, 1)
    return d <= AUTO_DENSE_MAX_DIM and pooled >= 10 * d


def tune(target: Target, kernel: Kernel, base_params, prior_draws, *, seed,
         config: TuningConfig = TuningConfig(), progress: bool = False,
         give_up: Callable[[np.ndarray, np.ndarray, float, int], str | None] | None = None,
         at: np.ndarray | None = None, base_metric: np.ndarray | None = None
         ) -> TunedKernel:
    """Tune the step size (and optionally the metric) of ``kernel`` along beta.

    ``base_params`` (HMCParams or NUTSParams) gives the fixed settings (leapfrog
    steps or maximum depth) and the initial step size; ``prior_draws`` (n, d)
    are exact prior draws reserved for the pilot (never reuse them for scored
    chains).  Pilot chains use random stream ``config.stream``.  ``progress``
    shows a bar over the grid betas (on a terminal).  ``give_up``, called after
    each grid beta with the grid so far, the sds of the log likelihood measured
    there, the mean gradients per chain and transition so far and the gradients spent so
    far (all chains), stops the pilot with :class:`PilotAbandoned` when it returns a
    reason.  ``at``: tune at these betas
    only (increasing, from 0) instead of the grid up to 1.  ``base_metric``: a dense
    inverse metric (d, d) used at every grid beta, the step size alone adapted (the
    covariance of the Gaussian a path starts from: see :func:`metric_from_base`).
    """
    kind = kind_of(base_params)
    if config.burn_in < 0 or config.pilot_steps < 1:
        raise InputError("burn_in must be >= 0 and pilot_steps >= 1")
    x = np.ascontiguousarray(np.asarray(prior_draws, dtype=float))
    if x.ndim != 2 or x.shape[1] != target.dim or x.shape[0] < 2:
        raise InputError(f"pilot needs at least 2 prior draws of shape (n, {target.dim})")
    n, d = x.shape
    pilot = _Pilot(target, kernel, base_params, config, ChainRandom.from_seed(
        seed, n, stream=config.stream))
    state = initial_state(target, x, gradient=True)
    floor, size = config.pilot_floor, config.pilot_grid  # the pilot's grid
    if floor is None:
        floor, size = auto_floor(state.evaluation.log_lik, size, config.floor_min)
    grid = grid_betas(size, floor) if at is None else np.asarray(at, dtype=float)
    mode = _metric_mode(config, n, d, base_metric)
    metric = _start_metric(base_params, base_metric, mode)
    step = float(base_params.step_size)
    record: list[_AtBeta] = []
    log.info("tuning %s along beta: %d betas x %d transitions x %d pilot chains", kind,
             grid.size, config.pilot_steps + config.burn_in, n)
    bar = progress_bar(grid.size, progress, "tuning")
    pace = PaceLog(f"tuning {kind}", grid.size, "betas")
    start = time.perf_counter()
    pilot.pace_over(f"the pilot tuning {kind} along beta",
                    pilot_transitions(grid.size, config.pilot_steps, config.burn_in))
    for i, beta in enumerate(grid):
        if bar is not None:
            bar.update()
        if i > 0 and config.burn_in > 0:
            state = pilot.burn_in(state, beta, step, metric, config.burn_in)
        state, at_beta = _adapt_at(pilot, state, beta, step, metric, mode,
                                   bool(record) and record[-1].separated)
        step, metric = at_beta.step, at_beta.metric
        record.append(at_beta)
        pilot.measured = (grid[:i + 1], np.array([r.loglik_sd for r in record]))
        log.debug("pilot beta=%.4g: step size %.4g, acceptance %.3f, sd of log lik %.4g, "
                  "%.0f%% of trees at the maximum depth", beta, step, at_beta.accept,
                  at_beta.loglik_sd, 100 * at_beta.depth_share)
        if progress and bar is None:  # a log, not a terminal: lines, not a bar
            pace.tick(i + 1, f"beta = {beta:.3g}, step size {step:.3g}")
        reason = None if give_up is None else give_up(
            grid[:i + 1], np.array([r.loglik_sd for r in record]),
            pilot.gradients / max(pilot.transitions, 1), pilot.gradients)
        if reason is not None:
            if bar is not None:
                bar.close()
            raise PilotAbandoned(reason)
    if bar is not None:
        bar.close()
    transitions = n * pilot_transitions(grid.size, config.pilot_steps, config.burn_in)
    seconds = (time.perf_counter() - start) / max(transitions, 1)
    return _tuned_kernel(kind, grid, floor, record, pilot, mode, seconds)


class _Pilot:
    """The pilot chains' kernel at one beta: transitions and rounds of dual averaging,
    counting the gradient evaluations and chain transitions they cost.  Every
    transition keeps pace with the set-up's deadline (:func:`~bread_stan.deadline.keep_pace`,
    after the first ``_PACE_AFTER``: one slow beta, such as a funnel prior's at beta = 0,
    is then stopped inside itself, not only after it)."""

    def __init__(self, target: Target, kernel: Kernel, base_params, config: TuningConfig,
                 rng: ChainRandom):
        self.target, self.kernel, self.base_params, self.rng = target, kernel, base_params, rng
        self.config, self.n = config, rng.n_chains
        self.kind = kind_of(base_params)
        self.accept_target = config.target_accept or KERNELS[self.kind].target_accept
        # NUTS: the tree depth that counts as "at the maximum"
        self.top = int(getattr(base_params, "max_depth", 0)) if self.kind == "nuts" else 0
        self.gradients, self.transitions = 0, 0
        self.measured = None   # (grid betas so far, sds of the log likelihood there)
        # (what, total transitions of the chains together, began, self.transitions then)
        self.pace: tuple[str, int, float, int] | None = None

    def pace_over(self, what: str, total: int) -> None:
        """Keep pace, from now, with a deadline over ``total`` transitions."""
        self.pace = (what, total, time.monotonic(), self.transitions)

    def transition(self, state, beta: float, params):
        state, info = self.kernel.step(self.rng, state, self.target, np.full(self.n, beta),
                                       params)
        self.gradients += int(np.sum(info.n_grad))
        self.transitions += self.n
        if self.pace is not None:
            what, total, began, before = self.pace
            done = (self.transitions - before) // self.n
            if done >= _PACE_AFTER:
                try:
                    keep_pace(what, done, total, began, pilot=True)
                except OverBudget as over:
                    over.measured = self.measured   # the path measured before the stop
                    raise
        return state, info

    def burn_in(self, state, beta: float, step: float, metric, n_steps: int):
        """``n_steps`` unadapted transitions with the step size and metric brought from
        the grid beta before."""
        params = replace(self.base_params, step_size=step, inv_metric=metric)
        for _ in range(n_steps):
            state, _ = self.transition(state, beta, params)
        return state

    def adapt(self, state, beta: float, step: float, metric, n_steps: int, record: list):
        """``n_steps`` transitions of dual averaging from ``step`` toward the target
        acceptance (each state appended to ``record``).  Returns the state, the final
        step size, and the mean acceptance and share of trees at the maximum depth over
        the second half of the transitions."""
        da = DualAveraging(step, self.accept_target)
        acc, deep = [], []
        for _ in range(n_steps):
            params = replace(self.base_params, step_size=float(da.current), inv_metric=metric)
            state, info = self.transition(state, beta, params)
            a = float(np.mean(np.nan_to_num(info.accept_stat, nan=0.0)))
            da.update(a)
            acc.append(a)
            deep.append(float(np.mean(info.tree_depth >= self.top)) if self.top else 0.0)
            record.append(state)
        half = len(acc) // 2
        return state, float(da.final), float(np.mean(acc[half:])), float(np.mean(deep[half:]))


class _AtBeta(NamedTuple):
    """What the pilot measured at one grid beta."""

    step: float             # the adapted step size
    metric: np.ndarray | None
    accept: float           # mean acceptance over the final window's second half
    depth_share: float      # share of those NUTS trees at the maximum depth
    separated: bool         # the chains sat apart (the metric is from within chains)
    loglik_sd: float        # sd of the log likelihood over the final window's second half


def _metric_mode(config: TuningConfig, n: int, d: int, base_metric) -> str:
    """How the pilot sets its metric: "base" (``base_metric`` at every beta), "dense" or
    "diag" (estimated at each beta) or "fixed" (the base params' metric, never adapted)."""
    if base_metric is not None:
        return "base"
    if config.adapt_metric and (config.metric == "dense" or (
            config.metric == "auto" and _auto_may_be_dense(config, n, d))):
        return "dense"
    return "diag" if config.adapt_metric else "fixed"


def _start_metric(base_params, base_metric, mode: str) -> np.ndarray | None:
    """The metric of the first transitions: ``base_metric`` as (1, d, d), else the base
    params' (a diagonal one as a (1, d, d) matrix where the metric is dense)."""
    if mode == "base":
        return np.asarray(base_metric, dtype=float)[None]
    metric = (None if base_params.inv_metric is None
              else np.asarray(base_params.inv_metric, float))
    if mode == "dense" and metric is not None and metric.ndim == 1:
        metric = np.diag(metric)[None]
    return metric


def _adapt_at(pilot: _Pilot, state, beta: float, step: float, metric, mode: str,
              separated_before: bool):
    """The adaptation at one grid beta (see the module docstring): one round of dual
    averaging with a fixed metric, or two windows with the metric estimated before each
    (a beta after one where the chains sat apart keeps the metric it arrives with for
    the first window).  Returns the state and what the pilot measured there."""
    config = pilot.config
    visited: list = []
    separated = False
    if mode in ("base", "fixed"):
        state, step, acc, deep = pilot.adapt(state, beta, step, metric, config.pilot_steps,
                                             visited)
    else:
        dense, half = mode == "dense", max(config.pilot_steps // 2, 1)
        if not separated_before:
            metric = arrival_metric(state.position, dense, config.metric_ridge)
        first: list = []
        state, step, _, _ = pilot.adapt(state, beta, step, metric, half, first)
        draws = np.stack([s.position for s in first])
        separated = chains_separated(draws)
        metric = window_metric(draws, state.position, separated, dense, config.metric,
                               config.dense_correlation, config.metric_ridge)
        state, step, acc, deep = pilot.adapt(state, beta, step, metric, half, visited)
    window = visited[len(visited) // 2:] or [state]
    sd = loglik_sd(np.concatenate([s.evaluation.log_lik for s in window]))
    return state, _AtBeta(step, metric, acc, deep, separated, sd)


def _tuned_kernel(kind: str, grid: np.ndarray, floor: float, record: list[_AtBeta],
                  pilot: _Pilot, mode: str, seconds: float) -> TunedKernel:
    """The pilot's record as a :class:`TunedKernel`."""
    separated = np.array([r.separated for r in record], dtype=bool)
    if separated.any():
        log.info("the pilot chains sat apart (separate modes, or a slowly mixing funnel) "
                 "at %d of %d grid betas: the metric there comes from the spread within "
                 "each chain", int(separated.sum()), grid.size)
    fixed = {k: v for k, v in asdict(pilot.base_params).items()
             if k not in ("step_size", "inv_metric")}
    metrics = [r.metric for r in record]
    inv_metric = None
    if mode == "base":
        inv_metric = metrics[-1]  # (1, d, d): one for every grid beta
    elif mode == "dense":
        inv_metric = np.concatenate(metrics)
        if pilot.config.metric == "auto" and all(_is_diagonal(m) for m in inv_metric):
            inv_metric = np.stack([np.diag(m) for m in inv_metric])
    elif mode == "diag":
        inv_metric = np.stack(metrics)
    elif metrics[-1] is not None:
        base = metrics[-1][0] if metrics[-1].ndim == 3 else metrics[-1]
        inv_metric = np.repeat(base[None], grid.size, axis=0)
    return TunedKernel(kind, grid, np.array([r.step for r in record]), inv_metric, fixed,
                       floor, np.array([r.accept for r in record]), seconds,
                       np.array([r.loglik_sd for r in record]),
                       np.array([r.depth_share for r in record]) if pilot.top else None,
                       pilot.gradients / max(pilot.transitions, 1), float(pilot.gradients),
                       separated)


def _is_diagonal(m: np.ndarray) -> bool:
    return not np.any(m - np.diag(np.diag(m)))

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
from dataclasses import asdict, dataclass, replace
from functools import cached_property

import numpy as np

from .frozen_kernels import InterpolatedSchedule, kind_of
from .metric_estimates import (chains_separated, metric_from_draws, regularised_variance,
                               strongly_correlated, within_chain_deviations)
from ..kernels.base import Kernel, initial_state
from ..kernels.registry import KERNELS
from ..linalg import spd_log, symmetric_exp
from ..rng import ChainRandom, Stream
from ..store import CorruptFileError, load_json, save_json
from ..progress import PaceLog, progress_bar
from ..target import Target
from ..errors import InputError

__all__ = ["TuningConfig", "TunedKernel", "tune", "loglik_sd", "PILOT_STREAM",
           "PilotAbandoned", "metric_from_base"]

log = logging.getLogger(__name__)

PILOT_STREAM = int(Stream.PILOT)  # random stream of the pilot chains (kept as a public name)
_METRICS = ("diag", "dense", "auto")
AUTO_DENSE_MAX_DIM = 20  # "auto" never goes dense above this many parameters
_SANE_STEP = (1e-8, 1e6)   # step sizes outside this range flag a broken density
_SANE_RATIO = 1e6          # nor should they vary more than this along beta
_RIDGES = ("stan", "relative")
_DEFAULT_FLOOR = 1e-3


class PilotAbandoned(Exception):
    """A pilot stopped by its ``give_up`` rule (the message says why); not an error."""


@dataclass(frozen=True)
class TuningConfig:
    """Pilot settings.  ``target_accept`` None means the kernel's default in
    :data:`~bread_stan.kernels.registry.KERNELS` (0.65 for HMC, 0.8 for NUTS).

    The defaults are the workflows' (those of
    :class:`~bread_stan.workflows.settings.SamplerSettings`: a 20-transition pilot,
    an "auto" metric, the floor chosen from the prior draws), so :func:`tune` called
    directly tunes as :func:`~bread_stan.bread` does.

    At each grid beta after the first, ``burn_in`` unadapted transitions precede
    the ``adapt_steps`` transitions of dual averaging.

    The grid runs from 0 through betas equally spaced in ``log(beta +
    beta_floor)`` up to 1.  ``beta_floor=None`` chooses the floor from the pilot's
    prior draws: ``1 / sd(log lik)`` (clipped to [floor_min, 1e-3]), the beta at which
    the likelihood first reweights the prior by about e; below it the tempered
    density is still close to the prior.  The grid then grows to keep ``n_grid``
    points per three decades of beta, so a likelihood far more informative than
    the prior (a vague prior) gets pilot betas where its posterior takes shape.

    ``metric`` (with ``adapt_metric``): "diag", "dense" or "auto".  "auto" uses a
    dense metric at a grid beta when the pilot draws there are strongly
    correlated (some absolute correlation above ``dense_correlation``) and plentiful
    enough to estimate a covariance (at least ``10 d`` pooled draws), and the
    diagonal of the same estimate otherwise; the kernel is dense if any grid
    beta chose dense.  Beyond ``AUTO_DENSE_MAX_DIM`` = 20 parameters "auto" is
    "diag": a dense kernel costs O(d^3) per transition and its frozen schedule
    O(T d^2) memory.

    ``ridge``: how the metric estimate is regularised.  "stan" (the default) is
    Stan's ``n / (n + 5) S + 1e-3 * 5 / (n + 5) I``, whose absolute ridge swamps a
    parameter with a posterior sd far below 0.03 (a coefficient of an uncentred
    predictor: sd 1e-5 gets a metric variance 1e5 times too large, so the step
    size collapses).  "relative" shrinks toward ``1e-3`` times the estimate's own
    diagonal instead: the same metric in any units.  ``floor_min`` is the smallest
    automatic floor (the clip of ``1 / sd(log lik)``).
    """

    n_grid: int = 16
    adapt_steps: int = 20
    burn_in: int = 5
    target_accept: float | None = None
    adapt_metric: bool = True
    beta_floor: float | None = None
    stream: int = PILOT_STREAM
    metric: str = "auto"
    dense_correlation: float = 0.5
    ridge: str = "stan"
    floor_min: float = 1e-12

    def __post_init__(self):
        if self.ridge not in _RIDGES:
            raise InputError(f"unknown ridge {self.ridge!r}; use 'stan' or 'relative'")
        if not 0 < self.floor_min <= _DEFAULT_FLOOR:
            raise InputError(f"floor_min must be in (0, {_DEFAULT_FLOOR}], got {self.floor_min}")
        if self.beta_floor is not None and not 0 < self.beta_floor < 1:
            raise InputError(f"beta_floor must be in (0, 1) or None (automatic), "
                             f"got {self.beta_floor}")
        if self.metric not in _METRICS:
            raise InputError(f"unknown metric {self.metric!r}; use 'diag', 'dense' or 'auto'")


@dataclass(frozen=True, eq=False)
class TunedKernel:
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
            metric = _interp_spd(x, grid, self._log_metrics)
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

    def save(self, path) -> None:
        """Write the tuned kernel as JSON, atomically."""
        save_json(path, self.to_dict())

    @classmethod
    def load(cls, path) -> "TunedKernel":
        """Read a tuned kernel saved by :meth:`save`; CorruptFileError if damaged."""
        data = load_json(path)
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptFileError(path, f"not a tuned kernel: {error!r}") from None


def _interp_spd(x: np.ndarray, grid: np.ndarray, logs: np.ndarray) -> np.ndarray:
    """Symmetric positive definite matrices at ``x``, interpolated linearly in their
    matrix logarithm ``logs`` between the ``grid`` points (the dense analogue of
    interpolating a diagonal in log); constant beyond the ends.  The linear algebra
    is :mod:`bread_stan.linalg`'s, so the result does not depend on BLAS."""
    g = logs.shape[0]
    pos = np.interp(x, grid, np.arange(g, dtype=float))
    lo = np.minimum(np.floor(pos).astype(int), g - 2) if g > 1 else np.zeros(x.size, int)
    frac = (pos - lo)[:, None, None]
    hi = np.minimum(lo + 1, g - 1)
    mixed = (1.0 - frac) * logs[lo] + frac * logs[hi]
    return symmetric_exp(mixed)


def _auto_floor(log_lik: np.ndarray, n_grid: int, floor_min: float = 1e-12
                ) -> tuple[float, int]:
    """The floor ``1 / sd(log lik at prior draws)`` in [floor_min, 1e-3], and the grid
    size that keeps the density of ``n_grid`` points over the default floor's
    decades."""
    sd = loglik_sd(log_lik)   # inf when |log lik| > 1e154: the floor is floor_min
    floor = float(np.clip(1.0 / sd, floor_min, _DEFAULT_FLOOR)) if sd > 0 else _DEFAULT_FLOOR
    decades = np.log10((1 + floor) / floor) / np.log10((1 + _DEFAULT_FLOOR) / _DEFAULT_FLOOR)
    return floor, max(n_grid, int(round(n_grid * decades)))


def _grid(n_grid: int, floor: float) -> np.ndarray:
    """Betas equally spaced in log(beta + floor), from exactly 0 to exactly 1."""
    if n_grid < 2:
        raise InputError("n_grid must be at least 2")
    g = np.exp(np.linspace(np.log(floor), np.log(1.0 + floor), n_grid)) - floor
    g[0], g[-1] = 0.0, 1.0
    return g


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
    d = cov.shape[0]
    pooled = n_draws * max(config.adapt_steps // 2, 1)
    if (config.metric != "auto" or not config.adapt_metric
            or (d <= AUTO_DENSE_MAX_DIM and pooled >= 10 * d)):
        return None
    return cov if strongly_correlated(cov, config.dense_correlation) else None


class DualAveraging:
    """Nesterov dual averaging of log step size toward a target acceptance (Stan's),
    elementwise: a scalar step size, or one independent copy per chain."""

    def __init__(self, step_size, target: float):
        self.target = target
        self.restart(step_size)

    def restart(self, step_size) -> None:
        """Start again from ``step_size`` (Stan does so after each metric update)."""
        step_size = np.asarray(step_size, dtype=float)
        self.mu = np.log(10 * step_size)
        self.x = np.log(step_size)
        self.x_bar = np.zeros_like(self.x)
        self.s_bar = np.zeros_like(self.x)
        self.count = 0

    def update(self, accept) -> None:
        self.count += 1
        eta = 1.0 / (self.count + 10.0)
        accept = np.nan_to_num(np.asarray(accept, dtype=float), nan=0.0)
        self.s_bar = (1 - eta) * self.s_bar + eta * (self.target - accept)
        self.x = self.mu - self.s_bar * np.sqrt(self.count) / 0.05
        w = self.count ** -0.75
        self.x_bar = w * self.x + (1 - w) * self.x_bar

    @property
    def current(self) -> np.ndarray:
        return np.exp(self.x)

    @property
    def final(self) -> np.ndarray:
        return np.exp(self.x_bar)


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
    if config.burn_in < 0 or config.adapt_steps < 1:
        raise InputError("burn_in must be >= 0 and adapt_steps >= 1")
    accept_target = config.target_accept or KERNELS[kind].target_accept
    x = np.ascontiguousarray(np.asarray(prior_draws, dtype=float))
    if x.ndim != 2 or x.shape[1] != target.dim or x.shape[0] < 2:
        raise InputError(f"pilot needs at least 2 prior draws of shape (n, {target.dim})")
    n, d = x.shape
    rng = ChainRandom.from_seed(seed, n, stream=config.stream)
    state = initial_state(target, x, gradient=True)
    floor, n_grid = config.beta_floor, config.n_grid
    if floor is None:
        floor, n_grid = _auto_floor(state.evaluation.log_lik, n_grid, config.floor_min)
    grid = _grid(n_grid, floor) if at is None else np.asarray(at, dtype=float)
    step = float(base_params.step_size)
    metric = None if base_params.inv_metric is None else np.asarray(base_params.inv_metric, float)
    steps, metrics, accepts = [], [], []

    pooled = n * max(config.adapt_steps // 2, 1)
    dense = config.adapt_metric and (config.metric == "dense" or (
        config.metric == "auto" and d <= AUTO_DENSE_MAX_DIM and pooled >= 10 * d))
    if dense and metric is not None and metric.ndim == 1:
        metric = np.diag(metric)[None]
    if base_metric is not None:  # every transition of the pilot, burn-in included
        metric = np.asarray(base_metric, dtype=float)[None]
    sds, depth_shares = [], []
    separated = [False]  # per grid beta after the first entry; a separated beta keeps its metric

    top = int(getattr(base_params, "max_depth", 0)) if kind == "nuts" else 0

    gradients = [0, 0]  # gradient evaluations, chain transitions

    def transition(state, beta, params):
        state, info = kernel.step(rng, state, target, np.full(n, beta), params)
        gradients[0] += int(np.sum(info.n_grad))
        gradients[1] += n
        return state, info

    def adapt(state, beta, step, metric, n_steps, record=None):
        da = DualAveraging(step, accept_target)
        acc, deep = [], []
        for _ in range(n_steps):
            params = replace(base_params, step_size=float(da.current), inv_metric=metric)
            state, info = transition(state, beta, params)
            a = float(np.mean(np.nan_to_num(info.accept_stat, nan=0.0)))
            da.update(a)
            acc.append(a)
            deep.append(float(np.mean(info.tree_depth >= top)) if top else 0.0)
            if record is not None:
                record.append(state)
        half = len(acc) // 2
        return state, float(da.final), float(np.mean(acc[half:])), float(np.mean(deep[half:]))

    log.info("tuning %s along beta: %d betas x %d transitions x %d pilot chains", kind,
             grid.size, config.adapt_steps + config.burn_in, n)
    bar = progress_bar(grid.size, progress, "tuning")
    pace = PaceLog(f"tuning {kind}", grid.size, "betas")
    start = time.perf_counter()
    for i, beta in enumerate(grid):
        if bar is not None:
            bar.update()
        if i > 0 and config.burn_in > 0:
            params = replace(base_params, step_size=step, inv_metric=metric)
            for _ in range(config.burn_in):
                state, _ = transition(state, beta, params)
        visited = []
        if base_metric is not None:
            state, step, acc, deep = adapt(state, beta, step, metric, config.adapt_steps,
                                           visited)
            separated.append(False)
        elif dense:
            half = max(config.adapt_steps // 2, 1)
            if not separated[-1]:
                metric = metric_from_draws(state.position, "dense", 1.0, config.ridge)[None]
            state, step, _, _ = adapt(state, beta, step, metric, half, visited)
            draws = np.stack([s.position for s in visited])
            separated.append(chains_separated(draws))
            pooled = (within_chain_deviations(draws) if separated[-1]
                      else draws.reshape(-1, d))
            metric = metric_from_draws(pooled, config.metric, config.dense_correlation,
                                       config.ridge)[None]
            visited = []
            state, step, acc, deep = adapt(state, beta, step, metric, half, visited)
        elif config.adapt_metric:
            half = max(config.adapt_steps // 2, 1)
            if not separated[-1]:
                metric = regularised_variance(state.position, config.ridge)
            first = []
            state, step, _, _ = adapt(state, beta, step, metric, half, first)
            draws = np.stack([s.position for s in first])
            separated.append(chains_separated(draws))
            metric = regularised_variance(
                within_chain_deviations(draws) if separated[-1] else state.position,
                config.ridge)
            state, step, acc, deep = adapt(state, beta, step, metric, half, visited)
        else:
            state, step, acc, deep = adapt(state, beta, step, metric, config.adapt_steps,
                                           visited)
            separated.append(False)
        window = visited[len(visited) // 2:] or [state]
        sds.append(loglik_sd(np.concatenate([s.evaluation.log_lik for s in window])))
        steps.append(step)
        metrics.append(metric)
        accepts.append(acc)
        depth_shares.append(deep)
        log.debug("pilot beta=%.4g: step size %.4g, acceptance %.3f, sd of log lik %.4g, "
                  "%.0f%% of trees at the maximum depth", beta, step, acc, sds[-1], 100 * deep)
        if progress and bar is None:  # a log, not a terminal: lines, not a bar
            pace.tick(i + 1, f"beta = {beta:.3g}, step size {step:.3g}")
        reason = None if give_up is None else give_up(
            grid[:i + 1], np.array(sds), gradients[0] / max(gradients[1], 1), gradients[0])
        if reason is not None:
            if bar is not None:
                bar.close()
            raise PilotAbandoned(reason)

    if bar is not None:
        bar.close()
    if any(separated):
        log.info("the pilot chains sat apart (separate modes, or a slowly mixing funnel) "
                 "at %d of %d grid betas: the metric there comes from the spread within "
                 "each chain", sum(separated), grid.size)
    transitions = n * (grid.size * (config.adapt_steps + config.burn_in) - config.burn_in)
    fixed = {k: v for k, v in asdict(base_params).items() if k not in ("step_size", "inv_metric")}
    inv_metric = None
    if base_metric is not None:
        inv_metric = metric  # (1, d, d): one for every grid beta
    elif dense:
        inv_metric = np.concatenate(metrics)
        if config.metric == "auto" and all(_is_diagonal(m) for m in inv_metric):
            inv_metric = np.stack([np.diag(m) for m in inv_metric])
    elif config.adapt_metric:
        inv_metric = np.stack(metrics)
    elif metric is not None:
        base = metric[0] if metric.ndim == 3 else metric
        inv_metric = np.repeat(base[None], grid.size, axis=0)
    return TunedKernel(kind, grid, np.array(steps), inv_metric, fixed, floor,
                       np.array(accepts), (time.perf_counter() - start) / max(transitions, 1),
                       np.array(sds), np.array(depth_shares) if top else None,
                       gradients[0] / max(gradients[1], 1), float(gradients[0]),
                       np.array(separated[1:], dtype=bool))


def loglik_sd(values: np.ndarray) -> float:
    """Standard deviation of pooled log likelihoods, ignoring non-finite ones (0 with
    fewer than two finite values).  At the pilot's prior draws its inverse is the
    automatic floor of the pilot's grid."""
    finite = values[np.isfinite(values)]
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sd is inf
        return float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0


def _is_diagonal(m: np.ndarray) -> bool:
    return not np.any(m - np.diag(np.diag(m)))

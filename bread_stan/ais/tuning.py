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
``adapt_metric`` the diagonal inverse metric is first set to the pilot chains'
regularised variance there, and the step size adapted in two windows.  The
result, a :class:`TunedKernel`, interpolates log step size (and log inverse
metric) linearly in ``log(beta + beta_floor)`` and turns any schedule of betas
into a frozen :class:`~bread_stan.kernel_schedule.KernelSchedule`, shared by the
forward and reverse runs and saved with the results.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from .frozen_kernels import KernelSchedule, kind_of
from ..kernels.base import Kernel, initial_state
from ..rng import ChainRandom
from ..store import CorruptFileError, load_json, save_json
from ..target import Target

__all__ = ["TuningConfig", "TunedKernel", "tune", "progress_bar", "PILOT_STREAM"]

log = logging.getLogger(__name__)

PILOT_STREAM = 1_000_000  # random stream of the pilot chains; scored runs use small streams
_DEFAULT_ACCEPT = {"hmc": 0.65, "nuts": 0.8}
_SANE_STEP = (1e-8, 1e6)   # step sizes outside this range flag a broken density
_SANE_RATIO = 1e6          # nor should they vary more than this along beta


@dataclass(frozen=True)
class TuningConfig:
    """Pilot settings.  ``target_accept`` None means 0.65 for HMC, 0.8 for NUTS.

    At each grid beta after the first, ``burn_in`` unadapted transitions precede
    the ``adapt_steps`` transitions of dual averaging.
    """

    n_grid: int = 16
    adapt_steps: int = 40
    burn_in: int = 5
    target_accept: float | None = None
    adapt_metric: bool = False
    beta_floor: float = 1e-3
    stream: int = PILOT_STREAM


@dataclass(frozen=True, eq=False)
class TunedKernel:
    """Step size (and inverse metric) at grid betas, for any schedule by interpolation."""

    kind: str
    grid_betas: np.ndarray
    step_size: np.ndarray
    inv_metric: np.ndarray | None
    fixed: dict
    beta_floor: float
    accept: np.ndarray  # mean pilot acceptance at each grid beta during the final window
    seconds_per_transition: float = float("nan")  # pilot wall time per chain and transition

    def _coord(self, betas) -> np.ndarray:
        return np.log(np.asarray(betas, dtype=float) + self.beta_floor)

    def schedule(self, betas, steps_per_temperature: int = 1) -> KernelSchedule:
        """The frozen kernel schedule for these betas."""
        x, grid = self._coord(betas), self._coord(self.grid_betas)
        step = np.exp(np.interp(x, grid, np.log(self.step_size)))
        metric = None
        if self.inv_metric is not None:
            log_m = np.log(self.inv_metric)
            metric = np.exp(np.stack([np.interp(x, grid, log_m[:, j])
                                      for j in range(log_m.shape[1])], axis=1))
        return KernelSchedule(np.asarray(betas, dtype=float), steps_per_temperature,
                              self.kind, step, metric, dict(self.fixed))

    def to_dict(self) -> dict:
        lst = lambda a: None if a is None else np.asarray(a).tolist()  # noqa: E731
        return {"kind": self.kind, "grid_betas": lst(self.grid_betas),
                "step_size": lst(self.step_size), "inv_metric": lst(self.inv_metric),
                "fixed": self.fixed, "beta_floor": self.beta_floor, "accept": lst(self.accept),
                "seconds_per_transition": self.seconds_per_transition}

    @classmethod
    def from_dict(cls, data: dict) -> "TunedKernel":
        arr = lambda a: None if a is None else np.asarray(a, dtype=float)  # noqa: E731
        return cls(data["kind"], arr(data["grid_betas"]), arr(data["step_size"]),
                   arr(data.get("inv_metric")), dict(data.get("fixed") or {}),
                   float(data["beta_floor"]), arr(data.get("accept")),
                   float(data.get("seconds_per_transition", float("nan"))))

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


def _grid(n_grid: int, floor: float) -> np.ndarray:
    """Betas equally spaced in log(beta + floor), from exactly 0 to exactly 1."""
    if n_grid < 2:
        raise ValueError("n_grid must be at least 2")
    g = np.exp(np.linspace(np.log(floor), np.log(1.0 + floor), n_grid)) - floor
    g[0], g[-1] = 0.0, 1.0
    return g


def regularised_variance(draws: np.ndarray) -> np.ndarray:
    """Stan's shrunk variance estimate for the diagonal inverse metric, over axis 0
    (draws), so (n, d) -> (d,) and (n, chains, d) -> (chains, d)."""
    n = draws.shape[0]
    return (n / (n + 5.0)) * np.var(draws, axis=0, ddof=1) + 1e-3 * (5.0 / (n + 5.0))


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


def progress_bar(total: int, enabled: bool, desc: str):
    """A tqdm bar when asked for and attached to a terminal; otherwise None."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # progress bars are optional
        return None
    return tqdm(total=total, desc=desc, leave=False)


def tune(target: Target, kernel: Kernel, base_params, prior_draws, *, seed,
         config: TuningConfig = TuningConfig(), progress: bool = False) -> TunedKernel:
    """Tune the step size (and optionally the metric) of ``kernel`` along beta.

    ``base_params`` (HMCParams or NUTSParams) gives the fixed settings (leapfrog
    steps or maximum depth) and the initial step size; ``prior_draws`` (n, d)
    are exact prior draws reserved for the pilot (never reuse them for scored
    chains).  Pilot chains use random stream ``config.stream``.  ``progress``
    shows a bar over the grid betas (on a terminal).
    """
    kind = kind_of(base_params)
    if config.burn_in < 0 or config.adapt_steps < 1:
        raise ValueError("burn_in must be >= 0 and adapt_steps >= 1")
    accept_target = config.target_accept or _DEFAULT_ACCEPT[kind]
    x = np.ascontiguousarray(np.asarray(prior_draws, dtype=float))
    if x.ndim != 2 or x.shape[1] != target.dim or x.shape[0] < 2:
        raise ValueError(f"pilot needs at least 2 prior draws of shape (n, {target.dim})")
    n, d = x.shape
    grid = _grid(config.n_grid, config.beta_floor)
    rng = ChainRandom.from_seed(seed, n, stream=config.stream)
    state = initial_state(target, x, gradient=True)
    step = float(base_params.step_size)
    metric = None if base_params.inv_metric is None else np.asarray(base_params.inv_metric, float)
    steps, metrics, accepts = [], [], []

    def adapt(state, beta, step, metric, n_steps):
        da = DualAveraging(step, accept_target)
        acc = []
        for _ in range(n_steps):
            params = replace(base_params, step_size=float(da.current), inv_metric=metric)
            state, info = kernel.step(rng, state, target, np.full(n, beta), params)
            a = float(np.mean(np.nan_to_num(info.accept_stat, nan=0.0)))
            da.update(a)
            acc.append(a)
        return state, float(da.final), float(np.mean(acc[len(acc) // 2:]))

    log.info("tuning %s along beta: %d betas x %d transitions x %d pilot chains", kind,
             grid.size, config.adapt_steps + config.burn_in, n)
    bar = progress_bar(grid.size, progress, "tuning")
    start = time.perf_counter()
    for i, beta in enumerate(grid):
        if bar is not None:
            bar.update()
        if i > 0 and config.burn_in > 0:
            params = replace(base_params, step_size=step, inv_metric=metric)
            for _ in range(config.burn_in):
                state, _ = kernel.step(rng, state, target, np.full(n, beta), params)
        if config.adapt_metric:
            half = max(config.adapt_steps // 2, 1)
            metric = regularised_variance(state.position)
            state, step, _ = adapt(state, beta, step, metric, half)
            metric = regularised_variance(state.position)
            state, step, acc = adapt(state, beta, step, metric, half)
        else:
            state, step, acc = adapt(state, beta, step, metric, config.adapt_steps)
        steps.append(step)
        metrics.append(metric)
        accepts.append(acc)
        log.debug("pilot beta=%.4g: step size %.4g, acceptance %.3f", beta, step, acc)

    if bar is not None:
        bar.close()
    transitions = n * (grid.size * (config.adapt_steps + config.burn_in) - config.burn_in)
    fixed = {k: v for k, v in asdict(base_params).items() if k not in ("step_size", "inv_metric")}
    inv_metric = None
    if config.adapt_metric:
        inv_metric = np.stack(metrics)
    elif metric is not None:
        inv_metric = np.tile(metric, (grid.size, 1))
    return TunedKernel(kind, grid, np.array(steps), inv_metric, fixed, config.beta_floor,
                       np.array(accepts), (time.perf_counter() - start) / max(transitions, 1))

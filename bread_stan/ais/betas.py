"""Inverse-temperature schedules 0 = b_1 < ... < b_T = 1 for the annealing path.

- :func:`linear`: equal steps in beta.
- :func:`sigmoidal`: the sigmoid schedule of the AIS/BDMC papers (Grosse et al.
  2015, Wu et al. 2017): ``b_t ∝ sigmoid(delta * (2 t / (T - 1) - 1))``, rescaled
  to run from exactly 0 to exactly 1; larger ``sharpness`` (delta) puts more
  temperatures near both ends.
- :func:`geometric`: 0 followed by ``T - 1`` log-spaced values from ``start`` to 1,
  for likelihoods that dominate the prior already at small beta.
- :func:`thermodynamic`: equal shares of the path's thermodynamic length, from a
  curve of the log likelihood's standard deviation along beta (measured by the
  pilot chains: the "adaptive" schedule).
- :func:`validate`: any user array, checked.

:class:`ScheduleSpec` names a schedule family and its settings so a run can
build one schedule per number of temperatures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ScheduleError", "linear", "sigmoidal", "geometric", "thermodynamic", "validate",
           "ScheduleSpec"]


class ScheduleError(ValueError):
    """A schedule that does not run strictly upwards from 0 to 1."""


def _check_count(n_temperatures: int) -> int:
    if int(n_temperatures) != n_temperatures or n_temperatures < 2:
        raise ScheduleError(f"a schedule needs at least 2 temperatures, got {n_temperatures}")
    return int(n_temperatures)


def validate(betas) -> np.ndarray:
    """Return ``betas`` as a float array after checking it is a valid schedule.

    Valid: one-dimensional, at least two entries, finite, starting at exactly 0,
    ending at exactly 1, strictly increasing.
    """
    b = np.asarray(betas, dtype=float)
    if b.ndim != 1 or b.size < 2:
        raise ScheduleError(f"a schedule must be a 1-d array of at least 2 betas, got shape {b.shape}")
    if not np.all(np.isfinite(b)):
        raise ScheduleError(f"schedule has non-finite betas at positions {np.flatnonzero(~np.isfinite(b))[:5].tolist()}")
    if b[0] != 0.0:
        raise ScheduleError(f"schedule must start at beta = 0 (the prior), starts at {b[0]!r}")
    if b[-1] != 1.0:
        raise ScheduleError(f"schedule must end at beta = 1 (the posterior), ends at {b[-1]!r}")
    steps = np.diff(b)
    if np.any(steps <= 0):
        i = int(np.flatnonzero(steps <= 0)[0])
        raise ScheduleError(f"schedule must be strictly increasing; b[{i}] = {b[i]!r} >= b[{i + 1}] = {b[i + 1]!r}")
    return b


def linear(n_temperatures: int) -> np.ndarray:
    """Equally spaced betas from 0 to 1."""
    n = _check_count(n_temperatures)
    b = np.linspace(0.0, 1.0, n)
    return validate(b)


def sigmoidal(n_temperatures: int, sharpness: float = 4.0) -> np.ndarray:
    """The sigmoid schedule, rescaled to [0, 1]; ``sharpness`` > 0."""
    n = _check_count(n_temperatures)
    if not sharpness > 0:
        raise ScheduleError(f"sigmoid sharpness must be positive, got {sharpness}")
    s = 1.0 / (1.0 + np.exp(-sharpness * np.linspace(-1.0, 1.0, n)))
    b = (s - s[0]) / (s[-1] - s[0])
    b[0], b[-1] = 0.0, 1.0
    return validate(b)


def geometric(n_temperatures: int, start: float = 1e-4) -> np.ndarray:
    """0, then ``T - 1`` geometrically spaced betas from ``start`` to 1."""
    n = _check_count(n_temperatures)
    if not 0 < start < 1:
        raise ScheduleError(f"geometric start must lie in (0, 1), got {start}")
    b = np.concatenate([[0.0], np.geomspace(start, 1.0, n - 1)]) if n > 2 else np.array([0.0, 1.0])
    b[-1] = 1.0
    return validate(b)


def _segment_lengths(grid: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, float]:
    """Lengths of the grid intervals under the interpolated sd curve, and the
    first interval's crossover beta (inf: sd taken linear there)."""
    g, s = grid, sd
    lengths = np.empty(g.size - 1)
    # [0, g_1]: s(b) = s_0 / (1 + b / b*) through both ends when s falls (the
    # shape of a Gaussian posterior narrowing as b grows), else linear.
    if s[0] > s[1]:
        crossover = g[1] / (s[0] / s[1] - 1.0)
        lengths[0] = s[0] * crossover * np.log1p(g[1] / crossover)
    else:
        crossover = np.inf
        lengths[0] = 0.5 * (s[0] + s[1]) * g[1]
    # Later intervals: a power law s(b) = s_i (b / g_i)^k through both ends.
    k = np.log(s[2:] / s[1:-1]) / np.log(g[2:] / g[1:-1])
    ratio = g[2:] / g[1:-1]
    near_log = np.abs(k + 1.0) < 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        power = (ratio ** (k + 1.0) - 1.0) / (k + 1.0)
    lengths[1:] = s[1:-1] * g[1:-1] * np.where(near_log, np.log(ratio), power)
    return lengths, crossover


def thermodynamic(n_temperatures: int, grid_betas, loglik_sd) -> np.ndarray:
    """Betas at equal increments of the thermodynamic length of the path.

    The length is ``L = int_0^1 sqrt(Var_b[log lik]) db`` (Var_b under the
    tempered posterior at b).  The AIS log weight gains ``(b_t - b_{t-1}) *
    log_lik`` at each step; to first order in the step, the variance of that
    increment is ``(b_t - b_{t-1})^2 Var_b[log lik]``, and so is twice the
    step's contribution to the gap (the bound), which is its squared length.
    For a fixed total length, a sum of squared increments is smallest when they
    are all equal (Cauchy-Schwarz), giving the gap about ``L^2 / (2 T)``: the
    schedule places its betas so each step carries ``L / (T - 1)``.

    ``loglik_sd`` is the standard deviation of the log likelihood at the
    ``grid_betas`` (0 = g_0 < g_1 < ... < 1, as the pilot's).  Between grid
    points after g_1 it is taken as a power law in beta (the posterior's spread
    shrinks like a power of beta once the likelihood dominates); on [0, g_1],
    below the pilot's first nonzero beta, as ``s_0 / (1 + b / b*)`` through both
    measured ends, the shape for a Gaussian whose prior gives way to the
    likelihood around ``b*`` (linear if the sd rises instead).  Both integrate
    and invert in closed form, so the schedule is a deterministic function of
    ``T`` and the curve.
    """
    n = _check_count(n_temperatures)
    g = np.asarray(grid_betas, dtype=float)
    s = np.asarray(loglik_sd, dtype=float)
    if g.ndim != 1 or g.size < 2 or s.shape != g.shape:
        raise ScheduleError(f"need matching 1-d grid betas and sds, got {g.shape} and {s.shape}")
    validate(g)
    if not np.all(np.isfinite(s) & (s >= 0)) or not s.max() > 0:
        raise ScheduleError("the log likelihood's sd along beta must be finite, non-negative "
                            "and not all zero; the pilot chains did not measure it")
    # A floor keeps every step of positive length (a constant log likelihood
    # somewhere gives sd 0 and would stack betas together); it sits far below the
    # smallest measured sd, so it never flattens a curve spanning many decades.
    s = np.maximum(s, 1e-6 * s[s > 0].min())
    lengths, crossover = _segment_lengths(g, s)
    edges = np.concatenate([[0.0], np.cumsum(lengths)])
    targets = edges[-1] * np.arange(1, n - 1) / (n - 1)
    seg = np.clip(np.searchsorted(edges, targets, side="right") - 1, 0, g.size - 2)
    r = targets - edges[seg]
    b = np.empty(targets.size)
    first = seg == 0
    if np.isfinite(crossover):
        b[first] = crossover * np.expm1(r[first] / (s[0] * crossover))
    else:  # s(b) = s_0 + c b: solve s_0 b + c b^2 / 2 = r
        c = (s[1] - s[0]) / g[1]
        rf = r[first]
        b[first] = (2.0 * rf / (s[0] + np.sqrt(s[0] ** 2 + 2.0 * c * rf)) if c > 0
                    else rf / s[0])
    i = seg[~first]
    gi, si = g[i], s[i]
    k = np.log(s[i + 1] / si) / np.log(g[i + 1] / gi)
    x = r[~first] / (si * gi)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        b[~first] = np.where(np.abs(k + 1.0) < 1e-9, gi * np.exp(x),
                             gi * np.maximum(1.0 + x * (k + 1.0), 0.0) ** (1.0 / (k + 1.0)))
    b = np.clip(b, 0.0, 1.0)
    out = np.concatenate([[0.0], b, [1.0]])
    # Guard against ties from rounding where the curve is extreme.
    out[1:-1] = np.maximum.accumulate(out[1:-1])
    bad = np.diff(out) <= 0
    if bad.any():
        raise ScheduleError(f"the adaptive schedule with {n} betas has coinciding betas "
                            f"(first at {float(out[np.flatnonzero(bad)[0]]):.3g}); use fewer "
                            "temperatures or another schedule")
    return validate(out)


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule family: ``kind`` is "linear", "sigmoid", "geometric" or "adaptive".

    "adaptive" places betas at equal thermodynamic length (:func:`thermodynamic`)
    using the curve the pilot measured, so it needs the tuned kernel.
    """

    kind: str = "sigmoid"
    sharpness: float = 4.0
    start: float = 1e-4

    def betas(self, n_temperatures: int, tuned=None) -> np.ndarray:
        """The schedule with ``n_temperatures`` betas.

        ``tuned`` (a :class:`~bread_stan.ais.tuning.TunedKernel`) supplies the
        pilot's log-likelihood curve for the adaptive kind; others ignore it.
        """
        if self.kind == "adaptive":
            curve = getattr(tuned, "loglik_sd", None)
            if curve is None:
                raise ScheduleError("the adaptive schedule is chosen from the pilot chains: "
                                    "give the tuned kernel (a pilot-tuned TunedKernel), or "
                                    "use the 'sigmoid' schedule")
            return thermodynamic(n_temperatures, tuned.grid_betas, curve)
        if self.kind == "linear":
            return linear(n_temperatures)
        if self.kind == "sigmoid":
            return sigmoidal(n_temperatures, self.sharpness)
        if self.kind == "geometric":
            return geometric(n_temperatures, self.start)
        raise ScheduleError(f"unknown schedule kind {self.kind!r}; use 'linear', 'sigmoid', "
                            "'geometric' or 'adaptive'")

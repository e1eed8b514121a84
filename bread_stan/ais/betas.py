"""Inverse-temperature schedules 0 = b_1 < ... < b_T = 1 for the annealing path.

- :func:`linear`: equal steps in beta.
- :func:`sigmoidal`: the sigmoid schedule of the AIS/BDMC papers (Grosse et al.
  2015, Wu et al. 2017): ``b_t ∝ sigmoid(delta * (2 t / (T - 1) - 1))``, rescaled
  to run from exactly 0 to exactly 1; larger ``sharpness`` (delta) puts more
  temperatures near both ends.
- :func:`geometric`: 0 followed by ``T - 1`` log-spaced values from ``start`` to 1,
  for likelihoods that dominate the prior already at small beta.
- :func:`validate`: any user array, checked.

:class:`ScheduleSpec` names a schedule family and its settings so a run can
build one schedule per number of temperatures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ScheduleError", "linear", "sigmoidal", "geometric", "validate", "ScheduleSpec"]


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


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule family: ``kind`` is "linear", "sigmoid" or "geometric"."""

    kind: str = "sigmoid"
    sharpness: float = 4.0
    start: float = 1e-4

    def betas(self, n_temperatures: int) -> np.ndarray:
        """The schedule with ``n_temperatures`` betas."""
        if self.kind == "linear":
            return linear(n_temperatures)
        if self.kind == "sigmoid":
            return sigmoidal(n_temperatures, self.sharpness)
        if self.kind == "geometric":
            return geometric(n_temperatures, self.start)
        raise ScheduleError(f"unknown schedule kind {self.kind!r}; use 'linear', 'sigmoid' or 'geometric'")

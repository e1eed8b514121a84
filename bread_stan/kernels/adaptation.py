"""Step-size adaptation: Stan's dual averaging of the log step size toward a target
acceptance (gamma 0.05, t0 10, kappa 0.75), used by the pilot along beta
(:mod:`bread_stan.ais.tuning`) and by the reference fits' warm-up."""

from __future__ import annotations

import numpy as np

__all__ = ["DualAveraging"]


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

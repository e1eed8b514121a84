"""The pilot's grid of betas: its floor, its points, and what a pilot chain costs on it.

The grid is equally spaced in ``log(beta + floor)``.  Its floor is ``1 / sd(log lik)``
at the prior draws, clipped to ``[floor_min, DEFAULT_FLOOR]``: where the likelihood is
sharp at the prior, the first betas must be small for the tempered distribution to move
little between them.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["DEFAULT_FLOOR", "auto_floor", "floor_for_sd", "grid_betas", "loglik_sd",
           "pilot_transitions"]

DEFAULT_FLOOR = 1e-3


def loglik_sd(values: np.ndarray) -> float:
    """Standard deviation of pooled log likelihoods, ignoring non-finite ones (0 with
    fewer than two finite values).  At the pilot's prior draws its inverse is the
    automatic floor of the pilot's grid."""
    finite = values[np.isfinite(values)]
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sd is inf
        return float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0


def auto_floor(log_lik: np.ndarray, pilot_grid: int, floor_min: float = 1e-12
               ) -> tuple[float, int]:
    """The floor ``1 / sd(log lik at prior draws)`` in [floor_min, DEFAULT_FLOOR], and the
    grid size that keeps the density of ``pilot_grid`` points over the default floor's
    decades."""
    # inf when |log lik| > 1e154: the floor is floor_min
    return floor_for_sd(loglik_sd(log_lik), pilot_grid, floor_min)


def floor_for_sd(sd: float, pilot_grid: int, floor_min: float = 1e-12) -> tuple[float, int]:
    """:func:`auto_floor` from the log likelihood's sd at the prior draws (0: the default
    floor)."""
    floor = float(np.clip(1.0 / sd, floor_min, DEFAULT_FLOOR)) if sd > 0 else DEFAULT_FLOOR
    decades = np.log10((1 + floor) / floor) / np.log10((1 + DEFAULT_FLOOR) / DEFAULT_FLOOR)
    return floor, max(pilot_grid, int(round(pilot_grid * decades)))


def grid_betas(pilot_grid: int, floor: float) -> np.ndarray:
    """Betas equally spaced in log(beta + floor), from exactly 0 to exactly 1."""
    if pilot_grid < 2:
        raise InputError("pilot_grid must be at least 2")
    g = np.exp(np.linspace(np.log(floor), np.log(1.0 + floor), pilot_grid)) - floor
    g[0], g[-1] = 0.0, 1.0
    return g


def pilot_transitions(grid_size: int, pilot_steps: int, burn_in: int) -> int:
    """Transitions one pilot chain makes along ``grid_size`` betas: ``pilot_steps`` at
    each, and ``burn_in`` more on arriving at each after the first."""
    return grid_size * (pilot_steps + burn_in) - burn_in

"""Targets on a small two-dimensional grid, for exact validation (SPEC section 6).

A grid target has one unnormalised log density ``log_f`` per cell and a prior
``log_prior`` (uniform by default) that starts the annealing path
``log f_t = log_prior + b_t * log_f``.  :class:`GridTarget` exposes it through
the :class:`~bread_stan.target.Target` protocol so that the sampling engine can
run on it: a position is an (n, 2) float array of integer cell coordinates
(row, column); a point off the grid evaluates to ``-inf`` (a rejected proposal).
Cell ``(r, c)`` has the flat index ``r * n_cols + c``.

The named targets of SPEC section 6 come from :func:`grid_log_f`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ..target import Evaluation

__all__ = ["GridTarget", "GridLaw", "grid_log_f", "GRID_TARGETS", "cells_to_positions",
           "positions_to_cells"]

GRID_TARGETS = ("easy", "hard", "barrier")


def grid_log_f(name: str, shape: tuple[int, int] = (7, 7), seed: int = 0) -> np.ndarray:
    """The log density table of a named grid target, shape ``shape``.

    ``"easy"`` and ``"hard"``: iid normal(0, 2) and normal(0, 10) per cell,
    drawn from ``numpy.random.default_rng(seed)``.  ``"barrier"``: four square
    quadrants separated by the middle row and column; 3 in the upper-right
    quadrant, 0 in the other three, -10 on the barrier (odd square grids only).
    """
    if name in ("easy", "hard"):
        sd = 2.0 if name == "easy" else 10.0
        return sd * np.random.default_rng(seed).standard_normal(shape)
    if name == "barrier":
        rows, cols = shape
        if rows != cols or rows % 2 == 0 or rows < 3:
            raise ValueError(f"the barrier target needs an odd square grid, got {shape}")
        mid = rows // 2
        log_f = np.zeros(shape)
        log_f[:mid, mid + 1:] = 3.0
        log_f[mid, :] = -10.0
        log_f[:, mid] = -10.0
        return log_f
    raise ValueError(f"unknown grid target {name!r}; expected one of {GRID_TARGETS}")


def positions_to_cells(points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Flat cell indices of (n, 2) positions; -1 for points off the grid or not finite."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"grid positions must have shape (n, 2), got {points.shape}")
    finite = np.all(np.isfinite(points), axis=1)
    rc = np.where(finite[:, None], points, -1.0)  # a non-finite point is off the grid
    if not np.array_equal(np.rint(rc), rc):
        raise ValueError("grid positions must hold integer cell coordinates")
    rows, cols = shape
    r, c = rc[:, 0].astype(np.int64), rc[:, 1].astype(np.int64)
    inside = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
    return np.where(inside, r * cols + c, -1)


def cells_to_positions(cells: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(n, 2) float positions (row, column) of flat cell indices."""
    r, c = np.divmod(np.asarray(cells, dtype=np.int64), shape[1])
    return np.stack([r, c], axis=1).astype(float)


class GridTarget:
    """A discrete target on a grid, evaluated like any other :class:`Target`.

    ``log_f`` is the (rows, cols) table of the unnormalised log likelihood;
    ``log_prior`` (same shape) is normalised here and defaults to uniform.
    There is no gradient: ``evaluate(..., gradient=True)`` raises.
    """

    def __init__(self, log_f: np.ndarray, log_prior: np.ndarray | None = None):
        log_f = np.asarray(log_f, dtype=float)
        if log_f.ndim != 2 or not np.all(np.isfinite(log_f)):
            raise ValueError("log_f must be a finite (rows, cols) array")
        if log_prior is None:
            log_prior = np.zeros_like(log_f)
        log_prior = np.asarray(log_prior, dtype=float)
        if log_prior.shape != log_f.shape:
            raise ValueError("log_prior and log_f must have the same shape")
        self.shape = log_f.shape
        self.log_f = log_f
        self.log_prior = log_prior - logsumexp(log_prior)
        # One padding slot at the end: index -1 (off the grid) reads -inf.
        self._lik = np.append(log_f.ravel(), -np.inf)
        self._prior = np.append(self.log_prior.ravel(), -np.inf)

    @property
    def dim(self) -> int:
        return 2

    @property
    def n_cells(self) -> int:
        return self.log_f.size

    def evaluate(self, points: np.ndarray, *, gradient: bool = True) -> Evaluation:
        """Log prior and log likelihood at (n, 2) cell coordinates."""
        if gradient:
            raise ValueError("a grid target has no gradient; use a gradient-free kernel")
        cells = positions_to_cells(points, self.shape)
        return Evaluation(self._prior[cells], self._lik[cells])

    def sample_prior(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n exact prior draws as (n, 2) positions."""
        return self._sample(rng, n, self.log_prior)

    def sample_posterior(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n exact draws from the normalised ``prior * f`` as (n, 2) positions."""
        return self._sample(rng, n, self.log_prior + self.log_f)

    def _sample(self, rng: np.random.Generator, n: int, log_p: np.ndarray) -> np.ndarray:
        p = np.exp(log_p.ravel() - logsumexp(log_p))
        return cells_to_positions(rng.choice(p.size, size=n, p=p / p.sum()), self.shape)


class GridLaw:
    """An exact distribution on a grid's cells: draws (as cell centres) and log pmf, as
    AIDE's tractable algorithms want them (a start, or a gold standard, on the grid)."""

    def __init__(self, log_p: np.ndarray, shape: tuple[int, int]):
        self.log_p = log_p - logsumexp(log_p)
        self.shape, self.dim = shape, 2

    def sample(self, rng, n: int) -> np.ndarray:
        p = np.exp(self.log_p)
        return cells_to_positions(rng.choice(p.size, size=n, p=p / p.sum()), self.shape)

    def log_density(self, points: np.ndarray) -> np.ndarray:
        cells = positions_to_cells(points, self.shape)
        return np.where(cells >= 0, self.log_p[cells], -np.inf)

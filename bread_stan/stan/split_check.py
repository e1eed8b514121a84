"""Check that an automatically split program is exact: same joint, prior as stated.

The generated program at ``prior_only = 0`` must have the user's program's log density
at every point, and at ``prior_only = 1`` that of a reference for the prior (a program
with the likelihood deleted, or one written by hand), with the Jacobian on and off and
all constants kept (``propto=False``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compile import CompiledModel
from .data import DataLike, load_data
from .model import StanModel

__all__ = ["SplitCheck", "check_split_exact"]


@dataclass(frozen=True)
class SplitCheck:
    """Largest relative differences (``abs(a - b) / max(1, abs(a))``) over the points checked."""

    joint: float          # generated (prior_only = 0) against the user's program
    prior: float          # generated (prior_only = 1) against the prior reference
    points: int           # points where the log densities are finite
    mismatched: int       # points finite in one program and not in the other

    scale: float = 1.0    # sd of the points (smaller when none was finite at sd 1)

    def exact(self, tolerance: float = 1e-10) -> bool:
        """Both differences within ``tolerance``, the same points finite in both, and
        at least one finite point (no finite point proves nothing)."""
        return (self.points > 0 and self.joint <= tolerance and self.prior <= tolerance
                and not self.mismatched)


def _difference(a: np.ndarray, b: np.ndarray) -> tuple[float, int, int]:
    fa, fb = np.isfinite(a), np.isfinite(b)
    both = fa & fb
    diff = np.abs(a[both] - b[both]) / np.maximum(1.0, np.abs(a[both]))
    return (float(diff.max()) if diff.size else 0.0), int(both.sum()), int((fa != fb).sum())


def check_split_exact(user: CompiledModel, generated: CompiledModel,
                      prior_reference: CompiledModel, data: DataLike, *,
                      rng: np.random.Generator, n: int = 20, scale: float = 1.0
                      ) -> SplitCheck:
    """Compare the three programs at ``n`` random unconstrained points (normal, sd
    ``scale``), Jacobian on and off; returns the largest differences.

    Where no point has a finite log density (a constrained model far from its support at
    sd ``scale``), the points are drawn again at sd ``scale / 10`` and ``scale / 100``."""
    values = {k: v for k, v in load_data(data).items() if k != "prior_only"}
    full = StanModel(generated, {**values, "prior_only": 0}, threads=1)
    prior = StanModel(generated, {**values, "prior_only": 1}, threads=1)
    reference = StanModel(user, values, threads=1)
    prior_reference = StanModel(prior_reference, values, threads=1)
    if not (full.dim == reference.dim == prior_reference.dim):
        raise ValueError(f"the programs have {full.dim}, {reference.dim} and "
                         f"{prior_reference.dim} unconstrained coordinates")
    for sd in (scale, scale / 10, scale / 100):
        check = _compare(reference, full, prior_reference, prior,
                         rng.normal(scale=sd, size=(n, full.dim)), sd)
        if check.points:
            break
    return check


def _compare(reference: StanModel, full: StanModel, prior_reference: StanModel,
             prior: StanModel, points: np.ndarray, sd: float) -> SplitCheck:
    joint_diff = prior_diff = 0.0
    finite = mismatched = 0
    for jacobian in (True, False):
        d1, f1, m1 = _difference(reference.log_density_batch(points, jacobian=jacobian),
                                 full.log_density_batch(points, jacobian=jacobian))
        d2, f2, m2 = _difference(
            prior_reference.log_density_batch(points, jacobian=jacobian),
            prior.log_density_batch(points, jacobian=jacobian))
        joint_diff, prior_diff = max(joint_diff, d1), max(prior_diff, d2)
        finite, mismatched = max(finite, min(f1, f2)), mismatched + m1 + m2
    return SplitCheck(joint_diff, prior_diff, finite, mismatched, sd)

"""Laplace approximation in the unconstrained space (as Stan's ``laplace`` method with
``jacobian=True``): N(mode, -H^-1) at the mode of the log density with the Jacobian."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ais.gaussian_base import BaseFitError, laplace_fit
from .gaussian import ApproximationError, GaussianApproximation, initial_point

__all__ = ["laplace"]


def laplace(model: Any, *, start: np.ndarray | None = None, seed: int = 0,
            step: float = 1e-4) -> GaussianApproximation:
    """The Laplace approximation of ``model``'s posterior in the unconstrained space.

    The mode comes from L-BFGS (scipy) on the log density *with* the Jacobian of the
    constraining transforms, started at ``start`` or at Stan's default uniform(-2, 2)
    draw (``seed``); the Hessian from central differences of the gradient (relative
    step ``step``), symmetrised.  This is Stan's ``laplace`` with ``jacobian=True``: a
    Gaussian in the unconstrained space, not at the constrained mode.  A density with no
    mode (improper, unbounded) or not negative definite curvature at it raises
    :class:`ApproximationError`.
    """
    x0 = initial_point(model, start, np.random.default_rng(seed))
    try:
        fitted = laplace_fit(model, x0, step=step)
    except BaseFitError as error:
        raise ApproximationError(f"laplace: {error}") from None
    diagnostics = {**fitted.diagnostics, "log_density_at_mode": fitted.log_density}
    return GaussianApproximation(fitted.mode, fitted.cov, method="laplace",
                                 diagnostics=diagnostics)

"""Approximations by name, as the command line spells them."""

from __future__ import annotations

from typing import Any

from .advi import advi
from .gaussian import GaussianApproximation
from .laplace import laplace
from .pathfinder import pathfinder
from ..errors import InputError

__all__ = ["METHODS", "approximate"]

METHODS = ("laplace", "advi-meanfield", "advi-fullrank", "pathfinder")


def approximate(model: Any, method: str, *, seed: int = 0, **options) -> GaussianApproximation:
    """Run the approximation named ``method`` (one of :data:`METHODS`) on ``model``;
    ``options`` go to :func:`laplace`, :func:`advi` or :func:`pathfinder`."""
    if method == "laplace":
        return laplace(model, seed=seed, **options)
    if method in ("advi-meanfield", "advi-fullrank"):
        return advi(model, family=method.split("-")[1], seed=seed, **options)
    if method == "pathfinder":
        return pathfinder(model, seed=seed, **options)
    raise InputError(f"unknown approximation {method!r}; choose one of {', '.join(METHODS)}")

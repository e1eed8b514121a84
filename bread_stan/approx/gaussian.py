"""The output of every approximation: a Gaussian in the unconstrained space (one type).

:class:`GaussianApproximation` extends :class:`~bread_stan.ais.gaussian_base.GaussianBase`
(the package's one Gaussian-in-unconstrained-space type, which AIS also starts from) with
the method that made it and its diagnostics, and maps draws to Stan's shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..ais.gaussian_base import BaseFitError, GaussianBase, joint_density
from ..stan.draws import to_arviz as _to_arviz
from ..stan.model import unflatten_draws
from ..errors import InputError

__all__ = ["GaussianApproximation", "ApproximationError", "initial_point"]


class ApproximationError(BaseFitError):
    """An approximation could not be computed (no mode, no curvature, ELBO not finite)."""


@dataclass(frozen=True)
class GaussianApproximation(GaussianBase):
    """N(mean, cov) in the unconstrained space, made by ``method`` (``"laplace"``,
    ``"advi-meanfield"``, ``"advi-fullrank"``, ``"pathfinder"``).

    ``diagnostics``: at least ``iterations``, ``converged``, ``gradient_evaluations`` and
    ``seconds``; ADVI adds ``eta`` and ``elbo_trace``, Pathfinder ``elbo_trace`` and
    ``best_iteration``.  Inherited: ``sample(rng, n) -> (n, d)`` exact draws and
    ``log_density(points) -> (log q (n,), gradient (n, d))``, the normalised log density
    (``log_density(x)[0]`` is log q).  ``widen`` stays 1.
    """

    method: str = "gaussian"
    diagnostics: Mapping[str, Any] = field(default_factory=dict)

    def log_q(self, points: np.ndarray) -> np.ndarray:
        """The normalised log density (n,) at (n, d) unconstrained points."""
        return self.log_density(np.atleast_2d(points), gradient=False)[0]

    def draws(self, model: Any, n: int = 1000, seed: int = 0) -> dict[str, np.ndarray]:
        """``n`` draws as a dict name -> ``(n, *Stan shape)``, constrained by ``model``'s
        ``param_constrain`` (parameters, transformed parameters and, for a StanModel,
        generated quantities with the Stan RNG seeded by ``seed``)."""
        if not (hasattr(model, "param_constrain") and hasattr(model, "param_names")):
            raise TypeError(f"{type(model).__name__} has no param_constrain/param_names; "
                            "use sample() for unconstrained draws")
        u = self.sample(np.random.default_rng(seed), int(n))
        if hasattr(model, "log_density_gradient_batch"):  # a StanModel: everything
            flat = model.param_constrain(u, True, True, seed=seed)
            names = model.param_names(True, True)
        else:
            flat, names = model.param_constrain(u, True), model.param_names(True)
        return unflatten_draws(flat, names)

    def to_arviz(self, model: Any, n: int = 1000, seed: int = 0):
        """:meth:`draws` as ArviZ data (one chain of ``n`` draws) with the method as an
        attribute."""
        posterior = {k: v[None] for k, v in self.draws(model, n, seed).items()}
        return _to_arviz({"posterior": posterior}, {"method": self.method})

    def to_dict(self) -> dict[str, Any]:
        plain = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                 for k, v in self.diagnostics.items()}
        return {**super().to_dict(), "method": self.method, "diagnostics": plain}


def initial_point(model: Any, start: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """``start`` checked (finite, right length, finite density), or Stan's default
    initialisation: uniform(-2, 2) in every unconstrained coordinate."""
    d = int(model.dim)
    if start is None:
        return rng.uniform(-2.0, 2.0, size=d)
    x0 = np.asarray(start, dtype=float).ravel()
    if x0.shape != (d,):
        raise InputError(f"start must have the model's {d} unconstrained coordinates, "
                         f"got shape {np.shape(start)}")
    if not np.all(np.isfinite(x0)):
        raise InputError(f"start must be finite, got {x0}")
    if not np.isfinite(joint_density(model)(x0[None, :], False)[0][0]):
        raise InputError("the model's log density is not finite at start; give a point "
                         "inside the support (unconstrained coordinates)")
    return x0

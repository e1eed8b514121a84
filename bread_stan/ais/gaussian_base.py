"""AIS from a Gaussian base in the unconstrained space (SPEC section 7.1).

Any normalised density q0 with exact draws can start AIS.  :class:`GaussianBaseTarget`
presents the geometric path ``q0^(1-b) p~^b`` to the engine as a
:class:`~bread_stan.target.Target` whose "prior" is ``log q0(u)`` and whose "log
likelihood" is ``log p~(u, y) - log q0(u)``, where ``log p~`` is the model's full log
density with the Jacobian.  The engine then runs unchanged: Z_1 = 1 and Z_T is the
integral of p~: ``log p(y)`` only when the program's prior density integrates to 1 (not
for an improper prior, nor for an untruncated prior on a constrained parameter, such as
``tau ~ cauchy(0, 5)`` on ``real<lower=0> tau``, whose normaliser is 1/2).  No
``prior_only`` split and no simulator are needed.

:class:`GaussianBase` is fitted either to reference draws (their mean and covariance) or
to a Laplace approximation (:func:`laplace_fit`, which :func:`bread_stan.approx.laplace`
also uses: mode by L-BFGS on the log density and its gradient, Hessian by central
differences of the gradient), and widened by a stated factor on the standard deviation
scale so that its tails cover the posterior's.

On a :class:`~bread_stan.stan.model.StanModel` the target offers native HMC and NUTS
transitions (``target.native``): the model library evaluates log q0 as well
(``gaussian_base_point`` in ``csrc/bridge.cpp``), bit for bit as
:meth:`GaussianBase.log_density` does, so the kernels leave Python once per transition
(about 20 times faster on eight schools than the Python kernels, which stay the reference).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy import optimize

from ..errors import BreadStanError, InputError
from ..linalg import cholesky, covariance, row_dot, triangular_inverse
from ..stan.model import StanModel
from ..stan.native import NativeKernels
from ..stan.tempered import JointTarget
from ..target import Evaluation, Target

__all__ = ["GaussianBase", "GaussianBaseTarget", "LaplaceFit", "laplace_fit", "joint_density",
           "DEFAULT_WIDEN"]

DEFAULT_WIDEN = 1.5  # standard deviations of q0 are this many times the fitted ones
_LOG_2PI = float(np.log(2 * np.pi))
# a precision whose eigenvalues span more than this cannot be inverted reliably in double
# precision (eight schools centred: L-BFGS runs into the funnel's neck, tau -> 0)
_MAX_CONDITION = 1e14
_CHUNK = 1 << 22  # doubles in the temporary of a dense base's products (32 MB)

JointDensity = Callable[[np.ndarray, bool], tuple[np.ndarray, np.ndarray | None]]


class BaseFitError(BreadStanError):
    """The Gaussian base could not be fitted (too few draws, no mode, no curvature)."""


def joint_density(source: Any) -> JointDensity:
    """``f(points, gradient) -> (log p~ (n,), gradient (n, d) or None)`` of ``source``.

    ``source`` is a :class:`~bread_stan.stan.model.StanModel` (its log density with the
    Jacobian, all constants) or any :class:`~bread_stan.target.Target` (log prior plus
    log likelihood).
    """
    if hasattr(source, "log_density_gradient_batch"):
        def stan(points, gradient):
            if gradient:
                return source.log_density_gradient_batch(points, jacobian=True)
            return source.log_density_batch(points, jacobian=True), None
        return stan
    if isinstance(source, Target):
        def summed(points, gradient):
            ev = source.evaluate(points, gradient=gradient)
            lp = ev.log_prior + ev.log_lik
            return lp, (ev.grad_prior + ev.grad_lik) if gradient else None
        return summed
    raise TypeError(f"cannot take a joint log density from {type(source).__name__}; "
                    "pass a StanModel or a Target")


@dataclass(frozen=True)
class LaplaceFit:
    """The mode of a joint log density in the unconstrained space and the curvature there.

    ``cov`` is the inverse of ``precision`` (minus the symmetrised Hessian at the mode);
    ``diagnostics`` counts L-BFGS iterations and gradient evaluations and records the time.
    """

    mode: np.ndarray
    precision: np.ndarray
    cov: np.ndarray
    log_density: float
    diagnostics: dict


def laplace_fit(source: Any, start: np.ndarray, *, step: float = 1e-4,
                gtol: float = 1e-8) -> LaplaceFit:
    """Mode of ``source``'s joint density (with the Jacobian) by L-BFGS from ``start`` (d,),
    Hessian there by central differences of the gradient (one batched call of 2d points,
    symmetrised).  The one mode/Hessian routine of the package: the Gaussian base and
    :func:`bread_stan.approx.laplace` both use it.

    Raises :class:`BaseFitError` when the start is not finite or has zero density, when
    L-BFGS runs off to infinity (no mode: an improper or unbounded density), or when the
    Hessian at the mode is not negative definite.
    """
    t0 = time.perf_counter()
    density = joint_density(source)
    x0 = np.asarray(start, dtype=float).ravel()
    if not np.all(np.isfinite(x0)):
        raise BaseFitError("the start of the mode search must be a finite unconstrained point, "
                           f"got {x0}")
    if not np.isfinite(density(x0[None, :], False)[0][0]):
        raise BaseFitError("the log density is not finite at the start of the mode search; "
                           "give a start inside the support")
    calls = [0]

    def negative(u):
        calls[0] += 1
        lp, grad = density(u[None, :], True)
        if not np.isfinite(lp[0]) or not np.all(np.isfinite(grad[0])):
            return np.inf, np.zeros_like(u)
        return -float(lp[0]), -grad[0]

    fitted = optimize.minimize(negative, x0, jac=True, method="L-BFGS-B",
                               options={"maxiter": 10_000, "gtol": gtol, "ftol": 1e-15})
    mode = fitted.x
    scale = max(1.0, float(np.max(np.abs(x0))))
    if (not np.isfinite(fitted.fun) or not np.all(np.isfinite(mode))
            or np.max(np.abs(mode)) > 1e6 * scale):
        raise BaseFitError("no mode found: L-BFGS ran off to |u| = "
                           f"{np.max(np.abs(mode)):.3g} (is the posterior improper or "
                           "its density unbounded?)")
    d = mode.size
    h = step * np.maximum(1.0, np.abs(mode))
    points = np.concatenate([mode + np.diag(h), mode - np.diag(h)])
    _, grads = density(points, True)
    hessian = (grads[:d] - grads[d:]) / (2 * h[:, None])
    precision = -0.5 * (hessian + hessian.T)
    eigen = np.linalg.eigvalsh(precision) if np.all(np.isfinite(precision)) else [np.nan]
    if not np.all(np.isfinite(eigen)) or np.min(eigen) <= 0:
        raise BaseFitError("the log density is not curved downward at the mode (smallest "
                           f"eigenvalue of minus the Hessian {np.min(eigen):.3g}): no Gaussian "
                           "approximation there (is the posterior improper or flat?)")
    if np.max(eigen) > _MAX_CONDITION * np.min(eigen):
        raise BaseFitError("the log density's curvature at the mode spans more than "
                           f"{np.log10(_MAX_CONDITION):.0f} orders of magnitude (eigenvalues "
                           f"of minus the Hessian {np.min(eigen):.3g} to {np.max(eigen):.3g}): "
                           "no Gaussian approximation there (a mode in a funnel's neck or "
                           "at a boundary of the support?)")
    diagnostics = {"iterations": int(fitted.nit), "converged": bool(fitted.success),
                   "message": str(fitted.message), "gradient_evaluations": calls[0] + 2 * d,
                   "seconds": time.perf_counter() - t0}
    return LaplaceFit(mode, precision, np.linalg.inv(precision), -float(fitted.fun), diagnostics)


@dataclass(frozen=True)
class GaussianBase:
    """A normalised Gaussian N(mean, cov) in the unconstrained space, with exact draws."""

    mean: np.ndarray
    cov: np.ndarray
    widen: float = 1.0  # recorded: cov already includes widen**2

    def __post_init__(self):
        mean = np.asarray(self.mean, dtype=float).ravel()
        cov = np.atleast_2d(np.asarray(self.cov, dtype=float))
        if cov.shape != (mean.size, mean.size) or not np.all(np.isfinite(cov)):
            raise BaseFitError(f"the base covariance must be a finite ({mean.size}, "
                               f"{mean.size}) matrix, got shape {cov.shape}")
        cov = 0.5 * (cov + cov.T)
        try:  # bread_stan.linalg: the same bits whatever kernels OpenBLAS picks
            chol = cholesky(cov)
        except np.linalg.LinAlgError:
            raise BaseFitError("the base covariance is not positive definite; widen it or "
                               "fit the base to more reference draws") from None
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "cov", cov)
        object.__setattr__(self, "_chol", chol)
        diagonal = not np.any(cov - np.diag(np.diag(cov)))
        object.__setattr__(self, "_sd", np.diag(chol).copy() if diagonal else None)
        object.__setattr__(self, "_inverse", None)  # (L^-1, L^-T), made on first use
        object.__setattr__(self, "_log_norm",
                           -0.5 * mean.size * _LOG_2PI - float(np.sum(np.log(np.diag(chol)))))

    @property
    def dim(self) -> int:
        return self.mean.size

    @property
    def log_peak(self) -> float:
        """log q0 at its mean: the log normaliser, ``log_density`` there bit for bit."""
        return self._log_norm

    def _inverse_factors(self) -> tuple[np.ndarray, np.ndarray]:
        """``L^-1`` and ``L^-T`` of a dense covariance, computed once, when first needed:
        O(d^3), a minute at d = 1536, so a base that is only compared (one of several
        Laplace fits of which the best is kept) never pays it."""
        if self._inverse is None:
            linv = triangular_inverse(self._chol)
            # C order: row_dot's products must be contiguous along the summed axis
            object.__setattr__(self, "_inverse", (linv, np.ascontiguousarray(linv.T)))
        return self._inverse

    @classmethod
    def standard(cls, dim: int) -> "GaussianBase":
        """N(0, I): a placeholder base, for example to sample the posterior at beta = 1."""
        return cls(np.zeros(dim), np.eye(dim))

    @classmethod
    def from_draws(cls, draws: np.ndarray, widen: float = DEFAULT_WIDEN) -> "GaussianBase":
        """Mean and covariance of (n, d) unconstrained draws, sds times ``widen``.

        A small ridge (1e-8 of the largest variance) keeps a nearly singular sample
        covariance usable; fewer than d + 1 draws give a diagonal covariance.
        """
        x = np.asarray(draws, dtype=float)
        if x.ndim != 2 or x.shape[0] < 2:
            raise BaseFitError(f"fitting a Gaussian base needs at least 2 draws of shape (n, d), "
                               f"got {x.shape}")
        _check_widen(widen)
        cov = covariance(x)
        if x.shape[0] <= x.shape[1]:
            cov = np.diag(np.diag(cov))
        cov = cov + 1e-8 * max(float(np.max(np.diag(cov))), 1e-300) * np.eye(x.shape[1])
        return cls(x.mean(axis=0), widen ** 2 * cov, widen)

    @classmethod
    def laplace(cls, source: Any, start: np.ndarray, widen: float = DEFAULT_WIDEN,
                *, step: float = 1e-4) -> "GaussianBase":
        """Laplace approximation of ``source``'s joint density (:func:`laplace_fit`),
        sds times ``widen``.  A model without a mode or without downward curvature at it
        is refused: fit the base to reference draws instead."""
        _check_widen(widen)
        try:
            fitted = laplace_fit(source, start, step=step)
        except BaseFitError as error:
            raise BaseFitError(f"{error}; fit the base to reference draws instead") from None
        return cls(fitted.mode, widen ** 2 * fitted.cov, widen)

    @property
    def diagonal(self) -> bool:
        """Whether the covariance is diagonal (then log q0 takes elementwise divisions)."""
        return self._sd is not None

    def log_density(self, points: np.ndarray, gradient: bool = True
                    ) -> tuple[np.ndarray, np.ndarray | None]:
        """log q0 (n,) and its gradient (n, d) at (n, d) points (None without
        ``gradient``: half the work of a dense covariance, the same log q0).

        With ``s = L^-1 (u - m)``: ``log q0 = c - s's / 2`` and the gradient is
        ``-L^-T s``.  A diagonal covariance takes elementwise divisions, O(n d); a dense
        one products with the precomputed ``L^-1`` and ``L^-T``, O(n d^2) (never a
        refactorisation per call).  Sums are :func:`~bread_stan.kernels.integrator.row_dot`
        (pairwise, in a fixed order) so that the native kernels (``csrc/bridge.cpp``,
        ``gaussian_base_point``) reproduce these numbers bit for bit."""
        z = np.asarray(points, dtype=float) - self.mean
        if self._sd is not None:
            solved = z / self._sd
            grad = -(solved / self._sd) if gradient else None
        else:
            solved = np.empty_like(z)
            grad = np.empty_like(z) if gradient else None
            linv, linv_t = self._inverse_factors()
            rows = max(1, _CHUNK // max(z.shape[1] ** 2, 1))  # bound the (rows, d, d) product
            for lo in range(0, z.shape[0], rows):
                block = slice(lo, lo + rows)
                solved[block] = row_dot(linv, z[block, None, :])
                if gradient:
                    grad[block] = -row_dot(linv_t, solved[block, None, :])
        log_q = self._log_norm - 0.5 * row_dot(solved, solved)
        return log_q, grad

    def native_block(self) -> np.ndarray:
        """What the native kernels read: ``[log normaliser, mean (d), sd (d)]``, or for a
        dense covariance ``[log normaliser, mean (d), L^-1 (d*d), L^-T (d*d)]`` (row-major)."""
        parts = [[self._log_norm], self.mean]
        parts += [self._sd] if self._sd is not None else [
            factor.ravel() for factor in self._inverse_factors()]
        return np.concatenate(parts)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Exact draws (n, d): ``mean + L z`` with the products summed in a fixed order."""
        z = rng.standard_normal((n, self.dim))
        if self._sd is not None:
            return self.mean + z * self._sd
        out = np.empty_like(z)
        rows = max(1, _CHUNK // max(self.dim ** 2, 1))
        for lo in range(0, n, rows):
            out[lo:lo + rows] = row_dot(self._chol, z[lo:lo + rows, None, :])
        return self.mean + out

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.tolist(), "cov": self.cov.tolist(), "widen": self.widen}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GaussianBase":
        """The base :meth:`to_dict` wrote, bit for bit."""
        return cls(np.asarray(data["mean"], dtype=float), np.asarray(data["cov"], dtype=float),
                   float(data["widen"]))


def _check_widen(widen: float) -> None:
    if not np.isfinite(widen) or widen <= 0:
        raise InputError(f"widen must be a positive factor on the standard deviations, got {widen}")


class GaussianBaseTarget:
    """The geometric path from a Gaussian base q0 to a model's joint density, as a Target.

    ``source`` is a :class:`~bread_stan.stan.model.StanModel` (or any Target; its log
    prior plus log likelihood is the joint).  Transforms (``param_constrain``,
    ``param_names``, ``param_unconstrain_batch``) are the source's.  A StanModel source
    gives native transitions (``native``), with log q0 evaluated in its library.
    """

    def __init__(self, source: Any, base: GaussianBase):
        self.source = source
        self.base = base
        self._density = joint_density(source)
        if base.dim != self.dim:
            raise InputError(f"the base has {base.dim} coordinates, the model {self.dim}")
        # Native transitions (the model's library evaluates q0 too) for a StanModel source.
        self.native = (NativeKernels(source, None, source.threads, base=base)
                       if isinstance(source, StanModel) and NativeKernels.available(source)
                       else None)

    @property
    def dim(self) -> int:
        return int(self.source.dim)

    def with_base(self, base: GaussianBase) -> "GaussianBaseTarget":
        """The same model with another base."""
        return GaussianBaseTarget(self.source, base)

    def joint(self) -> Any:
        """The model's posterior alone, as a fit samples it: a
        :class:`~bread_stan.stan.tempered.JointTarget` (native NUTS) when the source is a
        StanModel, else this target (whose beta = 1 density is the joint)."""
        return JointTarget(self.source) if isinstance(self.source, StanModel) else self

    def log_joint(self, points: np.ndarray) -> np.ndarray:
        """The model's log p~ (n,) at (n, d) points (no gradient)."""
        return self._density(np.ascontiguousarray(points, dtype=float), False)[0]

    def evaluate(self, points: np.ndarray, *, gradient: bool = True) -> Evaluation:
        """log q0 as the prior, log p~ - log q0 as the likelihood (and gradients)."""
        points = np.ascontiguousarray(points, dtype=float)
        log_q, grad_q = self.base.log_density(points)
        lp, grad = self._density(points, gradient)
        with np.errstate(invalid="ignore"):
            log_lik = lp - log_q
        if not gradient:
            return Evaluation(log_q, log_lik)
        return Evaluation(log_q, log_lik, grad_q, grad - grad_q)

    def param_names(self, include_tp: bool = False, include_gq: bool = False) -> list[str]:
        return self.source.param_names(include_tp, include_gq)

    def param_constrain(self, u: np.ndarray, include_tp: bool = False) -> np.ndarray:
        return self.source.param_constrain(u, include_tp)

    def param_unconstrain_batch(self, values) -> np.ndarray:
        return self.source.param_unconstrain_batch(values)

    @property
    def compiled(self):
        return self.source.compiled

    @property
    def full_model(self):
        """The model with its full joint density, as :func:`~bread_stan.workflows.fit.fit`
        reads it (a StanModel source)."""
        return self.source

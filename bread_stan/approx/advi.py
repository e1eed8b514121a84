"""ADVI (Kucukelbir et al. 2017) as Stan implements it (``stan/variational/advi.hpp``,
``families/normal_meanfield.hpp``, ``families/normal_fullrank.hpp``, Stan 2.3x).

What is followed, step by step:

* families: mean-field N(mu, diag(exp(omega))^2) started at (mu = start, omega = 0);
  full-rank N(mu, L L^T), L lower triangular, started at (mu = start, L = I);
* ELBO: ``elbo_samples`` draws zeta = mu + scale * eta, eta ~ N(0, I); the sum of log p~
  (log density with the Jacobian, all constants) over draws that evaluate, divided by
  ``elbo_samples`` (a draw that fails is redrawn; ``elbo_samples`` failures are an
  error), plus the entropy 0.5 d (1 + log 2 pi) + sum(omega) (or sum log |L_ii|);
* ELBO gradient: ``grad_samples`` reparameterised draws; mu gets the mean gradient g,
  omega the mean of g * eta times exp(omega) plus 1, L the mean of tril(g eta^T) plus
  diag(1 / L_ii); a failing draw is redrawn, up to 10 * ``grad_samples`` times;
* step sizes: Stan's adaptive sequence, s_k = 0.9 s_{k-1} + 0.1 g_k^2 (s_1 = g_1^2),
  step eta * k^(-1/2) / (1 + sqrt(s_k)), element-wise;
* eta adaptation (``eta=None``): each of 100, 10, 1, 0.1, 0.01 runs ``adapt_iter``
  steps from the start and is scored by the ELBO; stop at the first eta whose ELBO is
  worse than the previous eta's once that one beats the initial ELBO; the last eta is
  kept only if it beats the initial ELBO (otherwise an error);
* convergence: every ``eval_elbo`` iterations the relative ELBO change
  |(ELBO_prev - ELBO) / ELBO| goes into a circular buffer of max(0.1 max_iter /
  eval_elbo, 2) entries; stop when its mean or its median (upper median, as Stan's
  ``nth_element``) is below ``tol_rel_obj``, or at ``max_iter``.

Random numbers come from a numpy Generator seeded by ``seed``, so the results are
reproducible but not Stan's draws.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import numpy as np

from ..ais.gaussian_base import joint_density
from .gaussian import ApproximationError, GaussianApproximation, initial_point
from ..errors import InputError

__all__ = ["advi", "FAMILIES"]

FAMILIES = ("meanfield", "fullrank")
ETA_SEQUENCE = (100.0, 10.0, 1.0, 0.1, 0.01)
_TAU, _PRE, _POST = 1.0, 0.9, 0.1
_ENTROPY_PER_DIM = 0.5 * (1.0 + np.log(2 * np.pi))
_GRAD_RETRIES = 10
_IMPROPER_SD = 100.0  # a warning: few proper posteriors are this wide, unconstrained

log = logging.getLogger(__name__)


class _Family:
    """The variational parameters as one flat vector: mu then omega (mean-field) or mu
    then L row-major (full-rank; its upper triangle stays zero)."""

    def __init__(self, family: str, d: int):
        self.fullrank = family == "fullrank"
        self.d = d

    def initial(self, mu: np.ndarray) -> np.ndarray:
        scale = np.eye(self.d).ravel() if self.fullrank else np.zeros(self.d)
        return np.concatenate([mu, scale])

    def split(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mu, rest = params[:self.d], params[self.d:]
        return mu, (rest.reshape(self.d, self.d) if self.fullrank else rest)

    def transform(self, params: np.ndarray, eta: np.ndarray) -> np.ndarray:
        mu, scale = self.split(params)
        with np.errstate(over="ignore", invalid="ignore"):  # diverging runs are caught later
            return mu + (eta @ scale.T if self.fullrank else eta * np.exp(scale))

    def entropy(self, params: np.ndarray) -> float:
        _, scale = self.split(params)
        if not self.fullrank:
            return _ENTROPY_PER_DIM * self.d + float(np.sum(scale))
        diag = np.abs(np.diag(scale))
        return _ENTROPY_PER_DIM * self.d + float(np.sum(np.log(diag[diag != 0])))

    def gradient(self, params: np.ndarray, grads: np.ndarray, eta: np.ndarray) -> np.ndarray:
        """ELBO gradient from model gradients (n, d) at the draws made from ``eta``."""
        _, scale = self.split(params)
        mu_grad = grads.mean(axis=0)
        if self.fullrank:
            scale_grad = np.tril(grads.T @ eta) / grads.shape[0]
            scale_grad[np.diag_indices(self.d)] += 1.0 / np.diag(scale)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                scale_grad = (grads * eta).mean(axis=0) * np.exp(scale) + 1.0
        return np.concatenate([mu_grad, scale_grad.ravel()])

    def gaussian(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mu, scale = self.split(params)
        chol = scale if self.fullrank else np.diag(np.exp(scale))
        return mu.copy(), chol @ chol.T


class _Objective:
    """Monte Carlo ELBO and its gradient, counting gradient evaluations."""

    def __init__(self, model: Any, family: _Family, rng: np.random.Generator,
                 grad_samples: int, elbo_samples: int):
        self.density = joint_density(model)
        self.family, self.rng = family, rng
        self.grad_samples, self.elbo_samples = grad_samples, elbo_samples
        self.gradient_evaluations = 0
        self.density_evaluations = 0

    def elbo(self, params: np.ndarray) -> float:
        n, total, kept, dropped = self.elbo_samples, 0.0, 0, 0
        while kept < n:
            eta = self.rng.standard_normal((n - kept, self.family.d))
            lp, _ = self.density(self.family.transform(params, eta), False)
            self.density_evaluations += lp.size
            good = np.isfinite(lp)
            total += float(np.sum(lp[good]))
            kept += int(good.sum())
            dropped += int((~good).sum())
            if dropped >= n:
                raise ApproximationError(
                    f"advi: {dropped} of the ELBO draws could not be evaluated (the model "
                    "may be severely ill-conditioned or misspecified)")
        return total / n + self.family.entropy(params)

    def gradient(self, params: np.ndarray) -> np.ndarray:
        n, d = self.grad_samples, self.family.d
        etas, grads, dropped = [], [], 0
        while sum(len(g) for g in grads) < n:
            eta = self.rng.standard_normal((n - sum(len(g) for g in grads), d))
            _, grad = self.density(self.family.transform(params, eta), True)
            self.gradient_evaluations += eta.shape[0]
            good = np.all(np.isfinite(grad), axis=1)
            etas.append(eta[good])
            grads.append(grad[good])
            dropped += int((~good).sum())
            if dropped >= _GRAD_RETRIES * n:
                raise ApproximationError(
                    f"advi: {dropped} gradient draws could not be evaluated (the model may "
                    "be severely ill-conditioned or misspecified)")
        return self.family.gradient(params, np.concatenate(grads), np.concatenate(etas))


def _step(params, grad, history, k, eta):
    """One step of Stan's adaptive step-size sequence (iteration k >= 1); a step that
    overflows gives non-finite parameters, which the callers handle."""
    with np.errstate(over="ignore", invalid="ignore"):
        history = grad ** 2 if k == 1 else _PRE * history + _POST * grad ** 2
        return params + eta / np.sqrt(k) * grad / (_TAU + np.sqrt(history)), history


def _adapt_eta(objective: _Objective, initial: np.ndarray, adapt_iter: int) -> float:
    try:
        elbo_init = objective.elbo(initial)
    except ApproximationError:
        raise ApproximationError("advi: cannot compute the ELBO at the initial variational "
                                 "distribution (the model may be severely ill-conditioned "
                                 "or misspecified); give another start") from None
    elbo_best, eta_best = -np.inf, None
    for index, eta in enumerate(ETA_SEQUENCE):
        params, history = initial.copy(), None
        for k in range(1, adapt_iter + 1):
            try:
                grad = objective.gradient(params)
            except ApproximationError:
                grad = np.zeros_like(params)
            params, history = _step(params, grad, history, k, eta)
        try:
            elbo = objective.elbo(params) if np.all(np.isfinite(params)) else -np.inf
        except ApproximationError:
            elbo = -np.inf
        if elbo < elbo_best and elbo_best > elbo_init:
            return eta_best
        if index < len(ETA_SEQUENCE) - 1:
            elbo_best, eta_best = elbo, eta
        elif elbo > elbo_init:
            return eta
    raise ApproximationError("advi: all proposed step sizes (eta 100 ... 0.01) failed to "
                             "improve the ELBO (the model may be severely ill-conditioned "
                             "or misspecified); give eta or another start")


def advi(model: Any, *, family: str = "meanfield", seed: int = 0,
         start: np.ndarray | None = None, grad_samples: int = 1, elbo_samples: int = 100,
         eta: float | None = None, adapt_iter: int = 50, tol_rel_obj: float = 0.01,
         eval_elbo: int = 100, max_iter: int = 10_000) -> GaussianApproximation:
    """Stan's ADVI on ``model``'s posterior in the unconstrained space (see the module
    docstring for exactly what is followed); defaults are Stan's.

    ``family``: ``"meanfield"`` or ``"fullrank"``.  ``start``: the initial mean (default
    Stan's uniform(-2, 2) draw from ``seed``).  ``eta=None`` adapts the step size.
    Returns the final variational Gaussian (method ``"advi-<family>"``) with diagnostics
    ``iterations``, ``converged`` (the relative-ELBO rule fired before ``max_iter``),
    ``eta``, ``elbo_trace`` (the ELBO every ``eval_elbo`` iterations),
    ``gradient_evaluations`` (adaptation included) and ``seconds``.
    """
    if family not in FAMILIES:
        raise InputError(f"family must be one of {FAMILIES}, got {family!r}")
    for name, value in (("grad_samples", grad_samples), ("elbo_samples", elbo_samples),
                        ("eval_elbo", eval_elbo), ("max_iter", max_iter),
                        ("adapt_iter", adapt_iter)):
        if int(value) != value or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value}")
    if not tol_rel_obj > 0:
        raise InputError(f"tol_rel_obj must be positive, got {tol_rel_obj}")
    if eta is not None and not (np.isfinite(eta) and eta > 0):
        raise InputError(f"eta must be a positive step-size scale (or None to adapt), got {eta}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x0 = initial_point(model, start, rng)
    shape = _Family(family, x0.size)
    objective = _Objective(model, shape, rng, int(grad_samples), int(elbo_samples))
    initial = shape.initial(x0)
    adapted = eta is None
    if adapted:
        eta = _adapt_eta(objective, initial, int(adapt_iter))

    params, history = initial.copy(), None
    buffer = deque(maxlen=int(max(0.1 * max_iter / eval_elbo, 2.0)))
    elbo, trace, converged, k = 0.0, [], False, 0
    for k in range(1, int(max_iter) + 1):
        params, history = _step(params, objective.gradient(params), history, k, eta)
        if not np.all(np.isfinite(params)):
            raise ApproximationError(f"advi: the variational parameters became non-finite at "
                                     f"iteration {k} (eta {eta:g}): is the posterior improper? "
                                     "If not, give a smaller eta")
        if k % eval_elbo == 0:
            elbo_prev, elbo = elbo, objective.elbo(params)
            trace.append(elbo)
            buffer.append(abs((elbo_prev - elbo) / elbo))
            values = sorted(buffer)
            if np.mean(values) < tol_rel_obj or values[len(values) // 2] < tol_rel_obj:
                converged = True
                break
    mean, cov = shape.gaussian(params)
    widest = float(np.sqrt(np.max(np.diag(cov))))
    if widest > _IMPROPER_SD:
        log.warning("advi: the approximation's largest standard deviation in the "
                    "unconstrained space is %.3g: is the posterior improper?", widest)
    diagnostics = {"iterations": k, "converged": converged, "eta": float(eta),
                   "eta_adapted": adapted, "elbo_trace": np.asarray(trace),
                   "gradient_evaluations": objective.gradient_evaluations,
                   "density_evaluations": objective.density_evaluations,
                   "seconds": time.perf_counter() - t0}
    return GaussianApproximation(mean, cov, method=f"advi-{family}", diagnostics=diagnostics)

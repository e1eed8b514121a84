"""Hamiltonian pieces shared by HMC and NUTS, vectorised over a batch of chains.

The potential is minus the tempered log density ``log_prior + beta * log_lik``
(beta per chain); the kinetic energy uses a diagonal inverse metric ``minv``
(one row per chain), so momenta are drawn as ``N(0, diag(1 / minv))``.  All
functions work on (n, d) arrays and never loop over chains.  Non-finite values
are expected (a proposal outside the support) and must not raise or warn:
callers run these under ``np.errstate(all="ignore")``.
"""

from __future__ import annotations

import numpy as np

from ..target import Evaluation, Target

__all__ = ["per_chain", "per_chain_metric", "tempered_logp", "tempered_grad",
           "kinetic", "leapfrog"]


def per_chain(value, n: int, name: str, *, integer: bool = False) -> np.ndarray:
    """A scalar or (n,) setting as an (n,) array, checked to be finite and positive."""
    arr = np.asarray(value, dtype=np.int64 if integer else float)
    if arr.ndim == 0:
        arr = np.full(n, arr)
    if arr.shape != (n,):
        raise ValueError(f"{name} must be a scalar or have shape ({n},), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and positive")
    return arr


def per_chain_metric(inv_metric, n: int, d: int) -> np.ndarray:
    """The diagonal inverse metric as an (n, d) array (None means the identity)."""
    if inv_metric is None:
        return np.ones((n, d))
    m = np.asarray(inv_metric, dtype=float)
    if m.shape == (d,):
        m = np.broadcast_to(m, (n, d))
    if m.shape != (n, d):
        raise ValueError(f"inv_metric must have shape ({d},) or ({n}, {d}), got {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m <= 0):
        raise ValueError("inv_metric must be finite and positive")
    return m


def tempered_logp(ev: Evaluation, beta: np.ndarray) -> np.ndarray:
    """``log_prior + beta * log_lik``, ignoring the likelihood at beta == 0; NaN -> -inf."""
    if np.all(beta != 0.0):  # the common case: skip the masking
        out = ev.log_prior + beta * ev.log_lik
    else:
        out = ev.log_prior + np.where(beta == 0.0, 0.0, beta * ev.log_lik)
    return np.where(np.isnan(out), -np.inf, out)


def tempered_grad(ev: Evaluation, beta: np.ndarray) -> np.ndarray:
    """``grad_prior + beta * grad_lik``, ignoring the likelihood at beta == 0."""
    if ev.grad_prior is None or ev.grad_lik is None:
        raise ValueError("this kernel needs gradients; build the state with gradient=True")
    b = beta[:, None]
    if np.all(beta != 0.0):
        return ev.grad_prior + b * ev.grad_lik
    return ev.grad_prior + np.where(b == 0.0, 0.0, b * ev.grad_lik)


def kinetic(p: np.ndarray, minv: np.ndarray) -> np.ndarray:
    """``p' M^-1 p / 2`` per chain."""
    return 0.5 * np.einsum("ij,ij->i", minv * p, p)


def leapfrog(target: Target, q: np.ndarray, p: np.ndarray, grad: np.ndarray,
             eps: np.ndarray, minv: np.ndarray, beta: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Evaluation]:
    """One leapfrog step of signed size ``eps`` (n,) for every chain: one model call.

    Returns the new position, momentum, tempered gradient and the target's
    evaluation at the new position.
    """
    e = eps[:, None]
    p_half = p + (0.5 * e) * grad
    q_new = q + e * (minv * p_half)
    ev = target.evaluate(q_new, gradient=True)
    g_new = tempered_grad(ev, beta)
    p_new = p_half + (0.5 * e) * g_new
    return q_new, p_new, g_new, ev

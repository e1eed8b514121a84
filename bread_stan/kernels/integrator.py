"""Hamiltonian pieces shared by HMC and NUTS, vectorised over a batch of chains.

The potential is minus the tempered log density ``log_prior + beta * log_lik``
(beta per chain); the kinetic energy ``p' M^-1 p / 2`` uses an inverse metric
``minv`` = M^-1 per chain: diagonal, (n, d), or dense, (n, d, d) (Stan's
``diag_e`` and ``dense_e``).  Momenta are drawn from N(0, M) and positions move
with the velocity ``M^-1 p``.  All functions work on batches and never loop over
chains.

Sums over coordinates (kinetic energy, dense metric products, the no-U-turn
criterion) are :func:`row_dot`: ``np.add.reduce`` along the last, contiguous
axis, which numpy computes by pairwise summation in a fixed order.  Dense metrics
are factorised by :func:`bread_stan.linalg.cholesky` (no LAPACK), so a momentum
has the same bits whichever kernels OpenBLAS picks.  The native
kernels of the model library (``csrc/bridge.cpp``) repeat that order exactly,
so that they reproduce these kernels bit for bit.  Non-finite values
are expected (a proposal outside the support) and must not raise or warn:
callers run these under ``np.errstate(all="ignore")``.
"""

from __future__ import annotations

import os

import numpy as np

from ..linalg import cholesky, row_dot
from ..target import Evaluation, Target

__all__ = ["per_chain", "randomised_step_size", "per_chain_metric", "is_dense", "is_shared",
           "distinct_metrics", "take_chains", "row_dot", "velocity",
           "draw_momentum", "tempered_logp", "tempered_grad", "kinetic", "leapfrog",
           "native_default"]


def native_default(native: bool | None) -> bool:
    """Whether a kernel uses a target's native transitions: ``native`` if given, else
    on unless the environment sets ``BREAD_STAN_NATIVE=0``."""
    if native is not None:
        return bool(native)
    return os.environ.get("BREAD_STAN_NATIVE", "1").strip().lower() not in ("0", "false", "no")


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


def check_step_randomisation(jitter: float, rescue_prob: float) -> None:
    """Raise ValueError unless 0 <= jitter < 1 and 0 <= rescue_prob < 1."""
    if not 0.0 <= float(jitter) < 1.0:
        raise ValueError(f"step_size_jitter must be in [0, 1), got {jitter}")
    if not 0.0 <= float(rescue_prob) < 1.0:
        raise ValueError(f"rescue_prob must be in [0, 1), got {rescue_prob}")


def randomised_step_size(rng, chains: np.ndarray, eps: np.ndarray, jitter: float,
                         rescue_prob: float) -> tuple[np.ndarray, np.ndarray]:
    """Each chain's step size for one transition, and which chains were rescued.

    ``eps`` times a jitter factor uniform in [1 - jitter, 1 + jitter] and, with
    probability ``rescue_prob``, a "rescue" factor log-uniform in [1e-3, 1].
    Both are drawn from the chain's uniform stream (jitter first),
    independently of the state, so the kernel stays an exact mixture of exact
    kernels.
    """
    rescued = np.zeros(eps.shape, dtype=bool)
    if jitter > 0:
        eps = eps * (1.0 + jitter * (2.0 * rng.uniform(chains) - 1.0))
    if rescue_prob > 0:
        u = rng.uniform(chains)
        rescued = u < rescue_prob
        # u / r is uniform on [0, 1) given a rescue, so the factor is log-uniform.
        eps = np.where(rescued, eps * 10.0 ** (-3.0 * u / rescue_prob), eps)
    return eps, rescued


def per_chain_metric(inv_metric, n: int, d: int) -> np.ndarray:
    """The inverse metric per chain: diagonal (n, d) or dense (n, d, d).

    Diagonal: (d,) shared or (n, d) per chain; None means the identity.  Dense
    (always three axes, so that it cannot be mistaken for a per-chain diagonal):
    (1, d, d) shared or (n, d, d) per chain, each symmetric positive definite.
    A shared dense metric is checked once and returned as a read-only stride-0
    view (see :func:`is_shared`), never copied per chain.
    """
    if inv_metric is None:
        return np.ones((n, d))
    m = np.asarray(inv_metric, dtype=float)
    if m.ndim == 3:
        if m.shape not in ((1, d, d), (n, d, d)):
            raise ValueError(f"a dense inv_metric must have shape (1, {d}, {d}) or "
                             f"({n}, {d}, {d}), got {m.shape}")
        distinct, _ = distinct_metrics(m)  # a run of one metric (a batch's group) once
        if not np.all(np.isfinite(distinct)) or not np.allclose(distinct,
                                                               np.swapaxes(distinct, 1, 2)):
            raise ValueError("a dense inv_metric must be finite and symmetric")
        if _factorise(distinct) is None:
            raise ValueError("a dense inv_metric must be positive definite")
        return np.broadcast_to(m, (n, d, d))
    if m.shape == (d,):
        m = np.broadcast_to(m, (n, d))
    if m.shape != (n, d):
        raise ValueError(f"inv_metric must have shape ({d},) or ({n}, {d}) (diagonal), or "
                         f"(1, {d}, {d}) or ({n}, {d}, {d}) (dense), got {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m <= 0):
        raise ValueError("inv_metric must be finite and positive")
    return m


_LAST_FACTORS: dict = {}  # the last distinct dense metrics factorised -> their factors


def _factorise(distinct: np.ndarray) -> np.ndarray | None:
    """Cholesky factors (k, d, d) of distinct dense metrics, None if one is not positive
    definite.  The factors of the last metrics seen are kept (read-only): a transition
    checks its metric (:func:`per_chain_metric`) and then draws momenta with it
    (:func:`draw_momentum`), one factorisation for both."""
    key = (distinct.shape, np.ascontiguousarray(distinct).tobytes())
    if key in _LAST_FACTORS:
        return _LAST_FACTORS[key]
    try:
        chol = cholesky(distinct)
        chol.flags.writeable = False
    except np.linalg.LinAlgError:
        chol = None
    _LAST_FACTORS.clear()
    _LAST_FACTORS[key] = chol
    return chol


def is_dense(minv: np.ndarray) -> bool:
    """Whether a per-chain inverse metric is dense (n, d, d) rather than diagonal."""
    return minv.ndim == 3


def is_shared(minv: np.ndarray) -> bool:
    """Whether a per-chain inverse metric is one metric seen by every chain (stride 0)."""
    return minv.shape[0] > 1 and minv.strides[0] == 0


def distinct_metrics(minv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense metrics (n, d, d) as runs of equal ones: the first of each run (k, d, d)
    and each chain's run (n,) (a shared metric, or a batch of groups each with its own
    metric, is k = 1 or a few matrices to factorise, not n)."""
    n = minv.shape[0]
    if n == 1 or is_shared(minv):
        return minv[:1], np.zeros(n, dtype=np.int64)
    starts = np.concatenate([[True], np.any(minv[1:] != minv[:-1], axis=(1, 2))])
    return minv[starts], np.cumsum(starts) - 1


def take_chains(minv: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The inverse metrics of chains ``rows``; a shared metric stays shared (no copy)."""
    if is_shared(minv):
        return np.broadcast_to(minv[0], (len(rows), *minv.shape[1:]))
    return minv[rows]


def velocity(p: np.ndarray, minv: np.ndarray) -> np.ndarray:
    """``M^-1 p`` per chain for momenta ``p`` (n, d), or (n, k, d) for k momenta each."""
    if not is_dense(minv):
        return minv[:, None, :] * p if p.ndim == 3 else minv * p
    if p.ndim == 3:
        return row_dot(minv[:, None, :, :], p[:, :, None, :])
    return row_dot(minv, p[:, None, :])


def draw_momentum(z: np.ndarray, minv: np.ndarray) -> np.ndarray:
    """Momenta ~ N(0, M) from standard normals ``z`` (n, d).

    Diagonal: ``z / sqrt(minv)``.  Dense: with ``M^-1 = L L'`` (Cholesky),
    ``p = L^-T z`` has covariance ``L^-T L^-1 = (L L')^-1 = M``.  Each distinct
    metric is factorised once, and ``L' p = z`` is solved by back substitution
    for all chains together, every chain by the same operations: a chain's
    momentum does not depend on the other chains of its batch.
    """
    if not is_dense(minv):
        return z / np.sqrt(minv)
    distinct, which = distinct_metrics(minv)
    chol = _factorise(distinct)
    if chol is None:
        raise np.linalg.LinAlgError("a dense inv_metric is not positive definite")
    chol = np.broadcast_to(chol, minv.shape) if len(distinct) == 1 else chol[which]
    p = np.array(z, dtype=float)
    for j in range(p.shape[1] - 1, -1, -1):  # column j of L' is row j of L
        p[:, j] /= chol[:, j, j]
        p[:, :j] -= p[:, j, None] * chol[:, j, :j]
    return p


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
    return 0.5 * row_dot(velocity(p, minv), p)


def leapfrog(target: Target, q: np.ndarray, p: np.ndarray, grad: np.ndarray,
             eps: np.ndarray, minv: np.ndarray, beta: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Evaluation]:
    """One leapfrog step of signed size ``eps`` (n,) for every chain: one model call.

    Returns the new position, momentum, tempered gradient and the target's
    evaluation at the new position.
    """
    e = eps[:, None]
    p_half = p + (0.5 * e) * grad
    q_new = q + e * velocity(p_half, minv)
    ev = target.evaluate(q_new, gradient=True)
    g_new = tempered_grad(ev, beta)
    p_new = p_half + (0.5 * e) * g_new
    return q_new, p_new, g_new, ev

"""Linear algebra of metric matrices in a fixed order of operations, without BLAS or LAPACK.

numpy's ``np.cov``, ``np.linalg.cholesky`` and ``np.linalg.eigh`` call OpenBLAS,
which picks its kernels by processor (``OPENBLAS_CORETYPE``); different kernels
round differently, so the same seed gave different chains on one machine
depending on that choice.  The functions here give the same bits whatever
OpenBLAS picks, and whatever the memory layout of their inputs: every sum is
either ``np.add.reduce`` along the last axis of a C-contiguous product (numpy's
pairwise summation, in a fixed order; :func:`row_dot`) or a loop of elementwise
additions in index order (:func:`matmul`), and every other operation is
elementwise (IEEE arithmetic and ``sqrt``, correctly rounded on any processor).
They are for the small matrices of kernel tuning (d up to a few hundred), where
their cost is small next to gradients:

- :func:`covariance`: the sample covariance of draws, as ``np.cov(x, rowvar=False)``.
- :func:`cholesky`: the lower Cholesky factor (Cholesky-Crout, one column at a time),
  and :func:`triangular_inverse`, its inverse.
- :func:`symmetric_eigen`: eigenvalues and eigenvectors of symmetric matrices by
  Jacobi rotations (cyclic, the rotations of one round on disjoint pairs of
  coordinates, round-robin); :func:`symmetric_function` puts ``V f(w) V'`` back
  together, as :func:`spd_log` does for the matrix logarithm.
- :func:`symmetric_exp`: the matrix exponential by scaling and squaring, with
  :func:`matmul`'s products; :func:`interpolate_spd` interpolates between matrices
  in their matrix logarithm with it.

All of them take a batch of matrices (``(..., d, d)``), and each matrix's
result depends on that matrix alone, never on the rest of its batch.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["row_dot", "covariance", "cholesky", "triangular_inverse", "is_positive_definite",
           "symmetric_eigen", "symmetric_function", "spd_log", "matmul", "symmetric_exp",
           "interpolate_spd"]

_MAX_SWEEPS = 60  # Jacobi converges quadratically: about 6-12 sweeps in practice


def row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sum(a * b)`` over the last axis, by numpy's pairwise summation.

    The product is made C-contiguous, so the reduction runs along contiguous
    memory (the pairwise algorithm) whatever the layout of ``a`` and ``b``.
    """
    return np.add.reduce(np.multiply(a, b, order="C"), axis=-1)


def _square(a, name: str = "a") -> np.ndarray:
    a = np.array(a, dtype=float, order="C")  # a private C-contiguous copy
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name} must be a square matrix or a stack of them, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def covariance(x) -> np.ndarray:
    """The sample covariance (d, d) of draws ``x`` (n, d), divisor n - 1 (``np.cov``'s).

    Means and cross-products are sums over the draws in a fixed (pairwise) order;
    the result is exactly symmetric.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"covariance needs draws of shape (n >= 2, d), got {x.shape}")
    cols = np.array(x.T, order="C")  # (d, n): each coordinate's draws contiguous
    n, d = x.shape
    centred = cols - (np.add.reduce(cols, axis=-1) / n)[:, None]
    out = np.empty((d, d))
    for i in range(d):  # x_i * x_j == x_j * x_i exactly, so out is symmetric
        out[i] = row_dot(centred[i], centred)
    return out / (n - 1)


def _cholesky(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower factors of a C-contiguous batch (k, d, d), and which matrices factorised."""
    k, d, _ = a.shape
    chol = np.zeros_like(a)
    ok = np.ones(k, dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(d):
            row = chol[:, j, :j]  # row j of L left of the diagonal
            pivot = a[:, j, j] - row_dot(row, row)
            ok &= pivot > 0  # False also for NaN
            diag = np.sqrt(np.where(ok, pivot, 1.0))
            chol[:, j, j] = diag
            if j + 1 < d:
                below = a[:, j + 1:, j] - row_dot(chol[:, j + 1:, :j], row[:, None, :])
                chol[:, j + 1:, j] = below / diag[:, None]
    return chol, ok


def cholesky(a) -> np.ndarray:
    """The lower Cholesky factor L (``a = L L'``) of a symmetric positive definite
    matrix or stack of them (..., d, d); only the lower triangle of ``a`` is read.

    Raises :class:`numpy.linalg.LinAlgError` (as ``np.linalg.cholesky``) if a
    matrix is not positive definite.
    """
    a = _square(a)
    flat = a.reshape(-1, *a.shape[-2:])
    chol, ok = _cholesky(flat)
    if not np.all(ok):
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    return chol.reshape(a.shape)


def triangular_inverse(chol) -> np.ndarray:
    """The inverse of lower triangular matrices (..., d, d) (as from :func:`cholesky`),
    row by row by forward substitution, each entry's sum in pairwise order; exactly
    lower triangular.

    Column i of the transposed inverse is computed in its first i + 1 entries only: the
    rest are exactly +0 (the inverse is lower triangular, so their sums are of zeros),
    which the zeros the result starts from already are; half the work, the same bits."""
    chol = _square(chol, "chol")
    d = chol.shape[-1]
    inv_t = np.zeros(chol.shape)  # transposed: inv_t[..., j, i] = inverse[..., i, j]
    for i in range(d):
        rhs = np.zeros((*chol.shape[:-2], i + 1))
        rhs[..., i] = 1.0
        inv_t[..., :i + 1, i] = (rhs - row_dot(chol[..., i, None, :i],
                                               inv_t[..., :i + 1, :i])) / chol[..., i, i, None]
    return np.array(np.swapaxes(inv_t, -1, -2), order="C")


def is_positive_definite(a) -> np.ndarray:
    """Whether each symmetric matrix of ``a`` (..., d, d) is positive definite (its
    Cholesky factorisation succeeds): a boolean array of shape ``a.shape[:-2]``."""
    a = _square(a)
    _, ok = _cholesky(a.reshape(-1, *a.shape[-2:]))
    return ok.reshape(a.shape[:-2])


def _rounds(d: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Round-robin pairings of coordinates 0..d-1: each pair (p < q) exactly once per
    sweep, the pairs of a round disjoint (a coordinate d, if d is odd, sits out)."""
    m = d + (d % 2)
    players = list(range(m))
    out = []
    for _ in range(m - 1):
        pairs = [(players[i], players[m - 1 - i]) for i in range(m // 2)]
        pairs = [(min(p, q), max(p, q)) for p, q in pairs if max(p, q) < d]
        out.append((np.array([p for p, _ in pairs]), np.array([q for _, q in pairs])))
        players = [players[0], players[-1], *players[1:-1]]
    return out


def symmetric_eigen(a) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (..., d) and eigenvectors (..., d, d) (as columns: ``a = V diag(w) V'``)
    of symmetric matrices (..., d, d), by cyclic Jacobi rotations.

    Each rotation zeroes one off-diagonal entry (Rutishauser's formulas); an entry
    negligible next to both its diagonal entries (adding 100 times it changes
    neither) is set to zero instead.  Sweeps repeat until every off-diagonal entry
    is exactly zero.  Eigenvalues come in ascending order, as ``np.linalg.eigh``'s;
    the eigenvectors' signs are not normalised.  Only the upper triangle of ``a``
    is read.
    """
    a = _square(a)
    shape = a.shape
    d = shape[-1]
    work = a.reshape(-1, d, d).copy()
    upper = np.triu(np.ones((d, d), dtype=bool), 1)
    work = np.where(upper.T, np.swapaxes(work, 1, 2), work)  # mirror the upper triangle
    k = work.shape[0]
    vecs = np.broadcast_to(np.eye(d), (k, d, d)).copy()
    rounds, lower = _rounds(d), np.tril_indices(d, -1)
    for _ in range(_MAX_SWEEPS):
        if not np.any(work[:, upper]):
            break
        for p, q in rounds:
            _rotate(work, vecs, p, q, lower)
    else:
        raise np.linalg.LinAlgError(f"Jacobi eigenvalue iteration did not converge "
                                    f"in {_MAX_SWEEPS} sweeps")
    vals = np.diagonal(work, axis1=1, axis2=2).copy()
    order = np.argsort(vals, axis=1, kind="stable")
    vals = np.take_along_axis(vals, order, axis=1)
    vecs = np.take_along_axis(vecs, order[:, None, :], axis=2)
    return vals.reshape(shape[:-1]), vecs.reshape(shape)


def _rotate(work: np.ndarray, vecs: np.ndarray, p: np.ndarray, q: np.ndarray,
            lower: tuple[np.ndarray, np.ndarray]) -> None:
    """One round of Jacobi rotations in the planes (p_i, q_i), in place, for every
    matrix of the batch (its own angles; a rotation by zero where skipped)."""
    app, aqq, apq = work[:, p, p], work[:, q, q], work[:, p, q]
    g = 100.0 * np.abs(apq)
    negligible = (np.abs(app) + g == np.abs(app)) & (np.abs(aqq) + g == np.abs(aqq))
    rotate = ~negligible & (apq != 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        theta = 0.5 * (aqq - app) / np.where(rotate, apq, 1.0)
        t = 1.0 / (np.abs(theta) + np.sqrt(1.0 + theta * theta))
        t = np.where(theta < 0, -t, t)
        # theta * theta overflows for |theta| > ~1e154: t -> 1 / (2 theta) there
        t = np.where(np.abs(theta) > 1e150, 0.5 / theta, t)
    t = np.where(rotate, t, 0.0)
    c = 1.0 / np.sqrt(1.0 + t * t)
    s = t * c
    new_pp, new_qq = app - t * apq, aqq + t * apq
    # rows p, q then columns p, q: A <- J' A J with J the rotations of this round
    cr, sr = c[:, :, None], s[:, :, None]
    rp, rq = work[:, p, :], work[:, q, :]
    work[:, p, :], work[:, q, :] = cr * rp - sr * rq, sr * rp + cr * rq
    cc, sc = c[:, None, :], s[:, None, :]
    cp, cq = work[:, :, p], work[:, :, q]
    work[:, :, p], work[:, :, q] = cc * cp - sc * cq, sc * cp + cc * cq
    work[:, p, p], work[:, q, q] = new_pp, new_qq
    work[:, p, q] = work[:, q, p] = 0.0
    # exact symmetry: each entry below the diagonal takes its mirror's value
    work[:, lower[0], lower[1]] = work[:, lower[1], lower[0]]
    vp, vq = vecs[:, :, p], vecs[:, :, q]
    vecs[:, :, p], vecs[:, :, q] = cc * vp - sc * vq, sc * vp + cc * vq


def symmetric_function(vals, vecs) -> np.ndarray:
    """``V diag(vals) V'`` for eigenvalues (..., d) and eigenvectors (..., d, d), in a
    fixed order (pairwise sums over the eigenvalues); exactly symmetric."""
    vals = np.asarray(vals, dtype=float)
    vecs = np.array(vecs, dtype=float, order="C")
    d = vecs.shape[-1]
    out = np.empty(vecs.shape)
    for i in range(d):
        weighted = np.multiply(vecs[..., i, None, :], vals[..., None, :])
        out[..., i, i:] = row_dot(weighted, vecs[..., i:, :])
    rows, cols = np.tril_indices(d, -1)
    out[..., rows, cols] = out[..., cols, rows]
    return out


def spd_log(a) -> np.ndarray:
    """The matrix logarithm of symmetric positive definite matrices (..., d, d)."""
    vals, vecs = symmetric_eigen(a)
    if np.any(vals <= 0):
        raise ValueError("the matrix logarithm needs positive definite matrices")
    return symmetric_function(np.log(vals), vecs)


def matmul(a, b) -> np.ndarray:
    """``a @ b`` for stacks of matrices (..., m, k) and (..., k, n), each entry summed
    over k in order (k = 0, 1, ...) by elementwise operations."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out = a[..., :, 0, None] * b[..., None, 0, :]
    for j in range(1, a.shape[-1]):
        out = out + a[..., :, j, None] * b[..., None, j, :]
    return out


_TAYLOR_DEGREE = 16  # ||x|| <= 1/2: remainder below 0.5**17 / 17! ~ 2e-20, relative
_TAYLOR = [1.0 / math.factorial(j) for j in range(_TAYLOR_DEGREE + 1)]


def symmetric_exp(a) -> np.ndarray:
    """The matrix exponential of symmetric matrices (..., d, d), by scaling and squaring:
    ``exp(a) = exp(a / 2^s)^(2^s)`` with ``s`` the smallest power of two that brings
    the matrix's infinity norm to at most 1/2 (chosen per matrix), the exponential of
    the scaled matrix by its Taylor polynomial of degree 16 (Paterson-Stockmeyer:
    six products).  Exactly symmetric (the upper triangle mirrored).  Only the upper
    triangle of ``a`` is read.
    """
    a = _square(a)
    d = a.shape[-1]
    rows, cols = np.tril_indices(d, -1)
    a[..., rows, cols] = a[..., cols, rows]
    norm = np.max(np.add.reduce(np.abs(a), axis=-1), axis=-1)
    with np.errstate(divide="ignore"):
        s = np.maximum(np.ceil(np.log2(norm / 0.5)), 0.0)
    s = np.where(norm > 0, s, 0.0).astype(np.int64)
    x = a / np.ldexp(1.0, s)[..., None, None]  # exact: a power of two
    eye = np.eye(d)
    x2 = matmul(x, x)
    x3 = matmul(x2, x)
    x4 = matmul(x3, x)
    c = _TAYLOR

    def block(i):  # the terms of degree 4i .. 4i + 3, divided by x^4i
        return c[4 * i] * eye + c[4 * i + 1] * x + c[4 * i + 2] * x2 + c[4 * i + 3] * x3

    power = block(3) + c[16] * x4
    for i in (2, 1, 0):
        power = block(i) + matmul(x4, power)
    power = power.reshape(-1, d, d)  # square only the matrices that need it
    s = s.reshape(-1)
    for step in range(int(np.max(s, initial=0))):
        more = np.flatnonzero(s > step)
        power[more] = matmul(power[more], power[more])
    power[:, rows, cols] = power[:, cols, rows]
    return power.reshape(a.shape)


def interpolate_spd(x: np.ndarray, grid: np.ndarray, logs: np.ndarray) -> np.ndarray:
    """Symmetric positive definite matrices at ``x``, interpolated linearly in their
    matrix logarithm ``logs`` between the ``grid`` points (the dense analogue of
    interpolating a diagonal in log); constant beyond the ends.  The linear algebra
    is this module's, so the result does not depend on BLAS."""
    g = logs.shape[0]
    pos = np.interp(x, grid, np.arange(g, dtype=float))
    lo = np.minimum(np.floor(pos).astype(int), g - 2) if g > 1 else np.zeros(x.size, int)
    frac = (pos - lo)[:, None, None]
    hi = np.minimum(lo + 1, g - 1)
    mixed = (1.0 - frac) * logs[lo] + frac * logs[hi]
    return symmetric_exp(mixed)

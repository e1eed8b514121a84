"""The BLAS-free linear algebra of metric matrices (bread_stan.linalg).

Two properties: the same answers as numpy's BLAS/LAPACK routines to rounding
(relative 1e-12 on matrices with condition number below about 1e3, where both
are accurate to ~1e-14), and the same bits on every call whatever the memory
layout of the input or the rest of its batch (what makes a seed's numbers
independent of the kernels OpenBLAS picks; ``scripts/studies/blas_determinism.py``
checks whole runs under two kernel choices).
"""

import numpy as np
import pytest

from bread_stan import linalg

DIMS = [1, 2, 3, 8, 21]
TOL = 1e-12


def _spd(d: int, seed: int, spread: float = 3.0) -> np.ndarray:
    """A random SPD matrix with eigenvalues from exp(-spread) to exp(spread)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    a = (q * np.exp(np.linspace(-spread, spread, d))) @ q.T
    return np.triu(a) + np.triu(a, 1).T  # exactly symmetric


def _layouts(a: np.ndarray):
    """The same values as C order, Fortran order, and a strided view."""
    big = np.zeros((2 * a.shape[0], *a.shape[1:]))
    big[::2] = a
    return [np.ascontiguousarray(a), np.asfortranarray(a), big[::2]]


def _same_bits(arrays) -> bool:
    first = arrays[0]
    return all(x.shape == first.shape and x.tobytes() == first.tobytes() for x in arrays)


@pytest.mark.parametrize("d", DIMS)
def test_covariance_is_numpys_and_layout_free(d):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((10 * d + 7, d)) @ np.linalg.cholesky(_spd(d, d, 1.0)).T + 3.0
    cov = linalg.covariance(x)
    ref = np.atleast_2d(np.cov(x, rowvar=False))
    assert np.max(np.abs(cov - ref)) <= TOL * np.max(np.abs(ref))
    assert np.array_equal(cov, cov.T)
    assert _same_bits([linalg.covariance(v) for v in _layouts(x)] + [linalg.covariance(x)])


@pytest.mark.parametrize("d", DIMS)
def test_cholesky_is_numpys_and_layout_free(d):
    a = _spd(d, d)
    chol = linalg.cholesky(a)
    ref = np.linalg.cholesky(a)
    assert np.max(np.abs(chol - ref)) <= TOL * np.max(np.abs(ref))
    assert np.array_equal(chol, np.tril(chol))
    batch = np.stack([a, 2.0 * a, _spd(d, d + 100)])
    assert _same_bits([linalg.cholesky(v)[0] for v in _layouts(batch)] + [chol])
    assert linalg.is_positive_definite(batch).all()


@pytest.mark.parametrize("d", DIMS)
def test_triangular_inverse_is_scipys_and_layout_free(d):
    from scipy.linalg import solve_triangular

    chol = np.linalg.cholesky(_spd(d, d))
    inv = linalg.triangular_inverse(chol)
    ref = solve_triangular(chol, np.eye(d), lower=True)
    assert np.max(np.abs(inv - ref)) <= TOL * np.max(np.abs(ref))
    assert np.array_equal(inv, np.tril(inv))
    batch = np.stack([chol, 3.0 * chol])
    assert _same_bits([linalg.triangular_inverse(v)[0] for v in _layouts(batch)] + [inv])


def test_cholesky_refuses_what_is_not_positive_definite():
    a = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        linalg.cholesky(a)
    assert list(linalg.is_positive_definite(np.stack([a, np.eye(2)]))) == [False, True]
    with pytest.raises(ValueError, match="square"):
        linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        linalg.cholesky(np.full((2, 2), np.nan))


@pytest.mark.parametrize("d", DIMS)
def test_symmetric_eigen_is_numpys(d):
    a = _spd(d, d) - np.eye(d)  # eigenvalues of both signs
    vals, vecs = linalg.symmetric_eigen(a)
    scale = np.max(np.abs(a))
    assert np.max(np.abs(vals - np.linalg.eigvalsh(a))) <= TOL * scale
    assert np.all(np.diff(vals) >= 0)
    assert np.max(np.abs(vecs.T @ vecs - np.eye(d))) <= TOL
    assert np.max(np.abs((vecs * vals) @ vecs.T - a)) <= TOL * scale


@pytest.mark.parametrize("d", DIMS)
def test_matrix_log_and_exp_are_numpys(d):
    a = _spd(d, d)
    vals, vecs = np.linalg.eigh(a)
    log_ref = (vecs * np.log(vals)) @ vecs.T
    log_a = linalg.spd_log(a)
    assert np.max(np.abs(log_a - log_ref)) <= TOL * np.max(np.abs(log_ref))
    exp_a = linalg.symmetric_exp(log_ref)
    assert np.max(np.abs(exp_a - a)) <= TOL * np.max(np.abs(a))
    assert np.array_equal(log_a, log_a.T) and np.array_equal(exp_a, exp_a.T)
    assert np.array_equal(linalg.symmetric_exp(np.zeros((d, d))), np.eye(d))
    with pytest.raises(ValueError, match="positive definite"):
        linalg.spd_log(-a)


@pytest.mark.parametrize("d", DIMS)
def test_matmul_is_numpys(d):
    rng = np.random.default_rng(d)
    a, b = rng.standard_normal((2, 4, d, d))
    out = linalg.matmul(a, b)
    assert np.max(np.abs(out - a @ b)) <= TOL * np.max(np.abs(a @ b))
    assert _same_bits([linalg.matmul(x, y) for x, y in zip(_layouts(a), _layouts(b))])


@pytest.mark.parametrize("d", [3, 8])
def test_each_matrix_of_a_batch_is_computed_alone(d):
    """Bit-identical results for a matrix alone, in a batch with others (which need
    more or fewer Jacobi sweeps and squarings), in any layout, and on repeated calls."""
    a = _spd(d, 1)
    others = np.stack([_spd(d, 2, 3.5), np.eye(d), _spd(d, 3, 0.1)])
    batch = np.concatenate([others[:2], a[None], others[2:]])
    for fn in (linalg.spd_log, linalg.symmetric_exp, linalg.cholesky,
               lambda m: linalg.symmetric_eigen(m)[1]):
        alone = fn(a)
        runs = [fn(v)[2] for v in _layouts(batch)] + [fn(a[None])[0], fn(a), fn(a.T)]
        assert _same_bits([alone, *runs])


def _substitution_over_whole_columns(chol: np.ndarray) -> np.ndarray:
    """Forward substitution over every column's d entries: the triangular inverse as
    it was before it skipped the entries known to be zero (issue 42)."""
    d = chol.shape[-1]
    inv_t = np.zeros(chol.shape)
    for i in range(d):
        rhs = np.zeros(chol.shape[:-1])
        rhs[..., i] = 1.0
        inv_t[..., :, i] = (rhs - linalg.row_dot(chol[..., i, None, :i], inv_t[..., :, :i])) \
            / chol[..., i, i, None]
    return np.array(np.swapaxes(inv_t, -1, -2), order="C")


@pytest.mark.parametrize("d", [1, 2, 7, 60])
def test_triangular_inverse_skips_only_exact_zeros(d):
    """Skipping the entries above the diagonal changes no bit (signs of zero included):
    a saved run's Gaussian base, and so its chains, are the same as before."""
    a = np.random.default_rng(d).normal(size=(2, d, d))
    chol = linalg.cholesky(a @ np.swapaxes(a, -1, -2) + 0.1 * np.eye(d))
    assert linalg.triangular_inverse(chol).tobytes() == \
        _substitution_over_whole_columns(chol).tobytes()

"""Dense (full) inverse metrics in HMC and NUTS: exact draws of a correlated
Gaussian stay exact.

The target is a 3-d Gaussian with sds 0.01, 1 and 30 and correlations near -1 /
+0.95 (the shape of an uncentred regression's posterior).  With the inverse
metric equal to its covariance the kernels see a standard normal, so a step size
of 0.6 is stable and most proposals are accepted; with a diagonal metric that
step size is unstable along the narrow direction.  Checks are done in whitened
coordinates ``w = chol(cov)^-1 (x - mean)``, independent standard normals under
the target: z-scores of the means, variances and cross products (|z| < Z_TOL =
4.5, as in test_kernel_mutations) and a two-sample Kolmogorov-Smirnov test per
coordinate against fresh exact draws (p > P_MIN / d).  The negative control
draws momenta with covariance M^-1 instead of M (the easy mistake: ``L z``
instead of ``L^-T z``) and must fail the same checks.
"""

import numpy as np
import pytest
from scipy import stats

from bread_stan.kernels import hmc as hmc_module, nuts as nuts_module
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.integrator import draw_momentum, per_chain_metric
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.kernels.params import concat_params
from bread_stan.rng import ChainRandom
from bread_stan.target import Evaluation

Z_TOL = 4.5
P_MIN = 1e-4


class _CorrelatedGaussian:
    """N(mean, cov) as the prior with a flat likelihood."""

    sd = np.array([0.01, 1.0, 30.0])
    corr = np.array([[1.0, -0.99, 0.5], [-0.99, 1.0, -0.45], [0.5, -0.45, 1.0]])
    mean = np.array([1.0, -2.0, 100.0])
    cov = corr * np.outer(sd, sd)
    chol = np.linalg.cholesky(cov)
    precision = np.linalg.inv(cov)
    dim = 3

    def evaluate(self, points, *, gradient=True):
        r = points - self.mean
        pr = r @ self.precision
        log_prior = -0.5 * np.einsum("ij,ij->i", pr, r)
        log_lik = np.zeros(points.shape[0])
        if not gradient:
            return Evaluation(log_prior, log_lik)
        return Evaluation(log_prior, log_lik, -pr, np.zeros_like(points))

    def sample(self, rng, n):
        return self.mean + rng.standard_normal((n, self.dim)) @ self.chol.T

    def whiten(self, x):
        return np.linalg.solve(self.chol, (x - self.mean).T).T


def _whitened_z(w):
    """z-scores of means, variances and cross products of independent N(0, 1) columns."""
    n, d = w.shape
    z_mean = w.mean(0) * np.sqrt(n)
    z_var = ((w ** 2).mean(0) - 1.0) / np.sqrt(2.0 / n)
    i, j = np.triu_indices(d, 1)
    z_cross = (w[:, i] * w[:, j]).mean(0) * np.sqrt(n)
    return np.concatenate([z_mean, z_var, z_cross])


def _run(kernel, params, n=2000, transitions=8, seed=41):
    target = _CorrelatedGaussian()
    rng = np.random.default_rng(seed)
    state = initial_state(target, target.sample(rng, n))
    chain_rng = ChainRandom.from_seed(seed + 1, n)
    accept = []
    for _ in range(transitions):
        state, info = kernel.step(chain_rng, state, target, np.ones(n), params)
        accept.append(info.accept_stat.mean())
    w = target.whiten(state.position)
    exact = target.whiten(target.sample(rng, n))
    p = [stats.ks_2samp(w[:, j], exact[:, j]).pvalue for j in range(target.dim)]
    return _whitened_z(w), min(p), float(np.mean(accept))


_DENSE = _CorrelatedGaussian.cov[None]
_KERNELS = [(HMC(), HMCParams(step_size=0.6, n_leapfrog=4, inv_metric=_DENSE,
                              step_size_jitter=0.3)),
            (NUTS(), NUTSParams(step_size=0.6, inv_metric=_DENSE, max_depth=5))]


@pytest.mark.parametrize("kernel, params", [  # NUTS in the slow tier (the fast tier's minute)
    _KERNELS[0], pytest.param(*_KERNELS[1], marks=pytest.mark.slow)])
def test_dense_metric_kernels_keep_exact_correlated_draws_exact(kernel, params):
    z, p_min, accept = _run(kernel, params)
    assert np.all(np.abs(z) < Z_TOL), z
    assert p_min > P_MIN / 3, p_min
    assert accept > 0.7, accept


@pytest.mark.parametrize("kernel, params", _KERNELS)
def test_momentum_with_the_inverse_covariance_is_caught(kernel, params, monkeypatch):
    """Negative control: momenta drawn as ``L z`` (covariance M^-1, not M)."""
    def wrong(z, minv):
        return np.einsum("nij,nj->ni", np.linalg.cholesky(minv), z)
    module = hmc_module if isinstance(kernel, HMC) else nuts_module
    monkeypatch.setattr(module, "draw_momentum", wrong)
    z, p_min, _ = _run(kernel, params)
    assert np.max(np.abs(z)) > Z_TOL or p_min < P_MIN / 3


def test_dense_momentum_has_covariance_m():
    """p = L^-T z with M^-1 = L L' has covariance M = cov^-1 (exact check on many draws)."""
    cov = _CorrelatedGaussian.cov / np.outer(_CorrelatedGaussian.sd, _CorrelatedGaussian.sd)
    n = 200_000
    z = np.random.default_rng(3).standard_normal((n, 3))
    p = draw_momentum(z, np.broadcast_to(cov, (n, 3, 3)))
    m = np.linalg.inv(cov)
    emp = p.T @ p / n
    # sd of each entry of the sample second moment: sqrt((m_ij^2 + m_ii m_jj) / n)
    se = np.sqrt((m ** 2 + np.outer(np.diag(m), np.diag(m))) / n)
    assert np.all(np.abs(emp - m) < Z_TOL * se)


def test_dense_metric_shapes_and_errors():
    d, n = 3, 4
    dense = per_chain_metric(np.eye(d)[None] * 2.0, n, d)
    assert dense.shape == (n, d, d)
    # A square 2-d array is a per-chain diagonal when n == d, never a dense metric.
    assert per_chain_metric(np.ones((d, d)), d, d).shape == (d, d)
    with pytest.raises(ValueError, match="symmetric"):
        per_chain_metric(np.array([[[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]]), n, d)
    with pytest.raises(ValueError, match="positive definite"):
        per_chain_metric(-np.eye(d)[None], n, d)
    with pytest.raises(ValueError, match="dense"):
        per_chain_metric(np.ones((2, d, d)), n, d)
    # A diagonal group joins a dense batch as diagonal matrices.
    both = concat_params([(HMCParams(inv_metric=np.eye(d)[None] * 2.0), 2),
                          (HMCParams(inv_metric=np.array([1.0, 2.0, 3.0])), 3)], d)
    assert both.inv_metric.shape == (5, d, d)
    np.testing.assert_array_equal(both.inv_metric[4], np.diag([1.0, 2.0, 3.0]))


def test_momenta_of_a_chain_do_not_depend_on_the_other_metrics_of_its_batch():
    # A batch of two groups (forward and reverse chains), each with its own dense
    # metric: each distinct metric is checked and factorised once, and every chain
    # gets the bits it gets alone with its group's metric shared, which solve L' p = z.
    d = 12
    rng = np.random.default_rng(5)
    a, b = (rng.normal(size=(d, d)) for _ in range(2))
    ma, mb = (x @ x.T / d + 0.1 * np.eye(d) for x in (a, b))
    params = concat_params([(HMCParams(inv_metric=ma[None]), 3),
                            (HMCParams(inv_metric=mb[None]), 2)], d)
    z = rng.normal(size=(5, d))
    both = draw_momentum(z, per_chain_metric(params.inv_metric, 5, d))
    for rows, m in ((slice(0, 3), ma), (slice(3, 5), mb)):
        alone = draw_momentum(z[rows], per_chain_metric(m[None], len(z[rows]), d))
        np.testing.assert_array_equal(both[rows], alone)
    for rows, m in ((slice(0, 3), ma), (slice(3, 5), mb)):
        chol = np.linalg.cholesky(m)
        np.testing.assert_allclose(chol.T @ both[rows].T, z[rows].T, rtol=0, atol=1e-12)
    # every distinct metric is checked, not only the first
    with pytest.raises(ValueError, match="positive definite"):
        per_chain_metric(np.concatenate([np.repeat(ma[None], 3, 0), -np.eye(d)[None]]), 4, d)

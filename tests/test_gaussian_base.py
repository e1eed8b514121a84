"""AIS from a Gaussian base (SPEC 7.1) on the conjugate regression, whose log p(y) is exact.

The Gaussian-base target must give the geometric path q0^(1-b) p~^b with a normalised q0
(checked against scipy), the Laplace fit of a Gaussian posterior must be that posterior
(to finite-difference accuracy), and forward / reverse AIS from the base must sandwich
the closed-form log p(y).  Tolerances as in test_ais.py: 3.5 standard errors (a false
failure is a < 1e-3 event per comparison under a correct implementation).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bread_stan.ais import engine
from bread_stan.ais.betas import sigmoidal
from bread_stan.ais.estimators import consistency_check, log_ml_sandwich
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.ais.gaussian_base import (BaseFitError, GaussianBase, GaussianBaseTarget,
                                         laplace_fit)
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels import HMC, HMCParams
from bread_stan.stan.model import StanModel

N_SE = 3.5


@pytest.fixture(scope="module")
def regression():
    model, _ = simulate_regression(20, 3, correlation=0.6, prior_sd=1.2, noise_sd=0.7, seed=11)
    return model


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


@pytest.mark.parametrize("diagonal", [False, True])
def test_base_density_is_normalised_gaussian_with_exact_draws(diagonal):
    """Dense covariances go through triangular solves, diagonal ones elementwise."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    cov = np.diag([0.3, 2.0, 5.0]) if diagonal else a @ a.T + np.eye(3)
    base = GaussianBase(np.array([1.0, -2.0, 0.5]), cov)
    assert (base._sd is not None) == diagonal
    x = rng.normal(size=(5, 3))
    log_q, grad = base.log_density(x)
    np.testing.assert_allclose(log_q, stats.multivariate_normal(base.mean, base.cov).logpdf(x),
                               rtol=1e-12)
    np.testing.assert_allclose(grad, -(x - base.mean) @ np.linalg.inv(base.cov), rtol=1e-10)
    draws = base.sample(np.random.default_rng(1), 20000)
    np.testing.assert_allclose(draws.mean(axis=0), base.mean, atol=4 * 2.5 / np.sqrt(20000))
    np.testing.assert_allclose(np.cov(draws, rowvar=False), base.cov, atol=0.15)


def test_dense_base_density_matches_the_general_solve_at_d_500():
    """The triangular solves against a general solve with the covariance itself, d = 500
    (the size of the MovieLens base), to 1e-10 relative."""
    rng = np.random.default_rng(3)
    d = 500
    a = rng.normal(size=(d, d)) / np.sqrt(d)
    base = GaussianBase(rng.normal(size=d), a @ a.T + 0.5 * np.eye(d))
    x = base.mean + rng.normal(size=(4, d))
    log_q, grad = base.log_density(x)
    z = (x - base.mean).T
    solved = np.linalg.solve(base.cov, z)  # Sigma^-1 (u - m), (d, n)
    _, log_det = np.linalg.slogdet(base.cov)
    expected = -0.5 * (d * np.log(2 * np.pi) + log_det + np.einsum("ij,ij->j", z, solved))
    np.testing.assert_allclose(log_q, expected, rtol=1e-10)
    np.testing.assert_allclose(grad, -solved.T, rtol=1e-10, atol=1e-10 * np.abs(solved).max())


def test_target_is_the_geometric_path_from_the_base(regression):
    base = GaussianBase(np.zeros(3), 2.0 * np.eye(3))
    target = GaussianBaseTarget(regression, base)
    x = np.random.default_rng(2).normal(size=(4, 3))
    ev, joint = target.evaluate(x), regression.evaluate(x)
    log_q, grad_q = base.log_density(x)
    for beta in (0.0, 0.3, 1.0):
        np.testing.assert_allclose(ev.log_prior + beta * ev.log_lik,
                                   (1 - beta) * log_q + beta * (joint.log_prior + joint.log_lik),
                                   rtol=1e-12)
        np.testing.assert_allclose(
            ev.grad_prior + beta * ev.grad_lik,
            (1 - beta) * grad_q + beta * (joint.grad_prior + joint.grad_lik), atol=1e-10)


def test_laplace_of_a_gaussian_posterior_is_that_posterior_widened(regression):
    mean, cov = regression.tempered_posterior(1.0)
    base = GaussianBase.laplace(regression, np.full(3, 3.0), widen=2.0)
    np.testing.assert_allclose(base.mean, mean, atol=1e-5)
    np.testing.assert_allclose(base.cov, 4.0 * cov, rtol=1e-4)
    fitted = GaussianBase.from_draws(regression.sample_posterior(np.random.default_rng(3), 4000),
                                     widen=1.0)
    np.testing.assert_allclose(fitted.cov, cov, rtol=0.1, atol=0.01)


def test_bad_bases_are_refused_with_a_reason(regression):
    with pytest.raises(BaseFitError, match="positive definite"):
        GaussianBase(np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="widen"):
        GaussianBase.from_draws(np.zeros((5, 2)), widen=0.0)
    with pytest.raises(BaseFitError, match="at least 2 draws"):
        GaussianBase.from_draws(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="coordinates"):
        GaussianBaseTarget(regression, GaussianBase.standard(2))


def _bdmc(target, base, exact_posterior, T, n, seed=1):
    rng = np.random.default_rng(seed)
    schedule = KernelSchedule.constant(sigmoidal(T), HMCParams(0.2, 8))
    f = engine.forward(target, HMC(), schedule, base.sample(rng, n), seed=seed)
    r = engine.reverse(target, HMC(), schedule, exact_posterior, seed=seed)
    return f.log_estimates, r.log_estimates


@pytest.mark.parametrize("fit", ["laplace", "draws"])
def test_ais_from_the_gaussian_base_sandwiches_the_exact_log_ml(regression, fit):
    rng = np.random.default_rng(4)
    post = regression.sample_posterior(rng, 200)
    base = (GaussianBase.laplace(regression, np.zeros(3)) if fit == "laplace"
            else GaussianBase.from_draws(regression.sample_posterior(rng, 500)))
    target = GaussianBaseTarget(regression, base)
    log_ml = regression.log_marginal_likelihood()
    L, U = _bdmc(target, base, post, 20, 200)
    assert L.mean() < log_ml + N_SE * _se(L)
    assert U.mean() > log_ml - N_SE * _se(U)
    assert log_ml_sandwich(L, U).contains(log_ml, n_se=N_SE)
    assert consistency_check(L, U).passed


def test_an_unnormalised_base_fails_the_sandwich(regression):
    """Deliberate break: a base whose density is off by a constant shifts both bounds."""
    base = GaussianBase.laplace(regression, np.zeros(3))

    class Unnormalised(GaussianBase):
        def log_density(self, points):
            log_q, grad = super().log_density(points)
            return log_q + 1.0, grad

    wrong = Unnormalised(base.mean, base.cov)
    post = regression.sample_posterior(np.random.default_rng(5), 200)
    L, U = _bdmc(GaussianBaseTarget(regression, wrong), wrong, post, 20, 200)
    assert not log_ml_sandwich(L, U).contains(regression.log_marginal_likelihood(), n_se=N_SE)


def test_stan_model_without_a_prior_split_sandwiches_the_exact_log_ml(compiled, regression):
    """The Stan joint density (prior_only = 0, Jacobian included) as the path's end."""
    data = {"N": 20, "K": 3, "X": regression.X, "y": regression.y,
            "prior_sd": regression.prior_sd, "noise_sd": regression.noise_sd, "prior_only": 0}
    stan = StanModel(compiled["conjugate_regression"], data, threads=1)
    base = GaussianBase.laplace(stan, np.zeros(3))
    np.testing.assert_allclose(base.mean, regression.tempered_posterior(1.0)[0], atol=1e-5)
    target = GaussianBaseTarget(stan, base)
    post = regression.sample_posterior(np.random.default_rng(6), 100)
    log_ml = regression.log_marginal_likelihood()
    L, U = _bdmc(target, base, post, 20, 100)
    assert log_ml_sandwich(L, U).contains(log_ml, n_se=N_SE)


class _IllConditioned:
    """A Gaussian log density with precision diag(1e8, 1e-8) (condition number 1e16):
    curved downward everywhere, but too unevenly for a double-precision inverse."""

    precision = np.array([1e8, 1e-8])

    def log_density_gradient_batch(self, points, jacobian=True):
        return -0.5 * (points ** 2) @ self.precision, -points * self.precision

    def log_density_batch(self, points, jacobian=True):
        return -0.5 * (points ** 2) @ self.precision


def test_a_mode_with_curvature_beyond_double_precision_is_refused_with_a_reason():
    """Reproduction (issue 42): eight schools centred with 8 pilot chains, L-BFGS ran
    into the funnel's neck and ``np.linalg.inv`` raised LinAlgError "Singular matrix"
    instead of a BaseFitError that the path choice reads as "no Laplace fit"."""
    with pytest.raises(BaseFitError, match="orders of magnitude"):
        laplace_fit(_IllConditioned(), np.array([1e-9, 0.0]))


def test_the_peak_needs_no_inverse_and_is_log_density_at_the_mean_bit_for_bit():
    """The mode comparison of the waypoint's Laplace fits reads ``log_peak`` so that only
    the kept fit is inverted (at d = 1536, logistic_regression_rhs, each inverse took
    minutes: issue 42); the peak must be what ``log_density`` gives at the mean."""
    a = np.random.default_rng(4).normal(size=(5, 5))
    base = GaussianBase(np.arange(5.0), a @ a.T + np.eye(5))
    assert base._inverse is None     # built without L^-1
    peak = base.log_peak
    assert base._inverse is None
    assert peak == float(base.log_density(base.mean[None, :])[0][0])
    assert base._inverse is not None  # log_density made it, once

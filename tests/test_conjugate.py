"""The conjugate regression target: closed forms against identities and finite differences."""

import numpy as np

from bread_stan.exact.conjugate import LinearRegression, simulate_regression
from bread_stan.target import Target
from scipy import stats


def test_log_ml_satisfies_the_candidate_identity():
    """log p(y) = log p(w) + log p(y | w) - log p(w | y) at any w."""
    model, w = simulate_regression(15, 4, prior_sd=1.5, noise_sd=0.8, seed=0)
    assert isinstance(model, Target)
    mean, cov = model.tempered_posterior(1.0)
    pts = np.vstack([w, np.zeros(4), mean + 1.0])
    ev = model.evaluate(pts)
    log_post = stats.multivariate_normal(mean, cov).logpdf(pts)
    np.testing.assert_allclose(ev.log_prior + ev.log_lik - log_post,
                               model.log_marginal_likelihood(), rtol=1e-10)
    np.testing.assert_allclose(ev.log_prior, stats.norm(0, 1.5).logpdf(pts).sum(1))
    np.testing.assert_allclose(ev.log_lik, [stats.norm(model.X @ p, 0.8).logpdf(model.y).sum()
                                            for p in pts])


def test_gradients_match_finite_differences():
    model, _ = simulate_regression(10, 3, seed=1)
    x = np.random.default_rng(0).normal(size=(5, 3))
    ev = model.evaluate(x)
    h = 1e-6
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        up, dn = model.evaluate(x + e, gradient=False), model.evaluate(x - e, gradient=False)
        np.testing.assert_allclose((up.log_prior - dn.log_prior) / (2 * h), ev.grad_prior[:, j],
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose((up.log_lik - dn.log_lik) / (2 * h), ev.grad_lik[:, j],
                                   rtol=1e-5, atol=1e-5)


def test_exact_draws_have_the_right_moments():
    model = LinearRegression(np.eye(2), np.array([1.0, -1.0]), prior_sd=1.0, noise_sd=1.0)
    draws = model.sample_posterior(np.random.default_rng(0), 20000)
    np.testing.assert_allclose(draws.mean(0), [0.5, -0.5], atol=0.03)  # se 0.005
    np.testing.assert_allclose(draws.var(0), [0.5, 0.5], atol=0.03)
    assert model.sample_prior(np.random.default_rng(0), 3).shape == (3, 2)

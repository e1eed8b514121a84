"""The prior/likelihood split of StanTarget."""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.stan.model import StanModel
from bread_stan.stan.tempered import StanTarget
from bread_stan.target import Evaluation, Target, tempered_gradient

from test_model import linear_log_density


@pytest.fixture(scope="module")
def target(compiled, linear_data):
    return StanTarget(compiled["linear_regression"], linear_data, threads=2)


def points(d, n, seed=0):
    return np.random.default_rng(seed).normal(scale=0.7, size=(n, d))


def test_is_a_target(target):
    assert isinstance(target, Target)
    assert target.dim == 6


def test_prior_and_likelihood_match_formulas(target, linear_data):
    u = points(target.dim, 7)
    ev = target.evaluate(u)
    assert isinstance(ev, Evaluation)
    for i in range(len(u)):
        prior = linear_log_density(u[i], linear_data, jacobian=True, prior_only=True)
        full = linear_log_density(u[i], linear_data, jacobian=True)
        assert ev.log_prior[i] == pytest.approx(prior, rel=1e-10)
        assert ev.log_lik[i] == pytest.approx(full - prior, rel=1e-9)


def test_prior_plus_likelihood_is_full_density(compiled, target, linear_data):
    full = StanModel(compiled["linear_regression"], {**linear_data, "prior_only": 0})
    u = points(target.dim, 9, seed=1)
    ev = target.evaluate(u)
    lp, grad = full.log_density_gradient_batch(u)
    np.testing.assert_allclose(ev.log_prior + ev.log_lik, lp, rtol=1e-13)
    np.testing.assert_allclose(ev.grad_prior + ev.grad_lik, grad, rtol=1e-12, atol=1e-12)
    # The prior part is exactly the prior_only = 1 model.
    prior = StanModel(compiled["linear_regression"], {**linear_data, "prior_only": 1})
    lp_prior, grad_prior = prior.log_density_gradient_batch(u)
    np.testing.assert_array_equal(ev.log_prior, lp_prior)
    np.testing.assert_array_equal(ev.grad_prior, grad_prior)


def test_no_gradient_and_thread_independence(compiled, target, linear_data):
    u = points(target.dim, 33, seed=2)
    ev = target.evaluate(u)
    plain = target.evaluate(u, gradient=False)
    assert plain.grad_prior is None and plain.grad_lik is None
    np.testing.assert_array_equal(plain.log_prior, ev.log_prior)
    np.testing.assert_array_equal(plain.log_lik, ev.log_lik)
    one = StanTarget(compiled["linear_regression"], linear_data, threads=1).evaluate(u)
    for name in ("log_prior", "log_lik", "grad_prior", "grad_lik"):
        np.testing.assert_array_equal(getattr(one, name), getattr(ev, name))


def test_log_prior_likelihood_beta(target):
    u = points(target.dim, 4, seed=3)
    ev = target.evaluate(u)
    lp, ll, grad = target.log_prior_likelihood(u, 0.25)
    np.testing.assert_array_equal(grad, tempered_gradient(ev, 0.25))
    beta = np.array([0.0, 0.1, 0.5, 1.0])
    _, _, grad = target.log_prior_likelihood(u, beta)
    np.testing.assert_allclose(grad, ev.grad_prior + beta[:, None] * ev.grad_lik)
    np.testing.assert_array_equal(lp, ev.log_prior)
    np.testing.assert_array_equal(ll, ev.log_lik)


def test_prior_only_in_user_data_is_overridden(compiled, target, linear_data):
    other = StanTarget(compiled["linear_regression"], {**linear_data, "prior_only": 1})
    u = points(target.dim, 3, seed=4)
    np.testing.assert_array_equal(other.evaluate(u).log_lik, target.evaluate(u).log_lik)


def test_unconstrain_helpers(target):
    values = {"sigma_sq": 0.5, "scale_sq": 2.0, "alpha": -0.1, "beta": [0.1, 0.2, 0.3]}
    u = target.param_unconstrain(values)
    np.testing.assert_allclose(u[:2], np.log([0.5, 2.0]))
    np.testing.assert_allclose(target.param_constrain(u),
                               [0.5, 2.0, -0.1, 0.1, 0.2, 0.3], rtol=1e-14)

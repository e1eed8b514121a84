"""Exact tests of StanModel: densities against scipy, gradients, transforms, batching."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bread_stan.stan.model import StanModel, variable_shapes


def linear_log_density(u, data, *, jacobian, prior_only=False):
    """Independent implementation of stan_models/linear_regression.stan on u."""
    sigma_sq, scale_sq = np.exp(u[0]), np.exp(u[1])
    alpha, beta = u[2], u[3:]
    lp = (stats.invgamma.logpdf(sigma_sq, 1, scale=1)
          + stats.invgamma.logpdf(scale_sq, 1, scale=1)
          + stats.norm.logpdf(alpha, 0, np.sqrt(scale_sq))
          + stats.norm.logpdf(beta, 0, np.sqrt(scale_sq)).sum())
    if not prior_only:
        mu = alpha + np.asarray(data["X"]) @ beta
        lp += stats.norm.logpdf(data["y"], mu, np.sqrt(sigma_sq)).sum()
    return lp + (u[0] + u[1] if jacobian else 0.0)


def logistic_log_density(u, data, *, jacobian, prior_only=False):
    """Independent implementation of stan_models/logistic_regression.stan on u."""
    scale_sq = np.exp(u[0])
    alpha, beta = u[1], u[2:]
    lp = (stats.invgamma.logpdf(scale_sq, 1, scale=1)
          + stats.norm.logpdf(alpha, 0, np.sqrt(scale_sq))
          + stats.norm.logpdf(beta, 0, np.sqrt(scale_sq)).sum())
    if not prior_only:
        eta = alpha + np.asarray(data["X"]) @ beta
        y = np.asarray(data["y"])
        lp += np.sum(y * eta - np.logaddexp(0, eta))
    return lp + (u[0] if jacobian else 0.0)


@pytest.fixture(scope="module")
def linear(compiled, linear_data):
    return StanModel(compiled["linear_regression"], {**linear_data, "prior_only": 0})


@pytest.fixture(scope="module")
def logistic(compiled, logistic_data):
    return StanModel(compiled["logistic_regression"], {**logistic_data, "prior_only": 0})


@pytest.fixture(scope="module")
def cases(linear, logistic, linear_data, logistic_data):
    return [(linear, linear_data, linear_log_density),
            (logistic, logistic_data, logistic_log_density)]


def points(model, n, seed=0):
    return np.random.default_rng(seed).normal(scale=0.7, size=(n, model.dim))


def test_names_and_sizes(linear):
    assert linear.param_unc_num() == 6
    assert linear.param_num() == 6
    assert linear.param_names() == ["sigma_sq", "scale_sq", "alpha",
                                    "beta.1", "beta.2", "beta.3"]
    assert linear.param_unc_names() == linear.param_names()
    assert variable_shapes(linear.param_names()) == [
        ("sigma_sq", ()), ("scale_sq", ()), ("alpha", ()), ("beta", (3,))]


@pytest.mark.parametrize("jacobian", [True, False])
def test_log_density_matches_scipy(cases, jacobian):
    for model, data, reference in cases:
        for u in points(model, 5):
            expected = reference(u, data, jacobian=jacobian)
            got = model.log_density(u, jacobian=jacobian)
            assert got == pytest.approx(expected, rel=1e-10, abs=1e-10)


def test_propto_drops_only_constants(linear):
    u1, u2 = points(linear, 2)
    full = linear.log_density(u1) - linear.log_density(u2)
    propto = linear.log_density(u1, propto=True) - linear.log_density(u2, propto=True)
    assert propto == pytest.approx(full, rel=1e-10)
    # propto drops the constant -log(2 pi)/2 of every normal term.
    assert linear.log_density(u1, propto=True) != pytest.approx(linear.log_density(u1))


def test_gradient_matches_finite_differences(cases):
    h = 1e-6
    for model, _, _ in cases:
        for u in points(model, 3, seed=1):
            lp, grad = model.log_density_gradient(u)
            assert lp == model.log_density(u)
            numeric = np.array([(model.log_density(u + h * e) - model.log_density(u - h * e))
                                / (2 * h) for e in np.eye(model.dim)])
            np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)


def test_gradient_out_buffer(linear):
    u = points(linear, 1)[0]
    buffer = np.empty(linear.dim)
    _, grad = linear.log_density_gradient(u, out=buffer)
    assert grad is buffer
    with pytest.raises(ValueError, match="shape"):
        linear.log_density_gradient(u, out=np.empty(linear.dim + 1))
    with pytest.raises(ValueError, match="shape"):
        linear.log_density_gradient(u[:-1])


def test_hessian(linear):
    u = points(linear, 1, seed=3)[0]
    lp, grad, hess = linear.log_density_hessian(u)
    h = 1e-5
    numeric = np.array([(linear.log_density_gradient(u + h * e)[1]
                         - linear.log_density_gradient(u - h * e)[1]) / (2 * h)
                        for e in np.eye(linear.dim)])
    assert lp == linear.log_density(u)
    np.testing.assert_allclose(hess, numeric, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-6, atol=1e-6)


def test_constrain_unconstrain_round_trip(linear):
    u = points(linear, 4, seed=4)
    constrained = linear.param_constrain(u)
    assert constrained.shape == (4, 6)
    np.testing.assert_allclose(constrained[:, :2], np.exp(u[:, :2]), rtol=1e-14)
    values = {"sigma_sq": constrained[:, 0], "scale_sq": constrained[:, 1],
              "alpha": constrained[:, 2], "beta": constrained[:, 3:]}
    np.testing.assert_allclose(linear.param_unconstrain_batch(values), u, rtol=1e-12,
                               atol=1e-12)
    single = {k: v[0] for k, v in values.items()}
    np.testing.assert_allclose(linear.param_unconstrain(single), u[0], rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_array_equal(linear.param_constrain(u[0]), constrained[0])


def test_batched_equals_single_bitwise(cases):
    for model, _, _ in cases:
        u = points(model, 17, seed=5)
        lp, grad = model.log_density_gradient_batch(u, threads=1)
        for i in range(len(u)):
            lp_i, grad_i = model.log_density_gradient(u[i])
            assert lp[i] == lp_i
            np.testing.assert_array_equal(grad[i], grad_i)
        np.testing.assert_array_equal(model.log_density_batch(u, threads=1),
                                      [model.log_density(x) for x in u])
        np.testing.assert_array_equal(model.log_density_batch(u, propto=True, jacobian=False),
                                      [model.log_density(x, propto=True, jacobian=False)
                                       for x in u])


def test_thread_count_does_not_change_results(linear):
    u = points(linear, 101, seed=6)
    lp1, grad1 = linear.log_density_gradient_batch(u, threads=1)
    for threads in (2, 3, 0):
        lp, grad = linear.log_density_gradient_batch(u, threads=threads)
        np.testing.assert_array_equal(lp, lp1)
        np.testing.assert_array_equal(grad, grad1)
    np.testing.assert_array_equal(linear.log_density_batch(u, threads=2),
                                  linear.log_density_batch(u, threads=1))


def test_batch_out_buffers(linear):
    u = points(linear, 5)
    lp, grad = np.empty(5), np.empty((5, linear.dim))
    got = linear.log_density_gradient_batch(u, out=(lp, grad))
    assert got[0] is lp and got[1] is grad
    with pytest.raises(ValueError):
        linear.log_density_gradient_batch(u, out=(np.empty(4), grad))


def test_pypi_bridgestan_loads_our_library(compiled, linear, linear_data):
    bridgestan = pytest.importorskip("bridgestan")
    theirs = bridgestan.StanModel(str(compiled["linear_regression"].library),
                                  linear.data_json, warn=False)
    assert theirs.model_version() == (2, 9, 0)
    assert theirs.param_names() == linear.param_names()
    assert theirs.param_unc_num() == linear.dim
    for u in points(linear, 3, seed=7):
        lp, grad = theirs.log_density_gradient(u, propto=False, jacobian=True)
        lp_ours, grad_ours = linear.log_density_gradient(u)
        assert lp == lp_ours
        np.testing.assert_array_equal(grad, grad_ours)
        assert theirs.log_density(u, propto=True) == linear.log_density(u, propto=True)
        np.testing.assert_array_equal(theirs.param_constrain(u), linear.param_constrain(u))
        np.testing.assert_allclose(theirs.param_unconstrain(theirs.param_constrain(u)), u,
                                   rtol=1e-12, atol=1e-12)
    _, _, hess = theirs.log_density_hessian(u, propto=False)
    np.testing.assert_allclose(hess, linear.log_density_hessian(u)[2])
    rng = theirs.new_rng(seed=1)
    init = theirs.param_initialize(rng, {"alpha": 0.5})
    assert init[2] == pytest.approx(0.5) and np.isfinite(theirs.log_density(init))


def test_data_conversion_accepts_numpy_and_pandas(compiled, logistic, logistic_data):
    pd = pytest.importorskip("pandas")
    data = {"N": np.int64(logistic_data["N"]), "K": logistic_data["K"],
            "X": pd.DataFrame(logistic_data["X"]),
            "y": pd.Series(logistic_data["y"]).astype(float),  # int variable given as floats
            "prior_only": False}
    other = StanModel(compiled["logistic_regression"], data)
    u = points(other, 1)[0]
    assert other.log_density(u) == logistic.log_density(u)


@pytest.fixture(scope="module")
def conjugate(compiled):
    rng = np.random.default_rng(8)
    x = rng.normal(size=(4, 2))
    data = {"N": 4, "K": 2, "X": x, "y": x @ [0.5, -1.0] + 0.3 * rng.normal(size=4),
            "prior_sd": 1.5, "noise_sd": 0.3, "prior_only": 0}
    return StanModel(compiled["conjugate_regression"], data), data


def test_package_exports_the_wrapper():
    import bread_stan
    assert bread_stan.StanModel is StanModel


def test_names_with_transformed_parameters_and_generated_quantities(conjugate):
    model, _ = conjugate
    w = ["w.1", "w.2"]
    assert model.param_names() == w and model.param_num() == 2
    assert model.param_names(include_tp=True) == w + ["w_norm_sq"]
    assert model.param_names(include_gq=True) == w + [f"y_rep.{i}" for i in range(1, 5)]
    assert model.param_names(True, True) == w + ["w_norm_sq"] + [f"y_rep.{i}" for i in range(1, 5)]
    assert model.param_num(True, True) == 7 and model.param_num(include_tp=True) == 3
    assert model.param_unc_names() == w
    assert variable_shapes(model.param_names(True, True)) == [
        ("w", (2,)), ("w_norm_sq", ()), ("y_rep", (4,))]


def test_generated_quantities_are_seeded_and_follow_the_model(conjugate):
    model, data = conjugate
    u = np.random.default_rng(9).normal(size=(3000, 2))
    with pytest.raises(ValueError, match="seed"):
        model.param_constrain(u, include_gq=True)
    tp = model.param_constrain(u, include_tp=True)
    np.testing.assert_array_equal(tp[:, :2], u)
    np.testing.assert_allclose(tp[:, 2], (u ** 2).sum(1), rtol=1e-14)
    a = model.param_constrain(u, True, True, seed=4)
    assert a.shape == (3000, 7)
    np.testing.assert_array_equal(a[:, :3], tp)
    # Row i depends on (seed, i) only: not on threads or on which rows share the call.
    np.testing.assert_array_equal(model.param_constrain(u, True, True, seed=4, threads=1), a)
    np.testing.assert_array_equal(model.param_constrain(u[:10], True, True, seed=4), a[:10])
    np.testing.assert_array_equal(model.param_constrain(u[0], True, True, seed=4), a[0])
    assert not np.array_equal(model.param_constrain(u, True, True, seed=5), a)
    gq_only = model.param_constrain(u, include_gq=True, seed=4)
    np.testing.assert_array_equal(gq_only, np.delete(a, 2, axis=1))
    # y_rep ~ normal(X w, noise_sd): standardised residuals have mean 0 and sd 1
    # (12000 values: standard errors 0.009 and 0.0065, allowed 5 of them).
    z = (a[:, 3:] - u @ np.asarray(data["X"]).T) / data["noise_sd"]
    assert abs(z.mean()) < 0.045 and abs(z.std() - 1) < 0.033

"""Simulator: reproducibility, independence of batching, prior moments, helpers."""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.errors import StanDataError
from bread_stan.stan.simulator import Simulator, draw_at, split_draw, to_unconstrained
from bread_stan.stan.tempered import StanTarget

HYPER = {"sigma_sq": 0.5, "scale_sq": 2.0}


@pytest.fixture(scope="module")
def covariates(linear_data):
    return {k: linear_data[k] for k in ("N", "K", "X")}


@pytest.fixture(scope="module")
def simulator(compiled, covariates):
    return Simulator(compiled["linear_regression_sim"], covariates, batch_size=64)


def assert_close_to(sample, mean, sd, *, z=5.0):
    """Sample mean within z standard errors of ``mean`` (Monte Carlo error sd/sqrt(n))."""
    sample = np.asarray(sample, dtype=float)
    se = sd / np.sqrt(sample.size)
    assert abs(sample.mean() - mean) < z * se, (sample.mean(), mean, se)


def test_shapes_and_hyperparameters(simulator, covariates):
    assert simulator.hyperparameters == ["scale_sq", "sigma_sq"]
    draws = simulator.simulate(5, seed=1)
    assert set(draws) == {"sigma_sq", "scale_sq", "alpha", "beta", "y"}
    assert draws["beta"].shape == (5, covariates["K"])
    assert draws["y"].shape == (5, covariates["N"])
    assert draws["alpha"].shape == (5,)


def test_reproducible_and_independent_of_batching(compiled, simulator, covariates):
    a = simulator.simulate(150, seed=7)
    b = simulator.simulate(150, seed=7, threads=1)
    other = Simulator(compiled["linear_regression_sim"], covariates, batch_size=7, threads=2)
    c = other.simulate(150, seed=7)
    tail = simulator.simulate(50, seed=7, first=100)
    different = simulator.simulate(150, seed=8)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        np.testing.assert_array_equal(a[name], c[name])
        np.testing.assert_array_equal(a[name][100:], tail[name])
        assert not np.array_equal(a[name], different[name])


def test_moments_with_given_hyperparameters(compiled, covariates):
    sim = Simulator(compiled["linear_regression_sim"], covariates, hyper=HYPER)
    n = 4000
    draws = sim.simulate(n, seed=11)
    np.testing.assert_array_equal(draws["sigma_sq"], HYPER["sigma_sq"])
    scale = np.sqrt(HYPER["scale_sq"])
    # alpha, beta_k ~ normal(0, scale): mean 0 (sd scale); alpha^2 has mean
    # scale^2 and sd sqrt(2) scale^2.
    assert_close_to(draws["alpha"], 0.0, scale)
    assert_close_to(draws["beta"], 0.0, scale)
    assert_close_to(draws["alpha"] ** 2, scale ** 2, np.sqrt(2) * scale ** 2)
    assert_close_to(draws["beta"][:, 0] ** 2, scale ** 2, np.sqrt(2) * scale ** 2)
    # Standardised residuals of y given the draw are standard normal.
    mu = draws["alpha"][:, None] + draws["beta"] @ np.asarray(covariates["X"]).T
    z = (draws["y"] - mu) / np.sqrt(HYPER["sigma_sq"])
    assert_close_to(z, 0.0, 1.0)
    assert_close_to(z ** 2, 1.0, np.sqrt(2))


def test_moments_with_drawn_hyperparameters(simulator):
    n = 4000
    draws = simulator.simulate(n, seed=12)
    # sigma_sq ~ inv_gamma(1, 1): P(sigma_sq < 1) = exp(-1); binomial sd.
    p = np.exp(-1)
    for name in ("sigma_sq", "scale_sq"):
        assert_close_to(draws[name] < 1.0, p, np.sqrt(p * (1 - p)))
    # alpha / scale is standard normal whatever the scale.
    assert_close_to(draws["alpha"] / np.sqrt(draws["scale_sq"]), 0.0, 1.0)
    assert_close_to(draws["alpha"] ** 2 / draws["scale_sq"], 1.0, np.sqrt(2))


def test_moment_check_catches_a_wrong_prior(simulator):
    """Negative case: the same check must reject a wrong variance."""
    draws = simulator.simulate(4000, seed=13)
    with pytest.raises(AssertionError):
        assert_close_to(draws["alpha"] ** 2 / draws["scale_sq"], 1.3, np.sqrt(2))


def test_a_draw_an_rng_function_refuses_is_named_with_the_likely_cause(compiled, covariates):
    """Finite covariates of 1e308 make alpha + X * beta overflow, as a vague prior's draws
    do (posteriordb's surgical model: inv_gamma(0.001, 0.001) gives sigma = inf)."""
    huge = Simulator(compiled["linear_regression_sim"],
                     {**covariates, "X": np.full_like(covariates["X"], 1e308)})
    with pytest.raises(StanDataError, match=r"simulation failed .*normal_rng.* is -?(inf|nan)"
                                            r".*an _rng function refused a value the "
                                            r"simulator drew"):
        huge.simulate(20, seed=0)


def test_a_simulator_draw_outside_the_model_constraints_is_named(compiled, simulator,
                                                                 linear_data):
    """A simulator drawing sigma_sq < 0 for a <lower=0> parameter (as one forgetting abs
    for a half-normal, or sort_asc for an ordered vector) is told so, with the fix."""
    from bread_stan.workflows.problem import simulate_problem

    draw = draw_at(simulator.simulate(1, seed=3), 0)
    draw["sigma_sq"] = np.float64(-1.0)
    with pytest.raises(StanDataError, match=r"the simulator drew parameters outside the "
                                            r"model's constraints .*variable is -1.*sort_asc"):
        simulate_problem("lr", compiled["linear_regression"], simulator, linear_data, 0, 1,
                          truth_draw=draw)


def test_hyper_must_name_every_hyperparameter(compiled, covariates):
    with pytest.raises(StanDataError, match="missing"):
        Simulator(compiled["linear_regression_sim"], covariates, hyper={"sigma_sq": 1.0})
    with pytest.raises(StanDataError, match="unknown"):
        Simulator(compiled["linear_regression_sim"], covariates,
                  hyper={**HYPER, "tau": 1.0})


def test_split_draw_and_unconstrain(compiled, simulator, linear_data):
    draws = simulator.simulate(6, seed=3)
    target = StanTarget(compiled["linear_regression"], linear_data)
    params, data = split_draw(draws, target)
    assert set(params) == {"sigma_sq", "scale_sq", "alpha", "beta"}
    assert set(data) == {"y"}
    u = to_unconstrained(params, target)
    assert u.shape == (6, target.dim)
    constrained = target.param_constrain(u)
    np.testing.assert_allclose(constrained[:, 3:], params["beta"], rtol=1e-12)
    np.testing.assert_allclose(constrained[:, 0], params["sigma_sq"], rtol=1e-12)
    one_params, one_data = split_draw(draw_at(draws, 2), target)
    np.testing.assert_allclose(to_unconstrained(one_params, target, batched=False), u[2],
                               rtol=1e-12)
    # The simulated data set replaces y and gives a finite likelihood there.
    sim_target = StanTarget(compiled["linear_regression"], {**linear_data, **one_data})
    assert np.isfinite(sim_target.evaluate(u[2:3]).log_lik).all()

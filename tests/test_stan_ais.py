"""AIS through a compiled Stan model whose log p(y) is known: tests/stan/conjugate_regression.stan.

The program is the conjugate case of :class:`bread_stan.exact.conjugate.LinearRegression`
(known noise sd, w ~ normal(0, prior_sd)); its unconstrained space is w itself,
so the closed-form prior and posterior give exact starting draws and log p(y)
is exact.  First the Stan target must agree with the numpy one (log prior, log
likelihood and both gradients, to rounding); then forward and reverse AIS on
the Stan target must bracket the exact log p(y), and the run must not depend on
the thread count.

Tolerances (as in test_ais.py): a direction's mean estimate is compared with
log p(y) allowing 3.5 standard errors (chain-to-chain sd / sqrt(n)); the
log-ML sandwich is widened by 3.5 delta-method standard errors; the gap must
shrink by more than 3.5 standard errors of the difference.  With fixed seeds
the outcomes are deterministic; under a correct implementation each comparison
would fail by chance with probability below 1e-3.
"""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.ais import engine as ais
from bread_stan.ais import runs
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.ais.estimators import consistency_check, log_ml_sandwich
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.kernels import HMC, HMCParams, NUTS, NUTSParams
from bread_stan.ais.betas import ScheduleSpec, sigmoidal
from bread_stan.stan.tempered import StanTarget

N_SE = 3.5


@pytest.fixture(scope="module")
def problem(compiled):
    numpy_model, w_true = simulate_regression(20, 3, correlation=0.6, prior_sd=1.2,
                                              noise_sd=0.7, seed=11)
    data = {"N": 20, "K": 3, "X": numpy_model.X, "y": numpy_model.y,
            "prior_sd": numpy_model.prior_sd, "noise_sd": numpy_model.noise_sd}
    rng = np.random.default_rng(12)
    return {"numpy": numpy_model, "data": data, "w_true": w_true,
            "stan": StanTarget(compiled["conjugate_regression"], data, threads=2),
            "log_ml": numpy_model.log_marginal_likelihood(),
            "prior": numpy_model.sample_prior(rng, 200),
            "post": numpy_model.sample_posterior(rng, 200)}


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


def test_stan_target_agrees_with_the_numpy_target(problem):
    stan, numpy_model = problem["stan"], problem["numpy"]
    assert stan.dim == 3 and stan.param_unc_names() == ["w.1", "w.2", "w.3"]
    u = np.vstack([problem["prior"][:10], problem["post"][:10], 5 * problem["prior"][:3]])
    got, want = stan.evaluate(u), numpy_model.evaluate(u)
    np.testing.assert_allclose(got.log_prior, want.log_prior, rtol=1e-12)
    np.testing.assert_allclose(got.log_lik, want.log_lik, rtol=1e-11)
    np.testing.assert_allclose(got.grad_prior, want.grad_prior, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.grad_lik, want.grad_lik, rtol=1e-10, atol=1e-10)
    # The candidate identity through Stan: log p(y) = log prior + log lik - log posterior.
    from scipy import stats
    mean, cov = numpy_model.tempered_posterior(1.0)
    log_post = stats.multivariate_normal(mean, cov).logpdf(u)
    np.testing.assert_allclose(got.log_prior + got.log_lik - log_post, problem["log_ml"],
                               rtol=1e-10)


@pytest.mark.parametrize("kernel, params, n", [(HMC(), HMCParams(0.15, 8), 200),
                                               (NUTS(), NUTSParams(0.2), 120)])
def test_stan_bounds_sandwich_exact_log_ml_and_gap_shrinks(problem, kernel, params, n):
    target, log_ml = problem["stan"], problem["log_ml"]
    gaps = []
    for T in (5, 100):
        ks = KernelSchedule.constant(sigmoidal(T), params)
        f = ais.forward(target, kernel, ks, problem["prior"][:n], seed=1)
        r = ais.reverse(target, kernel, ks, problem["post"][:n], seed=1)
        L, U = f.log_estimates, r.log_estimates
        assert np.all(np.isfinite(L)) and np.all(np.isfinite(U))
        assert L.mean() < log_ml + N_SE * _se(L)
        assert U.mean() > log_ml - N_SE * _se(U)
        assert log_ml_sandwich(L, U).contains(log_ml, n_se=N_SE)
        assert consistency_check(L, U).passed
        gaps.append((U.mean() - L.mean(), np.hypot(_se(L), _se(U))))
    (g_short, se_short), (g_long, se_long) = gaps
    assert g_long + N_SE * se_long < g_short - N_SE * se_short
    assert g_long < 0.5 * g_short


def test_draws_that_are_not_from_the_posterior_fail_the_checks(problem):
    """Negative control: reverse chains started from the posterior given -y (what a
    simulator that disagrees with the model program would hand over) must fail."""
    from bread_stan.exact.conjugate import LinearRegression
    m = problem["numpy"]
    wrong = LinearRegression(m.X, -m.y, m.prior_sd, m.noise_sd)
    bad = wrong.sample_posterior(np.random.default_rng(3), 200)
    ks = KernelSchedule.constant(sigmoidal(5), HMCParams(0.15, 8))
    L = ais.forward(problem["stan"], HMC(), ks, problem["prior"], seed=1).log_estimates
    U = ais.reverse(problem["stan"], HMC(), ks, bad, seed=1).log_estimates
    # measured: mean U sits about 33 standard errors below log p(y)
    assert U.mean() < problem["log_ml"] - N_SE * _se(U)
    assert not log_ml_sandwich(L, U).contains(problem["log_ml"], n_se=N_SE)
    assert not consistency_check(L, U).passed


def _run(target, seed, kernel=NUTS(), params=NUTSParams(0.25), problem=None):
    config = ais.RunConfig(steps=(15,), schedule=ScheduleSpec("sigmoid"), increment_blocks=5)
    return runs.run(target, kernel, problem["prior"][:24], problem["post"][:24], seed=seed,
                   path=params, config=config)


@pytest.mark.parametrize("kernel, params", [(HMC(), HMCParams(0.2, 6)), (NUTS(), NUTSParams(0.25))])
def test_one_and_two_threads_give_identical_runs(compiled, problem, kernel, params):
    """Bit for bit: estimates, running estimates and final states, forward and reverse."""
    one = StanTarget(compiled["conjugate_regression"], problem["data"], threads=1)
    a = _run(one, 3, kernel, params, problem).steps[0]
    b = _run(problem["stan"], 3, kernel, params, problem).steps[0]
    for x, y in ((a.forward, b.forward), (a.reverse, b.reverse)):
        np.testing.assert_array_equal(x.log_estimates, y.log_estimates)
        np.testing.assert_array_equal(x.cumulative, y.cumulative)
        assert x.n_grad == y.n_grad
    np.testing.assert_array_equal(a.draws["unconstrained"],
                                  b.draws["unconstrained"])
    # and the final reverse states too (not kept by run): through reverse() directly
    ks = KernelSchedule.constant(sigmoidal(15), params)
    r1 = ais.reverse(one, kernel, ks, problem["post"][:24], seed=3)
    r2 = ais.reverse(problem["stan"], kernel, ks, problem["post"][:24], seed=3)
    np.testing.assert_array_equal(r1.final_positions, r2.final_positions)
    np.testing.assert_array_equal(r1.log_weights, r2.log_weights)


def test_same_seed_same_numbers_through_stan(problem):
    a = _run(problem["stan"], 5, problem=problem).steps[0]
    b = _run(problem["stan"], 5, problem=problem).steps[0]
    c = _run(problem["stan"], 6, problem=problem).steps[0]
    np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
    np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    np.testing.assert_array_equal(a.draws["unconstrained"], b.draws["unconstrained"])
    assert not np.array_equal(a.forward.log_estimates, c.forward.log_estimates)

"""Independent Metropolis-Hastings (bread_stan.kernels.imh) and its frozen proposals
(bread_stan.ais.imh_tuning): exactness, known answers, seed and batch invariance.

1. Exact: the proposal interpolated in natural parameters along beta is the exact
   tempered posterior of a Gaussian prior and likelihood, given the moments at two
   betas; the pilot's result survives JSON.
2. Statistical: 4,000 chains started from the exact tempered posterior of a 2-d
   Gaussian (beta = 0.5) keep its mean and covariance after 10 IMH steps with a
   deliberately poor proposal (offset by 1 sd, too narrow in one direction and too
   wide in the other, t with 5 degrees of freedom); each moment within 4 standard
   errors (the draws are exact at the start, so the standard error is that of 4,000
   independent draws; a false failure is a < 1e-4 event per comparison).  The same
   check catches the kernel without the proposal's density in the MH ratio.
3. Known answer: SMC with IMH on the conjugate regression gives L below and U above
   the closed-form log p(y) on average, and the sandwich of log-mean-exps contains it
   (4 standard errors of the run-to-run spread).
4. Seeds and batches: forward and conditional runs give the same numbers whole or
   split into blocks of runs, and the forward runs the same alone or sharing a batch
   with the retained reverse chains (where each lane has its own temperature's
   proposal).
"""

import numpy as np
import pytest
from scipy.special import logsumexp

from bread_stan.ais import engine, smc
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.ais.imh_tuning import IMHTuningConfig, TunedIMH, tune_imh
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels import imh as imh_module
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.imh import IMH, IMHParams
from bread_stan.rng import ChainRandom

N_SE = 4.0


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


@pytest.fixture(scope="module")
def regression():
    return simulate_regression(20, 3, correlation=0.6, noise_sd=0.7, seed=11)


@pytest.fixture(scope="module")
def tuned(regression):
    model, _ = regression
    return tune_imh(model, model.sample_prior(np.random.default_rng(1), 200), seed=2)


# ------------------------------------------------------------------------- 1. exact


def test_natural_parameter_interpolation_is_exact_for_a_gaussian(regression):
    model, _ = regression
    betas = np.array([0.0, 0.4, 1.0])
    moments = [model.tempered_posterior(b) for b in betas]
    tuned = TunedIMH(betas, np.stack([m for m, _ in moments]), np.stack([c for _, c in moments]),
                     np.ones(3), np.ones(3), np.array([0, 2, 2]), None, 1.0)
    for b in (0.0, 0.1, 0.4, 0.77, 1.0):
        p = tuned.params(b)
        mean, cov = model.tempered_posterior(b)
        np.testing.assert_allclose(p.mean, mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(p.scale @ p.scale.T, cov, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(p.whiten @ p.scale, np.eye(3), atol=1e-12)
    # A t proposal with df = 10 widened 1.5 times has covariance 1.5^2 times the estimate.
    wide = TunedIMH(betas, tuned.means, tuned.covs, np.ones(3), np.ones(3), np.ones(3), 10, 1.5)
    p = wide.params(0.77)
    np.testing.assert_allclose(p.scale @ p.scale.T * 10 / 8,
                               2.25 * model.tempered_posterior(0.77)[1], rtol=1e-10)


def test_pilot_result_round_trips_through_json(tuned, tmp_path):
    tuned.save(tmp_path / "tuning.json")
    back = TunedIMH.load(tmp_path / "tuning.json")
    assert back.steps == tuned.steps and back.df == tuned.df
    for b in (0.0, 0.003, 0.5, 1.0):
        a, c = tuned.params(b), back.params(b)
        assert np.array_equal(a.mean, c.mean) and np.array_equal(a.scale, c.scale)


def test_pilot_ends_at_the_posterior(regression, tuned):
    model, _ = regression
    assert tuned.grid_betas[0] == 0.0 and tuned.grid_betas[-1] == 1.0
    mean, cov = model.tempered_posterior(1.0)
    sd = np.sqrt(np.diag(cov))
    # 200 pilot particles: the mean within 4 sd / sqrt(200) * 2 (resampling doubles the
    # variance at most), the sds within 30%.
    assert np.all(np.abs(tuned.means[-1] - mean) < 8 * sd / np.sqrt(200))
    assert np.all(np.abs(np.sqrt(np.diag(tuned.covs[-1])) / sd - 1) < 0.3)
    assert 1 <= tuned.steps <= IMHTuningConfig().max_steps


# ------------------------------------------------------------------ 2. invariance


def _moments_after_steps(model, n=4000, steps=10, beta=0.5, seed=0):
    mean, cov = model.tempered_posterior(beta)
    sd = np.sqrt(np.diag(cov))
    # Offset by one sd, too narrow along the first axis, too wide along the second.
    proposal = IMHParams.from_covariance(mean + sd, np.diag(sd ** 2 * np.array([0.3, 4.0])), 5)
    x = model.sample_posterior(np.random.default_rng(seed), n, beta)
    state = initial_state(model, x, gradient=False)
    rng = ChainRandom.from_seed(seed, n)
    for _ in range(steps):
        state, info = IMH().step(rng, state, model, np.full(n, beta), proposal)
    y = state.position
    z = (y - mean) / sd
    corr = cov[0, 1] / (sd[0] * sd[1])
    # Standard errors of n exact draws: mean 1 (standardised), variance sqrt(2),
    # cross moment sqrt(1 + corr^2).
    return (np.abs(z.mean(axis=0)) / (1 / np.sqrt(n)),
            np.abs(z.var(axis=0, ddof=1) - 1) / np.sqrt(2 / n),
            abs(np.mean(z[:, 0] * z[:, 1]) - corr) / np.sqrt((1 + corr ** 2) / n),
            float(np.mean(info.accept_stat)))


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_imh_keeps_a_tempered_gaussian_invariant():
    model, _ = simulate_regression(10, 2, correlation=0.5, seed=3)
    mean_err, var_err, cross_err, accept = _moments_after_steps(model)
    assert 0.05 < accept < 0.95  # the chains do move
    assert np.all(mean_err < N_SE) and np.all(var_err < N_SE) and cross_err < N_SE, \
        (mean_err, var_err, cross_err)


def test_imh_without_the_proposal_density_is_caught(monkeypatch):
    model, _ = simulate_regression(10, 2, correlation=0.5, seed=3)
    monkeypatch.setattr(imh_module, "_log_q", lambda r2, df, d: np.zeros_like(r2))
    mean_err, var_err, cross_err, _ = _moments_after_steps(model)
    assert max(np.max(mean_err), np.max(var_err), cross_err) > N_SE


# ---------------------------------------------------------------- 3. known answer


def _smc_imh(regression, tuned, n=60, P=8, T=20, seed=5):
    model, w = regression
    prior = model.sample_prior(np.random.default_rng(seed), n * (2 * P - 1))
    config = engine.RunConfig(steps=(T,), schedule=ScheduleSpec("adaptive"),
                              increment_blocks=None)
    res = runs.run(model, IMH(), prior.reshape(n, 2 * P - 1, -1), w, seed=seed, path=tuned,
                  config=config, resampling=smc.SMCConfig(particles=P))
    return res.steps[0].forward.log_estimates, res.steps[0].reverse.log_estimates


def test_smc_with_imh_sandwiches_the_closed_form_log_ml(regression, tuned):
    model, _ = regression
    log_ml = model.log_marginal_likelihood()
    L, U = _smc_imh(regression, tuned)
    assert L.mean() < log_ml + N_SE * _se(L)
    assert U.mean() > log_ml - N_SE * _se(U)
    lower = float(logsumexp(L) - np.log(L.size))
    upper = float(-(logsumexp(-U) - np.log(U.size)))
    assert lower - N_SE * _se(L) < log_ml < upper + N_SE * _se(U), (lower, log_ml, upper)
    # And the estimate is accurate: a few particles, T = 20, within 0.1 nat.
    assert abs(lower - log_ml) < 0.1 and abs(upper - log_ml) < 0.1


# ------------------------------------------------------------- 4. seeds, batches


def test_same_numbers_whole_split_or_sharing_a_batch(regression, tuned):
    model, w = regression
    P, n, T = 4, 6, 12
    prior = model.sample_prior(np.random.default_rng(9), n * (2 * P - 1)).reshape(n, 2 * P - 1, 3)
    config = engine.RunConfig(steps=(T,), schedule=ScheduleSpec("adaptive"),
                              increment_blocks=None)
    betas, schedule, _ = engine.step_schedule(config, tuned, T)
    at = smc.SMCConfig(particles=P).steps_for(betas, tuned)
    assert at.size > 0  # resampling happens
    whole = smc.forward_smc(model, IMH(), schedule, prior[:, :P], seed=4, resample_at=at)
    parts = [smc.forward_smc(model, IMH(), schedule, prior[lo:hi, :P], seed=4, resample_at=at,
                             first_run=lo) for lo, hi in ((0, 2), (2, 6))]
    assert np.array_equal(whole.log_estimates,
                          np.concatenate([p.log_estimates for p in parts]))
    x_star = np.repeat(w[None], n, axis=0)
    cond = smc.conditional_smc(model, IMH(), schedule, x_star, prior[:, P:], seed=4,
                               resample_at=at)
    cparts = [smc.conditional_smc(model, IMH(), schedule, x_star[lo:hi], prior[lo:hi, P:],
                                  seed=4, resample_at=at, first_run=lo)
              for lo, hi in ((0, 3), (3, 6))]
    assert np.array_equal(cond.log_estimates,
                          np.concatenate([p.log_estimates for p in cparts]))
    # run() batches the forward particles with the retained reverse chains.
    res = runs.run(model, IMH(), prior, w, seed=4, path=tuned, config=config,
                  resampling=smc.SMCConfig(particles=P))
    assert np.array_equal(res.steps[0].forward.log_estimates, whole.log_estimates)
    assert np.array_equal(res.steps[0].reverse.log_estimates, cond.log_estimates)
    assert res.steps[0].forward.wall_time > 0  # no gradients: time is split by rows


def test_ais_with_imh_sandwiches_the_closed_form_log_ml(regression, tuned):
    """The engine takes the IMH kernel as it takes HMC: AIS chains, no resampling."""
    model, w = regression
    log_ml = model.log_marginal_likelihood()
    prior = model.sample_prior(np.random.default_rng(7), 200)
    config = engine.RunConfig(steps=(30,), schedule=ScheduleSpec("adaptive"),
                              increment_blocks=None)
    res = runs.run(model, IMH(), prior, w, seed=8, path=tuned, config=config)
    L, U = res.steps[0].forward.log_estimates, res.steps[0].reverse.log_estimates
    assert L.mean() < log_ml + N_SE * _se(L) and U.mean() > log_ml - N_SE * _se(U)
    lower, upper = logsumexp(L) - np.log(L.size), -(logsumexp(-U) - np.log(U.size))
    assert lower - N_SE * _se(L) < log_ml < upper + N_SE * _se(U), (lower, log_ml, upper)

"""Sequential Monte Carlo both ways (bread_stan.ais.smc): exactness and known answers.

1. With one particle (nothing to resample) SMC is AIS: identical numbers, bit for bit.
2. On the 7 x 7 grid with two particles resampled at every step, the forward and the
   conditional particle systems are Markov chains on pairs of cells (2,401 states), so
   E[L], E[U] and the distribution of the output are computed exactly here by an
   independent implementation (dense transition matrices written in this file).
   The exact Jeffreys divergence of the output lies below the exact E[B]; the sampled
   implementation reproduces the exact E[L], E[U], E[exp(L - log Z)] = 1 and
   E[exp(log Z - U)] = 1 (Z-hat unbiased for Z, 1/Z-hat of the conditional run for 1/Z)
   and the output's probabilities.
3. On the conjugate regression (closed-form log p(y)) the SMC sandwich contains
   log p(y) and the bound falls as P grows at fixed T.

Tolerances: sampled means are compared with exact values allowing 4 standard errors
(run-to-run sd / sqrt(n)); with fixed seeds the tests are deterministic, and a false
failure under a correct implementation is a < 1e-4 event per comparison.  The
output's distribution is compared cell by cell by a chi-square statistic against its
99.99% quantile.
"""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from bread_stan.ais import engine, smc
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec, sigmoidal
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.exact.grid import GridTarget, grid_log_f, positions_to_cells
from bread_stan.exact.oracle import linear_schedule
from bread_stan.kernels.grid_mh import GridMetropolis
from bread_stan.kernels.hmc import HMC, HMCParams

N_SE = 4.0


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


@pytest.fixture(scope="module")
def regression():
    model, w = simulate_regression(20, 3, correlation=0.6, noise_sd=0.7, seed=11)
    return model, w


# ---------------------------------------------------------------- 1. P = 1 is AIS


def test_one_particle_is_ais_bit_for_bit(regression):
    model, w = regression
    prior = model.sample_prior(np.random.default_rng(0), 12)
    params = HMCParams(0.15, 8)
    config = engine.RunConfig(steps=(7, 30), schedule=ScheduleSpec("sigmoid"), increment_blocks=4)
    ais = runs.run(model, HMC(), prior, w, seed=3, path=params, config=config)
    one = runs.run(model, HMC(), prior, w, seed=3, path=params, config=config,
                  resampling=smc.SMCConfig(particles=1))
    for a, s in zip(ais.steps, one.steps):
        for d in ("forward", "reverse"):
            assert np.array_equal(getattr(a, d).log_estimates, getattr(s, d).log_estimates)
            assert getattr(a, d).n_grad == getattr(s, d).n_grad
        assert np.array_equal(a.draws["unconstrained"], s.draws["unconstrained"])
    # The one-direction entry points likewise, from any first run.
    ks = KernelSchedule.constant(sigmoidal(15), params)
    f = engine.forward(model, HMC(), ks, prior, seed=9, first_chain=5)
    r = engine.reverse(model, HMC(), ks, w, seed=9, n_chains=12, first_chain=5)
    fs = smc.forward_smc(model, HMC(), ks, prior[:, None], seed=9, first_run=5)
    rs = smc.conditional_smc(model, HMC(), ks, np.tile(w, (12, 1)), np.zeros((12, 0, 3)),
                             seed=9, first_run=5)
    assert np.array_equal(f.log_estimates, fs.log_estimates)
    assert np.array_equal(r.log_estimates, rs.log_estimates)
    assert np.array_equal(f.final_positions, fs.final_positions)


# ------------------------------------------------- 2. the grid, two particles, exactly


def _mh_matrix(log_density: np.ndarray) -> np.ndarray:
    """Dense transition matrix of nearest-neighbour MH on a (rows, cols) grid."""
    rows, cols = log_density.shape
    lp = log_density.ravel()
    S = lp.size
    K = np.zeros((S, S))
    for i in range(S):
        r, c = divmod(i, cols)
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < rows and 0 <= cc < cols:
                j = rr * cols + cc
                K[i, j] = 0.25 * min(1.0, np.exp(lp[j] - lp[i]))
        K[i, i] = 1.0 - K[i].sum()
    return K


def _kl(p, q):
    m = p > 0
    return float(np.sum(p[m] * (np.log(p[m]) - np.log(q[m]))))


def _exact_two_particles(log_prior, log_f, betas):
    """Exact E[L], E[U] and output distribution of SMC with P = 2, resampling after
    every increment but the last (forward: pairs of cells; conditional: (retained,
    free) pairs, the retained path a reverse chain read forward by Bayes' rule)."""
    T = betas.size
    ll = log_f.ravel()
    p0 = np.exp(log_prior.ravel())
    K = [_mh_matrix(log_prior + b * log_f) for b in betas]
    lme = lambda a, b: np.logaddexp(a, b) - np.log(2.0)  # noqa: E731
    # Forward: pi (x1, x2), both slots alike.
    pi = np.outer(p0, p0)
    EL = 0.0
    for j in range(1, T):
        w = (betas[j] - betas[j - 1]) * ll
        W1, W2 = w[:, None], w[None, :]
        EL += float(np.sum(pi * lme(W1, W2)))
        s1 = 1.0 / (1.0 + np.exp(W2 - W1))
        s2 = 1.0 - s1
        if j == T - 1:
            out = (pi * s1).sum(axis=1) + (pi * s2).sum(axis=0)
            q_out = out @ K[T - 1]
            break
        cross = pi * s1 * s2
        pi = np.diag((pi * s1 ** 2).sum(axis=1)) + np.diag((pi * s2 ** 2).sum(axis=0)) \
            + cross + cross.T
        pi = K[j].T @ pi @ K[j]
    # Conditional: marginals of the retained path, v_{T-1} ~ p, v_{j-1} ~ K_{j-1}(v_j, .).
    post = np.exp(log_prior.ravel() + ll - logsumexp(log_prior.ravel() + ll))
    m = [None] * T
    m[T - 1] = post
    for j in range(T - 1, 1, -1):
        m[j - 1] = m[j] @ K[j - 1]
    rho = np.outer(m[1], p0)  # (retained v_1, free x_0)
    EU = 0.0
    for j in range(1, T):
        w = (betas[j] - betas[j - 1]) * ll
        Wr, Wf = w[:, None], w[None, :]
        EU += float(np.sum(rho * lme(Wr, Wf)))
        if j == T - 1:
            break
        sr = 1.0 / (1.0 + np.exp(Wf - Wr))
        with np.errstate(divide="ignore", invalid="ignore"):  # P(v_{j+1} | v_j), Bayes
            C = (m[j + 1][None, :] * K[j].T) / m[j][:, None]
        C = np.nan_to_num(C)
        a = (rho * sr).sum(axis=1)
        rho = C.T @ (a[:, None] * K[j]) + C.T @ (rho * (1.0 - sr)) @ K[j]
    log_z = float(logsumexp(log_prior.ravel() + ll))
    return EL, EU, q_out, post, log_z


@pytest.fixture(scope="module", params=[2, pytest.param(10, marks=pytest.mark.slow)])
def grid_case(request):
    # T = 2: one increment (the whole likelihood), so the output is picked by very
    # unequal weights; T = 10: eight resampling steps.
    target = GridTarget(grid_log_f("barrier"))
    betas = linear_schedule(request.param)
    EL, EU, q_out, post, log_z = _exact_two_particles(target.log_prior, target.log_f, betas)
    rng = np.random.default_rng(1)
    n, at = 6000, range(1, betas.size - 1)
    f = smc.forward_smc(target, GridMetropolis(), betas,
                        target.sample_prior(rng, 2 * n).reshape(n, 2, 2), seed=5, resample_at=at)
    c = smc.conditional_smc(target, GridMetropolis(), betas, target.sample_posterior(rng, n),
                            target.sample_prior(rng, n).reshape(n, 1, 2), seed=5, resample_at=at)
    return {"EL": EL, "EU": EU, "q": q_out, "p": post, "log_z": log_z, "L": f.log_estimates,
            "U": c.log_estimates, "cells": positions_to_cells(f.final_positions, target.shape)}


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_grid_exact_jeffreys_of_output_below_exact_bound(grid_case):
    g = grid_case
    J = _kl(g["p"], g["q"]) + _kl(g["q"], g["p"])
    EB = g["EU"] - g["EL"]
    assert g["EL"] < g["log_z"] < g["EU"]
    assert 0.0 < J < EB, (J, EB)
    assert np.isclose(g["q"].sum(), 1.0)


def test_grid_sampled_smc_matches_exact(grid_case):
    g = grid_case
    L, U = g["L"], g["U"]
    assert abs(L.mean() - g["EL"]) < N_SE * _se(L), (L.mean(), g["EL"])
    assert abs(U.mean() - g["EU"]) < N_SE * _se(U), (U.mean(), g["EU"])
    z_fwd, z_rev = np.exp(L - g["log_z"]), np.exp(g["log_z"] - U)
    assert abs(z_fwd.mean() - 1.0) < N_SE * _se(z_fwd)
    assert abs(z_rev.mean() - 1.0) < N_SE * _se(z_rev)
    # The output's cells: chi-square over cells with expected count >= 5.
    n = g["cells"].size
    expected = n * g["q"]
    counts = np.bincount(g["cells"], minlength=expected.size)
    keep = expected >= 5
    chi2 = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    assert chi2 < stats.chi2.ppf(0.9999, keep.sum() - 1), chi2


# ------------------------------------------- 3. conjugate regression: sandwich, P


def test_conjugate_sandwich_contains_log_ml_and_bound_falls_with_particles(regression):
    model, w = regression
    log_ml = model.log_marginal_likelihood()
    T, n = 10, 100
    config = engine.RunConfig(steps=(T,), schedule=ScheduleSpec("sigmoid"), increment_blocks=None)
    rng = np.random.default_rng(4)
    bounds, ses = [], []
    for P in (1, 4, 16):
        prior = model.sample_prior(rng, n * (2 * P - 1)).reshape(n, 2 * P - 1, 3)
        res = runs.run(model, HMC(), prior, w, seed=6, path=HMCParams(0.15, 6), config=config,
                      resampling=smc.SMCConfig(particles=P, resample_every=2))
        L, U = res.steps[0].forward.log_estimates, res.steps[0].reverse.log_estimates
        assert L.mean() < log_ml + N_SE * _se(L)
        assert U.mean() > log_ml - N_SE * _se(U)
        lower = float(logsumexp(L) - np.log(n))
        upper = float(-(logsumexp(-U) - np.log(n)))
        assert lower - N_SE * _se(L) < log_ml < upper + N_SE * _se(U), (lower, log_ml, upper)
        bounds.append(U.mean() - L.mean())
        ses.append(np.hypot(_se(L), _se(U)))
    # E[B] falls as P grows: each step down by more than 4 combined standard errors.
    for (b0, s0), (b1, s1) in zip(zip(bounds, ses), zip(bounds[1:], ses[1:])):
        assert b1 < b0 - N_SE * np.hypot(s0, s1), bounds


# ------------------------------------------------------------- resampling rule, input


def test_resampling_steps_from_the_pilot_curve():
    betas = np.linspace(0.0, 1.0, 101)
    # A constant sd of 10: each interval adds (0.01 * 10)^2 = 0.01 of variance;
    # log 2 = 0.693 is first exceeded after 70 intervals.
    steps = smc.resampling_steps(betas, [0.0, 0.5, 1.0], [10.0, 10.0, 10.0], 1e-3, 0.5,
                                 rule="mixed")
    assert steps.tolist() == [70]
    # Frozen particles: (b_k - b_s)^2 * 100 > log 2 once b_k - b_s > 0.0833: every 9 steps.
    frozen = smc.resampling_steps(betas, [0.0, 0.5, 1.0], [10.0, 10.0, 10.0], 1e-3, 0.5)
    assert frozen.tolist() == list(range(9, 100, 9))
    assert smc.resampling_steps(betas, [0.0, 1.0], [0.0, 0.0], 1e-3).size == 0
    assert smc.SMCConfig(particles=1, resample_every=1).steps_for(betas).size == 0
    assert smc.SMCConfig(particles=3, resample_every=40).steps_for(betas).tolist() == [40, 80]


def test_bad_input_is_refused_in_one_line(regression):
    model, w = regression
    with pytest.raises(ValueError, match="particles"):
        smc.SMCConfig(particles=0)
    with pytest.raises(ValueError, match="ess_fraction"):
        smc.SMCConfig(ess_fraction=1.5)
    with pytest.raises(ValueError, match="shape"):
        runs.run(model, HMC(), np.zeros((4, 2, 3)), w, seed=0, resampling=smc.SMCConfig(particles=2),
                path=HMCParams(0.1, 2), config=engine.RunConfig(steps=(5,)))
    with pytest.raises(ValueError, match="resampling steps"):
        smc.forward_smc(model, HMC(), KernelSchedule.constant(sigmoidal(5), HMCParams(0.1, 2)),
                        np.zeros((2, 2, 3)), seed=0, resample_at=[4])
    with pytest.raises(ValueError, match="pilot"):
        smc.SMCConfig(particles=2).steps_for(np.linspace(0, 1, 5))


def test_log_mean_exp():
    assert smc.log_mean_exp(np.array([3.25]))[()] == 3.25
    assert np.isneginf(smc.log_mean_exp(np.array([-np.inf, -np.inf])))
    assert np.isclose(smc.log_mean_exp(np.array([0.0, np.log(3.0)])), np.log(2.0))


# ------------------------------------------------------------- AIDE's SMC algorithm


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_aide_smc_algorithm_is_ais_with_one_particle_and_meta_inference_is_exact(regression):
    from bread_stan.meta import AISAlgorithm, SMCAlgorithm
    from bread_stan.ais.gaussian_base import GaussianBase

    model, _ = regression
    ks = KernelSchedule.constant(sigmoidal(6), HMCParams(0.15, 5))
    draw = lambda n, seed: model.sample_prior(np.random.default_rng(seed), n)  # noqa: E731
    ais, one = AISAlgorithm(model, HMC(), ks, draw), SMCAlgorithm(model, HMC(), ks, draw, 1)
    a, s = ais.run(7, 3), one.run(7, 3)
    assert np.array_equal(a.outputs, s.outputs) and np.array_equal(a.log_xi, s.log_xi)
    assert np.array_equal(ais.meta_log_xi(a.outputs, 2, 4).log_xi,
                          one.meta_log_xi(a.outputs, 2, 4).log_xi)
    # From exact posterior draws x, meta-inference xi = p~(x) / Z-hat of conditional SMC
    # has E[xi / p(x | y)] = E[p(y) / Z-hat] = 1 (the conditional run's law is the
    # extended target).  4 standard errors.
    posterior = GaussianBase(*model.tempered_posterior(1.0))
    x = posterior.sample(np.random.default_rng(5), 1000)
    longer = KernelSchedule.constant(sigmoidal(12), HMCParams(0.15, 5))
    eight = SMCAlgorithm(model, HMC(), longer, draw, 8, resample_at=range(2, 11, 2))
    ratio = np.exp(eight.meta_log_xi(x, 1, 6).log_xi[:, 0] - posterior.log_density(x)[0])
    assert abs(ratio.mean() - 1.0) < N_SE * _se(ratio), (ratio.mean(), _se(ratio))
    assert _se(ratio) < 0.05  # the check has power

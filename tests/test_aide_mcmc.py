"""AIDE on MCMC (issue 44): the random-walk Metropolis kernel's invariance, the MCMC
algorithm as AIS with the jump schedule (0, 1), and the exact grid oracle: the T-step
Metropolis output law by matrix powers against AIDE's estimate over many runs.

Tolerances are stated in Monte Carlo standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.ais.gaussian_base import GaussianBase
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.exact.grid import GridLaw, GridTarget, cells_to_positions, grid_log_f
from bread_stan.exact.oracle import NeighbourMetropolis
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.grid_mh import GridMetropolis
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.rwm import RandomWalkMetropolis, RWMParams
from bread_stan.meta import (AISAlgorithm, MCMCAlgorithm, TractableAlgorithm, density_start,
                             estimate_aide, uniform_start)
from bread_stan.rng import ChainRandom


# -- the random-walk Metropolis kernel ------------------------------------------------------

@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_random_walk_metropolis_leaves_a_correlated_gaussian_invariant(metric):
    """Exact draws of a correlated Gaussian posterior, ten steps each: mean and
    covariance stay those of the posterior (within 5 se), and the chains moved."""
    model, _ = simulate_regression(30, 2, correlation=0.8, noise_sd=0.5, seed=3)
    mean, cov = model.tempered_posterior(1.0)
    n = 6000
    x = model.sample_posterior(np.random.default_rng(1), n)
    inv = np.diag(cov).copy() if metric == "diag" else cov[None]
    params = RWMParams(step_size=2.38 / np.sqrt(2), inv_metric=inv)
    state = initial_state(model, x, gradient=False)
    rng = ChainRandom.from_seed(5, n)
    kernel, accepted = RandomWalkMetropolis(), 0.0
    for _ in range(10):
        state, info = kernel.step(rng, state, model, np.ones(n), params)
        accepted += info.accept_stat.mean() / 10
    y = state.position
    assert 0.2 < accepted < 0.8
    assert np.mean(np.all(y != x, axis=1)) > 0.9
    sd = np.sqrt(np.diag(cov))
    z = (y.mean(axis=0) - mean) / (sd / np.sqrt(n))
    assert np.all(np.abs(z) < 5), z
    # each second moment's se, from the fourth moments of a Gaussian
    for i, j in [(0, 0), (1, 1), (0, 1)]:
        c = cov[i, j]
        se = np.sqrt((cov[i, i] * cov[j, j] + c * c) / n)
        got = np.mean((y[:, i] - mean[i]) * (y[:, j] - mean[j]))
        assert abs(got - c) < 5 * se, (i, j, got, c, se)


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_random_walk_metropolis_satisfies_detailed_balance_on_a_lattice():
    """On a density that is constant on each of five unit cells, the one-step flow
    between cells, pi(A) K(A, B), is symmetric (detailed balance): checked from exact
    draws of pi, within 5 se per pair."""

    class Steps:
        dim = 1
        log_p = np.log(np.array([1.0, 3.0, 2.0, 5.0, 1.5]))

        def evaluate(self, points, *, gradient=True):
            from bread_stan.target import Evaluation
            x = np.asarray(points, dtype=float)[:, 0]
            cell = np.floor(x).astype(int)
            on = (cell >= 0) & (cell < 5)
            lp = np.where(on, self.log_p[np.clip(cell, 0, 4)], -np.inf)
            return Evaluation(lp, np.zeros_like(lp))

    target = Steps()
    p = np.exp(target.log_p - logsumexp(target.log_p))
    n = 12_000
    rng = np.random.default_rng(2)
    x = (rng.choice(5, n, p=p) + rng.random(n))[:, None]
    state = initial_state(target, x, gradient=False)
    new, _ = RandomWalkMetropolis().step(ChainRandom.from_seed(9, n), state, target,
                                         np.ones(n), RWMParams(step_size=1.5))
    a, b = np.floor(x[:, 0]).astype(int), np.floor(new.position[:, 0]).astype(int)
    flow = np.zeros((5, 5))
    np.add.at(flow, (a, b), 1.0 / n)
    se = np.sqrt((flow + flow.T) / n)
    assert np.all(np.abs(flow - flow.T) <= 5 * se + 1e-12), flow - flow.T
    assert flow[0, 1] > 0.01  # it moves between cells


# -- MCMC as AIS with the jump schedule ------------------------------------------------------

def test_mcmc_is_ais_with_the_schedule_zero_one_and_t_steps_per_temperature():
    """The generic SMC meta-inference with one particle (AISAlgorithm) on betas (0, 1) with
    T steps at beta = 1 gives the MCMC algorithm's numbers: outputs bit for bit, log xi
    of the runs and of the reverse chains to rounding."""
    model, _ = simulate_regression(20, 2, correlation=0.6, noise_sd=0.7, seed=11)
    params = HMCParams(step_size=0.2, n_leapfrog=4)
    T = 7
    ais = AISAlgorithm(model, HMC(), KernelSchedule.constant(np.array([0.0, 1.0]), params, T),
                       lambda n, seed: model.sample_prior(np.random.default_rng(seed), n))
    prior = GaussianBase(np.zeros(2), model.prior_sd ** 2 * np.eye(2))
    mcmc = MCMCAlgorithm(model, HMC(), params, density_start("prior", prior), T)
    a, b = ais.run(50, 3), mcmc.run(50, 3)
    np.testing.assert_array_equal(a.outputs, b.outputs)
    np.testing.assert_allclose(a.log_xi, b.log_xi, rtol=0, atol=1e-8)
    ma, mb = ais.meta_log_xi(a.outputs[:10], 4, 8), mcmc.meta_log_xi(a.outputs[:10], 4, 8)
    np.testing.assert_allclose(ma.log_xi, mb.log_xi, rtol=0, atol=1e-8)
    assert b.cost.gradients == a.cost.gradients


def test_a_uniform_start_gives_no_trace_where_the_reverse_chain_leaves_its_box():
    model, _ = simulate_regression(20, 2, noise_sd=0.7, seed=11)
    mcmc = MCMCAlgorithm(model, RandomWalkMetropolis(), RWMParams(0.5), uniform_start(2, 0.1), 3)
    far = np.array([[0.0, 0.0], [5.0, 5.0]])
    meta = mcmc.meta_log_xi(far, 20, 1)
    assert np.all(np.isneginf(meta.log_xi[1]))  # three small steps cannot get back
    assert np.isfinite(mcmc.run(5, 0).log_xi).all()


# -- the exact grid oracle -------------------------------------------------------------------



def _jeffreys(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.sum((p - q) * (np.log(p) - np.log(q))))


@pytest.fixture(scope="module")
def grid():
    """A 6 x 6 'easy' target, a start law far from it, the exact T-step output laws."""
    shape = (6, 6)
    log_f = grid_log_f("easy", shape, seed=4) * 0.5
    target = GridTarget(log_f)
    log_post = target.log_prior.ravel() + log_f.ravel()
    log_post -= logsumexp(log_post)
    r, c = np.divmod(np.arange(36), 6)
    start = GridLaw(-0.6 * (r + c).astype(float), shape)  # mass in the upper-left corner
    probs = NeighbourMetropolis(shape).probabilities(log_post[None])[0]
    P = np.zeros((36, 36))
    np.add.at(P, (np.repeat(np.arange(36), 5), NeighbourMetropolis(shape).neighbours.ravel()),
              probs.ravel())
    laws = {0: np.exp(start.log_p)}
    law = laws[0]
    for t in range(1, 41):
        law = law @ P
        laws[t] = law
    return target, start, np.exp(log_post), laws, GridLaw(log_post, shape), P


def _mh(target, start, T):
    return MCMCAlgorithm(target, GridMetropolis(), None, density_start("corner", start), T,
                         name=f"mh:{T}")


def test_the_reverse_chain_is_an_unbiased_estimate_of_the_output_density(grid):
    """E over reverse chains of xi = p~(x) q0(v_0) / p~(v_0) is q_T(x), the exact T-step
    law at x (matrix powers), at five cells, within 5 se."""
    target, start, post, laws, _, _ = grid
    T = 3  # cells where q_3 and q_2 differ by about 20%: a chain one step short fails
    cells = np.array([0, 4, 11, 17, 34])
    x = cells_to_positions(cells, (6, 6))
    meta = _mh(target, start, T).meta_log_xi(x, 3000, 2)
    xi = np.exp(meta.log_xi)  # p~(x) q0(v_0) / p~(v_0): the normaliser of p~ cancels
    mean, se = xi.mean(axis=1), xi.std(axis=1) / np.sqrt(xi.shape[1])
    assert np.all(np.abs(mean - laws[T][cells]) <= 5 * se), (mean - laws[T][cells]) / se


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_aide_of_mh_on_the_grid_bounds_the_exact_divergence_and_approaches_it_with_m(grid):
    """AIDE's mh:T estimate against the exact posterior (gold), over many runs: with one
    trace its expectation is J(q0, p) whatever T; with M traces it lies above the exact
    J(q_T, p) (within 4 se) and falls towards it."""
    target, start, post, laws, exact, _ = grid
    gold = TractableAlgorithm(exact, "exact")
    T = 10
    j_start, j_true = _jeffreys(laws[0], post), _jeffreys(laws[T], post)
    got = {m: estimate_aide(gold, _mh(target, start, T), n_gold=600, n_target=600,
                            m_target=m, seed=1) for m in (1, 30)}
    for m, res in got.items():
        assert res.estimate > j_true - 4 * res.se, (m, res.estimate, j_true, res.se)
    assert abs(got[1].estimate - j_start) < 4 * got[1].se, (got[1].estimate, j_start)
    # the gap to the truth shrinks: at M = 30 it is under a third of the one-trace gap
    gap1, gap30 = got[1].estimate - j_true, got[30].estimate - j_true
    assert gap30 < gap1 / 3, (gap1, gap30)


# -- NUTS on a Stan program ------------------------------------------------------------------

@pytest.mark.stan
@pytest.mark.slow
def test_nuts_on_eight_schools_from_the_command_line_falls_with_t(tmp_path, capsys):
    """``bread-stan aide eight_schools.stan --target nuts:1 nuts:30`` from Stan's uniform
    start, 100 traces per output: the longer chain's estimate is finite and clearly lower.
    (NUTS mixes in a few transitions here: nuts:2 is already within error of nuts:30. The
    one-step chain's estimate is large or infinite: none of the 100 one-step reverse chains from
    some posterior draw gets back into the box [-2, 2]^10, where the start has density.)"""
    import json
    from pathlib import Path
    from bread_stan.cli.main import main

    here = Path(__file__).resolve().parent / "stan"
    out = tmp_path / "es"
    args = ["aide", str(here / "eight_schools.stan"), "--data",
            str(here / "eight_schools.json"), "--gold", "ais:200", "--target", "nuts:1",
            "nuts:30", "--n-gold", "60", "--n-target", "100", "--m-target", "100",
            "--mcmc-start", "uniform", "--pilot-chains", "8", "--threads", "1", "--quiet",
            "--out", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    short, long = summary["targets"]
    assert short["settings"]["mcmc_start"] == "uniform(-2, 2)"
    assert np.isfinite(long["aide_nats"]) and long["aide_nats"] < 3
    se = np.hypot(min(short["se"], 1e9), long["se"])
    assert short["aide_nats"] > long["aide_nats"] + 2 * se, (short, long)
    assert "MCMC" in (out / "report.md").read_text()

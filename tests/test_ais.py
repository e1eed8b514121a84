"""Forward and reverse AIS on the conjugate regression, whose log p(y) is exact.

Tolerances: a per-chain mean is compared with log p(y) allowing 3.5 standard
errors (chain-to-chain sd / sqrt(n)); the log-ML sandwich is widened by 3.5
delta-method standard errors.  With fixed seeds these are deterministic; the
stated margins make a false failure under a correct implementation a
< 1e-3 event per comparison.
"""

import numpy as np
import pytest

from bread_stan.ais import engine as ais
from bread_stan.ais import runs
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.ais.estimators import consistency_check, log_ml_sandwich
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.kernels.base import ChainState, StepInfo
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.integrator import leapfrog, tempered_grad
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.ais.betas import ScheduleSpec, linear, sigmoidal
from bread_stan.target import Evaluation, tempered_log_density

N_SE = 3.5


@pytest.fixture(scope="module")
def problem():
    model, w_true = simulate_regression(20, 3, correlation=0.6, noise_sd=0.7, seed=11)
    rng = np.random.default_rng(12)
    return {"model": model, "log_ml": model.log_marginal_likelihood(),
            "prior": model.sample_prior(rng, 300), "post": model.sample_posterior(rng, 300),
            "w_true": w_true}


def _se(x):
    return np.std(x, ddof=1) / np.sqrt(x.size)


def _bdmc(problem, kernel, params, T, n=300, seed=1):
    ks = KernelSchedule.constant(sigmoidal(T), params)
    f = ais.forward(problem["model"], kernel, ks, problem["prior"][:n], seed=seed)
    r = ais.reverse(problem["model"], kernel, ks, problem["post"][:n], seed=seed)
    return f, r


def _sandwich_ok(f, r, log_ml):
    L, U = f.log_estimates, r.log_estimates
    if not (np.all(np.isfinite(L)) and np.all(np.isfinite(U))):
        return False
    sw = log_ml_sandwich(L, U)
    return (L.mean() < log_ml + N_SE * _se(L) and U.mean() > log_ml - N_SE * _se(U)
            and sw.contains(log_ml, n_se=N_SE) and consistency_check(L, U).passed)


@pytest.mark.parametrize("kernel, params", [  # NUTS in the slow tier (the fast tier's minute)
    (HMC(), HMCParams(0.15, 8)), pytest.param(NUTS(), NUTSParams(0.2), marks=pytest.mark.slow)])
def test_bounds_sandwich_exact_log_ml_and_gap_shrinks(problem, kernel, params):
    log_ml = problem["log_ml"]
    gaps = []
    for T in (5, 100):
        f, r = _bdmc(problem, kernel, params, T, n=200 if isinstance(kernel, NUTS) else 300)
        L, U = f.log_estimates, r.log_estimates
        assert L.mean() < log_ml + N_SE * _se(L)
        assert U.mean() > log_ml - N_SE * _se(U)
        assert log_ml_sandwich(L, U).contains(log_ml, n_se=N_SE)
        gaps.append((U.mean() - L.mean(), np.hypot(_se(L), _se(U))))
    (g_short, se_short), (g_long, se_long) = gaps
    assert g_long + N_SE * se_long < g_short - N_SE * se_short
    assert g_long < 0.5 * g_short


class _UncorrectedHMC:
    """A deliberately wrong kernel: HMC that always accepts (no Metropolis step)."""

    needs_gradient = True

    def step(self, rng, state, target, beta, params, chains=None):
        n, d = state.position.shape
        chains = np.arange(n) if chains is None else chains
        with np.errstate(all="ignore"):
            q, p = state.position, rng.normal(d, chains)
            g, ev = tempered_grad(state.evaluation, beta), state.evaluation
            for _ in range(params.n_leapfrog):
                q, p, g, ev = leapfrog(target, q, p, g, np.full(n, params.step_size),
                                       np.ones((n, d)), beta)
        z = np.zeros(n)
        return ChainState(q, ev), StepInfo(z + 1, z.astype(bool), z, z.astype(int) + 1, z.astype(int))


def test_wrong_kernel_fails_the_sandwich_test(problem):
    """Negative control: the same checks that pass above catch a kernel without MH."""
    # At this step size the uncorrected chains stay finite but biased: the mean
    # reverse estimate falls ~7 standard errors below log p(y).
    f, r = _bdmc(problem, _UncorrectedHMC(), HMCParams(0.2, 8), 100)
    assert not _sandwich_ok(f, r, problem["log_ml"])
    good_f, good_r = _bdmc(problem, HMC(), HMCParams(0.2, 8), 100)
    assert _sandwich_ok(good_f, good_r, problem["log_ml"])


class _RandomWalk:
    """A gradient-free Metropolis kernel without params (like the grid kernel)."""

    needs_gradient = False

    def step(self, rng, state, target, beta, params=None, chains=None):
        assert params is None
        n, d = state.position.shape
        chains = np.arange(n) if chains is None else chains
        prop = state.position + 0.4 * rng.normal(d, chains)
        ev = target.evaluate(prop, gradient=False)
        log_ratio = tempered_log_density(ev, beta) - tempered_log_density(state.evaluation, beta)
        acc = rng.log_uniform(chains) < log_ratio
        pick = lambda a, b: np.where(acc, a, b)  # noqa: E731
        new = ChainState(np.where(acc[:, None], prop, state.position),
                         Evaluation(pick(ev.log_prior, state.evaluation.log_prior),
                                    pick(ev.log_lik, state.evaluation.log_lik)))
        z = np.zeros(n)
        return new, StepInfo(np.exp(np.minimum(log_ratio, 0)), z.astype(bool), z,
                             z.astype(int), z.astype(int))


def test_kernel_without_params_and_a_bare_beta_array(problem):
    betas = linear(200)
    f = ais.forward(problem["model"], _RandomWalk(), betas, problem["prior"], seed=2)
    r = ais.reverse(problem["model"], _RandomWalk(), betas, problem["post"], seed=2)
    assert _sandwich_ok(f, r, problem["log_ml"])
    assert f.n_grad == 0


def test_same_seed_same_numbers_and_batch_independence(problem):
    ks = KernelSchedule.constant(sigmoidal(20), NUTSParams(0.3))
    m, prior = problem["model"], problem["prior"]
    a = ais.forward(m, NUTS(), ks, prior[:20], seed=5)
    b = ais.forward(m, NUTS(), ks, prior[:20], seed=5)
    alone = ais.forward(m, NUTS(), ks, prior[:10], seed=5)
    other = ais.forward(m, NUTS(), ks, prior[:20], seed=6)
    np.testing.assert_array_equal(a.log_weights, b.log_weights)
    np.testing.assert_array_equal(a.final_positions, b.final_positions)
    np.testing.assert_array_equal(alone.log_weights, a.log_weights[:10])
    np.testing.assert_array_equal(alone.final_positions, a.final_positions[:10])
    np.testing.assert_array_equal(alone.chain_stats["n_grad"], a.chain_stats["n_grad"][:10])
    assert not np.array_equal(other.log_weights, a.log_weights)


@pytest.mark.parametrize("combined", [True, False])
def test_run_matches_separate_directions_and_records_everything(problem, combined):
    m = problem["model"]
    params = HMCParams(0.2, 5)
    config = ais.RunConfig(steps=(12, 30), schedule=ScheduleSpec("linear"), combined=combined,
                           increment_blocks=4)
    res = runs.run(m, HMC(), problem["prior"][:40], problem["w_true"], seed=9, path=params,
                  config=config)
    ks = KernelSchedule.constant(linear(12), params)
    f = ais.forward(m, HMC(), ks, problem["prior"][:40], seed=9)
    r = ais.reverse(m, HMC(), ks, problem["w_true"], seed=9, n_chains=40)
    s = res.step(12)
    np.testing.assert_array_equal(s.forward.log_estimates, f.log_estimates)
    np.testing.assert_array_equal(s.reverse.log_estimates, r.log_estimates)
    assert s.forward.n_grad == f.n_grad == 40 * 11 * 5
    # running estimates: aligned by temperature, last column is the estimate, gaps add up
    for d in (s.forward, s.reverse):
        np.testing.assert_array_equal(d.cumulative_at, [3, 6, 9, 11])
        np.testing.assert_allclose(d.cumulative[:, -1], d.log_estimates)
    assert s.gap_by_temperature()["gap"].sum() == pytest.approx(s.bound().estimate)
    table = res.summary()
    assert list(table["steps"]) == [12, 30] and table["consistent"].all()
    assert res.settings["params"]["n_leapfrog"] == 5


def test_reverse_broadcasts_a_single_exact_draw(problem):
    ks = KernelSchedule.constant(sigmoidal(10), HMCParams(0.2, 5))
    r = ais.reverse(problem["model"], HMC(), ks, problem["w_true"], seed=1, n_chains=6)
    assert r.log_estimates.shape == (6,) and np.unique(r.log_estimates).size == 6
    np.testing.assert_array_equal(r.log_estimates, -r.log_weights)


def test_steps_per_temperature_and_diagnostics(problem):
    ks = KernelSchedule.constant(sigmoidal(10), HMCParams(0.2, 5), steps_per_temperature=3)
    f = ais.forward(problem["model"], HMC(), ks, problem["prior"][:8], seed=1,
                    increments_every=4)
    assert f.n_grad == 8 * 9 * 3 * 5
    assert 0.5 < f.diagnostics["accept_stat"] <= 1.0
    assert f.cumulative.shape == (8, 3)
    assert set(f.to_dataframe().columns) >= {"chain", "log_estimate", "accept_stat", "n_grad"}


def test_bad_starts_are_rejected(problem):
    ks = KernelSchedule.constant(sigmoidal(10), HMCParams(0.2, 5))
    with pytest.raises(ValueError, match="shape"):
        ais.forward(problem["model"], HMC(), ks, np.zeros((5, 4)), seed=0)
    with pytest.raises(ValueError, match="non-finite"):
        ais.forward(problem["model"], HMC(), ks, np.full((5, 3), np.nan), seed=0)


class _Terminal:
    """A stand-in for stderr attached to a terminal."""

    def __init__(self):
        import io
        self.buffer = io.StringIO()

    def isatty(self):
        return True

    def write(self, text):
        return self.buffer.write(text)

    def flush(self):
        pass


def test_progress_bar_only_on_a_terminal_and_never_required(problem, monkeypatch):
    import sys
    ks = KernelSchedule.constant(linear(6), HMCParams(0.2, 3))
    run = lambda progress: ais.forward(problem["model"], HMC(), ks,  # noqa: E731
                                       problem["prior"][:4], seed=1, progress=progress)
    reference = run(False).log_estimates
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    np.testing.assert_array_equal(run(True).log_estimates, reference)
    assert "AIS forward" in terminal.buffer.getvalue()
    shown = len(terminal.buffer.getvalue())
    np.testing.assert_array_equal(run(False).log_estimates, reference)  # asked to be silent
    assert len(terminal.buffer.getvalue()) == shown
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm not installed
    np.testing.assert_array_equal(run(True).log_estimates, reference)
    assert len(terminal.buffer.getvalue()) == shown


def test_bidirectional_estimate_is_consistent_where_both_ends_are_biased(problem):
    """Bennett's acceptance-ratio estimate from forward and reverse AIS at T = 20 and
    T = 100, with a third as many reverse chains as forward ones (the log(n_L / n_U)
    shift matters then).  It must be within N_SE bootstrap standard errors of the exact
    log p(y) (200 resamples of both directions), at T = 20 where the mean forward and
    reverse estimates are each more than 1 nat off.  Breaks tried, each fails: dropping
    the shift; the reverse term's sign flipped."""
    from bread_stan.ais.estimators import bidirectional_log_ml
    log_ml = problem["log_ml"]
    rng = np.random.default_rng(5)
    for T in (20, 100):
        f, r = _bdmc(problem, HMC(), HMCParams(0.15, 8), T)
        L, U = f.log_estimates, r.log_estimates[:100]
        estimate = bidirectional_log_ml(L, U)
        boot = [bidirectional_log_ml(rng.choice(L, L.size), rng.choice(U, U.size))
                for _ in range(200)]
        assert abs(estimate - log_ml) < N_SE * np.std(boot), (T, estimate - log_ml)
        if T == 20:
            assert log_ml - L.mean() > 1 and U.mean() - log_ml > 1
    same = np.full(7, 2.5)
    assert bidirectional_log_ml(same, same[:3]) == pytest.approx(2.5, abs=1e-10)

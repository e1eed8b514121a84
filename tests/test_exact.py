"""Exact grid oracle (SPEC section 6): its own consistency, a brute-force check over
all trajectories, and the sampling engine against it.

Statistical tests use fixed seeds; each states its tolerance in Monte Carlo
standard errors computed from the *exact* standard deviations, so a failure
means a disagreement of more than Z_TOL standard errors (two-sided p < 1e-4 for
one check of a correct sampler) or a chi-square p-value below P_MIN.
"""

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from bread_stan.ais.engine import forward, reverse
from bread_stan.exact.oracle import NeighbourMetropolis, grid_bounds, linear_schedule
from bread_stan.exact.grid import GridTarget, grid_log_f, positions_to_cells
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.grid_mh import GridMetropolis, GridMHParams
from bread_stan.rng import ChainRandom

Z_TOL = 4.0
P_MIN = 1e-4


# --- the oracle on its own -------------------------------------------------------------

@pytest.mark.parametrize("name", ["easy", "hard", "barrier"])
@pytest.mark.parametrize("T", [2, 3, 10, 100, 1000])
def test_bound_dominates_jeffreys_and_sandwiches_log_z(name, T):
    r = grid_bounds(name, T)
    assert r.bound >= r.jeffreys >= 0.0
    assert r.kl_forward >= 0.0 and r.kl_reverse >= 0.0
    assert r.forward_mean <= r.log_z <= r.reverse_mean
    assert r.log_z == pytest.approx(logsumexp(grid_log_f(name)) - np.log(49), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_bound_dominates_jeffreys_on_random_settings(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(2, 6, size=2))
    log_f = rng.normal(0, 5, size=shape)
    prior = rng.normal(0, 1, size=shape)
    betas = np.sort(np.concatenate([[0.0, 1.0], rng.uniform(size=rng.integers(1, 30))]))
    r = grid_bounds(log_f, None, betas=betas, log_prior=prior,
                    kernel=NeighbourMetropolis(shape, steps=int(rng.integers(1, 3))))
    assert r.bound >= r.jeffreys >= 0.0
    assert r.bound == pytest.approx(r.bound_from_estimates, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name", ["easy", "hard", "barrier"])
def test_chain_rule_and_log_weight_bounds_agree_to_rounding(name):
    for T in (2, 10, 300):
        for steps in (1, 3):
            r = grid_bounds(name, T, kernel=NeighbourMetropolis((7, 7), steps))
            assert abs(r.bound - r.bound_from_estimates) <= 1e-10 * max(1.0, r.bound)


def test_per_step_gaps_sum_to_the_bound_and_inputs_are_checked():
    r = grid_bounds("barrier", 50)
    assert r.gap_by_step.shape == (49,)
    assert r.gap_by_step.sum() == pytest.approx(r.bound, rel=1e-10)
    with pytest.raises(ValueError):
        grid_bounds(np.array([[0.0, np.inf]]), 10)
    with pytest.raises(ValueError):
        grid_bounds("easy", 10, betas=linear_schedule(11))
    with pytest.raises(ValueError):
        grid_bounds("nonsense", 10)


@pytest.mark.parametrize("name", ["easy", "hard", "barrier"])
def test_jeffreys_and_bound_fall_as_distributions_are_added(name):
    rs = [grid_bounds(name, T) for T in (10, 100, 1000, 3000)]
    for a, b in zip(rs, rs[1:]):
        assert b.jeffreys < a.jeffreys and b.bound < a.bound


def test_bound_is_loose_on_easy_and_close_on_hard_targets():
    easy, hard, barrier = (grid_bounds(n, 1000) for n in ("easy", "hard", "barrier"))
    assert easy.bound > 3 * easy.jeffreys
    assert hard.bound < 1.5 * hard.jeffreys
    assert barrier.bound < 1.5 * barrier.jeffreys


def test_named_targets():
    barrier = grid_log_f("barrier")
    assert barrier[:3, 4:].tolist() == [[3.0] * 3] * 3
    assert np.all(barrier[3, :] == -10) and np.all(barrier[:, 3] == -10)
    assert np.all(barrier[4:, :3] == 0) and np.all(barrier[:3, :3] == 0) and np.all(barrier[4:, 4:] == 0)
    assert np.array_equal(grid_log_f("hard", seed=3), 5 * grid_log_f("easy", seed=3))
    assert not np.array_equal(grid_log_f("easy", seed=0), grid_log_f("easy", seed=1))
    with pytest.raises(ValueError):
        grid_log_f("barrier", (6, 6))


def test_neighbour_metropolis_is_reversible_and_invariant():
    kern = NeighbourMetropolis((3, 4))
    log_p = np.random.default_rng(0).normal(0, 3, size=(5, 12))
    log_p -= logsumexp(log_p, axis=1, keepdims=True)
    K = _dense_kernels(kern, log_p)
    p = np.exp(log_p)
    assert np.allclose(K.sum(axis=2), 1.0)
    assert np.allclose(p[:, :, None] * K, (p[:, :, None] * K).transpose(0, 2, 1))
    assert np.allclose(np.einsum("ms,mst->mt", p, K), p)
    assert np.allclose(_dense_kernels(NeighbourMetropolis((3, 4), 2), log_p), K @ K)


# --- brute force over all trajectories ---------------------------------------------------

def _mh_matrix(log_p, shape):
    """Dense MH matrix written from the definition, independently of the module."""
    rows, cols = shape
    S = rows * cols
    K = np.zeros((S, S))
    for x in range(S):
        r, c = divmod(x, cols)
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            if 0 <= rr < rows and 0 <= cc < cols:
                y = rr * cols + cc
                K[x, y] += 0.25 * min(1.0, np.exp(log_p[y] - log_p[x]))
        K[x, x] += 1.0 - K[x].sum()
    return K


def _brute_force(log_f, betas, kernels):
    """Every quantity by enumerating all S**T trajectories; kernels[i] is the dense K_i."""
    g = log_f.ravel()
    S, T = g.size, betas.size
    p = np.exp([b * g - logsumexp(b * g) for b in betas])
    R = [p[i][None, :] * K.T / p[i][:, None] for i, K in enumerate(kernels)]
    c = np.diff(betas)
    out = dict(EL=0.0, EL2=0.0, EU=0.0, EU2=0.0, klf=0.0, klr=0.0,
               final=np.zeros(S), rev_first=np.zeros(S))
    for x in itertools.product(range(S), repeat=T):
        qf = p[0][x[0]] * np.prod([kernels[i][x[i - 1], x[i]] for i in range(1, T)])
        qr = p[-1][x[-1]] * np.prod([R[i][x[i], x[i - 1]] for i in range(1, T)])
        w = sum(c[i - 1] * g[x[i - 1]] for i in range(1, T))
        out["EL"] += qf * w
        out["EL2"] += qf * w * w
        out["EU"] += qr * w
        out["EU2"] += qr * w * w
        if qf > 0:
            out["klf"] += qf * np.log(qf / qr)
        if qr > 0:
            out["klr"] += qr * np.log(qr / qf)
        out["final"][x[-1]] += qf
        out["rev_first"][x[0]] += qr
    return out


class _SweepKernel:
    """A non-reversible kernel (a vertical MH move, then a horizontal one), dense pattern."""

    reversible = False

    def __init__(self, shape):
        self.shape = shape
        self.neighbours = np.tile(np.arange(shape[0] * shape[1]), (shape[0] * shape[1], 1))

    def matrix(self, log_p):
        rows, cols = self.shape
        v = _mh_matrix(log_p, self.shape)
        h = v.copy()
        for x in range(rows * cols):  # keep only vertical (v) or horizontal (h) moves
            for y in range(rows * cols):
                if x != y:
                    same_row = x // cols == y // cols
                    (v if same_row else h)[x, y] = 0.0
            v[x, x] = 1.0 - v[x].sum() + v[x, x]
            h[x, x] = 1.0 - h[x].sum() + h[x, x]
        return v @ h

    def probabilities(self, log_density, temperatures=None):
        return np.stack([self.matrix(lp) for lp in np.atleast_2d(log_density)])


@pytest.mark.parametrize("shape, T", [((2, 2), 4), ((3, 1), 5), ((1, 2), 6)])
@pytest.mark.parametrize("kind", ["mh", "sweep"])
def test_matches_brute_force_enumeration(shape, T, kind):
    log_f = np.random.default_rng(sum(shape) + T).normal(0, 3, size=shape)
    betas = linear_schedule(T)
    g = log_f.ravel()
    log_p = [b * g - logsumexp(b * g) for b in betas]
    if kind == "mh":
        kernel, kernels = None, [_mh_matrix(lp, shape) for lp in log_p]
    else:
        kernel = _SweepKernel(shape)
        kernels = [kernel.matrix(lp) for lp in log_p]
        flow = np.exp(log_p[-1])[:, None] * kernels[-1]
        assert np.allclose(flow, flow.T) == (min(shape) == 1)  # reversible only on a line
    bf = _brute_force(log_f, betas, kernels)
    r = grid_bounds(log_f, T, kernel=kernel)
    tol = dict(rel=1e-9, abs=1e-12)
    assert r.forward_mean == pytest.approx(bf["EL"], **tol)
    assert r.reverse_mean == pytest.approx(bf["EU"], **tol)
    assert r.forward_sd**2 == pytest.approx(bf["EL2"] - bf["EL"]**2, rel=1e-7, abs=1e-12)
    assert r.reverse_sd**2 == pytest.approx(bf["EU2"] - bf["EU"]**2, rel=1e-7, abs=1e-12)
    assert r.kl_forward == pytest.approx(bf["klf"], **tol)
    assert r.kl_reverse == pytest.approx(bf["klr"], **tol)
    assert r.final_marginal.ravel() == pytest.approx(bf["final"], **tol)
    assert r.reverse_final_marginal.ravel() == pytest.approx(bf["rev_first"] @ kernels[0], **tol)
    p = np.exp(log_p[-1])
    q = bf["final"]
    assert r.jeffreys == pytest.approx(np.sum((p - q) * np.log(p / q)), **tol)


# --- the grid target and kernel ------------------------------------------------------------

def test_grid_target_evaluates_cells_and_rejects_off_grid_points():
    log_f = np.arange(6.0).reshape(2, 3)
    tg = GridTarget(log_f)
    ev = tg.evaluate(np.array([[0, 0], [1, 2], [-1, 0], [2, 0], [0, 3], [np.nan, 0]]),
                     gradient=False)
    assert ev.log_lik[:2].tolist() == [0.0, 5.0]
    assert np.allclose(ev.log_prior[:2], -np.log(6))
    assert np.all(np.isneginf(ev.log_prior[2:]))
    with pytest.raises(ValueError, match="no gradient"):
        tg.evaluate(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="integer"):
        tg.evaluate(np.array([[0.5, 0.0]]), gradient=False)


@pytest.mark.parametrize("stay", [None, 0.6])
def test_grid_metropolis_moves_with_the_exact_transition_probabilities(stay):
    """Transition counts of 1000 chains over 60 steps against the exact rows of K
    (plain, and lazy: staying put with probability 0.6 before proposing).

    Successive exits from a cell are iid draws from its row of K (strong Markov
    property), so each row's counts are a multinomial sample.
    """
    log_f = grid_log_f("easy", (3, 3), seed=2)
    tg = GridTarget(log_f)
    beta = 0.7
    log_p = (beta * log_f).ravel() - logsumexp(beta * log_f)
    exact_kernel = NeighbourMetropolis((3, 3), stay_prob=None if stay is None else [stay])
    K = _dense_kernels(exact_kernel, log_p[None])[0]
    n, steps = 1000, 60
    rng = ChainRandom.from_seed(7, n)
    state = initial_state(tg, tg.sample_prior(np.random.default_rng(7), n), gradient=False)
    counts = np.zeros((9, 9), dtype=np.int64)
    kernel = GridMetropolis()
    params = None if stay is None else GridMHParams(stay)
    for _ in range(steps):
        before = positions_to_cells(state.position, (3, 3))
        state, info = kernel.step(rng, state, tg, np.full(n, beta), params)
        np.add.at(counts, (before, positions_to_cells(state.position, (3, 3))), 1)
    assert np.all(info.n_grad == 0)
    assert np.all(counts[K == 0] == 0)
    for x in range(9):
        assert _chi_square_p(counts[x], K[x]) > P_MIN


# --- the sampling engine against the oracle --------------------------------------------------

def _chi_square_p(counts, probs, min_expected=5.0):
    """Chi-square goodness-of-fit p-value, pooling cells with small expected counts."""
    expected = probs * counts.sum()
    small = expected < min_expected
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


def _run_engine(name, T, n, seed, *, kernel=None, steps=1):
    log_f = grid_log_f(name)
    tg = GridTarget(log_f)
    schedule = KernelSchedule(linear_schedule(T), steps)
    kernel = GridMetropolis() if kernel is None else kernel
    draws = np.random.default_rng(seed)
    fwd = forward(tg, kernel, schedule, tg.sample_prior(draws, n), seed=seed)
    rev = reverse(tg, kernel, schedule, tg.sample_posterior(draws, n), seed=seed)
    return fwd, rev


def _oracle_checks(name, T, n, seed, *, kernel=None, steps=1):
    """z-scores of mean L, mean U and B against exact values, and chi-square p-values."""
    exact = grid_bounds(name, T, kernel=NeighbourMetropolis((7, 7), steps))
    fwd, rev = _run_engine(name, T, n, seed, kernel=kernel, steps=steps)
    L, U = fwd.log_estimates, rev.log_estimates
    se_l, se_u = exact.forward_sd / np.sqrt(n), exact.reverse_sd / np.sqrt(n)
    cells_f = np.bincount(positions_to_cells(fwd.final_positions, (7, 7)), minlength=49)
    cells_r = np.bincount(positions_to_cells(rev.final_positions, (7, 7)), minlength=49)
    return {
        "z_forward": (L.mean() - exact.forward_mean) / se_l,
        "z_reverse": (U.mean() - exact.reverse_mean) / se_u,
        "z_bound": (U.mean() - L.mean() - exact.bound) / np.hypot(se_l, se_u),
        "z_sd_forward": (L.std() - exact.forward_sd) / (exact.forward_sd / np.sqrt(2 * n)),
        "p_final": _chi_square_p(cells_f, exact.final_marginal.ravel()),
        "p_reverse_final": _chi_square_p(cells_r, exact.reverse_final_marginal.ravel()),
    }


def _assert_agrees(checks):
    for key, value in checks.items():
        if key.startswith("z_sd"):
            # The sd's own standard error assumes normal L; allow a wider margin.
            assert abs(value) < 2 * Z_TOL, (key, checks)
        elif key.startswith("z_"):
            assert abs(value) < Z_TOL, (key, checks)
        else:
            assert value > P_MIN, (key, checks)


@pytest.mark.parametrize("name, T", [pytest.param("barrier", 20, marks=pytest.mark.slow),
                                     ("hard", 10)])
def test_engine_reproduces_exact_bound_and_final_distribution(name, T):
    _assert_agrees(_oracle_checks(name, T, n=4000, seed=11))


def test_oracle_catches_a_kernel_at_the_wrong_temperature():
    class WrongTemperature(GridMetropolis):
        def step(self, rng, state, target, beta, params=None, chains=None):
            return super().step(rng, state, target, 0.5 * np.asarray(beta), params, chains)

    checks = _oracle_checks("hard", 10, n=4000, seed=11, kernel=WrongTemperature())
    assert checks["p_final"] < 1e-10
    assert abs(checks["z_forward"]) > 2 * Z_TOL


@pytest.mark.slow
@pytest.mark.parametrize("name", ["easy", "hard", "barrier"])
def test_engine_reproduces_exact_values_with_more_steps_and_chains(name):
    _assert_agrees(_oracle_checks(name, 200, n=10000, seed=5, steps=2))


# --- helpers ---------------------------------------------------------------------------------

def _dense_kernels(kernel, log_p):
    probs = kernel.probabilities(log_p, np.zeros(len(log_p), dtype=np.int64))
    m, S, k = probs.shape
    out = np.zeros((m, S, S))
    for j in range(k):
        out[:, np.arange(S), kernel.neighbours[:, j]] += probs[:, :, j]
    return out

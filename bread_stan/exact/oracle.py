"""Exact AIS accuracy and BREAD bound on a small grid, with no sampling (SPEC section 6).

States are the S cells of a grid; temperatures are indexed ``i = 0 .. T-1``
(SPEC's ``t = i + 1``), ``log p_i = log_prior + b_i * log_f - log Z_i``, and
``K_i`` is a Markov kernel that leaves ``p_i`` invariant.

Conventions (the standard AIS/BDMC construction; see the derivation below)::

    forward:  x_0 ~ p_0;  for i = 1 .. T-1:  L += (b_i - b_{i-1}) log f(x_{i-1});
                                             x_i ~ K_i(. | x_{i-1})
    reverse:  x_{T-1} ~ p_{T-1};  for i = T-1 .. 1:  x_{i-1} ~ R_i(. | x_i);
                                             U += (b_i - b_{i-1}) log f(x_{i-1})

where ``R_i(y | x) = p_i(y) K_i(x | y) / p_i(x)`` is the reversal of ``K_i``
(``R_i = K_i`` for a reversible kernel such as Metropolis-Hastings).  So the
forward chain applies K_1..K_{T-1} (SPEC: K_2..K_T), each after the weight
update at its temperature; the reverse chain applies the same kernels in the
opposite order, K_{T-1}..K_1, each before the weight update that leaves its
temperature.  Derivation: with ``q_fwd(x_0..x_{T-1}) = p_0(x_0) prod K_i(x_i |
x_{i-1})`` and ``q_rev = p_{T-1}(x_{T-1}) prod R_i(x_{i-1} | x_i)``, the
products telescope to ``log q_rev / q_fwd = sum_i (b_i - b_{i-1}) log f(x_{i-1})
- log Z``, which is both L (under q_fwd) and U (under q_rev).  Hence
``E[L] = log Z - KL(q_fwd || q_rev)``, ``E[U] = log Z + KL(q_rev || q_fwd)`` and
``E[U] - E[L]`` is the Jeffreys divergence of the two trajectory laws, which
bounds the Jeffreys divergence ``J`` of their final-state marginals q_fwd(x_{T-1})
and p_{T-1} (data processing).

SPEC section 1 (and ``bread_stan.ais.engine``, which follows it) writes the reverse
chain as "weight at v_t, then v_{t-1} ~ K_{t-1}(. | v_t)", SPEC's kernels
K_{T-1}..K_1.  That is the chain above shifted by one slot (``v_t = x_{t-2}``
with SPEC's 1-based t and this module's 0-based x): it leaves out the first
kernel of the exact reversal (K_T in SPEC's indexing, which acts on an exact
draw from p_T and so changes nothing in law) and adds a last kernel K_1, at
b = 0, whose output no weight uses.  The law of U is identical; only the
reverse chain's final position differs, by that extra K_1 step
(:attr:`GridBounds.reverse_final_marginal` includes it).

All quantities come from forward recursions over the S-state marginals and
the per-state first and second moments of the accumulated log weight, in
O(T S^2) time; the trajectory KLs use the chain rule (first state, then the
expected KL of the transition conditionals, with q_rev's forward-direction
conditionals from Bayes' rule on its marginals), an independent route to
``E[U] - E[L]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from scipy.special import logsumexp

from .grid import grid_log_f

__all__ = ["GridBounds", "GridKernel", "NeighbourMetropolis", "grid_bounds",
           "conditional_reverse_means",
           "linear_schedule"]

_BLOCK_ENTRIES = 2**20  # kernel probabilities per block of temperatures (memory bound)
_SUB = 64  # temperatures per block of dense transition matrices, small enough for the cache


class GridKernel(Protocol):
    """Exact transition probabilities with a fixed sparsity pattern.

    ``neighbours`` is an (S, k) table: row x lists the k cells that x may move
    to (repeats allowed).  ``probabilities(log_density, temperatures)`` maps an
    (m, S) stack of normalised log densities, at the temperature indices
    ``temperatures`` (m,) of the schedule, to (m, S, k) probabilities, each row
    summing to one, of a kernel that leaves each density invariant (a kernel
    without per-temperature settings ignores the indices).  ``reversible`` says
    whether the kernel is its own reversal (detailed balance), which saves work.
    """

    neighbours: np.ndarray
    reversible: bool

    def probabilities(self, log_density: np.ndarray,
                      temperatures: np.ndarray | None = None) -> np.ndarray: ...


class NeighbourMetropolis:
    """Exact transitions of MH proposing one of four grid neighbours (probability 1/4 each).

    A proposal off the grid is rejected.  ``steps`` MH steps per distribution
    (the engine's ``steps_per_temperature``); with one step the pattern is
    (stay, up, down, left, right), with more it is dense.  ``stay_prob``, one
    value per temperature of the schedule (or None), makes each step lazy: it
    stays put with that probability (the engine's
    :class:`~bread_stan.kernels.grid_mh.GridMHParams`).  Mirrors
    :class:`bread_stan.kernels.grid_mh.GridMetropolis`.
    """

    reversible = True

    def __init__(self, shape: tuple[int, int], steps: int = 1,
                 stay_prob: np.ndarray | None = None):
        if int(steps) < 1:
            raise ValueError("steps must be at least 1")
        if stay_prob is not None:
            stay_prob = np.asarray(stay_prob, dtype=float)
            if stay_prob.ndim != 1 or not np.all((stay_prob >= 0) & (stay_prob < 1)):
                raise ValueError("stay_prob must be one value in [0, 1) per temperature")
        self.stay_prob = stay_prob
        rows, cols = shape
        r, c = np.divmod(np.arange(rows * cols), cols)
        table, inside_all = [r * cols + c], []
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            rr, cc = r + dr, c + dc
            inside = (rr >= 0) & (rr < rows) & (cc >= 0) & (cc < cols)
            table.append(np.where(inside, rr * cols + cc, r * cols + c))
            inside_all.append(inside)
        self.shape, self.steps = (rows, cols), int(steps)
        self._local = np.stack(table, axis=1)
        self._quarter_inside = 0.25 * np.stack(inside_all, axis=1)
        self.neighbours = (self._local if self.steps == 1
                           else np.tile(np.arange(rows * cols), (rows * cols, 1)))

    def probabilities(self, log_density: np.ndarray,
                      temperatures: np.ndarray | None = None) -> np.ndarray:
        one = self._one_step(np.atleast_2d(log_density))
        if self.stay_prob is not None:
            if temperatures is None:
                raise ValueError("a kernel with per-temperature stay_prob needs the "
                                 "temperature indices of the densities")
            stay = self.stay_prob[np.asarray(temperatures)][:, None]
            one *= 1.0 - stay[:, :, None]
            one[:, :, 0] += stay
        if self.steps == 1:
            return one
        return np.linalg.matrix_power(_dense(self._local, one), self.steps)

    def _one_step(self, log_density: np.ndarray) -> np.ndarray:
        m, s = log_density.shape
        moves = np.take(log_density, self._local[:, 1:].ravel(), axis=1).reshape(m, s, 4)
        moves -= log_density[:, :, None]
        np.minimum(moves, 0.0, out=moves)
        np.exp(moves, out=moves)
        moves *= self._quarter_inside
        stay = np.maximum(1.0 - moves.sum(axis=2), 0.0)
        return np.concatenate([stay[:, :, None], moves], axis=2)


def linear_schedule(n_distributions: int) -> np.ndarray:
    """``b_i = i / (T - 1)`` for ``i`` from 0 to ``T - 1``."""
    if n_distributions < 2:
        raise ValueError("need at least two distributions")
    return np.linspace(0.0, 1.0, n_distributions)


@dataclass(frozen=True)
class GridBounds:
    """Exact AIS quantities for one grid target, kernel and schedule.

    Log-estimate moments: ``forward_mean`` = E[L], ``reverse_mean`` = E[U],
    ``forward_sd``, ``reverse_sd`` their standard deviations over chains.
    ``kl_forward`` = KL(q_fwd || q_rev) and ``kl_reverse`` = KL(q_rev || q_fwd)
    over whole trajectories (chain rule); ``bound`` = E[B] is their sum and
    ``bound_from_estimates`` = E[U] - E[L] the same number by another route.
    ``jeffreys`` = KL(p || q) + KL(q || p) for the final-state marginal q.
    ``gap_by_step`` (T-1,) is E_rev - E_fwd of each weight increment; it sums
    to E[B] and shows where along the path the sampler falls behind.
    Distributions are (rows, cols) arrays of probabilities: ``target`` p,
    ``final_marginal`` q (forward output), ``reverse_final_marginal`` (reverse
    output under the engine's convention, ending with one more K_1).
    """

    log_f: np.ndarray
    betas: np.ndarray
    log_z: float
    forward_mean: float
    reverse_mean: float
    forward_sd: float
    reverse_sd: float
    kl_forward: float
    kl_reverse: float
    kl_target_to_final: float
    kl_final_to_target: float
    target: np.ndarray
    final_marginal: np.ndarray
    reverse_final_marginal: np.ndarray
    gap_by_step: np.ndarray = field(repr=False)

    @property
    def n_distributions(self) -> int:
        return self.betas.size

    @property
    def bound(self) -> float:
        """E[B] = KL(q_fwd || q_rev) + KL(q_rev || q_fwd), by the chain rule."""
        return self.kl_forward + self.kl_reverse

    @property
    def bound_from_estimates(self) -> float:
        """E[U] - E[L]; equals :attr:`bound` up to rounding."""
        return self.reverse_mean - self.forward_mean

    @property
    def jeffreys(self) -> float:
        """J(p, q_fwd) of the final state: KL(p || q) + KL(q || p)."""
        return self.kl_target_to_final + self.kl_final_to_target


def grid_bounds(target: str | np.ndarray = "easy", n_distributions: int | None = 100,
                seed: int = 0, *, shape: tuple[int, int] = (7, 7),
                betas: np.ndarray | None = None, log_prior: np.ndarray | None = None,
                kernel: GridKernel | None = None) -> GridBounds:
    """Exact J, E[B], E[L], E[U] and log Z for AIS on a grid.

    ``target`` is ``"easy"``, ``"hard"``, ``"barrier"`` (see
    :func:`bread_stan.exact.grid.grid_log_f`, ``seed`` picks the random ones) or a
    (rows, cols) array of log f.  The schedule is linear in b with
    ``n_distributions`` distributions unless ``betas`` is given; the path starts
    from ``log_prior`` (uniform by default); the kernel defaults to
    :class:`NeighbourMetropolis`, one step per temperature.
    """
    if isinstance(target, str):
        log_f = grid_log_f(target, shape, seed)
    else:
        log_f = np.asarray(target, dtype=float)
        if log_f.ndim != 2:
            raise ValueError("a log f table must be a (rows, cols) array")
    if not np.all(np.isfinite(log_f)):
        raise ValueError("log f must be finite in every cell")
    grid_shape = log_f.shape
    if betas is None:
        if n_distributions is None:
            raise ValueError("give n_distributions or betas")
        betas = linear_schedule(int(n_distributions))
    betas = np.asarray(betas, dtype=float)
    if betas.ndim != 1 or betas.size < 2 or np.any(np.diff(betas) < 0):
        raise ValueError("betas must be a nondecreasing sequence of at least two values")
    if n_distributions is not None and betas.size != n_distributions:
        raise ValueError(f"{betas.size} betas for {n_distributions} distributions")
    lp0 = np.zeros(grid_shape) if log_prior is None else np.asarray(log_prior, dtype=float)
    if lp0.shape != grid_shape or not np.all(np.isfinite(lp0)):
        raise ValueError("log_prior must be finite with the shape of log f")
    lp0 = (lp0 - logsumexp(lp0)).ravel()
    kernel = NeighbourMetropolis(grid_shape) if kernel is None else kernel
    stay = getattr(kernel, "stay_prob", None)
    if stay is not None and stay.size != betas.size:
        raise ValueError(f"the kernel has {stay.size} stay probabilities for {betas.size} betas")

    g = log_f.ravel()
    path = _Path(lp0, g, betas, kernel)
    log_z = path.log_z(betas[-1]) - path.log_z(betas[0])
    # Centring log f by log Z per unit b keeps the second moments well conditioned.
    span = betas[-1] - betas[0]
    g_ref = log_z / span if span > 0 else 0.0

    rev, rev_moments = _reverse(path, g - g_ref)
    fwd, fwd_moments, (kl_f, kl_r) = _forward(path, g - g_ref, rev)

    mean_l, var_l = _mean_var(fwd_moments)
    mean_u, var_u = _mean_var(rev_moments)
    p_final = np.exp(path.log_p(betas[-1:]))[0]
    q_final = fwd[-1]
    steps = np.diff(betas)[:, None] * g
    gap = (np.sum(rev[:-1] * steps, axis=1) - np.sum(fwd[:-1] * steps, axis=1))
    # The engine's (SPEC section 1) reverse chain ends with one more K at b_0.
    log_p0 = path.log_p(betas[:1])
    rev_end = rev[0] @ _dense(kernel.neighbours, kernel.probabilities(log_p0, np.arange(1)))[0]

    return GridBounds(
        log_f=log_f, betas=betas, log_z=float(log_z),
        forward_mean=float(mean_l + log_z), reverse_mean=float(mean_u + log_z),
        forward_sd=float(np.sqrt(var_l)), reverse_sd=float(np.sqrt(var_u)),
        kl_forward=float(kl_f), kl_reverse=float(kl_r),
        kl_target_to_final=float(_kl(p_final, q_final)),
        kl_final_to_target=float(_kl(q_final, p_final)),
        target=p_final.reshape(grid_shape), final_marginal=q_final.reshape(grid_shape),
        reverse_final_marginal=rev_end.reshape(grid_shape), gap_by_step=gap)


def conditional_reverse_means(log_f: np.ndarray, betas: np.ndarray, *,
                              log_prior: np.ndarray | None = None,
                              kernel: GridKernel | None = None) -> np.ndarray:
    """E[U | x* = s] for every start cell s of the reverse chain, (rows, cols): what the
    single-draw interval of the bound (all reverse chains from one x*) is centred on.

    Backward recursion on V_i(x) = E[sum_{k <= i} (b_k - b_{k-1}) log f(x_{k-1}) | x_i = x]
    with V_0 = 0 and x_{i-1} ~ R_i(. | x_i); averaged over x* ~ p it is E[U].
    """
    log_f = np.asarray(log_f, dtype=float)
    betas = np.asarray(betas, dtype=float)
    grid_shape = log_f.shape
    lp0 = np.zeros(grid_shape) if log_prior is None else np.asarray(log_prior, dtype=float)
    lp0 = (lp0 - logsumexp(lp0)).ravel()
    kernel = NeighbourMetropolis(grid_shape) if kernel is None else kernel
    g = log_f.ravel()
    path = _Path(lp0, g, betas, kernel)
    mats = {}
    for lo, log_p, probs in path.blocks(1, betas.size, reverse=True):
        for i, R in _matrices(path, lo, log_p, probs, reverse=True):
            mats[i] = R
    cg = np.diff(betas)[:, None] * g
    value = np.zeros(g.size)
    for i in range(1, betas.size):
        value = mats[i] @ (cg[i - 1] + value)
    return value.reshape(grid_shape)


class _Path:
    """The geometric path ``log_prior + b log f``, normalised, and its kernels."""

    def __init__(self, lp0, g, betas, kernel):
        self.lp0, self.g, self.betas, self.kernel = lp0, g, betas, kernel
        self.block = max(16, _BLOCK_ENTRIES // kernel.neighbours.size)

    def log_z(self, b: float) -> float:
        return float(logsumexp(self.lp0 + b * self.g))

    def log_p(self, b: np.ndarray) -> np.ndarray:
        unnorm = self.lp0 + b[:, None] * self.g
        top = unnorm.max(axis=1, keepdims=True)
        return unnorm - (top + np.log(np.exp(unnorm - top).sum(axis=1, keepdims=True)))

    def blocks(self, start: int, stop: int, *, reverse: bool = False):
        """(first index, log p, kernel probabilities) for blocks of temperatures start..stop-1."""
        starts = range(start, stop, self.block)
        for lo in (reversed(starts) if reverse else starts):
            hi = min(lo + self.block, stop)
            log_p = self.log_p(self.betas[lo:hi])
            yield lo, log_p, self.kernel.probabilities(log_p, np.arange(lo, hi))


def _dense(neighbours: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """(m, S, S) transition matrices from (m, S, k) sparse probabilities."""
    m, s, k = probs.shape
    flat = (np.arange(m)[:, None, None] * (s * s) + np.arange(s)[:, None] * s + neighbours)
    # bincount sums repeated (row, column) pairs, as a sparse-to-dense scatter must.
    return np.bincount(flat.ravel(), weights=probs.ravel(), minlength=m * s * s).reshape(m, s, s)


def _reversal(neighbours: np.ndarray, probs: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """Sparse probabilities of the reversal ``R(x | y) = p(x) K(y | x) / p(y)``.

    Entry (x, j) holds the probability that the reversed kernel moves from
    ``y = neighbours[x, j]`` to x (the same pattern as K, read backwards).
    """
    ratio = log_p[:, :, None] - _gather(log_p, neighbours)
    np.exp(ratio, out=ratio)
    return ratio * probs


def _gather(values: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
    """``values[:, neighbours]`` for (m, S) values and an (S, k) table, as (m, S, k)."""
    m, s = values.shape
    return np.take(values, neighbours.ravel(), axis=1).reshape(m, s, -1)


def _dense_reversal(neighbours: np.ndarray, probs: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """(m, S, S) matrices of the reversed kernels, row = from, column = to."""
    return _dense(neighbours, _reversal(neighbours, probs, log_p)).transpose(0, 2, 1)


class _Moments:
    """Per-state mass and first two moments of the running log weight, (3, S).

    Row 0 is P(x), row 1 E[w; x], row 2 E[w^2; x].  Two buffers swap on each
    move so the row views (and the hot loop) allocate nothing.
    """

    def __init__(self, mass: np.ndarray):
        self._buf = np.zeros((2, 3, mass.size))
        self._buf[0, 0] = mass
        self._rows = [tuple(self._buf[0]), tuple(self._buf[1])]
        self._tmp = np.empty((2, mass.size))
        self._cur = 0

    @property
    def values(self) -> np.ndarray:
        return self._buf[self._cur]

    def add(self, cg: np.ndarray) -> None:
        """Add ``cg(x)`` to the log weight of every chain at x."""
        m0, m1, m2 = self._rows[self._cur]
        step, t = self._tmp
        np.multiply(cg, m0, out=step)
        np.add(m1, m1, out=t)  # w^2 -> w^2 + 2 c w + c^2 = w^2 + c (2 w + c)
        t += step
        t *= cg
        m2 += t
        m1 += step

    def move(self, K: np.ndarray) -> None:
        """Apply the transition matrix K (row = from)."""
        np.matmul(self._buf[self._cur], K, out=self._buf[1 - self._cur])
        self._cur = 1 - self._cur


def _matrices(path: _Path, lo: int, log_p: np.ndarray, probs: np.ndarray, reverse: bool):
    """(index, transition matrix) for each temperature of a block, in small sub-blocks."""
    nb = path.kernel.neighbours
    reversible = getattr(path.kernel, "reversible", False)
    order = range(0, probs.shape[0], _SUB)
    for a in (reversed(order) if reverse else order):
        sl = slice(a, min(a + _SUB, probs.shape[0]))
        if reverse and not reversible:
            mats = _dense_reversal(nb, probs[sl], log_p[sl])
        else:
            mats = _dense(nb, probs[sl])
        js = range(mats.shape[0])
        for j in (reversed(js) if reverse else js):
            yield lo + a + j, mats[j]


def _forward(path: _Path, g: np.ndarray, rev: np.ndarray):
    """Forward marginals (T, S), the moments (3, S) of L joint with the final
    state, and the trajectory KLs against the reverse chain with marginals ``rev``."""
    betas = path.betas
    T = betas.size
    marg = np.empty((T, g.size))
    cg = np.diff(betas)[:, None] * g  # cg[i - 1]: the weight increment at step i
    v = _Moments(np.exp(path.log_p(betas[:1]))[0])
    kls = np.array([_kl(v.values[0], rev[0]), _kl(rev[0], v.values[0])])
    for lo, log_p, probs in path.blocks(1, T):
        for i, K in _matrices(path, lo, log_p, probs, reverse=False):
            marg[i - 1] = v.values[0]
            v.add(cg[i - 1])
            v.move(K)
        marg[lo + probs.shape[0] - 1] = v.values[0]
        kls += _block_kls(path.kernel, lo, log_p, probs, marg, rev)
    return marg, v.values, kls


def _reverse(path: _Path, g: np.ndarray):
    """Reverse-chain marginals (T, S) and the moments (3, S) of U joint with x_0."""
    betas = path.betas
    T = betas.size
    marg = np.empty((T, g.size))
    cg = np.diff(betas)[:, None] * g
    v = _Moments(np.exp(path.log_p(betas[-1:]))[0])
    marg[T - 1] = v.values[0]
    for lo, log_p, probs in path.blocks(1, T, reverse=True):
        for i, R in _matrices(path, lo, log_p, probs, reverse=True):
            v.move(R)
            marg[i - 1] = v.values[0]
            v.add(cg[i - 1])
    return marg, v.values


def _block_kls(kernel: GridKernel, lo: int, log_p: np.ndarray, K: np.ndarray,
               fwd: np.ndarray, rev: np.ndarray) -> np.ndarray:
    """Chain-rule terms of KL(q_fwd || q_rev) and KL(q_rev || q_fwd) for steps lo .. lo + m - 1.

    Each is the expected KL between the two chains' conditionals of x_i given
    x_{i-1}: K_i for q_fwd, and for q_rev, by Bayes' rule on its marginals,
    ``q_rev(y | x) = rev_i(y) R_i(x | y) / rev_{i-1}(x)``.
    """
    nb = kernel.neighbours
    now, before = slice(lo, lo + K.shape[0]), slice(lo - 1, lo - 1 + K.shape[0])
    # K_i(y | x) sits at (x, j) with y = nb[x, j]; so does R_i(x | y).
    R = _reversal(nb, K, log_p)
    joint_rev = _gather(rev[now], nb) * R                    # q_rev(x_{i-1} = x, x_i = y)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond_rev = joint_rev / rev[before][:, :, None]       # q_rev(x_i = y | x_{i-1} = x)
        log_ratio = np.log(np.divide(K, cond_rev, out=np.ones_like(K), where=K > 0))
    joint_fwd = fwd[before][:, :, None] * K
    return np.array([np.vdot(joint_fwd, log_ratio), -np.vdot(joint_rev, log_ratio)])


def _mean_var(v: np.ndarray) -> tuple[float, float]:
    mean = v[1].sum()
    return mean, max(v[2].sum() - mean**2, 0.0)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of two probability vectors (inf if p is not absolutely continuous)."""
    p, q = p.ravel(), q.ravel()
    support = p > 0
    if np.any(q[support] <= 0):
        return np.inf
    return float(np.sum(p[support] * (np.log(p[support]) - np.log(q[support]))))

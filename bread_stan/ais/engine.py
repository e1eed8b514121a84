"""Forward and reverse annealed importance sampling: the annealing loop.

Forward, from exact prior draws u_1 (stochastic lower bound on log p(y))::

    logw = 0
    for t = 2..T:   logw += (b_t - b_{t-1}) * loglik(u_{t-1});   u_t ~ K_t(. | u_{t-1})

Reverse, from exact posterior draws v_T (``-logw_rev`` is a stochastic upper bound)::

    logw_rev = 0
    for t = T..2:   logw_rev += (b_{t-1} - b_t) * loglik(v_t);   v_{t-1} ~ K_{t-1}(. | v_t)

Which kernels run.  Both directions follow SPEC literally: forward applies
K_2..K_T, reverse K_{T-1}..K_1, each transition *after* the increment that uses
the state before it.  Each is an exact AIS estimator on its own (unbiased for
p(y), respectively 1/p(y)).  The pair is also the exact mirror image needed for
E[U] - E[L] = KL(q_fwd || q_rev) + KL(q_rev || q_fwd): the time reversal of the
forward chain would start with K_T at the exact posterior draw, and K_T leaves
that draw exactly distributed, so the reverse weights have the same
distribution whether or not it is applied; likewise the reverse chain's final K_1
acts after its last increment.  Only the final states differ: forward's has the
extra K_T (which can only bring it closer to the posterior), reverse's the extra
K_1.  Both directions run T - 1 transitions, so they batch together.

Kernels are frozen (a :class:`~bread_stan.ais.frozen_kernels.KernelSchedule`
or :class:`~bread_stan.ais.frozen_kernels.InterpolatedSchedule`), so the same
K_t runs in both directions.  Weights are accumulated in log space.  Memory is
flat in T: betas and kernel params are read one temperature at a time (lazy
:class:`~bread_stan.ais.betas.Betas` and interpolated schedules compute them in
blocks), and the running estimates are recorded at a bounded number of blocks
of temperatures (``increments_every``, ``RunConfig.increment_blocks``).

:func:`anneal` is the toolkit's one annealing loop: forward and reverse chains in one
batch per call into the model, with a policy for what happens between an increment and
the next transition (none for AIS; resampling for SMC, :mod:`bread_stan.ais.smc`).
:mod:`bread_stan.ais.runs` runs any path through it, for one or several numbers of
temperatures.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .frozen_kernels import KernelSchedule
from ..kernels.base import ChainState, Kernel, initial_state
from ..kernels.params import concat_params
from .results import DirectionResult
from ..rng import ChainRandom, chain_seed_sequences
from .run_config import RunConfig, jsonable_config, step_schedule
from ..progress import PaceLog, progress_bar
from ..target import Target
from ..errors import InputError

__all__ = ["AISRun", "DirectionRun", "Group", "anneal", "Policy", "Increments", "Batch",
           "forward", "reverse", "forward_and_reverse", "check_starts", "TransitionTally",
           "chain_diagnostics", "wall_share", "batch_params", "as_schedule", "RunConfig",
           "step_schedule", "jsonable_config"]

log = logging.getLogger(__name__)


@dataclass
class DirectionRun:
    """What one direction leaves over one schedule, per chain (AIS) or per run (SMC).

    ``log_estimates``: the per-chain (per-run) estimate of log p(y), forward a
    stochastic lower bound, reverse an upper one.  ``cumulative`` (n, k), when recorded,
    is the running estimate after the temperatures ``cumulative_at`` (indices into the
    betas, in temperature order for both directions, so forward and reverse columns line
    up and the last column equals ``log_estimates``).  ``chain_stats`` holds per-chain
    kernel diagnostics.
    """

    direction: str
    log_estimates: np.ndarray
    final_positions: np.ndarray
    n_grad: int
    wall_time: float
    diagnostics: dict[str, float]
    chain_stats: dict[str, np.ndarray]
    cumulative: np.ndarray | None = field(default=None, kw_only=True)
    cumulative_at: np.ndarray | None = field(default=None, kw_only=True)
    schedule: KernelSchedule | None = field(default=None, repr=False, kw_only=True)

    def to_direction_result(self) -> DirectionResult:
        """The form stored in :class:`~bread_stan.ais.results.StepResult`."""
        return DirectionResult(self.log_estimates, self.wall_time, self.n_grad,
                               dict(self.diagnostics), self.cumulative, self.cumulative_at)


@dataclass
class AISRun(DirectionRun):
    """One direction of AIS over one schedule, per chain: :class:`DirectionRun` with
    ``log_weights``, forward logw or reverse logw_rev (``log_estimates`` is logw
    forward, ``-logw_rev`` reverse)."""

    log_weights: np.ndarray = field(kw_only=True)

    @property
    def n_chains(self) -> int:
        return self.log_weights.size

    def to_dataframe(self) -> pd.DataFrame:
        """One row per chain: estimate, weight and kernel diagnostics."""
        return pd.DataFrame({"direction": self.direction, "chain": np.arange(self.n_chains),
                             "log_estimate": self.log_estimates,
                             "log_weight": self.log_weights, **self.chain_stats})


@dataclass
class Group:
    """Chains of one direction inside a (possibly shared) batch."""

    direction: str
    start: np.ndarray
    seed: int | np.random.SeedSequence
    stream: int
    first_chain: int = 0  # the index of the group's first chain in its random streams
    seqs: list | None = None  # each chain's kernel stream, where not (seed, stream, i)

    @property
    def n(self) -> int:
        return self.start.shape[0]

    def seed_sequences(self) -> list:
        """Each chain's kernel stream: ``seqs``, else (seed, stream, first_chain + i)."""
        if self.seqs is not None:
            return list(self.seqs)
        return chain_seed_sequences(self.seed, self.stream,
                                    range(self.first_chain, self.first_chain + self.n))


def _as_schedule(schedule) -> KernelSchedule:
    if hasattr(schedule, "betas") and hasattr(schedule, "params_at"):
        return schedule
    return KernelSchedule(np.asarray(schedule, dtype=float))  # a bare array of betas


def _check_start(target: Target, start, n_chains: int | None, what: str) -> np.ndarray:
    x = np.asarray(start, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != target.dim:
        raise InputError(f"{what} draws must have shape (n, {target.dim}), got {np.shape(start)}")
    if n_chains is not None:
        if x.shape[0] == 1:
            x = np.repeat(x, n_chains, axis=0)
        elif x.shape[0] != n_chains:
            raise InputError(f"got {x.shape[0]} {what} draws for n_chains={n_chains}")
    if not np.all(np.isfinite(x)):
        raise InputError(f"{what} draws contain non-finite values")
    return np.ascontiguousarray(x)


def anneal(target: Target, kernel: Kernel, schedule, groups: list[Group], *,
           increments_every: int | None, progress: bool, policy: "Policy | None" = None,
           desc: str | None = None) -> list:
    """Run the groups' chains in one batch through the schedule: the one annealing loop.

    Forward groups run in temperature order, reverse groups as reverse AIS chains
    (see the module docstring).  ``policy`` decides what happens between an increment
    and the transition that follows it, and what each group returns: None is AIS (no
    resampling; one :class:`AISRun` per group, running estimates every
    ``increments_every`` temperatures); SMC passes its epochs and retained slot
    (:class:`bread_stan.ais.smc.Resampling`).
    """
    schedule = _as_schedule(schedule)
    betas = schedule.betas  # an array or a lazy Betas: read entry by entry
    T = len(betas)
    spt = int(getattr(schedule, "steps_per_temperature", 1))
    bounds = np.cumsum([0] + [g.n for g in groups])
    n = int(bounds[-1])
    is_rev = np.concatenate([np.full(g.n, g.direction == "reverse") for g in groups])
    policy = policy if policy is not None else Increments(increments_every)
    rng = ChainRandom([ss for g in groups for ss in g.seed_sequences()])
    t0 = time.perf_counter()
    state = initial_state(target, np.concatenate([g.start for g in groups]),
                          gradient=kernel.needs_gradient)
    _check_support(target, state, n)
    policy.begin(groups, bounds, T)
    logw = np.zeros(n)  # AIS: the log weights; SMC: the current epoch's
    tally = TransitionTally(n)
    desc = desc or "AIS " + "+".join(g.direction for g in groups)
    bar = progress_bar(T - 1, progress, desc)
    pace = (PaceLog(f"{desc}, {T} distributions", T - 1, "transitions")
            if progress and bar is None else None)
    try:
        for k in range(1, T):
            # Forward: temperature k (0-based) after the interval (b_{k-1}, b_k];
            # reverse: the interval (b_{T-1-k}, b_{T-k}], then its kernel at T-1-k.
            policy.before_increment(k, state)
            b_fwd, b_rev = float(betas[k]), float(betas[T - 1 - k])
            beta = np.where(is_rev, b_rev, b_fwd)
            coef = np.where(is_rev, b_rev - float(betas[T - k]), b_fwd - float(betas[k - 1]))
            ll = state.evaluation.log_lik
            with np.errstate(invalid="ignore"):
                inc = coef * np.where(np.isnan(ll), -np.inf, ll)
            logw += inc
            state = policy.after_increment(k, inc, logw, state)
            params = batch_params(schedule, [g.direction == "reverse" for g in groups], bounds,
                                  T, k, target.dim)
            state = tally.transitions(kernel, rng, state, target, beta, params, spt)
            if bar is not None:
                bar.update()
            elif pace is not None:
                pace.tick(k)
    finally:
        if bar is not None:
            bar.close()
    return policy.finish(Batch(groups, bounds, state, logw, tally, (T - 1) * spt,
                               time.perf_counter() - t0, schedule))


def _check_support(target: Target, state, n: int) -> None:
    bad = ~np.isfinite(state.evaluation.log_prior)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        stan = (getattr(target, "last_errors", None) or {}).get(first)
        said = f"; Stan says: {stan}" if stan else ""
        raise InputError(f"{int(bad.sum())} of {n} start points have zero or non-computable "
                         f"prior density under the model (first: chain {first}{said}). "
                         "Exact prior and posterior draws must lie in the model's support: "
                         "does the simulator draw values that the model rejects?")


@dataclass
class Batch:
    """What the loop leaves for its policy to report: the groups and their rows, the
    final state and weights, the tally of transitions, the wall time."""

    groups: list[Group]
    bounds: np.ndarray
    state: ChainState
    logw: np.ndarray
    tally: "TransitionTally"
    n_trans: int
    wall: float
    schedule: object

    @property
    def rows(self) -> list[tuple[Group, int, int]]:
        return list(zip(self.groups, self.bounds[:-1], self.bounds[1:]))

    def wall_of(self, lo: int, hi: int) -> float:
        """The share of the batch's wall time charged to rows lo:hi."""
        g_grad = int(self.tally.n_grad[lo:hi].sum())
        return self.wall * wall_share(g_grad, int(self.tally.n_grad.sum()), hi - lo,
                                      int(self.bounds[-1]), len(self.groups))


class Policy:
    """What the annealing loop does besides AIS's increments and transitions: hooks
    called before each increment and after it (where SMC resamples), and the results
    it makes of the finished batch."""

    def begin(self, groups: list[Group], bounds: np.ndarray, T: int) -> None:
        pass

    def before_increment(self, k: int, state: ChainState) -> None:
        pass

    def after_increment(self, k: int, inc: np.ndarray, logw: np.ndarray,
                        state: ChainState) -> ChainState:
        return state

    def finish(self, batch: Batch) -> list:
        raise NotImplementedError


class Increments(Policy):
    """AIS: no resampling; the increments summed in blocks of ``every`` temperatures
    for the running estimates (None: not recorded); one :class:`AISRun` per group."""

    def __init__(self, every: int | None):
        if every is not None and int(every) < 1:
            raise InputError("increments_every must be a positive integer")
        self.every = None if every is None else int(every)

    def begin(self, groups, bounds, T):
        self.T = T
        self.n_blocks = 0 if self.every is None else -(-(T - 1) // self.every)
        self.blocks = np.zeros((int(bounds[-1]), self.n_blocks))
        self.is_rev = np.concatenate([np.full(g.n, g.direction == "reverse") for g in groups])

    def after_increment(self, k, inc, logw, state):
        if self.n_blocks:
            interval = np.where(self.is_rev, self.T - k, k)
            self.blocks[np.arange(inc.size), (interval - 1) // self.every] += inc
        return state

    def finish(self, batch: Batch) -> list["AISRun"]:
        runs = []
        for g, lo, hi in batch.rows:
            sl = slice(lo, hi)
            w = batch.logw[sl].copy()
            sign = -1.0 if g.direction == "reverse" else 1.0
            cumulative = cumulative_at = None
            if self.n_blocks:
                cumulative = np.cumsum(sign * self.blocks[sl], axis=1)
                cumulative_at = np.minimum(np.arange(1, self.n_blocks + 1) * self.every,
                                           self.T - 1)
            stats = batch.tally.stats(sl, batch.n_trans)
            diagnostics = chain_diagnostics(w, stats, batch.n_trans,
                                            shared_batch=len(batch.groups) > 1)
            runs.append(AISRun(
                direction=g.direction, log_weights=w, log_estimates=sign * w,
                final_positions=batch.state.position[sl].copy(),
                n_grad=int(batch.tally.n_grad[sl].sum()), wall_time=batch.wall_of(lo, hi),
                diagnostics=diagnostics, chain_stats=stats, cumulative=cumulative,
                cumulative_at=cumulative_at, schedule=batch.schedule))
        return runs


def wall_share(g_grad: int, total_grad: int, rows: int, n: int, n_groups: int) -> float:
    """The share of a shared batch's wall time charged to a group: in proportion to its
    gradients, or to its rows when the kernel takes none (IMH: one density evaluation
    per chain and step)."""
    if n_groups == 1:
        return 1.0
    return g_grad / total_grad if total_grad > 0 else rows / n


def chain_diagnostics(log_weights: np.ndarray, stats: dict[str, np.ndarray], n_trans: int,
                      *, shared_batch: bool) -> dict[str, float]:
    """A direction's kernel diagnostics from its per-chain ``stats`` (``n_trans``
    transitions per chain); chains run in blocks and joined give the numbers of
    one batch."""
    n = log_weights.size
    return {
        "accept_stat": float(np.mean(stats["accept_stat"])),
        "divergences": float(stats["divergences"].sum()),
        "divergent_chains": float(np.count_nonzero(stats["divergences"])),
        "tree_depth": float(np.mean(stats["tree_depth"])),
        "grad_per_transition": int(stats["n_grad"].sum()) / max(n * n_trans, 1),
        "non_finite_estimates": float(np.count_nonzero(~np.isfinite(log_weights))),
        "shared_batch": float(shared_batch),
    }


def batch_params(schedule, reverse: Sequence[bool], bounds, T, k, d):
    """Kernel params for iteration k: one object for all groups' chains (group i
    holds rows ``bounds[i]:bounds[i + 1]``; a reverse group is at temperature
    T - 1 - k)."""
    parts = [(schedule.params_at(T - 1 - k if r else k), hi - lo)
             for r, lo, hi in zip(reverse, bounds[:-1], bounds[1:])]
    if len(parts) == 1 or all(p is None for p, _ in parts):
        return parts[0][0]
    return concat_params(parts, d)


class TransitionTally:
    """Per-chain totals of a batch's transitions: gradients, acceptance, divergences
    and tree depth, summed over every kernel step."""

    def __init__(self, n: int):
        self.n_grad = np.zeros(n, dtype=np.int64)
        self.accept_sum = np.zeros(n)
        self.divergences = np.zeros(n, dtype=np.int64)
        self.depth_sum = np.zeros(n)

    def transitions(self, kernel: Kernel, rng, state, target: Target, beta, params,
                    steps: int):
        """``steps`` kernel steps on the batch at ``beta``, tallied; the new state."""
        for _ in range(steps):
            state, info = kernel.step(rng, state, target, beta, params)
            self.n_grad += info.n_grad
            self.accept_sum += info.accept_stat
            self.divergences += info.divergent
            self.depth_sum += info.tree_depth
        return state

    def stats(self, rows: slice, n_trans: int) -> dict[str, np.ndarray]:
        """The per-chain statistics of ``rows`` (means over ``n_trans`` transitions)."""
        return {"accept_stat": self.accept_sum[rows] / n_trans,
                "divergences": self.divergences[rows],
                "tree_depth": self.depth_sum[rows] / n_trans, "n_grad": self.n_grad[rows]}


def forward(target: Target, kernel: Kernel, schedule, start, *, seed,
            stream: int = 0, increments_every: int | None = None,
            progress: bool = False, first_chain: int = 0) -> AISRun:
    """Forward AIS from exact prior draws ``start`` (n, d); estimates are lower bounds.

    ``schedule`` is a frozen :class:`KernelSchedule` (or any object with
    ``betas``, ``params_at(t)`` and ``steps_per_temperature``; a bare array of
    betas means a kernel without params and one step per temperature).
    Chain i uses random stream (seed, stream, first_chain + i), so a block of
    chains run alone gives the numbers those chains give in a larger batch.
    """
    start = _check_start(target, start, None, "prior")
    return anneal(target, kernel, schedule,
                   [Group("forward", start, seed, stream, first_chain)],
                   increments_every=increments_every, progress=progress)[0]


def reverse(target: Target, kernel: Kernel, schedule, start, *, seed,
            stream: int = 1, increments_every: int | None = None,
            progress: bool = False, n_chains: int | None = None,
            first_chain: int = 0) -> AISRun:
    """Reverse AIS from exact posterior draws ``start``; estimates are upper bounds.

    ``start`` is (n, d), or a single draw ((d,) or (1, d)) repeated for
    ``n_chains`` chains (default 1).  Chain i uses random stream (seed, stream,
    first_chain + i).
    """
    start = _check_start(target, start, n_chains, "posterior")
    return anneal(target, kernel, schedule,
                   [Group("reverse", start, seed, stream, first_chain)],
                   increments_every=increments_every, progress=progress)[0]


def check_starts(target: Target, prior_draws, posterior_draws) -> tuple[np.ndarray, np.ndarray]:
    """The forward starts (n, d) and the reverse starts, a single posterior draw
    repeated for n chains; InputError for shapes or values that cannot start chains."""
    prior = _check_start(target, prior_draws, None, "prior")
    single = np.ndim(posterior_draws) == 1 or np.shape(posterior_draws)[0] == 1
    post = _check_start(target, posterior_draws, prior.shape[0] if single else None,
                        "posterior")
    return prior, post


def forward_and_reverse(target: Target, kernel: Kernel, schedule, prior_draws,
                        posterior_draws, *, seed, streams: tuple[int, int] = (0, 1),
                        increments_every: int | None = None, progress: bool = False
                        ) -> tuple[AISRun, AISRun]:
    """Forward chains from ``prior_draws`` (n, d) and reverse chains from
    ``posterior_draws`` in one batch (the batch :func:`run` runs for one step count);
    a single posterior draw is repeated for n reverse chains."""
    prior, post = check_starts(target, prior_draws, posterior_draws)
    fwd, rev = anneal(target, kernel, schedule,
                      [Group("forward", prior, seed, streams[0]),
                       Group("reverse", post, seed, streams[1])],
                      increments_every=increments_every, progress=progress)
    return fwd, rev


def as_schedule(schedule) -> KernelSchedule:
    """A frozen kernel schedule as the engine reads it (a bare array of betas becomes
    a schedule without kernel params, one step per temperature)."""
    return _as_schedule(schedule)

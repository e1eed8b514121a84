"""Sequential Monte Carlo both ways: AIS with resampling, forward and conditional.

P particles follow the tempered path of the AIS engine (:mod:`bread_stan.ais.engine`)
with its frozen kernels and its increments.  Index the temperatures 0..T-1 (0-based, as
the betas); interval j (1..T-1) adds ``(b_j - b_{j-1}) * loglik`` at the state before
the transition at temperature j.  Each particle accumulates its weight ``W`` within an
*epoch*; at the resampling steps ``R`` (a sorted subset of 1..T-2, fixed before any
scored run) an epoch ends after interval k's increment and before the move at
temperature k::

    forward run:  x_0^i ~ prior (i = 1..P);  W_i = 0;  logZ = 0
      for k = 1..T-1:
          W_i += (b_k - b_{k-1}) * loglik(x^i)
          if k in R:  logZ += LME_i W_i;  ancestors a_i ~ Categorical(softmax(W));
                      x^i = x^{a_i};  W_i = 0
          x^i ~ K_k(. | x^i)
      logZ += LME_i W_i;   output = x^o with o ~ Categorical(softmax(W))

LME is log-mean-exp.  Z-hat = exp(logZ) is unbiased for p(y), so ``L = logZ`` is a
stochastic lower bound on log p(y).

The conditional (reverse) run starts from an exact posterior draw x*: the reverse AIS
chain of the engine (v_{T-1} = x*, v_{j-1} ~ K_{j-1}(. | v_j)) is read forward as the
retained path (the retained particle's state before interval j is v_j) and held in one
slot; the P - 1 free particles start from the prior and move with K_k as above; at each
resampling step all P weights (the retained particle's included) are normalised and only
the free slots draw ancestors, from all P.  ``U = logZ`` of this run, by the same
formula, is a stochastic upper bound on log p(y), and E[U] - E[L] bounds the Jeffreys
divergence between the forward run's output and the posterior.

With P = 1 and no resampling both runs are the AIS chains, bit for bit: forward run r
uses the random stream of AIS forward chain r (its particles are chains rP .. rP + P - 1
of the stream), the retained path is AIS reverse chain r, and the retained weight is
accumulated in the reverse chain's order.  The free particles and each run's ancestor
draws have streams of their own (:attr:`bread_stan.rng.Stream.SMC_FREE`,
:attr:`bread_stan.rng.Stream.SMC_RESAMPLE`), keyed by (seed, purpose, run index), so a
run gives the same numbers in any batch or shard.

Resampling steps come from the pilot (:func:`resampling_steps`), with sd(b) the pilot's
standard deviation of the log likelihood at inverse temperature b.  The variance of a
particle's log weight gathered since the last resampling at step s is estimated as if the
particles had not moved since (rule "frozen", the default: ``(b_k - b_s)^2 sd(b_s)^2``,
the weight of a particle equilibrated at b_s and reweighted to b_k, as adaptive
tempering does) or as if each transition mixed completely (rule "mixed": the sum of
``(b_j - b_{j-1})^2 sd(b_{j-1})^2``, smaller).  For log-normal weights the effective
sample size is about ``P exp(-var)``, so an epoch ends where the variance first exceeds
``-log(ess_fraction)`` (0.5: ESS below P/2).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from . import engine
from ..kernels.base import ChainState, Kernel
from ..rng import Stream, chain_seed_sequences
from ..target import Evaluation, Target

__all__ = ["SMCConfig", "SMCRun", "Resampling", "forward_smc", "conditional_smc",
           "forward_and_conditional", "check_starts", "resampling_steps", "log_mean_exp"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SMCConfig:
    """Particles per run and when to resample.

    ``resample_at``: explicit resampling steps (interval indices in 1..T-2, for every
    T), or None to choose them from the pilot by :func:`resampling_steps` with
    ``ess_fraction`` and ``rule`` ("frozen" or "mixed").  ``resample_every``: resample
    every that many steps instead
    (when the pilot has no log-likelihood curve, or for tests).
    """

    particles: int = 16
    ess_fraction: float = 0.5
    resample_at: tuple[int, ...] | None = None
    resample_every: int | None = None
    rule: str = "frozen"

    def __post_init__(self):
        if self.rule not in ("frozen", "mixed"):
            raise ValueError(f"unknown resampling rule {self.rule!r}; use 'frozen' or 'mixed'")
        if isinstance(self.particles, bool) or int(self.particles) != self.particles \
                or self.particles < 1:
            raise ValueError(f"particles must be a whole number >= 1; got {self.particles!r}")
        if not 0.0 < self.ess_fraction < 1.0:
            raise ValueError(f"ess_fraction must be in (0, 1); got {self.ess_fraction}")
        if self.resample_every is not None and self.resample_every < 1:
            raise ValueError(f"resample_every must be >= 1; got {self.resample_every}")
        if self.resample_at is not None:
            object.__setattr__(self, "resample_at",
                               tuple(sorted({int(k) for k in self.resample_at})))

    def steps_for(self, betas, tuned=None) -> np.ndarray:
        """The resampling steps for this schedule of betas (see the class docstring)."""
        T = len(betas)
        if self.particles == 1:
            return np.zeros(0, dtype=np.int64)  # one particle: resampling changes nothing
        if self.resample_at is not None:
            at = np.asarray(self.resample_at, dtype=np.int64)
            return at[(at >= 1) & (at <= T - 2)]
        if self.resample_every is not None:
            return np.arange(self.resample_every, T - 1, self.resample_every, dtype=np.int64)
        curve = getattr(tuned, "loglik_sd", None)
        if curve is None:
            raise ValueError("choosing resampling steps needs the pilot's log-likelihood curve "
                             "(a pilot-tuned kernel); give resample_at or resample_every instead")
        return resampling_steps(betas, tuned.grid_betas, curve, tuned.beta_floor,
                                self.ess_fraction, rule=self.rule)


def resampling_steps(betas, grid_betas, loglik_sd, beta_floor: float,
                     ess_fraction: float = 0.5, *, rule: str = "frozen") -> np.ndarray:
    """Steps k (in 1..T-2) after whose increment the particles are resampled.

    The pilot's sd of the log likelihood, ``loglik_sd`` at ``grid_betas``, is
    interpolated linearly in ``log(beta + beta_floor)``.  Since the last resampling
    at step s (0 at the start), the log weights' variance is estimated as
    ``(b_k - b_s)^2 sd(b_s)^2`` (``rule="frozen"``: particles equilibrated at b_s that
    have not moved since) or as the sum of ``(b_j - b_{j-1})^2 sd(b_{j-1})^2`` over the
    intervals j since s (``rule="mixed"``: each transition mixes completely); step k
    resamples where it first exceeds ``-log(ess_fraction)`` (the expected ESS of
    log-normal weights, ``P exp(-var)``, falls below ``ess_fraction * P``).  A pure
    function of the schedule and the pilot.
    """
    if rule not in ("frozen", "mixed"):
        raise ValueError(f"unknown resampling rule {rule!r}; use 'frozen' or 'mixed'")
    b = np.asarray(betas, dtype=float)
    grid = np.log(np.asarray(grid_betas, dtype=float) + beta_floor)
    sd = np.interp(np.log(b[:-1] + beta_floor), grid, np.asarray(loglik_sd, dtype=float))
    var = (np.diff(b) * sd) ** 2  # var[j - 1]: interval j
    limit = -math.log(ess_fraction)
    steps, acc, s = [], 0.0, 0
    for j in range(1, b.size - 1):  # never after the last interval
        acc = acc + var[j - 1] if rule == "mixed" else ((b[j] - b[s]) * sd[s]) ** 2
        if acc > limit:
            steps.append(j)
            acc, s = 0.0, j
    return np.asarray(steps, dtype=np.int64)


def log_mean_exp(w: np.ndarray, axis: int = -1) -> np.ndarray:
    """``log(mean(exp(w)))`` along ``axis``, stably; one finite value returns itself
    exactly; all -inf gives -inf."""
    w = np.asarray(w, dtype=float)
    m = np.max(w, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = np.sum(np.exp(w - safe), axis=axis, keepdims=True)
        out = safe + np.log(s) - math.log(w.shape[axis])
    out = np.where(np.isneginf(m), -np.inf, out)
    return np.squeeze(out, axis=axis)


@dataclass
class SMCRun(engine.DirectionRun):
    """One direction of SMC over one schedule, per run: :class:`~.engine.DirectionRun`
    with the resampling steps and the particle count.

    ``log_estimates``: log Z-hat per run (forward: L; conditional: U).
    ``final_positions``: forward, each run's output particle; conditional, the
    retained reverse chain's final state (as the AIS reverse chain's).
    """

    resample_at: np.ndarray
    particles: int

    @property
    def n_runs(self) -> int:
        return self.log_estimates.size


@dataclass
class _Lanes:
    """A block of lanes (particles or chains) of one kind inside one batch."""

    kind: str                 # "smc" (P per run), "free" (P - 1 per run), "retained" (1 per run)
    start: np.ndarray         # (n_runs * per_run, d), run-major
    seqs: list                # one SeedSequence per lane (its kernel stream)
    n_runs: int
    per_run: int
    resample: list | None = None        # one Generator per run (smc, free)
    retained: dict | None = None        # free: the retained paths' record (see _sweep)

    @property
    def n(self) -> int:
        return self.n_runs * self.per_run

    @property
    def reverse(self) -> bool:
        return self.kind == "retained"


class Resampling(engine.Policy):
    """SMC as a policy of the annealing loop (:func:`engine.anneal
    <bread_stan.ais.engine.anneal>`): the forward lanes' weights are the current epoch's,
    closed at the resampling steps ``resample_at`` (each run's log-mean-exp added to its
    log Z-hat, ancestors drawn, weights reset); running log Z-hats at the block ends
    every ``every`` temperatures.  A retained block (the reverse chains read forward)
    records, per run, its exact per-epoch weights (``epoch_w``, accumulated in the
    reverse chain's order), its weights summed over the segments between block ends and
    epoch ends (``segments``, for the running estimates) and its states ``v_k`` at the
    resampling steps k (``states``); a free block reads them from its ``retained``
    dict.  :meth:`finish` gives one dict of raw outputs per block."""

    def __init__(self, lanes: list[_Lanes], resample_at: np.ndarray, every: int | None):
        self.lanes = lanes
        self.resample_at = resample_at
        self.every = every

    def groups(self) -> list[engine.Group]:
        """The loop's groups: one per block of lanes, with the lanes' own streams."""
        return [engine.Group("reverse" if g.reverse else "forward", g.start, None, 0,
                             seqs=g.seqs) for g in self.lanes]

    def begin(self, groups, bounds, T):
        self.T, self.bounds = T, bounds
        is_rev = np.concatenate([np.full(g.n, g.reverse) for g in self.lanes])
        self.rev_rows = np.flatnonzero(is_rev)
        self.resample_set = {int(k) for k in self.resample_at}
        ends = np.zeros(0, dtype=np.int64)
        if self.every is not None:
            ends = np.minimum(np.arange(1, -(-(T - 1) // self.every) + 1) * self.every, T - 1)
        self.ends = ends
        self.end_set = {int(k) for k in ends[:-1]}  # the last is T - 1: the final estimate
        self.cuts = np.union1d(ends, self.resample_at)
        self.rev_epoch = np.zeros((self.rev_rows.size, len(self.resample_at) + 1))
        self.rev_seg = np.zeros((self.rev_rows.size, self.cuts.size + 1))
        self.rev_states: dict[int, ChainState] = {}
        self.finished = [np.zeros(g.n_runs) for g in self.lanes]  # finished epochs' LME
        self.running = [[] for _ in self.lanes]                   # log Z-hat at block ends
        self.epoch = 0

    def weights(self, W: np.ndarray, g: _Lanes, lo: int, k: int) -> np.ndarray:
        """(n_runs, P) weights of the current epoch up to interval k (retained first)."""
        w = W[lo:lo + g.n].reshape(g.n_runs, g.per_run)
        if g.kind != "free":
            return w
        rec = g.retained
        if k in self.resample_set or k == self.T - 1:
            own = rec["epoch_w"][:, self.epoch]  # exact: the epoch's full weight
        else:  # a block end inside the epoch: the segments so far (reporting only)
            first = (0 if self.epoch == 0 else
                     int(np.searchsorted(self.cuts, self.resample_at[self.epoch - 1])) + 1)
            own = rec["segments"][:, first:int(np.searchsorted(self.cuts, k)) + 1].sum(axis=1)
        return np.concatenate([own[:, None], w], axis=1)

    def before_increment(self, k, state):
        if self.rev_rows.size and (self.T - k) in self.resample_set:
            self.rev_states[self.T - k] = state.take(self.rev_rows)  # v_{T-k}, before it

    def after_increment(self, k, inc, W, state):
        if self.rev_rows.size:
            j = self.T - k  # the interval the retained lanes just added
            self.rev_epoch[:, int(np.searchsorted(self.resample_at, j))] += inc[self.rev_rows]
            self.rev_seg[:, int(np.searchsorted(self.cuts, j))] += inc[self.rev_rows]
        if k in self.end_set:
            for i, (g, lo) in enumerate(zip(self.lanes, self.bounds[:-1])):
                if not g.reverse:
                    self.running[i].append(self.finished[i] + log_mean_exp(
                        self.weights(W, g, lo, k), axis=1))
        if k in self.resample_set:
            state = self._resample(state, W, k)
            self.epoch += 1
        return state

    def _resample(self, state: ChainState, W: np.ndarray, k: int) -> ChainState:
        """Close the epoch at step k: add each run's LME to ``finished``, draw ancestors
        (multinomial; free slots from all P, the retained included), reset the weights."""
        n = int(self.bounds[-1])
        src = np.arange(n)
        extra = None
        for i, (g, lo) in enumerate(zip(self.lanes, self.bounds[:-1])):
            if g.reverse:
                continue
            w = self.weights(W, g, lo, k)
            self.finished[i] += log_mean_exp(w, axis=1)
            anc = np.stack([_categorical(g.resample[r], w[r], g.per_run)
                            for r in range(g.n_runs)])
            runs = np.repeat(np.arange(g.n_runs), g.per_run)
            if g.kind == "smc":
                src[lo:lo + g.n] = lo + runs * g.per_run + anc.ravel()
            else:  # free: ancestor 0 is the run's retained particle (row n + run of `extra`)
                if extra is not None:
                    raise ValueError("one block of free particles per batch")
                a = anc.ravel()
                src[lo:lo + g.n] = np.where(a == 0, n + runs, lo + runs * g.per_run + a - 1)
                extra = g.retained["states"][k]
            W[lo:lo + g.n] = 0.0
        if extra is None:
            return state.take(src)
        return _joined(state, extra).take(src)

    def finish(self, batch: engine.Batch) -> list[dict]:
        out = []
        for i, (g, (_, lo, hi)) in enumerate(zip(self.lanes, batch.rows)):
            res = {**batch.tally.stats(slice(lo, hi), batch.n_trans),
                   "position": batch.state.position[lo:hi].copy(), "ends": self.ends,
                   "cuts": self.cuts, "n_trans": batch.n_trans, "wall": batch.wall_of(lo, hi)}
            if g.reverse:
                rows = np.searchsorted(self.rev_rows, np.arange(lo, hi))
                res.update(epoch_w=-self.rev_epoch[rows], segments=-self.rev_seg[rows],
                           logw_rev=batch.logw[lo:hi].copy(),
                           states={k: s.take(rows) for k, s in self.rev_states.items()})
            else:
                w = self.weights(batch.logw, g, lo, self.T - 1)
                res.update(final_w=w, log_z=self.finished[i] + log_mean_exp(w, axis=1),
                           running=self.running[i])
            out.append(res)
        return out


def _sweep(target: Target, kernel: Kernel, schedule, lanes: list[_Lanes],
           resample_at: np.ndarray, every: int | None, progress: bool, desc: str) -> list[dict]:
    """The lanes through the schedule in one batch of the annealing loop, resampled by
    :class:`Resampling`; one dict of raw outputs per block."""
    policy = Resampling(lanes, resample_at, every)
    return engine.anneal(target, kernel, schedule, policy.groups(), increments_every=every,
                         progress=progress, policy=policy, desc=desc)


def _joined(state: ChainState, extra: ChainState) -> ChainState:
    """The batch's states with ``extra`` rows appended (the retained particles, which
    free slots may draw as ancestors)."""
    ev, ex = state.evaluation, extra.evaluation
    cat = lambda a, b: None if a is None else np.concatenate([a, b])  # noqa: E731
    return ChainState(np.concatenate([state.position, extra.position]),
                      Evaluation(cat(ev.log_prior, ex.log_prior), cat(ev.log_lik, ex.log_lik),
                                 cat(ev.grad_prior, ex.grad_prior),
                                 cat(ev.grad_lik, ex.grad_lik)))


def _categorical(gen: np.random.Generator, logw: np.ndarray, size: int) -> np.ndarray:
    """``size`` independent indices drawn with probability proportional to exp(logw)."""
    m = np.max(logw)
    if not np.isfinite(m):
        raise FloatingPointError("every particle of a run has zero or non-finite weight")
    c = np.cumsum(np.exp(logw - m))
    return np.minimum(np.searchsorted(c, gen.random(size) * c[-1], side="right"), c.size - 1)


def _generators(seed, stream: int, runs: range) -> list[np.random.Generator]:
    return [np.random.Generator(np.random.PCG64(s))
            for s in chain_seed_sequences(seed, stream, runs)]


def _smc_lanes(start, seed, stream, first_run, P) -> _Lanes:
    n_runs = start.shape[0]
    return _Lanes("smc", start.reshape(n_runs * P, -1),
                  chain_seed_sequences(seed, stream,
                                       range(first_run * P, (first_run + n_runs) * P)),
                  n_runs, P, _generators(seed, Stream.SMC_RESAMPLE + 2 * stream,
                                         range(first_run, first_run + n_runs)))


def _retained_lanes(x_star, seed, stream, first_run) -> _Lanes:
    n_runs = x_star.shape[0]
    return _Lanes("retained", x_star,
                  chain_seed_sequences(seed, stream, range(first_run, first_run + n_runs)),
                  n_runs, 1)


def _free_lanes(start, seed, stream, first_run, P, retained: dict) -> _Lanes:
    n_runs = start.shape[0]
    return _Lanes("free", start.reshape(n_runs * (P - 1), -1),
                  chain_seed_sequences(seed, Stream.SMC_FREE + stream,
                                       range(first_run * (P - 1), (first_run + n_runs) * (P - 1))),
                  n_runs, P - 1, _generators(seed, Stream.SMC_RESAMPLE + 2 * stream + 1,
                                             range(first_run, first_run + n_runs)),
                  retained)


def _stats(parts: list[dict], n_runs: int, per_run: list[int]) -> dict[str, np.ndarray]:
    """Per-run kernel statistics over all the run's lanes in ``parts``."""
    def per(key, reduce):
        cols = [np.asarray(p[key]).reshape(n_runs, m) for p, m in zip(parts, per_run)]
        return reduce(np.concatenate(cols, axis=1), axis=1)
    return {"accept_stat": per("accept_stat", np.mean), "divergences": per("divergences", np.sum),
            "tree_depth": per("tree_depth", np.mean), "n_grad": per("n_grad", np.sum)}


def _finish(direction, log_z, positions, parts, per_run, P, resample_at, running_cols, ends,
            schedule, shared) -> SMCRun:
    n_runs = log_z.size
    stats = _stats(parts, n_runs, per_run)
    n_trans = parts[0]["n_trans"]
    diag = engine.chain_diagnostics(log_z, stats, n_trans * P, shared_batch=shared)
    diag["particles"] = float(P)
    diag["resampling_steps"] = float(len(resample_at))
    cumulative = cumulative_at = None
    if ends.size:
        cumulative = np.column_stack(list(running_cols) + [log_z])
        cumulative_at = ends
    return SMCRun(direction, log_z, positions, int(stats["n_grad"].sum()),
                  float(sum(p["wall"] for p in parts)), diag, stats, np.asarray(resample_at), P,
                  cumulative=cumulative, cumulative_at=cumulative_at, schedule=schedule)


def _check_runs(target: Target, start, P: int, what: str) -> np.ndarray:
    x = np.asarray(start, dtype=float)
    if x.ndim == 2 and P == 1:
        x = x[:, None, :]
    if x.ndim != 3 or x.shape[1:] != (P, target.dim):
        raise ValueError(f"{what} draws must have shape (runs, {P}, {target.dim}); "
                         f"got {np.shape(start)}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} draws contain non-finite values")
    return np.ascontiguousarray(x)


def _forward_result(out: dict, lanes: _Lanes, P, resample_at, schedule, shared) -> SMCRun:
    pick = np.array([_categorical(lanes.resample[r], out["final_w"][r], 1)[0]
                     for r in range(lanes.n_runs)], dtype=np.int64)
    positions = out["position"].reshape(lanes.n_runs, P, -1)[np.arange(lanes.n_runs), pick]
    return _finish("forward", out["log_z"], positions, [out], [P], P, resample_at,
                   out["running"], out["ends"], schedule, shared)


def _conditional_result(rev: dict, free: dict | None, P, resample_at, schedule,
                        shared) -> SMCRun:
    if free is None:  # P = 1: the retained path alone, one epoch per resampling step
        log_z = rev["epoch_w"][:, 0].copy()
        for e in range(1, rev["epoch_w"].shape[1]):
            log_z = log_z + rev["epoch_w"][:, e]
        sums = np.cumsum(rev["segments"], axis=1)
        running = [sums[:, int(np.searchsorted(rev["cuts"], k))] for k in rev["ends"][:-1]]
        return _finish("reverse", log_z, rev["position"], [rev], [1], 1, resample_at,
                       running, rev["ends"], schedule, shared)
    return _finish("reverse", free["log_z"], rev["position"], [rev, free], [1, P - 1], P,
                   resample_at, free["running"], free["ends"], schedule, shared)


def forward_smc(target: Target, kernel: Kernel, schedule, start, *, seed, resample_at=(),
                stream: int = 0, increments_every: int | None = None, progress: bool = False,
                first_run: int = 0) -> SMCRun:
    """Forward SMC from exact prior draws ``start`` (runs, P, d); estimates are
    stochastic lower bounds on log p(y).  Run r's particles use the kernel streams of
    chains rP .. rP + P - 1 of ``stream`` (so P = 1 is :func:`engine.forward
    <bread_stan.ais.engine.forward>`, bit for bit)."""
    schedule = engine.as_schedule(schedule)
    at = _steps(resample_at, len(schedule.betas))
    x = np.asarray(start)
    P = x.shape[1] if x.ndim == 3 else 1
    x = _check_runs(target, start, P, "prior")
    lanes = _smc_lanes(x, seed, stream, first_run, P)
    out = _sweep(target, kernel, schedule, [lanes], at, increments_every, progress, "SMC forward")
    return _forward_result(out[0], lanes, P, at, schedule, False)


def conditional_smc(target: Target, kernel: Kernel, schedule, x_star, free_start, *, seed,
                    resample_at=(), stream: int = 1, increments_every: int | None = None,
                    progress: bool = False, first_run: int = 0) -> SMCRun:
    """Conditional SMC from exact posterior draws ``x_star`` (runs, d) with free
    particles from exact prior draws ``free_start`` (runs, P - 1, d); estimates are
    stochastic upper bounds on log p(y).  The retained path of run r is the reverse AIS
    chain r of ``stream`` (so P = 1 is :func:`engine.reverse
    <bread_stan.ais.engine.reverse>`, bit for bit)."""
    schedule = engine.as_schedule(schedule)
    at = _steps(resample_at, len(schedule.betas))
    xs = np.atleast_2d(np.asarray(x_star, dtype=float))
    free = np.asarray(free_start, dtype=float)
    if free.ndim != 3 or free.shape[0] != xs.shape[0] or xs.shape[1] != target.dim:
        raise ValueError(f"need x_star (runs, {target.dim}) and free_start (runs, P - 1, "
                         f"{target.dim}); got {xs.shape} and {free.shape}")
    P = free.shape[1] + 1
    ret = _retained_lanes(np.ascontiguousarray(xs), seed, stream, first_run)
    rev = _sweep(target, kernel, schedule, [ret], at, increments_every, progress,
                 "SMC retained")[0]
    out = None
    if P > 1:
        lanes = _free_lanes(_check_runs(target, free, P - 1, "prior"), seed, stream, first_run,
                            P, rev)
        out = _sweep(target, kernel, schedule, [lanes], at, increments_every, progress,
                     "SMC conditional")[0]
    return _conditional_result(rev, out, P, at, schedule, False)


def _steps(resample_at, T: int) -> np.ndarray:
    at = np.unique(np.asarray(resample_at, dtype=np.int64))
    if at.size and (at[0] < 1 or at[-1] > T - 2):
        raise ValueError(f"resampling steps must lie in 1..{T - 2} for {T} distributions")
    return at


def check_starts(target: Target, prior_draws, posterior_draws, P: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """SMC's starts: the prior particles (runs, 2P - 1, d) and one exact draw per run
    (one draw (d,) is repeated for every run)."""
    prior = _check_runs(target, prior_draws, 2 * P - 1, "prior")
    n_runs = prior.shape[0]
    post = np.asarray(posterior_draws, dtype=float)
    post = np.repeat(post.reshape(1, -1), n_runs, axis=0) if post.ndim == 1 or \
        post.shape[0] == 1 else post
    if post.shape != (n_runs, target.dim) or not np.all(np.isfinite(post)):
        raise ValueError(f"posterior draws must be one finite draw ({target.dim},) or "
                         f"({n_runs}, {target.dim}); got {np.shape(posterior_draws)}")
    return prior, post


def forward_and_conditional(target: Target, kernel: Kernel, schedule, prior, x_star,
                            free, P: int, *, seed, resample_at,
                            streams: tuple[int, int] = (0, 1),
                            increments_every: int | None = None, first_run: int = 0,
                            progress: bool = False) -> tuple[SMCRun, SMCRun]:
    """Forward SMC and conditional SMC at once: the forward runs and the retained
    reverse chains share one batch, the free particles run in a second.  ``prior``
    (runs, P, d): the forward runs' particles; ``x_star`` (runs', d) the conditional
    runs' exact draws and ``free`` (runs', P - 1, d) their free particles."""
    schedule = engine.as_schedule(schedule)
    at = _steps(resample_at, len(schedule.betas))
    T = len(schedule.betas)
    fwd_lanes = _smc_lanes(prior, seed, streams[0], first_run, P)
    ret_lanes = _retained_lanes(x_star, seed, streams[1], first_run)
    fwd_out, rev_out = _sweep(target, kernel, schedule, [fwd_lanes, ret_lanes], at,
                              increments_every, progress, f"SMC T={T}")
    free_out = None
    if P > 1:
        free_lanes = _free_lanes(free, seed, streams[1], first_run, P, rev_out)
        free_out = _sweep(target, kernel, schedule, [free_lanes], at, increments_every,
                          progress, f"SMC conditional T={T}")[0]
    return (_forward_result(fwd_out, fwd_lanes, P, at, schedule, True),
            _conditional_result(rev_out, free_out, P, at, schedule, True))

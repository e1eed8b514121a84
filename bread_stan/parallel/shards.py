"""AIS work cut into shards a worker runs alone, and the step rebuilt from them.

A shard is one block of one direction's chains at one number of distributions
T of one simulated problem, or (direction ``"both"``, the local executor's shard) all
forward and reverse chains of one problem in one batch, as
:func:`bread_stan.ais.runs.run` runs them.  Chain i draws from the random stream keyed (seed,
stream, i) whatever batch it runs in (:mod:`bread_stan.rng`), so the per-chain
numbers of a shard equal those of the same chains in the local run's one batch,
and :func:`join_problem` rebuilds the :class:`~bread_stan.ais.results.StepResult`
of that run exactly (the per-chain estimates, increments, final positions and
the diagnostics computed from them; only wall times differ).

A worker never receives a ctypes handle: a :class:`ShardContext` carries the
:class:`~bread_stan.stan.compile.CompiledModel` (library path, program text,
stanc info) and the data, and :func:`run_shard` rebuilds the model target once
per worker process.  Where the library path exists on the worker (same machine
or shared file system) it is loaded as it is; elsewhere the program is compiled
through the worker's content-addressed cache, which needs the same toolchain
(httpstan's Stan and a C++ compiler) installed on the worker.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ais import engine, runs
from ..ais.results import DirectionResult, StepResult
from ..errors import BreadStanError, InputError
from ..rng import Stream
from ..ais.gaussian_base import GaussianBase, GaussianBaseTarget
from ..stan.compile import CompiledModel, compile_model
from ..stan.model import StanModel
from ..stan.tempered import StanTarget, compile_tempered
from ..target import Target

__all__ = ["Shard", "ShardContext", "plan_shards", "run_shard", "run_on_target", "join_problem",
           "WorkerModelError", "step_betas"]

_STREAMS = {"forward": int(Stream.FORWARD),  # runs.run's streams of its first step count
            "reverse": int(Stream.REVERSE)}
_STREAMS_PAIR = (_STREAMS["forward"], _STREAMS["reverse"])
_STATS = ("accept_stat", "divergences", "tree_depth", "n_grad")


class WorkerModelError(BreadStanError):
    """A worker could not rebuild the model the client compiled."""


@dataclass(frozen=True)
class Shard:
    """Chains ``first_chain`` to ``first_chain + n_chains - 1`` of one direction
    (``"forward"``, ``"reverse"``, or ``"both"`` in one batch) at ``n_steps``
    distributions on simulated problem ``problem``."""

    n_steps: int
    problem: int
    direction: str
    first_chain: int
    n_chains: int

    @property
    def key(self) -> str:
        """A name for the shard, unique within a run (its file name and task key)."""
        return (f"T{self.n_steps}-p{self.problem}-{self.direction}-"
                f"{self.first_chain}-{self.n_chains}")


def plan_shards(n_steps: int, chains_per_problem: list[int], block: int | None,
                reverse_chains: list[int] | None = None) -> list[Shard]:
    """The shards of one step count: each problem's chains of each direction in
    blocks of at most ``block`` (``reverse_chains``: the reverse direction's
    chains per problem where they differ from the forward's); ``block`` None: one
    shard per problem holding both directions (``n_chains`` the forward chains)."""
    if block is None:
        return [Shard(n_steps, k, "both", 0, n) for k, n in enumerate(chains_per_problem)]
    if block < 1:
        raise InputError(f"chains per shard must be at least 1; got {block}")
    reverse_chains = chains_per_problem if reverse_chains is None else reverse_chains
    return [Shard(n_steps, k, direction, first, min(block, n - first))
            for k, (n_forward, n_reverse) in enumerate(zip(chains_per_problem, reverse_chains))
            for direction, n in (("forward", n_forward), ("reverse", n_reverse))
            for first in range(0, n, block)]


@dataclass(frozen=True)
class ShardContext:
    """What all shards of one simulated problem share (sent to each worker once):
    the model and its data, the kernel, the frozen tuning and the AIS settings.

    ``base``: None for the path from the prior (the model's ``prior_only`` split),
    or a :class:`~bread_stan.ais.gaussian_base.GaussianBase` for the path from that
    Gaussian to the model's full density (``data`` then holds ``prior_only`` = 0
    where the program declares it).

    ``target``: the model target already built in this process, used by shards run
    here (the local executor); it is never sent (a ctypes handle), so a worker
    rebuilds it from the model and data."""

    model: CompiledModel
    data: dict
    kernel: Any
    tuned: Any = None
    config: engine.RunConfig | None = None
    threads: int = 1
    base: GaussianBase | None = None
    smc: Any = None  # an SMCConfig: the shards run SMC (bread_stan.ais.smc) instead of AIS
    target: Target | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "target"}


_TARGETS: dict[str, Target] = {}  # per worker process


def _target(context: ShardContext) -> Target:
    if context.target is not None:
        return context.target
    base = context.base
    key = hashlib.sha256(json.dumps(
        [str(context.model.library), context.model.program.digest,
         {k: np.asarray(v).tolist() for k, v in sorted(context.data.items())},
         None if base is None else [base.mean.tolist(), base.cov.tolist()]],
        default=str).encode()).hexdigest()
    if key not in _TARGETS:
        model = context.model
        if not model.library.exists():
            model = (compile_tempered if base is None else compile_model)(model.program)
            if model.info != context.model.info:
                raise WorkerModelError(
                    f"the worker compiled {model.program.name} into a different model "
                    "(its stanc reports other variables): install the client's Stan "
                    "toolchain (httpstan version) on the workers")
        _TARGETS[key] = (StanTarget(model, context.data, threads=context.threads)
                         if base is None else
                         GaussianBaseTarget(StanModel(model, context.data,
                                                      threads=context.threads), base))
    return _TARGETS[key]


def run_shard(context: ShardContext, shard: Shard, seed: int, start
              ) -> tuple[dict[str, np.ndarray], dict]:
    """Run one shard (on a worker) from ``start`` (the block's forward starts; the
    exact posterior draw, or the block's reference draws, for reverse; the pair
    (forward starts, posterior draws) for ``"both"``; for SMC, see
    :func:`~bread_stan.ais.runs.run_smc`) along the context's path (``tuned``); its
    per-chain arrays and metadata, in the form :func:`~bread_stan.store.save_unit`
    writes (``"both"``: each direction's arrays prefixed ``forward__`` and
    ``reverse__``)."""
    target = _target(context)
    path, T, config = runs.as_path(context.tuned), shard.n_steps, context.config
    meta = {"shard": shard.key}
    if context.smc is not None:
        out = runs.run_smc(path, target, context.kernel, config, T, shard.direction, start,
                           context.smc, seed=seed, streams=_STREAMS_PAIR,
                           first_run=shard.first_chain)
        meta.update(particles=context.smc.particles,
                    resampling_steps=int(out[next(iter(out))].resample_at.size))
    elif shard.direction == "both":
        fwd, rev = runs.run_both(path, target, context.kernel, config, T, start[0], start[1],
                                 seed=seed, streams=_STREAMS_PAIR,
                                 increments=config.increment_blocks is not None,
                                 progress=config.progress)
        out = {"forward": fwd, "reverse": rev}
    else:
        extra = {} if shard.direction == "forward" else {"n_chains": shard.n_chains}
        out = {shard.direction: runs.run_direction(
            path, target, context.kernel, config, T, shard.direction, start, seed=seed,
            stream=_STREAMS[shard.direction], first_chain=shard.first_chain,
            increments=config.increment_blocks is not None, **extra)}
    if shard.direction != "both":
        (run,) = out.values()
        return _arrays(run), {**meta, "wall_time": run.wall_time}
    arrays = {f"{d}__{k}": v for d, r in out.items() for k, v in _arrays(r).items()}
    return arrays, {**meta, "wall_time": {d: r.wall_time for d, r in out.items()}}


def step_betas(context: ShardContext, T: int) -> np.ndarray:
    """The betas a step at ``T`` distributions records (on the waypoint path, the
    positions along both legs, q at 0.5)."""
    return runs.as_path(context.tuned).betas(context.config, T)


def _arrays(out: engine.DirectionRun) -> dict[str, np.ndarray]:
    """A direction's per-chain (per-run) arrays (final positions for forward): its
    estimates, its log weights (SMC: the estimate, negated for reverse) and kernel
    statistics."""
    weights = getattr(out, "log_weights", None)
    if weights is None:
        weights = out.log_estimates if out.direction == "forward" else -out.log_estimates
    arrays = {"log_estimates": out.log_estimates, "log_weights": weights,
              **{f"stat__{k}": np.asarray(out.chain_stats[k]) for k in _STATS}}
    if out.cumulative is not None:
        arrays["cumulative"] = out.cumulative
        arrays["cumulative_at"] = out.cumulative_at
    if out.direction == "forward":
        arrays["positions"] = out.final_positions
    return arrays


def _directions(shard: Shard, part: tuple[dict, dict]) -> list[tuple[str, tuple[dict, dict]]]:
    """A shard's part as (direction, part) pairs (a ``"both"`` shard gives two)."""
    if shard.direction != "both":
        return [(shard.direction, part)]
    arrays, meta = part
    return [(d, ({k.split("__", 1)[1]: v for k, v in arrays.items()
                  if k.startswith(f"{d}__")}, {**meta, "wall_time": meta["wall_time"][d]}))
            for d in ("forward", "reverse")]


def run_on_target(context: ShardContext, function, *args):
    """``function(target, *args)`` on a worker, with ``context``'s model target
    (AIDE's blocks of AIS runs; ``context.tuned`` and ``config`` are not used)."""
    return function(_target(context), *args)


def join_direction(parts: list[tuple[dict, dict]], n_trans: int,
                   shared_batch: bool) -> DirectionResult:
    """One direction's result from its shards, in chain order."""
    arrays = {k: np.concatenate([a[k] for a, _ in parts])
              for k in parts[0][0] if k not in ("cumulative_at", "positions")}
    stats = {k: arrays[f"stat__{k}"] for k in _STATS}
    cumulative = arrays.get("cumulative")
    particles = int(parts[0][1].get("particles", 1))  # SMC: transitions per run are P times
    diagnostics = engine.chain_diagnostics(arrays["log_weights"], stats, n_trans * particles,
                                           shared_batch=shared_batch)
    if "resampling_steps" in parts[0][1]:
        diagnostics["particles"] = float(particles)
        diagnostics["resampling_steps"] = float(parts[0][1]["resampling_steps"])
    return DirectionResult(
        arrays["log_estimates"], float(sum(m["wall_time"] for _, m in parts)),
        int(stats["n_grad"].sum()), diagnostics,
        cumulative, parts[0][0]["cumulative_at"] if cumulative is not None else None)


def join_problem(n_steps: int, betas: np.ndarray, parts: dict[Shard, tuple[dict, dict]],
                 n_trans: int, shared_batch: bool) -> StepResult:
    """One problem's step rebuilt from all its shards, as :func:`runs.run
    <bread_stan.ais.runs.run>` returns it (final forward positions in
    ``draws["unconstrained"]``)."""
    ordered = [pair for s in sorted(parts, key=lambda s: s.first_chain)
               for pair in _directions(s, parts[s])]
    directions = {direction: join_direction([part for d, part in ordered if d == direction],
                                            n_trans, shared_batch)
                  for direction in ("forward", "reverse")}
    positions = np.concatenate([part[0]["positions"] for d, part in ordered
                                if d == "forward"])
    return StepResult(n_steps, directions["forward"], directions["reverse"], betas,
                      {"unconstrained": positions})

"""Step counts run in shards through an executor, each shard saved as it arrives.

:func:`run_steps_in_shards` splits every step count's chains into shards
(:func:`~bread_stan.parallel.shards.plan_shards`), sends those not saved by an
interrupted run to the executor, saves each under ``out_dir/shards`` as it arrives and
joins a step count's shards into the :class:`~bread_stan.ais.results.StepResult` the
engine would have returned for the whole batch.  On the local executor, a step
count's shards are one per problem holding both directions, the batch the engine runs
(see :mod:`bread_stan.parallel.local`); on Dask, each direction's chains are split over
the workers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..ais.run_directory import SHARD_DIR, RunDirectory
from .executor import Executor
from .shards import Shard, ShardContext, join_problem, plan_shards, run_shard, step_betas

__all__ = ["run_steps_in_shards", "shard_start"]


def run_steps_in_shards(contexts: list[ShardContext], starts_at, seed_at, steps: Sequence[int],
                        steps_per_temperature: int, out_dir: Path | None, fingerprint: str,
                        executor: Executor, finish, progress: bool) -> None:
    """Run ``steps`` in shards on ``executor``'s cluster, one :class:`ShardContext` per
    problem.  ``starts_at(T)`` gives each problem's (forward starts (n, d), reverse
    starts (m, d), or one exact draw (d,) repeated for n chains; for SMC, forward
    particles (runs, 2P - 1, d) and the pair (exact draw(s), free particles) that
    :func:`~bread_stan.parallel.shards.run_shard` takes); ``seed_at(T, k)``
    problem k's seed.  Each shard is saved under ``out_dir/shards`` as it arrives (and
    reused by a rerun); ``finish`` gets each step count's per-problem
    :class:`StepResult`, joined exactly as :func:`runs.run <bread_stan.ais.runs.run>`
    returns it (final forward positions unconstrained).  ``progress`` shows a bar: the
    engine's per shard where shards run in this process, else the executor's."""
    directory = RunDirectory(out_dir, fingerprint)
    saved = directory.saved_shards()
    inside = progress and executor.in_process
    shared = [executor.share(replace(c, config=replace(c.config, progress=inside)))
              for c in contexts] if steps else []
    plans: dict[int, list[Shard]] = {}
    parts: dict[int, dict[Shard, tuple]] = {}
    tasks = {}
    for T in steps:
        starts = starts_at(T)
        forward = [f.shape[0] for f, _ in starts]
        reverse = [_n_reverse(r, n) for (_, r), n in zip(starts, forward)]
        plans[T] = plan_shards(T, forward, executor.block_size(max(forward + reverse)), reverse)
        parts[T] = {}
        for shard in plans[T]:
            if shard.key in saved:
                parts[T][shard] = saved[shard.key]
                continue
            k, first = shard.problem, shard.first_chain
            if shard.direction == "both":
                tasks[shard.key] = (shared[k], shard, seed_at(T, k), starts[k])
                continue
            start = shard_start(starts[k][0 if shard.direction == "forward" else 1], first,
                                shard.n_chains)
            tasks[shard.key] = (shared[k], shard, seed_at(T, k), start)
    by_key = {shard.key: shard for plan in plans.values() for shard in plan}

    def join(T: int) -> None:
        config = contexts[0].config
        betas = step_betas(contexts[0], T)
        n_trans = (T - 1) * steps_per_temperature
        finish([join_problem(T, betas, {s: v for s, v in parts[T].items() if s.problem == k},
                             n_trans, shared_batch=config.combined)
                for k in range(len(contexts))])
        directory.drop_shards(shard.key for shard in plans[T])

    def arrived(key: str, value: tuple) -> None:
        shard = by_key[key]
        directory.save_shard(key, *value)
        parts[shard.n_steps][shard] = value
        if len(parts[shard.n_steps]) == len(plans[shard.n_steps]):
            join(shard.n_steps)

    for T in steps:
        if len(parts[T]) == len(plans[T]):  # every shard was saved by an interrupted run
            join(T)
    executor.run(run_shard, tasks, arrived, progress=progress and not inside,
                 saved_in=str(directory.file(SHARD_DIR)) if out_dir is not None else None)


def _n_reverse(start, n_forward: int) -> int:
    """Reverse chains (runs) of a problem: one per row of its reverse starts (for SMC,
    of its exact draws), or ``n_forward`` when one exact draw is shared."""
    x = start[0] if isinstance(start, tuple) else start
    return x.shape[0] if np.ndim(x) == 2 else n_forward


def shard_start(start, first: int, n: int):
    """A shard's rows of its starts: one exact draw (d,) is shared; (runs, ...) arrays
    are sliced; a tuple (SMC's exact draw and prior particles) slices each part."""
    if isinstance(start, tuple):
        return tuple(shard_start(part, first, n) for part in start)
    return start[first:first + n] if np.ndim(start) >= 2 else start

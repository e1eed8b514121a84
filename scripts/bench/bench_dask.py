"""The same BREAD run locally (2 threads) and on a Dask LocalCluster (2 workers x 1 thread).

NHEFS linear regression (bundled data ``nhefs``, ``stan_models/linear_regression``),
HMC, adaptive schedule, no simulator check (it runs on the client either way).
Measured in one run:

- wall time of each (tuning runs once on the client in both; the cluster's start-up
  is timed apart), and that the per-chain numbers are bit-identical;
- per shard: its compute time (the AIS inside the worker), the bytes sent to the
  worker (shard, seed, start points; the shared model/data/tuning context is sent
  once per worker) and back (per-chain arrays), and the scheduler's round trip per
  task (empty tasks, one at a time and many at once);
- a scaling argument for 100 workers from those numbers.

Writes ``scripts/figures/bench_dask/results.md``.  Usage:
``PYTHONPATH=$PWD python scripts/bench/bench_dask.py [--steps 100,1000] [--chains 50]
[--chains-per-shard N]``.
"""

from __future__ import annotations

import argparse
import logging
import pickle
import time
from pathlib import Path

import numpy as np

from bread_stan.parallel.executor import Executor
from bread_stan.stan import datasets
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "bench_dask"


def _nothing(x=None):
    return x


def _round_trips(client, n: int = 200) -> tuple[float, float]:
    """Seconds per empty task: one at a time (latency), and n at once (throughput)."""
    t0 = time.perf_counter()
    for i in range(20):
        client.submit(_nothing, i, pure=False).result()
    serial = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    client.gather(client.map(_nothing, range(n), pure=False))
    return serial, (time.perf_counter() - t0) / n


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(x, d).log_estimates, getattr(y, d).log_estimates)
               and all(np.array_equal(x.draws[k], y.draws[k]) for k in x.draws)
               for x, y in zip(a.steps, b.steps) for d in ("forward", "reverse"))


class _Metered(Executor):
    """An executor that records the bytes of every task's arguments and result."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shared_bytes, self.sent, self.received, self.compute = [], [], [], []

    def share(self, value):
        self.shared_bytes.append(len(pickle.dumps(value)))
        return super().share(value)

    def run(self, function, tasks, on_result, **kw):
        for args in tasks.values():
            self.sent.append(len(pickle.dumps(args[1:])))  # args[0]: the shared context

        def arrived(key, value):
            self.received.append(len(pickle.dumps(value)))
            self.compute.append(value[1]["wall_time"])
            on_result(key, value)
        super().run(function, tasks, arrived, **kw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="100,1000")
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--chains-per-shard", type=int, default=None,
                        help="default: each direction's chains split evenly over the workers")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    steps = tuple(int(s) for s in args.steps.split(","))
    model = ROOT / "stan_models" / "linear_regression.stan"
    simulator = ROOT / "stan_models" / "linear_regression_sim.stan"
    data = datasets.load("nhefs")
    sampler = SamplerSettings(kernel="hmc")
    run = RunSettings(steps=steps, chains=args.chains, seed=args.seed, threads=2,
                      progress=False, check_simulator=False)

    t0 = time.perf_counter()
    local = bread(model, simulator, data, sampler=sampler, run=run)
    local_wall = time.perf_counter() - t0

    t0 = time.perf_counter()
    with _Metered(workers=2, chains_per_shard=args.chains_per_shard) as executor:
        startup = time.perf_counter() - t0
        block = executor.block_size(args.chains)
        t0 = time.perf_counter()
        on_dask = bread(model, simulator, data, sampler=sampler, run=run, executor=executor)
        dask_wall = time.perf_counter() - t0
        serial, batched = _round_trips(executor.client)
    identical = _same(local, on_dask)

    n_shards = len(executor.compute)
    tuning_local = local.extra["tuning_seconds"]
    tuning_dask = on_dask.extra["tuning_seconds"]
    ais_local, ais_dask = local_wall - tuning_local, dask_wall - tuning_dask
    compute = float(np.sum(executor.compute))
    per_shard_compute = compute / n_shards
    overhead = (ais_dask - compute / 2) / n_shards  # beyond perfect use of 2 workers
    sent, received = float(np.mean(executor.sent)), float(np.mean(executor.received))
    context = float(np.mean(executor.shared_bytes))

    # Scaling to 100 workers: the scheduler hands out about 1 / batched tasks per
    # second; 100 workers stay busy while shards last longer than 100 * batched.
    min_shard = 100 * batched
    bytes_per_second = 100 * (sent + received) / per_shard_compute
    lines = [
        f"# scripts/bench/bench_dask.py: NHEFS linear regression, HMC, adaptive schedule, "
        f"T = {', '.join(map(str, steps))}, {args.chains} chains per direction, "
        f"{block} chains per shard", "",
        f"Run of {time.strftime('%d %b %Y %H:%M UTC', time.gmtime())} on 2 shared cores "
        "(other jobs were running: wall times are noisy).", "",
        "| | local (2 threads) | Dask LocalCluster (2 workers x 1 thread) |",
        "|---|---|---|",
        f"| wall time, tuning + AIS (s) | {local_wall:.1f} | {dask_wall:.1f} |",
        f"| tuning on the client (s) | {tuning_local:.1f} | {tuning_dask:.1f} |",
        f"| AIS (s) | {ais_local:.1f} | {ais_dask:.1f} |",
        f"| cluster start-up (s) | - | {startup:.1f} |",
        f"| shards | - | {n_shards} |",
        f"| per-chain numbers bit-identical | | {'yes' if identical else 'NO'} |", "",
        "| per shard | |", "|---|---|",
        f"| compute inside the worker (s, mean) | {per_shard_compute:.3f} |",
        f"| overhead beyond 2 busy workers (s) | {overhead:.3f} |",
        f"| scheduler round trip, one task at a time (ms) | {1e3 * serial:.2f} |",
        f"| scheduler time per task, {200} at once (ms) | {1e3 * batched:.2f} |",
        f"| bytes to the worker (shard, seed, start points) | {sent:.0f} |",
        f"| bytes back (per-chain arrays) | {received:.0f} |",
        f"| bytes of the shared context, once per worker (model, data, tuning) | "
        f"{context:.0f} |", "",
        "## Scaling to 100 workers", "",
        f"- Scheduler: at {1e3 * batched:.2f} ms per task it dispatches about "
        f"{1 / batched:.0f} tasks/s, so 100 workers stay busy as long as a shard computes "
        f"for more than 100 x {1e3 * batched:.2f} ms = {min_shard:.2f} s. This run's shards "
        f"took {per_shard_compute:.2f} s; the cost grows linearly in T, so at T = 10000 "
        f"the same shards take ~{per_shard_compute * 10000 / sum(steps) * len(steps):.0f} s, "
        "far above that limit: the scheduler is not the "
        "bottleneck for BREAD-sized work; choose chains per shard so that each shard runs "
        "for seconds, not milliseconds.",
        f"- Network: {sent:.0f} B in and {received:.0f} B out per shard, plus "
        f"{context / 1e3:.0f} kB of context once per worker ({100 * context / 1e6:.1f} MB "
        f"for 100 workers). 100 workers finishing a shard every {per_shard_compute:.2f} s "
        f"move {bytes_per_second / 1e6:.2f} MB/s in total: negligible on any cluster network.",
        "- Parallelism: a step count splits into 2 directions x chains / chains-per-shard "
        "shards; 100 workers need at least 100 shards in flight, e.g. 1000 chains per "
        "direction in blocks of 20 (small blocks cost more per chain), or several step counts, "
        "replicates or programs at once "
        "(all step counts of a run are submitted together).",
        f"- Start-up: the cluster start ({startup:.1f} s here) and each worker's first "
        "model load are paid once; tuning and the simulator check run on the client before "
        "any shard and do not shrink with workers (Amdahl: here tuning is "
        f"{tuning_dask:.1f} s of {dask_wall:.1f} s).",
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

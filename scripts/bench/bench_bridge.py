"""Microseconds per gradient of the Stan bridge, four ways, measured in one run.

Linear regression (stan_models/linear_regression.stan) with synthetic data
(N = 1600, K = 5 by default), 100 points:

- one Python call per point (``StanModel.log_density_gradient``);
- one batched call for all points, on 1 and on 2 threads;
- the tight C++ loop (``bread_bench_gradient``), no Python at all.

Each figure is the best of several repetitions (the machine is shared; the
load average is printed alongside).  Usage: ``python scripts/bench/bench_bridge.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import numpy as np

from bread_stan.stan.tempered import StanTarget
from bread_stan.stan.model import StanModel

ROOT = Path(__file__).resolve().parents[2]


def best_time(fn, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls of ``fn``."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--N", type=int, default=1600)
    parser.add_argument("--K", type=int, default=5)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.N, args.K))
    y = 0.5 + x @ rng.normal(size=args.K) + rng.normal(size=args.N)
    data = {"N": args.N, "K": args.K, "X": x, "y": y, "prior_only": 0}
    model = StanModel(ROOT / "stan_models" / "linear_regression.stan", data)
    points = rng.normal(scale=0.5, size=(args.points, model.dim))
    n = len(points)

    grad = np.empty(model.dim)

    def per_point():
        for u in points:
            model.log_density_gradient(u, out=grad)

    lp_buf, grad_buf = np.empty(n), np.empty((n, model.dim))

    def batched(threads):
        return lambda: model.log_density_gradient_batch(points, out=(lp_buf, grad_buf),
                                                        threads=threads)

    target = StanTarget(ROOT / "stan_models" / "linear_regression.stan",
                        {k: v for k, v in data.items() if k != "prior_only"}, threads=2)

    for warm in (per_point, batched(1), batched(2)):
        warm()
    rows = {}
    # Interleave the methods so that changes of load hit them alike.
    timings: dict[str, list[float]] = {k: [] for k in
                                       ("python", "batch1", "batch2", "cpp", "split2")}
    for _ in range(args.repeats):
        timings["python"].append(best_time(per_point, 1))
        timings["batch1"].append(best_time(batched(1), 1))
        timings["batch2"].append(best_time(batched(2), 1))
        timings["cpp"].append(model.bench_gradient(points, repeats=1) * n)
        timings["split2"].append(best_time(lambda: target.evaluate(points), 1))
    for key, values in timings.items():
        rows[key] = 1e6 * min(values) / n

    labels = {
        "python": "one Python call per point",
        "batch1": f"one batched call ({n} points), 1 thread",
        "batch2": f"one batched call ({n} points), 2 threads",
        "cpp": "tight C++ loop",
        "split2": "StanTarget.evaluate (prior + full), 2 threads",
    }
    cpp = rows["cpp"]
    print(f"\nlinear regression N={args.N}, K={args.K}, d={model.dim}; "
          f"best of {args.repeats}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    print(f"{'method':50s} {'us/grad':>9s} {'vs C++ loop':>12s}")
    for key, label in labels.items():
        print(f"{label:50s} {rows[key]:9.2f} {rows[key] / cpp:11.2f}x")
    print(f"\n2 threads vs 1 thread (batched): {rows['batch1'] / rows['batch2']:.2f}x faster")


if __name__ == "__main__":
    main()

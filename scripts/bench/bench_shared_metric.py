"""A dense inverse metric shared by every chain: what handing it to the kernels costs.

100 chains, one batch, native NUTS (max depth 5) and HMC (10 leapfrog steps) on
``stan_models/linear_regression.stan`` with N = 100 and K = d - 3 covariates
(d = 50 and 200), at beta = 1, one thread.  The same dense metric given once,
(1, d, d), and repeated per chain, (n, d, d): milliseconds per transition, and
the milliseconds of the metric's preparation alone (``per_chain_metric`` and
the momentum draw).  Works on older checkouts too (it only uses the kernels'
public step), so the same script measures before and after a change.

Usage: ``PYTHONPATH=$PWD python scripts/bench/bench_shared_metric.py [--steps 5]``.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from bread_stan.kernels.base import initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.integrator import draw_momentum, per_chain_metric
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.stan.tempered import StanTarget

PROGRAM = Path(__file__).resolve().parents[2] / "stan_models" / "linear_regression.stan"
N_CHAINS = 100


def problem(d: int, rng):
    """The regression target with d unconstrained parameters and starting points."""
    k, n_obs = d - 3, 100
    x = rng.normal(size=(n_obs, k))
    y = 0.3 + x @ (0.3 * rng.normal(size=k)) + rng.normal(size=n_obs)
    target = StanTarget(PROGRAM, {"N": n_obs, "K": k, "X": x, "y": y}, threads=1)
    start = np.column_stack([np.zeros((N_CHAINS, 2)), 0.1 * rng.normal(size=(N_CHAINS, d - 2))])
    return target, start


def dense_metric(d: int, rng) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return ((a @ a.T) / d + np.eye(d))[None] * 0.05


def ms(fn, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return 1e3 * (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"{N_CHAINS} chains, one thread")
    print(f"{'d':>4} {'kernel':<8} {'metric':<10} {'ms/transition':>14} {'ms metric prep':>15}")
    for d in (50, 200):
        rng = np.random.default_rng(d)
        target, start = problem(d, rng)
        shared = dense_metric(d, rng)
        z = rng.normal(size=(N_CHAINS, d))
        for name, kernel, params in (
                ("NUTS", NUTS(native=True), NUTSParams(0.02, max_depth=5)),
                ("HMC(10)", HMC(native=True), HMCParams(0.02, 10))):
            for label, metric in (("shared", shared),
                                  ("per chain", np.repeat(shared, N_CHAINS, axis=0))):
                with_metric = replace(params, inv_metric=metric)
                state = initial_state(target, start)
                chains = ChainRandom.from_seed(1, N_CHAINS)
                kernel.step(chains, state, target, 1.0, with_metric)  # warm
                t = ms(lambda: kernel.step(chains, state, target, 1.0, with_metric), args.steps)
                prep = ms(lambda: draw_momentum(z, per_chain_metric(metric, N_CHAINS, d)),
                          args.steps)
                print(f"{d:>4} {name:<8} {label:<10} {t:>14.1f} {prep:>15.1f}", flush=True)


if __name__ == "__main__":
    main()

"""AIS wall time with the native kernels (the default) beside the Python kernels.

100 forward + 100 reverse chains in one batch, HMC with 10 leapfrog steps and
NUTS, on the conjugate numpy regression (d = 7: Python kernels only, it has no
native transitions) and, when the Stan bridge can build it, on
``stan_models/linear_regression.stan`` (K = 5, so d = 8), where each case runs
twice from the same seed: native kernels, then Python kernels (the same draws,
bit for bit).  Step sizes come from a short pilot (not timed).  Prints, per
run: wall time, gradients, time in ``target.evaluate`` and its share (the
Python kernels call it once per leapfrog step; a native transition evaluates
inside the model library, where it cannot be timed from Python, so its share
is not shown), Python overhead per evaluate call, and per case the ratio of
Python to native wall time.

Usage: ``python scripts/bench/bench_ais.py [--temperatures 1000] [--nuts-temperatures 1000]``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from bread_stan.ais import engine as ais

from bread_stan.ais import runs
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.ais.tuning import TuningConfig, tune

ROOT = Path(__file__).resolve().parents[2]


class TimedTarget:
    """Wraps a target and accumulates the time spent in ``evaluate``."""

    def __init__(self, target):
        self.target, self.seconds, self.calls = target, 0.0, 0

    @property
    def dim(self) -> int:
        return self.target.dim

    @property
    def native(self):
        """The wrapped target's native transitions (None for a numpy target)."""
        return getattr(self.target, "native", None)

    def evaluate(self, points, *, gradient=True):
        start = time.perf_counter()
        out = self.target.evaluate(points, gradient=gradient)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out


def stan_problem(rng, n_obs=1600, k=5):
    """Linear regression in Stan, simulated data, exact prior and posterior draws."""
    from bread_stan.stan.tempered import StanTarget

    def prior(n):  # unconstrained: log sigma_sq, log scale_sq, alpha, beta
        sigma_sq = 1.0 / rng.gamma(1.0, 1.0, n)
        scale_sq = 1.0 / rng.gamma(1.0, 1.0, n)
        coef = rng.normal(size=(n, k + 1)) * np.sqrt(scale_sq)[:, None]
        return np.column_stack([np.log(sigma_sq), np.log(scale_sq), coef])

    truth = prior(1)[0]
    x = rng.normal(size=(n_obs, k))
    y = truth[2] + x @ truth[3:] + np.sqrt(np.exp(truth[0])) * rng.normal(size=n_obs)
    target = StanTarget(ROOT / "stan_models" / "linear_regression.stan",
                        {"N": n_obs, "K": k, "X": x, "y": y})
    return target, prior, truth


def conjugate_problem(rng, d=7):
    model, truth = simulate_regression(200, d, correlation=0.5, seed=rng)
    return model, (lambda n: model.sample_prior(rng, n)), truth


def run(target, starts, truth, kernel, pilot, temperatures):
    """One timed AIS run: wall seconds, gradients, and the TimedTarget."""
    timed = TimedTarget(target)
    config = ais.RunConfig(steps=(temperatures,), schedule=ScheduleSpec("sigmoid"),
                           increment_blocks=100)
    start = time.perf_counter()
    result = runs.run(timed, kernel, starts, truth, seed=2, path=pilot, config=config)
    wall = time.perf_counter() - start
    step = result.steps[0]
    return wall, step.forward.n_grad + step.reverse.n_grad, timed


def bench(name, target, prior, truth, kernel_class, params, temperatures, n_chains=100):
    pilot = tune(target, kernel_class(), params, prior(32), seed=1,
                 config=TuningConfig(pilot_grid=6, pilot_steps=20, adapt_metric=False,
                                     pilot_floor=1e-3, metric="diag"))
    runs = (True, False) if getattr(target, "native", None) is not None else (False,)
    starts, walls = prior(n_chains), {}
    for native in runs:
        wall, grads, timed = run(target, starts, truth, kernel_class(native=native), pilot,
                                 temperatures)
        walls[native] = wall
        inside = ("" if native else
                  f"  evaluate {timed.seconds:6.2f} s ({100 * timed.seconds / wall:4.1f}%)  "
                  f"calls {timed.calls:6d}  overhead "
                  f"{1e6 * (wall - timed.seconds) / timed.calls:4.0f} us/call")
        print(f"{name:<30} {'native' if native else 'Python':<6} T={temperatures:<5} "
              f"wall {wall:7.2f} s  gradients {grads:9d}{inside}", flush=True)
    if len(walls) == 2:
        print(f"{name:<30} Python / native wall time: {walls[False] / walls[True]:.2f}x",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperatures", type=int, default=1000)
    parser.add_argument("--nuts-temperatures", type=int, default=1000)
    parser.add_argument("--no-stan", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          "100 forward + 100 reverse chains, one batch")
    rng = np.random.default_rng(0)
    problems = [("conjugate numpy d=7", *conjugate_problem(rng))]
    if not args.no_stan:
        try:
            problems.append(("stan linear_regression d=8", *stan_problem(rng)))
        except Exception as exc:  # the bridge is optional for this benchmark
            print(f"(Stan target unavailable: {type(exc).__name__}: {exc})")
    for name, target, prior, truth in problems:
        bench(name + " HMC(10)", target, prior, truth, HMC, HMCParams(0.1, 10),
              args.temperatures)
        bench(name + " NUTS", target, prior, truth, NUTS, NUTSParams(0.1),
              args.nuts_temperatures)


if __name__ == "__main__":
    main()

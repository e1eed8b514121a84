"""Share of AIS wall time spent inside ``target.evaluate`` (the rest is Python overhead).

100 forward + 100 reverse chains in one batch, HMC with 10 leapfrog steps and
NUTS, on the conjugate numpy regression (d = 7) and, when the Stan bridge can
build it, on ``stan_models/linear_regression.stan`` (K = 5, so d = 8).  Step
sizes come from a short pilot (not timed).  Prints, per case: wall time, time
in evaluate, its share, calls, gradients, and Python overhead per call.

Usage: ``python scripts/bench_ais.py [--temperatures 1000] [--nuts-temperatures 200]``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from bread_stan.ais import engine as ais
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.ais.tuning import TuningConfig, tune

ROOT = Path(__file__).resolve().parent.parent


class TimedTarget:
    """Wraps a target and accumulates the time spent in ``evaluate``."""

    def __init__(self, target):
        self.target, self.seconds, self.calls = target, 0.0, 0

    @property
    def dim(self) -> int:
        return self.target.dim

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


def bench(name, target, prior, truth, kernel, base, temperatures, n_chains=100):
    pilot = tune(target, kernel, base, prior(32), seed=1,
                 config=TuningConfig(n_grid=6, adapt_steps=20))
    timed = TimedTarget(target)
    config = ais.RunConfig(steps=(temperatures,), schedule=ScheduleSpec("sigmoid"),
                           increment_blocks=100)
    start = time.perf_counter()
    result = ais.run(timed, kernel, prior(n_chains), truth, seed=2, tuned=pilot, config=config)
    wall = time.perf_counter() - start
    step = result.steps[0]
    grads = step.forward.n_grad + step.reverse.n_grad
    overhead_us = 1e6 * (wall - timed.seconds) / timed.calls
    print(f"{name:<28} T={temperatures:<5} wall {wall:7.2f} s  evaluate {timed.seconds:7.2f} s "
          f"({100 * timed.seconds / wall:4.1f}%)  calls {timed.calls:6d}  gradients {grads:9d}  "
          f"overhead {overhead_us:6.0f} us/call  eval {1e6 * timed.seconds / timed.calls:6.0f} us/call")


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
        bench(name + " HMC(10)", target, prior, truth, HMC(), HMCParams(0.1, 10), args.temperatures)
        bench(name + " NUTS", target, prior, truth, NUTS(), NUTSParams(0.1), args.nuts_temperatures)


if __name__ == "__main__":
    main()

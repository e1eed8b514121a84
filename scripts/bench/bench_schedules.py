"""Jeffreys bound against wall time: sigmoid vs adaptive schedule, diagonal vs dense metric.

Two models, four settings each, at the same numbers of distributions T, in one
run so the ratios are side by side:

- NHEFS linear regression (bundled data ``nhefs``, ``stan_models/linear_regression``);
- the vague-prior, uncentred-predictor regression of issue 15
  (``stan_models/vague_regression``: three coefficients normal(0, 100), a
  predictor with values 70-140 and a binary one, 434 rows; data made here with
  a fixed seed).

Each setting runs :func:`bread_stan.bread` (``--kernel``, default NUTS; default
tuning; 50 chains per direction by default) and reports, per T, the bound
B = mean(U) - mean(L) with its interval, and the wall time (tuning plus both AIS
directions).

Results of the runs behind the defaults: ``scripts/figures/bench_schedules/results.md``.

Usage: ``PYTHONPATH=$PWD python scripts/bench/bench_schedules.py [--steps 100,1000]
[--chains 50] [--models nhefs,vague] [--kernel hmc] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

from bread_stan.ais.betas import ScheduleSpec
from bread_stan.stan import datasets
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [("sigmoid", "diag"), ("adaptive", "diag"), ("sigmoid", "dense"), ("adaptive", "dense")]


def vague_data(seed: int = 15, n: int = 434) -> dict:
    """Predictor x uniform on 70-140 (like mothers' IQ scores), binary z."""
    rng = np.random.default_rng(seed)
    return {"N": n, "x": np.round(rng.uniform(70, 140, n), 1).tolist(),
            "z": rng.integers(0, 2, n).astype(float).tolist()}


MODELS = {
    "nhefs": ("linear_regression", lambda: datasets.load("nhefs")),
    "vague": ("vague_regression", vague_data),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="100,1000")
    parser.add_argument("--chains", type=int, default=50)
    parser.add_argument("--models", default="nhefs,vague")
    parser.add_argument("--kernel", default="nuts", choices=("hmc", "nuts"))
    parser.add_argument("--settings", default=None,
                        help="comma-separated schedule/metric pairs, e.g. adaptive/dense")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    steps = tuple(int(s) for s in args.steps.split(","))
    settings = (SETTINGS if args.settings is None
                else [tuple(p.split("/")) for p in args.settings.split(",")])
    rows = []
    for key in args.models.split(","):
        stem, make_data = MODELS[key]
        data = make_data()
        for schedule, metric in settings:
            t0 = time.perf_counter()
            result = bread(ROOT / "stan_models" / f"{stem}.stan",
                           ROOT / "stan_models" / f"{stem}_sim.stan", data,
                           sampler=SamplerSettings(kernel=args.kernel, metric=metric),
                           run=RunSettings(steps=steps, chains=args.chains,
                                           schedule=ScheduleSpec(schedule), seed=args.seed,
                                           threads=args.threads, progress=False))
            total = time.perf_counter() - t0
            tuning = result.extra.get("tuning_seconds", float("nan"))
            dense = np.ndim(result.extra["tuning"]["inv_metric"]) == 3
            for step in result.steps:
                bound = step.bound()
                rows.append((key, schedule, metric + ("" if dense == (metric != "diag")
                                                      else "(diag)"), step.n_steps,
                             bound.estimate, bound.ci_low, bound.ci_high,
                             step.wall_time + tuning, total))
                print(f"{key:6s} {schedule:9s} {metric:6s} T={step.n_steps:6d}  bound "
                      f"{bound.estimate:12.4g} [{bound.ci_low:10.4g}, {bound.ci_high:10.4g}]  "
                      f"AIS {step.wall_time:7.1f} s + tuning {tuning:5.1f} s", flush=True)
    print("\n| model | schedule | metric | T | bound (nats) | 95% interval | wall s "
          "(tuning + AIS) | bound / sigmoid-diag |")
    print("|---|---|---|---|---|---|---|---|")
    base = {(r[0], r[3]): r[4] for r in rows if (r[1], r[2]) == ("sigmoid", "diag")}
    for key, schedule, metric, T, est, lo, hi, wall, _ in rows:
        ratio = est / base[(key, T)] if (key, T) in base else float("nan")
        print(f"| {key} | {schedule} | {metric} | {T} | {est:.4g} | [{lo:.3g}, {hi:.3g}] | "
              f"{wall:.1f} | {ratio:.3g} |")


if __name__ == "__main__":
    main()

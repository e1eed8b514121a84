"""Peak resident memory of one AIS run against the number of temperatures T.

Each measurement runs in its own subprocess and reports
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (peak RSS) and the RSS just before
the run (after imports, compilation and tuning), so their difference is what the
run itself added.  Two problems:

- ``gauss50``: a numpy conjugate regression with d = 50 parameters (diagonal
  metric tuned along beta), 2 + 2 chains, HMC with one leapfrog step, adaptive
  schedule, through :func:`bread_stan.ais.engine.run`;
- ``nhefs``: NHEFS linear regression (d = 8) through :func:`bread_stan.bread`
  with today's defaults, 2 chains per direction, no simulator check;
- ``schedule50``: the frozen kernel schedule alone of ``gauss50`` (adaptive betas,
  diagonal metric, d = 50), every temperature's params read once in order, no
  chains: what a run at that T holds for its schedule (cheap at T = 1e6).

``--root`` chooses the checkout whose ``bread_stan`` is measured, so the same
script measures the code before and after a change.

Usage: ``PYTHONPATH=$PWD python scripts/bench/bench_memory.py [--root DIR]
[--cases gauss50:1000,schedule50:1000000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(problem: str, T: int) -> dict:
    """Run one case in this process; peak and pre-run RSS in MB."""
    import numpy as np
    if problem in ("gauss50", "schedule50"):
        from bread_stan.ais import engine, runs
        from bread_stan.ais.betas import ScheduleSpec
        from bread_stan.ais.tuning import TuningConfig, tune
        from bread_stan.exact.conjugate import simulate_regression
        from bread_stan.kernels.hmc import HMC, HMCParams
        model, _ = simulate_regression(200, 50, seed=1)
        rng = np.random.default_rng(2)
        tuned = tune(model, HMC(), HMCParams(0.1, 1), model.sample_prior(rng, 16), seed=3,
                     config=TuningConfig(pilot_grid=8, pilot_steps=10, adapt_metric=True,
                                         pilot_floor=1e-3, metric="diag"))
        prior, post = model.sample_prior(rng, 2), model.sample_posterior(rng, 2)
        before = _rss_mb()
        t0 = time.perf_counter()
        if problem == "schedule50":
            spec = ScheduleSpec("adaptive")
            betas = getattr(spec, "lazy", spec.betas)(T, tuned)  # lazy where it exists
            schedule = tuned.schedule(betas)
            for t in range(T):
                schedule.params_at(t)
        else:
            runs.run(model, HMC(), prior, post, seed=4, path=tuned,
                       config=engine.RunConfig(steps=(T,), schedule=ScheduleSpec("adaptive"),
                                               increment_blocks=50))
    else:
        from bread_stan.stan import datasets
        from bread_stan.workflows.bread import RunSettings, bread
        import bread_stan.workflows.bread as workflow
        stem = ROOT / "stan_models" / "linear_regression"
        before = float("nan")
        original = workflow.warn_if_costly

        def mark(*args, **kwargs):  # called after tuning, just before the AIS runs
            nonlocal before
            before = _rss_mb()
            return original(*args, **kwargs)
        workflow.warn_if_costly = mark
        t0 = time.perf_counter()
        bread(f"{stem}.stan", f"{stem}_sim.stan", datasets.load("nhefs"),
              run=RunSettings(steps=(T,), chains=2, threads=1, progress=False,
                              check_simulator=False))
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"problem": problem, "T": T, "peak_mb": peak, "before_mb": before,
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--cases", default="gauss50:1000,gauss50:100000,nhefs:1000,"
                                           "nhefs:10000,schedule50:1000,schedule50:100000,"
                                           "schedule50:1000000")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        problem, T = args.child.split(":")
        print(json.dumps(child(problem, int(T))))
        return
    env = {**os.environ, "PYTHONPATH": str(args.root.resolve())}
    print(f"| problem | T | RSS before run MB | peak RSS MB | added by run MB | run s |  "
          f"(code: {args.root})")
    print("|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        out = subprocess.run([sys.executable, __file__, "--child", case], env=env,
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"| {case} | failed: {out.stderr.strip().splitlines()[-1:]} |")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {r['problem']} | {r['T']} | {r['before_mb']:.0f} | {r['peak_mb']:.0f} | "
              f"{r['peak_mb'] - r['before_mb']:.0f} | {r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()

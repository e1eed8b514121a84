"""The pilot's size against what it tunes (issue 42): pilot chains and transitions per
grid beta, each variant measured on its own at fixed step counts.

Each program runs ``bread`` (path auto, NUTS, no simulator check) at ``--steps``
(default 100) with ``--chains`` (default 30) over ``--seeds`` (default 0,1,2), once per
pilot variant: ``pilot_chains`` x ``pilot_steps`` (each grid beta after the first adds 5
unadapted transitions).  Per run: the pilots' gradients (every path's, the rival path's
abandoned pilot not counted), the scored gradients at the largest T, the bound there
and its 95% upper limit.  A smaller pilot is as good where the bound and the scored
gradients stay within their seed-to-seed spread; it is cheaper by the pilot-gradient
ratio.  Gradients do not depend on the machine.

Writes ``scripts/figures/bench_pilot_levers/pilot_size.md``.  Usage:
``PYTHONPATH=$PWD python scripts/bench/bench_pilot_size.py [--variants 32x20,16x10,8x10]
[--steps 100] [--chains 30] [--seeds 0,1,2] [--only TEXT ...]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_setup_share import programs  # noqa: E402

from bread_stan.workflows.bread import RunSettings, bread  # noqa: E402
from bread_stan.workflows.settings import SamplerSettings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "bench_pilot_levers"


def measure(model, simulator, data, sampler: SamplerSettings, run: RunSettings) -> dict:
    result = bread(model, simulator, data, sampler=sampler, run=run)
    step = result.steps[-1]
    verdict = step.verdict(result.verdict_settings())
    setup = result.extra["setup_gradients"]
    return {"pilots": setup["pilots"], "scored": float(step.forward.n_grad
                                                       + step.reverse.n_grad),
            "bound": float(verdict.bound.estimate), "upper": float(verdict.bound.ci_high),
            "path": result.extra.get("path_choice", {}).get("path", "?")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default="32x20,16x10,8x10")
    parser.add_argument("--steps", default="100")
    parser.add_argument("--chains", type=int, default=30)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--only", nargs="+", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    variants = [tuple(map(int, v.split("x"))) for v in args.variants.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    steps = tuple(int(s) for s in args.steps.split(","))
    lines = ["# The pilot's size against what it tunes", "",
             f"`bread` at steps {args.steps}, `chains={args.chains}`, seeds {args.seeds}, "
             "path auto, NUTS, no simulator check (`scripts/bench/bench_pilot_size.py`).  "
             "Variant = pilot chains x adapted transitions per grid beta (plus 5 unadapted "
             "after the first).  pilots = the pilots' gradients (mean over seeds); scored = "
             "the AIS gradients at the largest T; bound and upper = the Jeffreys bound "
             "there and its 95% upper limit, mean (min-max) over seeds.", "",
             "| program | pilot | path | pilots | scored | bound | upper |",
             "|---|---|---|---|---|---|---|"]
    for program, (model, simulator, data) in programs().items():
        if args.only and not any(s in program for s in args.only):
            continue
        for chains, pilot_steps in variants:
            sampler = SamplerSettings(pilot_chains=chains, pilot_steps=pilot_steps)
            ms = [measure(model, simulator, data, sampler,
                          RunSettings(steps=steps, chains=args.chains, seed=seed,
                                      check_simulator=False, progress=False))
                  for seed in seeds]
            col = lambda k: np.array([m[k] for m in ms])  # noqa: E731
            span = lambda k: (f"{col(k).mean():.3g} ({col(k).min():.3g}-"  # noqa: E731
                              f"{col(k).max():.3g})")
            lines.append(f"| {program} | {chains} x {pilot_steps} | "
                         f"{'/'.join(sorted(set(m['path'] for m in ms)))} | "
                         f"{col('pilots').mean():,.0f} | {col('scored').mean():,.0f} | "
                         f"{span('bound')} | {span('upper')} |")
            print(lines[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pilot_size.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT / 'pilot_size.md'}")


if __name__ == "__main__":
    main()

"""The study's representation comparison: collapsed vs uncollapsed matrix factorisation.

Both programs (``stan_models/mf_uncollapsed.stan``, ``mf_collapsed.stan``; N = 50,
D = 25, K = 5, all hyperparameters 1) share one data set and one exact posterior
draw from ``mf_pair_sim.stan``; BREAD bounds the Jeffreys divergence of each against
the number of AIS distributions and against wall time.  Writes
``comparison.png``, ``comparison.csv`` and ``comparison.md`` (plus each program's own
report) to ``--out``; rerunning continues where an interrupted run stopped.

    python scripts/studies/compare_mf.py [--steps 10,100,1000] [--chains 100] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bread_stan.stan import datasets
from bread_stan.reporting.report import markdown_table, write_comparison, write_report
from bread_stan.workflows.bread import RunSettings, SamplerSettings, compare

MODELS = Path(__file__).resolve().parents[2] / "stan_models"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="10,100,1000")
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--kernel", choices=("hmc", "nuts"), default="hmc")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("scripts/figures/compare_mf"))
    args = parser.parse_args()

    start = time.perf_counter()
    run = RunSettings(steps=tuple(int(s) for s in args.steps.split(",")), chains=args.chains,
                      seed=args.seed)
    results = compare({"uncollapsed": MODELS / "mf_uncollapsed.stan",
                       "collapsed": MODELS / "mf_collapsed.stan"},
                      MODELS / "mf_pair_sim.stan", datasets.load("mf_pair"),
                      sampler=SamplerSettings(kernel=args.kernel), run=run, out_dir=args.out)
    for label, result in results.items():
        write_report(result, args.out / label)
    path = write_comparison(results, args.out)
    for label, result in results.items():
        table = result.summary()[["steps", "bound", "bound_ci_low", "bound_ci_high",
                                  "seconds", "consistent"]]
        print(f"\n{label}\n{markdown_table(table)}")
    print(f"\n{path} ({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main()

"""Calibrate the protocol's agreement flag on a model where the truth is known.

Runs :func:`bread_stan.workflows.protocol` on ``tests/stan/noise_scale.stan`` (y ~
normal(mu, sigma), mu ~ normal(0, tau), hyperparameter tau_sq; sigma ~
lognormal(0, 0.1) is a parameter, so the prior pins the noise near 1) with
"real" data of noise sd 1 (well specified), and sd 2 and 20 (misspecified: the
fitted hyperparameter cannot absorb the noise), over several seeds, and tables
the agreement scores and flags.  The false-alarm rate of the well-specified
rows and the power of the others are what the default settings are judged by.

Rows are kept in ``scores.csv`` (column ``kernel``): a run replaces only the
rows of its own kernel, noise levels and seeds, so the summary tables
everything measured so far.  HMC uses 5 leapfrog steps; NUTS is the toolkit's default.

    python scripts/studies/agreement_calibration.py                 # NUTS, about 5 minutes
    python scripts/studies/agreement_calibration.py --kernel hmc
    python scripts/studies/agreement_calibration.py --seeds 11-30 --noise 1   # more null runs
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bread_stan.workflows.fit import FitSettings  # noqa: E402
from bread_stan.workflows.protocol import ProtocolSettings, protocol  # noqa: E402
from bread_stan.reporting.report import markdown_table  # noqa: E402
from bread_stan.workflows.bread import RunSettings, SamplerSettings  # noqa: E402

MODEL = ROOT / "tests" / "stan" / "noise_scale.stan"
SIMULATOR = ROOT / "tests" / "stan" / "noise_scale_sim.stan"


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def _real_data(noise: float, seed: int, n: int = 100) -> dict:
    rng = np.random.default_rng(seed)
    return {"N": n, "y": 1.0 + noise * rng.normal(size=n)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path,
                   default=ROOT / "scripts" / "figures" / "agreement_calibration")
    p.add_argument("--seeds", type=_seeds, default=_seeds("1-10"))
    p.add_argument("--noise", type=lambda s: [float(x) for x in s.split(",")],
                   default=[1.0, 2.0, 20.0])
    p.add_argument("--replicates", type=int, default=5)
    p.add_argument("--kernel", choices=("nuts", "hmc"), default="nuts")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the table says what the warnings would

    sampler = SamplerSettings(kernel=args.kernel, n_leapfrog=5, pilot_chains=16,
                              pilot_grid=6, pilot_steps=20)
    settings = ProtocolSettings(s_sweep=(10, 100), replicates=args.replicates,
                                fit=FitSettings(chains=4, warmup=200, draws=200))
    rows = []
    start = time.perf_counter()
    for noise in args.noise:
        for seed in args.seeds:
            t0 = time.perf_counter()
            result = protocol(MODEL, SIMULATOR, _real_data(noise, seed), sampler=sampler,
                              run=RunSettings(steps=(3, 10, 30, 100), chains=64, seed=seed,
                                              progress=False),
                              settings=settings)
            a = result.agreement()
            rows.append({"kernel": args.kernel, "replicates": args.replicates,
                         "noise_sd": noise, "well_specified": noise == 1.0, "seed": seed,
                         "score": a.score, "flagged": a.flagged, "at_T": a.worst_steps,
                         "seconds": time.perf_counter() - t0})
            print(f"noise {noise:g}, seed {seed}: score {a.score:.3f}"
                  f"{' FLAGGED' if a.flagged else ''}", flush=True)
    total = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    scores = args.out / "scores.csv"
    table = pd.DataFrame(rows)
    if scores.exists():  # keep the rows of other kernels, noise levels and seeds
        old = pd.read_csv(scores)
        key = ["kernel", "noise_sd", "seed"]
        rerun = old.set_index(key).index.isin(table.set_index(key).index)
        table = pd.concat([old[~rerun], table], ignore_index=True).sort_values(key)
    table.to_csv(scores, index=False)
    rates = (table.groupby(["kernel", "replicates", "noise_sd"])
             .agg(runs=("flagged", "size"), flagged=("flagged", "sum"),
                  outside_band=("score", lambda s: int((s > 0).sum())),
                  max_score=("score", "max"), min_score=("score", "min"),
                  minutes=("seconds", lambda s: s.sum() / 60))
             .reset_index())
    (args.out / "summary.md").write_text(
        "# Agreement flag on noise_scale (real noise sd 1 is well specified)\n\n"
        + markdown_table(rates) + "\n\n"
        + f"threshold {settings.agreement_threshold}, alpha {settings.agreement_alpha}; "
          "HMC with 5 leapfrog steps, NUTS with the default settings (max depth 8, "
          "10% rescue transitions); `minutes` is the wall-clock protocol time of the row's runs "
          "on a machine shared with other jobs.\n")
    print(markdown_table(rates))
    print(f"\n{len(rows)} protocol runs in {total:.0f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

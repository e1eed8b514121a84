"""Calibrate the verdict's tests on a conjugate regression with known answers.

Measures, with the real AIS engine on a numpy conjugate target (exact prior and
posterior draws):

1. false alarms of the sign test and the tail-bound test on correct runs, by number of
   distributions T (each replication its own exact draw x*, so the sign test's
   conditioning on x* is part of what is measured);
2. their power when the reverse estimates are shifted down by 1, 2, 3 and 8 nats (the
   signature of a simulator/model mismatch or a broken kernel), at 30 + 30 and
   100 + 100 chains;
3. the coverage of the single-draw and multi-draw intervals (``bread_stan.exact.coverage``).

The kernel is fixed (no tuning, so replications differ only in their random draws):
NUTS (the toolkit's default kernel: step 0.15, max depth 8, 10% rescue transitions) or
HMC (step 0.15, L = 10, as first calibrated).  Each kernel's rows are kept in
``tables.csv`` (a run replaces only its own kernel's rows) and
``scripts/figures/verdict_calibration/summary.md`` tables every kernel measured.  About
5 minutes (HMC) or 15 (NUTS) on 2 cores.

    python scripts/studies/verdict_calibration.py                 # NUTS
    python scripts/studies/verdict_calibration.py --kernel hmc
    python scripts/studies/verdict_calibration.py --summarise     # summary.md from tables.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bread_stan.ais import engine  # noqa: E402
from bread_stan.ais import runs
from bread_stan.ais.estimators import consistency_check, jeffreys_bound, sign_test  # noqa: E402
from bread_stan.exact.conjugate import simulate_regression  # noqa: E402
from bread_stan.exact.coverage import multi_draw_coverage, single_draw_coverage  # noqa: E402
from bread_stan.kernels.hmc import HMC, HMCParams  # noqa: E402
from bread_stan.kernels.nuts import NUTS, NUTSParams  # noqa: E402
from bread_stan.reporting.report import markdown_table  # noqa: E402

OUT = ROOT / "scripts" / "figures" / "verdict_calibration"
KERNELS = {
    "hmc": ("HMC(step 0.15, L = 10)", HMC, HMCParams(step_size=0.15, n_leapfrog=10)),
    "nuts": ("NUTS(step 0.15, max depth 8, rescue 0.1)", NUTS,
             NUTSParams(step_size=0.15, max_depth=8, rescue_prob=0.1)),
}
SIGN_ALPHA, TAIL_ALPHA = 0.01, 1e-3
SECTIONS = {
    "false_alarms": "## False alarms on correct runs (N = 20, d = 2; 300 runs per T, each with its "
            "own exact draw x*)",
    "power": "## Power: reverse estimates shifted down (T = 300, 200 runs each)",
    "coverage": "## Interval coverage (N = 100, d = 5, T = 100)",
}


def replicated_runs(model, kernel, params, steps: int, reps: int, chains: int, seed: int):
    """``reps`` independent single-draw runs of ``chains`` + ``chains`` chains, in one batch."""
    rng = np.random.default_rng(seed)
    x_star = np.repeat(model.sample_posterior(rng, reps), chains, axis=0)
    run = runs.run(model, kernel, model.sample_prior(rng, reps * chains), x_star, seed=seed,
                     path=params, config=engine.RunConfig(steps=(steps,),
                                                           increment_blocks=None)).steps[0]
    return (run.forward.log_estimates.reshape(reps, chains),
            run.reverse.log_estimates.reshape(reps, chains))


def rates(L, U, shift: float) -> dict:
    sign = normal = tail = 0
    bounds = []
    for lo, up in zip(L, U - shift):
        b = jeffreys_bound(lo, up)
        bounds.append(b.estimate)
        sign += sign_test(b, alpha=SIGN_ALPHA).negative
        # The sign test before issue 26: the normal quantile instead of Welch's t.
        normal += sign_test(replace(b, df=np.inf), alpha=SIGN_ALPHA).negative
        tail += not consistency_check(lo, up, alpha=TAIL_ALPHA).passed
    return {"mean bound": float(np.mean(bounds)), "sign test fired": sign / len(L),
            "normal sign test fired": normal / len(L), "tail test fired": tail / len(L)}


def measure(kernel, params, coverage: bool = True) -> dict[str, pd.DataFrame]:
    """The three tables for one kernel (without ``coverage``, the tests' two)."""
    model, _ = simulate_regression(20, 2, noise_sd=0.5, seed=1)
    reps = 300

    rows = []
    for steps in (10, 30, 100, 300, 1000):
        L, U = replicated_runs(model, kernel, params, steps, reps, 30, seed=steps)
        rows.append({"T": steps, "chains": "30 + 30", **rates(L, U, 0.0)})
        print(f"false alarms at T = {steps} done", flush=True)
    null = pd.DataFrame(rows)

    rows = []
    for chains in (30, 100):
        L, U = replicated_runs(model, kernel, params, 300, 200, chains, seed=7 + chains)
        for shift in (1.0, 2.0, 3.0, 8.0):
            rows.append({"shift (nats)": shift, "chains": f"{chains} + {chains}",
                         **rates(L, U, shift)})
        print(f"power with {chains} + {chains} chains done", flush=True)
    power = pd.DataFrame(rows)
    if not coverage:
        return {"false_alarms": null, "power": power}

    hard, _ = simulate_regression(100, 5, noise_sd=0.5, seed=1)
    single = single_draw_coverage(hard, kernel, params, steps=100, chains=50,
                                  replications=200, level=0.9, seed=0)
    multi = multi_draw_coverage(100, 5, kernel, params, steps=100, chains=200, problems=5,
                                replications=100, noise_sd=0.5, level=0.9, seed=0)
    coverage = pd.DataFrame([
        {"interval": "single draw (chains' spread, given x*)", "chains": "50 + 50",
         "nominal": 0.9,
         "coverage": single.coverage, "se": single.std_error, "mean width": single.mean_width,
         "replications": single.replications},
        {"interval": "multi-draw, K = 5 (problems' spread, t with 4 df)", "chains": "200 + 200",
         "nominal": 0.9,
         "coverage": multi.coverage, "se": multi.std_error, "mean width": multi.mean_width,
         "replications": multi.replications}])
    return {"false_alarms": null, "power": power, "coverage": coverage}


def write_summary(rows: pd.DataFrame) -> str:
    """``summary.md`` from every kernel's rows of ``tables.csv``."""
    times = rows.groupby("kernel", sort=False)["seconds"].first()
    md = ["# Verdict calibration", "",
          "Conjugate regression (`bread_stan.exact.conjugate`), fixed kernels (each "
          "kernel's last run took "
          f"{', '.join(f'{k}: {v:.0f} s' for k, v in times.items())}; a --tests-only run "
          "measures the tests' tables alone), sigmoid schedule. "
          f"Sign test (Welch's t) at alpha = {SIGN_ALPHA} (one step count), and the normal "
          "quantile it used before issue 26 on the same runs; tail-bound test at "
          f"alpha = {TAIL_ALPHA}. Written by `scripts/studies/verdict_calibration.py`.", ""]
    for name, heading in SECTIONS.items():
        part = rows[rows["table"] == name].dropna(axis=1, how="all")
        part = part.drop(columns=["table", "seconds"])
        first = [c for c in ("kernel", "T", "shift (nats)", "interval") if c in part]
        md += [heading, "", markdown_table(part[first + [c for c in part if c not in first]]),
               ""]
    text = "\n".join(md)
    (OUT / "summary.md").write_text(text)
    return text


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kernel", choices=tuple(KERNELS), default="nuts")
    p.add_argument("--summarise", action="store_true",
                   help="only rewrite summary.md from tables.csv")
    p.add_argument("--tests-only", action="store_true",
                   help="measure the tests' tables only; keep the kernel's coverage rows")
    args = p.parse_args(argv)
    saved = OUT / "tables.csv"
    if args.summarise:
        print(write_summary(pd.read_csv(saved)))
        return
    label, kernel_type, params = KERNELS[args.kernel]
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tables = measure(kernel_type(), params, coverage=not args.tests_only)
    seconds = time.perf_counter() - t0

    rows = pd.concat([t.assign(table=name, kernel=label, seconds=seconds)
                      for name, t in tables.items()], ignore_index=True)
    if saved.exists():  # keep the other kernels' rows (and with --tests-only, its coverage)
        old = pd.read_csv(saved)
        kept = (old["kernel"] == label) & (old["table"] == "coverage") & args.tests_only
        rows = pd.concat([old[old["kernel"] != label], rows, old[kept]], ignore_index=True)
    rows.to_csv(saved, index=False)
    print(write_summary(rows))


if __name__ == "__main__":
    main()

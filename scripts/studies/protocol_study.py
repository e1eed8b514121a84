"""Reproduce the real-data validation (SPEC section 4) on the five study data sets.

For each model/data pairing of SPEC section 5, runs :func:`bread_stan.workflows.protocol`
(fit on the real data, simulate with the fitted hyperparameters, forward AIS on
real and simulated data, reverse AIS from S start transitions), writes each
case's report into ``OUT/<case>/``, and a summary table plus a combined figure
of the shifted quartile curves into ``OUT/``.  The misspecification example is
matrix factorisation (no intercept) on uncentred 1-5 ratings next to the
centred ratings: the former should flag disagreeing curves, the latter not.

    python scripts/studies/protocol_study.py                      # modest settings
    python scripts/studies/protocol_study.py --quick              # a smoke run (minutes)
    python scripts/studies/protocol_study.py --only mf_centred,mf_uncentred --steps 10,100,1000,3000 \
        --replicate-max-steps 1000
    python scripts/studies/protocol_study.py --summarise          # tables and figures only

Runs resume: rerunning the same command continues where it stopped.  Prints
the elapsed time of every case and of the whole study.  Measured on 2 cores
with 5 replicate data sets per case: the MovieLens pair (T to 3000, replicates
to 1000) 41 min, the other four cases (T to 1000) 15 min.

Kernel: HMC (``--leapfrog`` steps, default 10), pinned as when the figures were made;
the toolkit's default kernel is NUTS since then, so a default ``bread-stan protocol``
run gives other numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bread_stan.stan import datasets  # noqa: E402
from bread_stan.workflows.fit import FitSettings  # noqa: E402
from bread_stan.workflows.protocol import ProtocolSettings, protocol
from bread_stan.workflows.protocol_result import ProtocolResult  # noqa: E402
from bread_stan.reporting.protocol_report import plot_shifted_curves, write_protocol_report  # noqa: E402
from bread_stan.reporting.report import markdown_table  # noqa: E402
from bread_stan.workflows.bread import RunSettings, SamplerSettings  # noqa: E402
from study_common import MODELS, STUDY_CASES, ints, names  # noqa: E402

CASES = STUDY_CASES

log = logging.getLogger("protocol_study")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "scripts" / "figures" / "protocol_study")
    p.add_argument("--steps", type=ints, default=(10, 100, 1000))
    p.add_argument("--chains", type=int, default=100)
    p.add_argument("--sweep", type=ints, default=(10, 100, 1000))
    p.add_argument("--leapfrog", type=int, default=10)
    p.add_argument("--fit-warmup", type=int, default=400)
    p.add_argument("--fit-draws", type=int, default=300)
    p.add_argument("--fit-depth", type=int, default=8)
    p.add_argument("--replicates", type=int, default=5,
                   help="replicate simulated data sets for the agreement band")
    p.add_argument("--replicate-max-steps", type=int, default=None,
                   help="run the replicates only up to this many distributions")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--only", type=names, default=list(CASES))
    p.add_argument("--summarise", action="store_true",
                   help="run nothing: rebuild the summary and figures from OUT")
    p.add_argument("--quick", action="store_true",
                   help="smoke settings: steps 10,30,100, 32 chains, sweep 10,100, short fit")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        datefmt="%H:%M:%S")
    if args.quick:
        args.steps, args.chains, args.sweep = (10, 30, 100), 32, (10, 100)
        args.fit_warmup, args.fit_draws = 200, 100
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=args.leapfrog, pilot_chains=32,
                              pilot_grid=12, pilot_steps=30)
    run = RunSettings(steps=args.steps, chains=args.chains, seed=args.seed,
                      threads=args.threads, progress=False)
    settings = ProtocolSettings(s_sweep=args.sweep, replicates=args.replicates,
                                replicate_max_steps=args.replicate_max_steps, fit=FitSettings(
        chains=4, warmup=args.fit_warmup, draws=args.fit_draws, max_depth=args.fit_depth))

    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for case in ([] if args.summarise else args.only):
        program, data_name = CASES[case]
        t0 = time.perf_counter()
        result = protocol(MODELS / f"{program}.stan", MODELS / f"{program}_sim.stan",
                          datasets.load(data_name), sampler=sampler, run=run,
                          settings=settings, out_dir=args.out / case, name=case)
        write_protocol_report(result, args.out / case)
        elapsed = time.perf_counter() - t0
        timing = args.out / case / "elapsed_seconds.json"
        spent = json.loads(timing.read_text()) if timing.exists() else []
        timing.write_text(json.dumps(spent + [elapsed]))
        a, sweep = result.agreement(), result.sweep_test()
        log.info("%s done in %.0f s: score %.2f (%s), sweep %s", case, elapsed, a.score,
                 "flagged" if a.flagged else "agree", "passed" if sweep.passed else "FAILED")
        print(f"{case}: {elapsed:.0f} s", flush=True)

    # The summary covers every case found in the output folder (runs may differ in T).
    results = {case: ProtocolResult.load(args.out / case) for case in CASES
               if (args.out / case / "protocol.json").exists()}
    summary = pd.DataFrame([_row(case, r, args.out / case) for case, r in results.items()])
    summary.to_csv(args.out / "summary.csv", index=False)
    (args.out / "summary.md").write_text(
        "# Real-data protocol on the study data sets\n\n" + markdown_table(summary) + "\n\n"
        + "Settings of each case:\n\n" + markdown_table(pd.DataFrame(
            [_settings_row(case, r) for case, r in results.items()])) + "\n")
    if args.summarise:
        for case, result in results.items():
            write_protocol_report(result, args.out / case)
    _combined_figure(results, args.out / "shifted_curves.png")
    total = time.perf_counter() - start
    print(markdown_table(summary))
    ran = 0 if args.summarise else len(args.only)
    print(f"\nprotocol study: {ran} cases run in {total:.0f} s ({total / 60:.1f} min); "
          f"results in {args.out}")
    return 0


def _row(case: str, result: ProtocolResult, folder: Path) -> dict:
    program, data_name = CASES[case]
    a, sweep = result.agreement(), result.sweep_test()
    table = result.summary().set_index("steps")
    T = max(result.steps)
    worst = a.table.set_index("steps").loc[a.worst_steps]
    timing = folder / "elapsed_seconds.json"
    return {"case": case, "data": data_name, "steps": ",".join(map(str, result.steps)),
            "fit_s": result.fit.seconds,
            "hyper_rhat_max": max(result.extra.get("fit_hyper_rhat", {}).values(),
                                  default=np.nan),
            "hyper": ", ".join(f"{k}={v:.3g}" for k, v in result.hyper.items()),
            "score": a.score, "flagged": a.flagged, "at_T": a.worst_steps,
            "real_deficit": worst["real_shifted_median"],
            "sim_deficit": worst["sim_shifted_median"],
            "sims_mean": worst["sims_mean"], "band_half_width": worst["half_width"],
            "n_sim": a.n_simulated,
            "sweep_passed": sweep.passed, "consistent": result.sim.consistent,
            "T_max": T, "bound": table.loc[T, "bound"], "median_gap": table.loc[T, "median_gap"],
            "run_s": sum(json.loads(timing.read_text())) if timing.exists() else np.nan}


def _settings_row(case: str, result: ProtocolResult) -> dict:
    run, protocol_settings = result.settings["run"], result.settings["protocol"]
    sampler, fit = result.settings["sampler"], protocol_settings["fit"]
    return {"case": case, "steps": ",".join(map(str, result.steps)), "chains": run["chains"],
            "seed": run["seed"], "kernel": sampler["kernel"], "leapfrog": sampler["n_leapfrog"],
            "sweep": ",".join(map(str, protocol_settings["s_sweep"])),
            "replicates": protocol_settings.get("replicates", 0),
            "replicate_max_steps": protocol_settings.get("replicate_max_steps") or "all",
            "fit": f"{fit['chains']} chains, {fit['warmup']} warmup, {fit['draws']} draws"}


def _combined_figure(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    if n == 0:
        return
    cols = min(3, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    for ax, (case, result) in zip(axes.ravel(), results.items()):
        plot_shifted_curves(result, ax=ax)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

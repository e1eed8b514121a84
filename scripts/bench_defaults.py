"""Wall time to a given Jeffreys bound: today's defaults against the defaults before issue 15.

Issue 15, target 3: the same Jeffreys bound in at least 4 times less wall time
than the old defaults, on NHEFS linear regression and on logistic regression
(Pima), measured side by side in one run.

- **old defaults** (before issue 15, commit b16e821): sigmoid schedule
  (sharpness 4), diagonal metric, pilot grid floor fixed at beta = 1e-3;
- **new defaults** (today's ``SamplerSettings()`` and ``RunSettings()``): NUTS
  (maximum depth 8, 10% rescue transitions of depth at most 4), adaptive
  schedule (equal thermodynamic length), diagonal metric, pilot floor chosen
  from the prior draws.

The old defaults use HMC with 10 leapfrog steps (10% rescue transitions); both
use the default pilot (32 chains, 16 grid betas, 40 transitions each).  For each setting the
script runs :func:`bread_stan.bread` at increasing numbers of distributions T
(one call per T, so each wall time includes its own pilot tuning, as a user
running that T would pay), T growing by about 1.4x, and stops once two
consecutive bound estimates B = mean(U) - mean(L) are at most ``--target``
nats.  Two speed-ups, old wall time over new:

- *first reached*: the measured wall times at the first T whose estimate is at
  most the target (quantised by the ladder's 1.4x steps);
- *interpolated* (the headline): the T at which the bound crosses the target,
  by linear interpolation of log B against log T between the last run above
  and the first at or below it, and the wall time there by linear
  interpolation in T.

If a setting never reaches the target on its ladder, its row says so.

The target: 1.5 nats, the bound the README's run (old defaults) reached at
T = 10,000 on NHEFS (about 1.3 nats); it is the fair comparison because both
settings must reach the same accuracy, and the old defaults reach it at all.

Results: ``scripts/figures/bench_defaults/results.md`` (100 chains).  With HMC
as the new kernel (adaptive schedule alone) NHEFS was 5.6x faster and Pima only
1.9x: on Pima the sigmoid schedule is already close to equal thermodynamic
length, and what was left to gain was the kernel.

Usage: ``PYTHONPATH=$PWD python scripts/bench_defaults.py [--chains 100]
[--target 1.5] [--out scripts/figures/bench_defaults/results.md] [--summarise]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import numpy as np

from bread_stan.ais.betas import ScheduleSpec
from bread_stan.stan import datasets
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"nhefs": "linear_regression", "pima": "logistic_regression"}
SETTINGS = {
    "old": (SamplerSettings(kernel="hmc", metric="diag", pilot_floor=1e-3),
            ScheduleSpec("sigmoid"),
            (1000, 1400, 2000, 2800, 4000, 5600, 8000, 11000, 16000, 22000)),
    "new": (SamplerSettings(), RunSettings().schedule,
            (50, 70, 100, 140, 200, 280, 400, 560, 800, 1100, 1600, 2200, 3200, 4500, 6400)),
}


def first_reaching(model: str, sampler, schedule, ladder, target: float, chains: int,
                   seed: int) -> list[dict]:
    """Runs at each T of ``ladder`` until two consecutive bound estimates are
    <= ``target``."""
    stem = MODELS[model]
    data = datasets.load(model)
    rows = []
    for T in ladder:
        t0 = time.perf_counter()
        result = bread(ROOT / "stan_models" / f"{stem}.stan",
                       ROOT / "stan_models" / f"{stem}_sim.stan", data, sampler=sampler,
                       run=RunSettings(steps=(T,), chains=chains, schedule=schedule,
                                       seed=seed, threads=1, progress=False,
                                       check_simulator=False))
        wall = time.perf_counter() - t0
        bound = result.steps[0].bound()
        rows.append({"T": T, "bound": bound.estimate, "low": bound.ci_low,
                     "high": bound.ci_high, "tuning": result.extra["tuning_seconds"],
                     "ais": result.steps[0].wall_time, "wall": wall,
                     "reached": bound.estimate <= target})
        print(f"{model} T={T}: bound {bound.estimate:.4g} [{bound.ci_low:.3g}, "
              f"{bound.ci_high:.3g}], {wall:.1f} s", flush=True)
        if len(rows) > 1 and rows[-1]["reached"] and rows[-2]["reached"]:
            break
    return rows


def crossing(rows: list[dict], target: float) -> tuple[float, float] | None:
    """(T, wall seconds) where the bound crosses ``target``, interpolated between
    the first run at or below it and the run before (None if never reached)."""
    first = next((i for i, r in enumerate(rows) if r["reached"]), None)
    if first is None:
        return None
    if first == 0:
        return rows[0]["T"], rows[0]["wall"]
    a, b = rows[first - 1], rows[first]
    frac = ((np.log(a["bound"]) - np.log(target)) / (np.log(a["bound"]) - np.log(b["bound"]))
            if a["bound"] > 0 and b["bound"] > 0 else 1.0)
    T = float(np.exp(np.log(a["T"]) + frac * (np.log(b["T"]) - np.log(a["T"]))))
    wall = a["wall"] + (T - a["T"]) / (b["T"] - a["T"]) * (b["wall"] - a["wall"])
    return T, wall


def _cell(point) -> str:
    return "not reached" if point is None else f"{point[0]:.0f}, {point[1]:.1f}"


def _ratio(old, new) -> str:
    return "n/a" if old is None or new is None else f"{old / new:.3g}x"


def summary(runs: dict, target: float) -> list[str]:
    """The speed-up table from the runs of each (model, "old"/"new")."""
    out = ["", "| model | old: first T reached, wall s | new: first T reached, wall s | "
           "speed-up (first reached) | old: crossing T, wall s | new: crossing T, wall s "
           "| speed-up (interpolated) |", "|---|---|---|---|---|---|---|"]
    for model in dict.fromkeys(m for m, _ in runs):
        first = {name: next((r for r in runs[model, name] if r["reached"]), None)
                 for name in ("old", "new")}
        cross = {name: crossing(runs[model, name], target) for name in ("old", "new")}
        old, new = first["old"], first["new"]
        cells = [_cell(old and (old["T"], old["wall"])), _cell(new and (new["T"], new["wall"])),
                 _ratio(old and old["wall"], new and new["wall"]),
                 _cell(cross["old"]), _cell(cross["new"]),
                 _ratio(cross["old"] and cross["old"][1], cross["new"] and cross["new"][1])]
        out.append(f"| {model} | " + " | ".join(cells) + " |")
    return out


def _read_runs(path: Path, target: float) -> dict:
    """The per-run rows of a results table written by this script."""
    runs: dict = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 9 and cells[1] in ("old", "new"):
            runs.setdefault((cells[0], cells[1]), []).append(
                {"T": int(cells[2]), "bound": float(cells[3]), "tuning": float(cells[5]),
                 "ais": float(cells[6]), "wall": float(cells[7]),
                 "reached": float(cells[3]) <= target})
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--target", type=float, default=1.5)
    parser.add_argument("--models", default="nhefs,pima")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "scripts" / "figures" / "bench_defaults" / "results.md")
    parser.add_argument("--summarise", action="store_true",
                        help="run nothing: add the speed-up table to the runs in --out")
    args = parser.parse_args()
    if args.summarise:
        text = args.out.read_text()
        text = text[:text.index("\nTotal run time")] if "\nTotal run time" in text else text
        tail = args.out.read_text()[len(text):]
        args.out.write_text(text.rstrip("\n") + "\n" + "\n".join(
            summary(_read_runs(args.out, args.target), args.target)) + "\n" + tail)
        print(args.out.read_text())
        return
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    lines = [f"# scripts/bench_defaults.py: wall time to a bound of {args.target} nats",
             "",
             f"{args.chains} chains per direction, 1 thread, seed "
             f"{args.seed}; wall time of a run = pilot tuning + forward and reverse AIS at its "
             "T (no simulator check); runs stop after two consecutive bounds at most the "
             "target. Old defaults: HMC (10 leapfrog steps), sigmoid schedule, diagonal "
             "metric, pilot floor 1e-3. New: NUTS (depth 8, rescue depth 4), adaptive "
             "schedule, diagonal metric, automatic pilot floor. Load average at the start: "
             f"{os.getloadavg()[0]:.2f}.", "",
             "| model | defaults | T | bound (nats) | 95% interval | tuning s | AIS s | "
             "wall s | reached |", "|---|---|---|---|---|---|---|---|---|"]
    runs = {}
    for model in args.models.split(","):
        for name, (sampler, schedule, ladder) in SETTINGS.items():
            runs[model, name] = first_reaching(model, sampler, schedule, ladder, args.target,
                                               args.chains, args.seed)
            for r in runs[model, name]:
                lines.append(f"| {model} | {name} | {r['T']} | {r['bound']:.4g} | "
                             f"[{r['low']:.3g}, {r['high']:.3g}] | {r['tuning']:.1f} | "
                             f"{r['ais']:.1f} | {r['wall']:.1f} | "
                             f"{'yes' if r['reached'] else 'no'} |")
    lines += summary(runs, args.target)
    lines += ["", f"Total run time of the script: {(time.perf_counter() - started) / 60:.1f} min."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

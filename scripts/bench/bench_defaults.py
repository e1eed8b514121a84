"""Wall time to a given Jeffreys bound: today's defaults against the defaults before issue 15.

Issue 15, target 3: the same Jeffreys bound in at least 4 times less wall time
than the old defaults, on NHEFS linear regression and on logistic regression
(Pima), measured side by side in one run.

- **old defaults** (before issue 15, commit b16e821): HMC with 10 leapfrog
  steps (10% rescue transitions), sigmoid schedule (sharpness 4), diagonal
  metric, pilot of 32 chains, 16 grid betas and 40 transitions each, pilot grid
  floor fixed at beta = 1e-3;
- **new defaults** (today's ``SamplerSettings()`` and ``RunSettings()``): NUTS
  (maximum depth 8, 10% rescue transitions of depth at most 4), adaptive
  schedule (equal thermodynamic length), metric "auto" (dense at the grid betas
  where the pilot draws are strongly correlated), pilot of 32 chains, 16 grid
  betas and 20 transitions each, pilot floor chosen from the prior draws.  For each setting the
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

Results: ``scripts/figures/bench_defaults/results.md`` (100 chains): Pima 4.47x
on a quiet machine over seeds 0-2 (old crossing T = 1252 in 32.6 s, new T = 243 in
7.3 s), and 4.47x in CPU seconds over seeds 0-5 on a loaded one; NHEFS 14.8x at seed
0.  With the diagonal metric and 40 pilot transitions as the new defaults Pima was
2.6x (seeds 0-2).  With HMC as the new kernel (the adaptive schedule alone) NHEFS was
5.6x and Pima 1.9x: on Pima the sigmoid schedule is already close to equal
thermodynamic length.

Usage: ``PYTHONPATH=$PWD python scripts/bench/bench_defaults.py [--chains 100]
[--target 1.5] [--seeds 3] [--models nhefs,pima]
[--out scripts/figures/bench_defaults/results.md]``.  ``--versus new,waypoint
--steps 100,300 [--out FILE]`` instead runs the named settings of ``VERSUS`` side by
side at equal T (issue 28: ``--versus new,auto`` the prior path with Stan's ridge, the
default before ``path="auto"``, against today's defaults; ``new,waypoint`` against the
waypoint path).
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

ROOT = Path(__file__).resolve().parents[2]
MODELS = {"nhefs": "linear_regression", "pima": "logistic_regression"}
LADDER = tuple(int(round(50 * 1.4 ** k, -1 if k < 9 else -2)) for k in range(22))
SETTINGS = {  # name -> (sampler, schedule, first T to try per model)
    "old": (SamplerSettings(kernel="hmc", metric="diag", pilot_steps=40, pilot_floor=1e-3),
            ScheduleSpec("sigmoid"), {"nhefs": 4000, "pima": 740}),
    "new": (SamplerSettings(), RunSettings().schedule, {"nhefs": 190, "pima": 140}),
}
# --versus: settings side by side at equal T (issue 28).  "new" is the prior path with
# Stan's ridge (the default before path "auto"), "auto" today's defaults.
VERSUS = {
    "new": (SamplerSettings(metric_ridge="stan"), RunSettings().schedule, "prior"),
    "auto": (SamplerSettings(), RunSettings().schedule, "auto"),
    "relative": (SamplerSettings(metric_ridge="relative"), RunSettings().schedule, "prior"),
    "waypoint": (SamplerSettings(metric_ridge="relative"), RunSettings().schedule, "waypoint"),
}


def one_run(stem: str, data, sampler, schedule, T: int, chains: int, seed: int,
            path: str = "prior") -> dict:
    """One :func:`bread` call of ``stan_models/STEM.stan`` at T distributions: its bound,
    wall and CPU seconds, and the gradients of its two AIS directions."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = bread(ROOT / "stan_models" / f"{stem}.stan",
                   ROOT / "stan_models" / f"{stem}_sim.stan", data,
                   sampler=sampler,
                   run=RunSettings(steps=(T,), chains=chains, schedule=schedule, seed=seed,
                                   threads=1, progress=False, check_simulator=False,
                                   path=path))
    step = result.steps[0]
    bound = step.bound()
    return {"path": result.extra["path_choice"]["path"],
            "estimates": (step.forward.log_estimates, step.reverse.log_estimates),
            "bound": bound.estimate, "se": bound.std_error,
            "tuning": result.extra["tuning_seconds"], "ais": step.wall_time,
            "wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0,
            "grads": step.forward.n_grad + step.reverse.n_grad}


def at_T(model, sampler, schedule, T, chains, seeds) -> dict:
    """The runs at T over ``seeds``, averaged."""
    runs = [one_run(MODELS[model], datasets.load(model), sampler, schedule, T, chains, seed)
            for seed in seeds]
    row = {key: float(np.mean([r[key] for r in runs]))
           for key in ("bound", "tuning", "ais", "wall", "cpu")}
    row.update(T=T, se=float(np.sqrt(np.sum([r["se"] ** 2 for r in runs])) / len(runs)),
               bounds=[r["bound"] for r in runs])
    print(f"{model} T={T}: bound {row['bound']:.4g} +- {row['se']:.2g} "
          f"({', '.join(f'{b:.3g}' for b in row['bounds'])}), wall {row['wall']:.1f} s, "
          f"cpu {row['cpu']:.1f} s", flush=True)
    return row


def bracket(model: str, sampler, schedule, first: int, target: float, chains: int,
            seeds) -> list[dict]:
    """Averaged runs along the ladder from ``first``, bracketing the target crossing."""
    i = LADDER.index(first)
    rows = {}

    def run(j):
        if j not in rows:
            rows[j] = at_T(model, sampler, schedule, LADDER[j], chains, seeds)
            rows[j]["reached"] = rows[j]["bound"] <= target
        return rows[j]

    while run(i)["reached"] and i > 0:  # the first T already reaches it: go down
        i -= 1
    j = i
    while j + 1 < len(LADDER) and not (run(j)["reached"] and j > 0 and rows.get(j - 1, {})
                                       .get("reached")):
        j += 1
        run(j)
    return [rows[k] for k in sorted(rows)]


def crossing(rows: list[dict], target: float, key: str) -> tuple[float, float] | None:
    """(T, seconds of ``key``) where the averaged bound crosses ``target``,
    interpolated between the first row at or below it and the row before."""
    first = next((i for i, r in enumerate(rows) if r["reached"]), None)
    if first is None or first == 0:
        return None
    a, b = rows[first - 1], rows[first]
    frac = ((np.log(a["bound"]) - np.log(target)) / (np.log(a["bound"]) - np.log(b["bound"]))
            if b["bound"] > 0 else 1.0)
    T = float(np.exp(np.log(a["T"]) + frac * (np.log(b["T"]) - np.log(a["T"]))))
    return T, a[key] + (T - a["T"]) / (b["T"] - a["T"]) * (b[key] - a[key])


def summary(runs: dict, target: float) -> list[str]:
    """The speed-up table from the runs of each (model, "old"/"new")."""
    out = ["", "| model | old: crossing T | new: crossing T | old wall s | new wall s | "
           "speed-up (wall) | old CPU s | new CPU s | speed-up (CPU) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for model in dict.fromkeys(m for m, _ in runs):
        cells = []
        cross = {(name, key): crossing(runs[model, name], target, key)
                 for name in ("old", "new") for key in ("wall", "cpu")}
        if any(c is None for c in cross.values()):
            out.append(f"| {model} | not bracketed | | | | | | | |")
            continue
        cells = [f"{cross['old', 'wall'][0]:.0f}", f"{cross['new', 'wall'][0]:.0f}"]
        for key in ("wall", "cpu"):
            old, new = cross["old", key][1], cross["new", key][1]
            cells += [f"{old:.1f}", f"{new:.1f}", f"{old / new:.2f}x"]
        out.append(f"| {model} | " + " | ".join(cells) + " |")
    return out


def versus(models: list[str], names: list[str], steps: list[int], chains: int, seeds,
           out: Path | None) -> None:
    """Settings of :data:`VERSUS` side by side at the same T (the same transitions per
    chain) and seeds, in one run: the bound, its per-seed values and times."""
    lines = [f"# scripts/bench/bench_defaults.py --versus: {', '.join(names)} at equal T", "",
             f"{chains} chains per direction, 1 thread, seeds {seeds.start}-{seeds.stop - 1} "
             "(bounds and times averaged over seeds); time = pilot (or waypoint fit) + "
             f"both AIS directions. Load average at the start: {os.getloadavg()[0]:.2f}.", "",
             "| model | setting | path | T | bound (nats) | se | per seed | tuning s | AIS s | "
             "wall s | CPU s | same numbers as the first setting |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in models:
        for T in steps:
            first = None
            for name in names:
                sampler, schedule, path = VERSUS[name]
                runs = [one_run(MODELS[model], datasets.load(model), sampler, schedule, T,
                                chains, seed, path) for seed in seeds]
                mean = {k: float(np.mean([r[k] for r in runs]))
                        for k in ("bound", "tuning", "ais", "wall", "cpu")}
                se = float(np.sqrt(np.sum([r["se"] ** 2 for r in runs])) / len(runs))
                per_seed = ", ".join(f"{r['bound']:.3g}" for r in runs)
                paths = "/".join(sorted({r["path"] for r in runs}))
                first = first or runs
                same = all(np.array_equal(a, b) for r, q in zip(runs, first)
                           for a, b in zip(r["estimates"], q["estimates"]))
                row = (f"| {model} | {name} | {paths} | {T} | {mean['bound']:.4g} | {se:.2g} | "
                       f"{per_seed} | "
                       f"{mean['tuning']:.1f} | {mean['ais']:.1f} | {mean['wall']:.1f} | "
                       f"{mean['cpu']:.1f} | {'yes' if same else 'no'} |")
                print(row, flush=True)
                lines.append(row)
    text = "\n".join(lines) + "\n"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--target", type=float, default=1.5)
    parser.add_argument("--models", default="nhefs,pima")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "scripts" / "figures" / "bench_defaults" / "results.md")
    parser.add_argument("--versus", default=None,
                        help="compare settings of VERSUS at equal T instead, e.g. "
                        "new,waypoint (with --steps)")
    parser.add_argument("--steps", default="100,300",
                        help="with --versus: the numbers of distributions T")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.versus:
        out = None if args.out == parser.get_default("out") else args.out
        versus(args.models.split(","), args.versus.split(","),
               [int(t) for t in args.steps.split(",")], args.chains, range(args.seeds), out)
        return
    started, load = time.perf_counter(), os.getloadavg()[0]
    seeds = range(args.seeds)
    lines = [f"# scripts/bench/bench_defaults.py: time to a bound of {args.target} nats", "",
             f"{args.chains} chains per direction, 1 thread, seeds 0-{args.seeds - 1} (bounds "
             "and times averaged over seeds); time of a run = pilot tuning + forward and "
             "reverse AIS at its T (no simulator check). Old defaults: HMC (10 leapfrog "
             "steps), sigmoid schedule, diagonal metric, 40 pilot transitions, pilot floor 1e-3. "
             "New: NUTS (depth 8, rescue depth 4), adaptive schedule, metric auto, 20 pilot "
             "transitions, automatic pilot floor. "
             f"Load average at the start: {load:.2f}.", "",
             "| model | defaults | T | bound (nats) | se | per seed | tuning s | AIS s | "
             "wall s | CPU s | reached |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    runs = {}
    for model in args.models.split(","):
        for name, (sampler, schedule, first) in SETTINGS.items():
            runs[model, name] = bracket(model, sampler, schedule, first[model], args.target,
                                        args.chains, seeds)
            for r in runs[model, name]:
                lines.append(f"| {model} | {name} | {r['T']} | {r['bound']:.4g} | "
                             f"{r['se']:.2g} | {', '.join(f'{b:.3g}' for b in r['bounds'])} | "
                             f"{r['tuning']:.1f} | {r['ais']:.1f} | {r['wall']:.1f} | "
                             f"{r['cpu']:.1f} | {'yes' if r['reached'] else 'no'} |")
    lines += summary(runs, args.target)
    lines += ["", f"Total run time of the script: {(time.perf_counter() - started) / 60:.1f} "
              f"min; load average at the end: {os.getloadavg()[0]:.2f}."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

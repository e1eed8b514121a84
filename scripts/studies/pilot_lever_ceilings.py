"""The most two of issue 42's untried pilot levers could save, on the runs of a sweep:
(c1) "tune the prior-dominated betas cheaply where beta x sd(log likelihood) << 1" and
(c2) "reuse the pilot's chains as the first T's".

(c1) A grid beta is prior-dominated where ``beta x sd(log lik at the prior draws) <
LEVEL``: there the tempered density differs from the prior by a factor whose log has sd
below LEVEL, so the prior's own tuning would serve.  The pilot's grid is rebuilt from the
sd the run saved (``path_choice.json``) exactly as the pilot built it
(:func:`bread_stan.ais.pilot_grid.floor_for_sd`; checked against the saved grid where
the prior path was chosen), cut at the beta the prior pilot reached when it stopped
early.  The ceiling makes those betas free and assumes every transition of the pilot
costs the same gradients (saved runs do not split the pilot's gradients by beta).

(c2) At most the first T's whole scored run (forward and reverse) could come from the
pilot's chains: the ceiling takes that many gradients off the set-up.

The shares are of gradients before the first scored transition (pilots and check) in all
of the run's gradients, as the sweep's table reports them, and with each ceiling and both
taken off.

    python scripts/studies/pilot_lever_ceilings.py --runs /tmp/sweep8/runs \
        --out scripts/figures/pilot_lever_ceilings/results.md
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from bread_stan.ais.pilot_grid import floor_for_sd, grid_betas

LEVEL = 0.1          # beta x sd(log lik) below this: the prior's geometry
BURN_IN = 5          # TuningConfig.burn_in: unadapted transitions on arriving at a beta


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def pilot_grid_of(settings: dict, sd: float) -> np.ndarray:
    """The prior path pilot's grid for the run's sampler settings and saved sd."""
    sampler = settings.get("sampler", {})
    size = int(sampler.get("pilot_grid", 16))
    floor = sampler.get("pilot_floor")
    if floor is None:
        floor, size = floor_for_sd(sd, size)
    return grid_betas(size, float(floor))


def reached(grid: np.ndarray, prior_cost: dict, reason: str) -> np.ndarray:
    """The grid betas the prior path's pilot ran: all of them when it completed, else
    those up to the beta its early stop names ("by beta = X ...")."""
    if prior_cost.get("complete", False):
        return grid
    found = re.search(r"by beta = ([\d.e+-]+)", reason)
    if not found:
        return grid[:1]
    return grid[grid <= float(found.group(1)) * (1 + 1e-3)]


def ceiling(run: Path) -> dict | None:
    """One run's row, or None when its prior path's pilot did not run."""
    header = _load(run / "run.json")
    choice = _load(run / "path_choice.json").get("choice") or {}
    costs = choice.get("costs") or {}
    prior, sd = costs.get("prior"), choice.get("loglik_sd")
    setup = header.get("extra", {}).get("setup_gradients") or {}
    if not prior or not prior.get("pilot_gradients") or sd is None or not setup:
        return None
    grid = pilot_grid_of(header.get("settings", {}), float(sd))
    tuning = header["extra"].get("tuning") or {}   # the prior path's: one kernel's record
    saved_grid = tuning.get("grid_betas") if choice.get("path") == "prior" else None
    ran = reached(grid, prior, choice.get("reason", ""))
    pilot_steps = int(header["settings"].get("sampler", {}).get("pilot_steps", 20))
    weights = np.full(ran.size, pilot_steps + BURN_IN, dtype=float)
    weights[0] = pilot_steps
    dominated = ran * float(sd) < LEVEL
    fraction = float(weights[dominated].sum() / weights.sum())
    saving = fraction * float(prior["pilot_gradients"])
    before = float(setup["pilots"]) + float(setup["check"])
    total = before + float(setup["scored"])
    steps = _load(run / "summary.json").get("summary") or []
    first = float(min(steps, key=lambda s: int(s["steps"])).get("gradients") or 0) if steps \
        else 0.0
    reuse = min(first, float(setup["pilots"]))
    return {"program": run.name, "path": choice.get("path"), "sd": float(sd),
            "grid": int(grid.size), "ran": int(ran.size), "dominated": int(dominated.sum()),
            "grid_checked": None if saved_grid is None else bool(
                np.allclose(saved_grid, grid, rtol=1e-9)),
            "prior_pilot": float(prior["pilot_gradients"]), "saving": saving,
            "first_T": int(min(int(s["steps"]) for s in steps)) if steps else None,
            "reuse": reuse, "share": before / total,
            "c1_share": (before - saving) / (total - saving),
            "c2_share": (before - reuse) / total,
            "both_share": (before - saving - reuse) / (total - saving)}


def table(rows: list[dict]) -> str:
    lines = ["| program | path | sd(log lik) | grid | prior pilot ran | prior-dominated | "
             "prior pilot grads | (c1) saved at most | first T | (c2) saved at most | "
             "share | with (c1) | with (c2) | with both |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["program"]):
        checked = {None: "", True: " (= saved)", False: " (differs)"}[r["grid_checked"]]
        lines.append(
            f"| {r['program']} | {r['path']} | {r['sd']:.3g} | {r['grid']}{checked} | "
            f"{r['ran']} | {r['dominated']} | {r['prior_pilot']:,.0f} | {r['saving']:,.0f} | "
            f"{r['first_T'] or ''} | {r['reuse']:,.0f} | {r['share']:.0%} | "
            f"{r['c1_share']:.0%} | {r['c2_share']:.0%} | {r['both_share']:.0%} |")
    if rows:
        median = {k: np.median([r[k] for r in rows])
                  for k in ("share", "c1_share", "c2_share", "both_share")}
        lines += ["", f"Median share over {len(rows)} runs: {median['share']:.0%}; with "
                  f"(c1) at its ceiling {median['c1_share']:.0%}, with (c2) "
                  f"{median['c2_share']:.0%}, with both {median['both_share']:.0%}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True,
                        help="a sweep's folder of run directories (its --work/runs)")
    parser.add_argument("--out", type=Path, help="write the table here (else print it)")
    args = parser.parse_args(argv)
    rows = [row for run in sorted(p for p in args.runs.iterdir() if p.is_dir())
            if (row := ceiling(run)) is not None]
    text = table(rows)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

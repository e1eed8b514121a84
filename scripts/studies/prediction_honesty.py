"""Is the T that ``--steps auto`` predicts honest?  Run it and compare.

``--steps auto`` names, when it stops not converged, the T at which the decay fitted
to its measured bounds reaches the convergence level (:func:`bread_stan.ais.budget.
fit_upper_limit`: the 95% upper limit, the verdict's criterion, as the estimate's decay,
1/T with one step count, plus its Monte Carlo margin's, 1/sqrt(T)).  Here each case
runs a few small step counts with ``--steps`` (not a budget: on a loaded machine a
budget in minutes would choose different step counts from run to run), fits them with
that same function, runs the predicted T in the same output directory (nothing
finished is rerun) and reads the measured upper limit there.  The prediction is honest
when the measured upper limit is within a factor of 3 of the fitted one at the T that
was run (the level itself, up to the rounding of T); the estimate is shown beside it.

A case whose first step counts already converge has no prediction to test; one whose
predicted T is over ``--max-steps`` is reported and skipped.  What the comparison cannot
see: one seed a case, so the measured upper limit carries its own Monte Carlo error; a
factor of 3 is the issue's tolerance, not a derived one.

    PYTHONPATH=$PWD nice python scripts/studies/prediction_honesty.py --work /tmp/ph
    PYTHONPATH=$PWD python scripts/studies/prediction_honesty.py --only pima,faithful

Writes ``scripts/figures/prediction_honesty/results.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

from bread_stan.ais.budget import fit_upper_limit

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "prediction_honesty"
M = ROOT / "stan_models"
T = ROOT / "tests" / "stan"

# case -> (model, simulator or None, data, first step counts, extra CLI arguments)
CASES = {
    "pima": (M / "logistic_regression.stan", M / "logistic_regression_sim.stan", "pima",
             (10,), ["--path", "prior"]),
    "pima_two": (M / "logistic_regression.stan", M / "logistic_regression_sim.stan", "pima",
                 (10, 40), ["--path", "prior"]),
    "goog": (M / "ar1.stan", M / "ar1_sim.stan", "goog", (10,),
             ["--path", "prior", "--converged-nats", "0.1"]),
    "faithful": (M / "gaussian_mixture.stan", M / "gaussian_mixture_sim.stan", "faithful",
                 (10,), ["--path", "prior"]),
    "eight_schools": (T / "eight_schools.stan", None, str(T / "eight_schools.json"), (10,),
                      ["--path", "prior", "--converged-nats", "0.05"]),
    "nhefs_gaussian": (M / "linear_regression.stan", M / "linear_regression_sim.stan",
                       "nhefs", (10,), ["--path", "gaussian", "--converged-nats", "0.02"]),
    "eight_schools_centred": (T / "eight_schools_centred.stan", None,
                              str(T / "eight_schools.json"), (10, 40),
                              ["--path", "prior", "--converged-nats", "0.05"]),
}


def _command(case: str, out: Path, steps) -> list[str]:
    model, simulator, data, _, extra = CASES[case]
    command = [sys.executable, "-m", "bread_stan.cli", "run", str(model), "--data", data,
               "--steps", ",".join(map(str, sorted(steps))), "--chains", "30",
               "--out", str(out), *extra]
    if simulator is not None:
        command += ["--simulator", str(simulator)]
    return command


def _rows(out: Path) -> dict[int, dict]:
    summary = json.loads((out / "summary.json").read_text())
    return {int(r["steps"]): r for r in summary["summary"]}


def _failed(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    return "failed: " + (lines[-1] if lines else f"exit {done.returncode}")


def run_case(case: str, work: Path, max_steps: int) -> dict:
    """The first step counts, the predicted T, then that T; one row of the table."""
    out, first = work / case, CASES[case][3]
    level = float(dict(zip(CASES[case][4][::2], CASES[case][4][1::2])).get(
        "--converged-nats", 1.0))
    started = time.monotonic()
    done = subprocess.run(_command(case, out, first), capture_output=True, text=True)
    if not (out / "summary.json").exists():
        return {"case": case, "outcome": _failed(done)}
    rows = _rows(out)
    row = {"case": case, "level": level, "first": ",".join(map(str, first))}
    if rows[max(first)]["converged"]:
        return {**row, "outcome": "converged at the first step counts: nothing to predict"}
    fit = fit_upper_limit(first, [rows[T]["bound"] for T in first],
                          [rows[T]["bound_ci_high"] for T in first])
    wanted = fit.steps_for(level) if fit is not None else math.inf
    if not math.isfinite(wanted) or wanted > max_steps:
        return {**row, "outcome": f"skipped: predicted T {wanted:.3g} over {max_steps}"}
    target = int(math.ceil(wanted))
    row.update(predicted_T=target, fit=fit.describe())
    done = subprocess.run(_command(case, out, (*first, target)), capture_output=True,
                          text=True)
    if target not in _rows(out):
        return {**row, "outcome": _failed(done)}
    measured = _rows(out)[target]
    predicted = fit.bound_at(target)
    ratio = float(measured["bound_ci_high"]) / predicted
    return {**row, "predicted_upper": predicted,
            "measured_upper": measured["bound_ci_high"], "measured_bound": measured["bound"],
            "converged_there": bool(measured["converged"]),
            "ratio": ratio, "within_3x": bool(1 / 3 <= ratio <= 3),
            "outcome": "tested", "seconds": round(time.monotonic() - started, 1)}


def write(rows: list[dict]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(rows, indent=1))
    columns = ["case", "level", "first", "predicted_T", "fit", "predicted_upper",
               "measured_upper", "measured_bound", "converged_there", "ratio",
               "within_3x", "outcome", "seconds"]
    tested = [r for r in rows if r["outcome"] == "tested"]
    lines = ["# Is the predicted T honest?", "",
             f"{sum(r['within_3x'] for r in tested)} of {len(tested)} tested cases measure "
             "an upper limit within a factor of 3 of the prediction at the predicted T "
             "(one seed a case; `scripts/studies/prediction_honesty.py`).", "",
             "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [r.get(c, "") for c in columns]
        lines.append("| " + " | ".join(f"{c:.3g}" if isinstance(c, float) else str(c)
                                        for c in cells) + " |")
    (OUT / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/prediction_honesty"))
    parser.add_argument("--only", help="comma-separated cases (default: all)")
    parser.add_argument("--max-steps", type=int, default=20000)
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(CASES)
    previous = {}
    if (OUT / "results.json").exists():
        previous = {r["case"]: r for r in json.loads((OUT / "results.json").read_text())}
    for case in chosen:
        previous[case] = run_case(case, args.work, args.max_steps)
        write([previous[c] for c in CASES if c in previous])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Is ``--steps auto``'s predicted T honest?  Run the T it names and compare.

For each case, ``bread-stan run ... --steps auto --budget B`` with a budget too small to
converge stops "not converged within the budget" and names a predicted T: the step
count at which the decay fitted to its measured bounds' 95% upper limits
(``log U = a - b log T``, :func:`bread_stan.ais.budget.fit_decay`; the upper limit is
what the verdict compares with the level) reaches the convergence level (1 nat by
default).  The study then runs that T in the same output directory (``--steps`` with the
chosen step counts and the predicted one, so nothing finished is rerun) and reads the
measured bound there.  The prediction is honest when the measured bound is within a
factor of 3 of the fitted bound at the T that was run (the level itself, up to the
rounding of T).

A case whose auto run converges within its budget has no prediction to test; one whose
predicted run would take longer than ``--max-minutes`` (by the auto run's own estimate)
is reported and skipped.  What the comparison cannot see: one seed a case, so the
measured bound carries its own Monte Carlo error (its 95% interval is in the table);
a factor of 3 is the issue's tolerance, not a derived one.

    PYTHONPATH=$PWD nice python scripts/studies/prediction_honesty.py --work /tmp/ph
    PYTHONPATH=$PWD python scripts/studies/prediction_honesty.py --only pima,nhefs

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

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "prediction_honesty"
M = ROOT / "stan_models"
T = ROOT / "tests" / "stan"

# case -> (model, simulator or None, data, budget in minutes, extra CLI arguments)
CASES = {
    "pima": (M / "logistic_regression.stan", M / "logistic_regression_sim.stan", "pima",
             0.12, ["--path", "prior"]),
    "nhefs": (M / "linear_regression.stan", M / "linear_regression_sim.stan", "nhefs",
              0.12, ["--path", "prior"]),
    "goog": (M / "ar1.stan", M / "ar1_sim.stan", "goog", 0.05,
             ["--path", "prior", "--converged-nats", "0.1"]),
    "faithful": (M / "gaussian_mixture.stan", M / "gaussian_mixture_sim.stan", "faithful",
                 0.3, ["--path", "prior"]),
    "eight_schools": (T / "eight_schools.stan", None, str(T / "eight_schools.json"), 0.1,
                      ["--path", "prior", "--converged-nats", "0.05"]),
    "nhefs_gaussian": (M / "linear_regression.stan", M / "linear_regression_sim.stan",
                       "nhefs", 0.05, ["--path", "gaussian", "--converged-nats", "0.02"]),
    "eight_schools_centred": (T / "eight_schools_centred.stan", None,
                              str(T / "eight_schools.json"), 0.1,
                              ["--path", "prior", "--converged-nats", "0.05"]),
}


def _command(case: str, out: Path, steps: str, budget: float | None) -> list[str]:
    model, simulator, data, _, extra = CASES[case]
    command = [sys.executable, "-m", "bread_stan.cli", "run", str(model), "--data", data,
               "--steps", steps, "--chains", "30", "--out", str(out), *extra]
    if simulator is not None:
        command += ["--simulator", str(simulator)]
    if budget is not None:
        command += ["--budget", str(budget)]
    return command


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _row_at(summary: dict, steps: int) -> dict:
    return next(r for r in summary["summary"] if int(r["steps"]) == steps)


def _fit_bound(fit: dict, steps: int) -> float:
    return math.exp(fit["intercept"] - fit["slope"] * math.log(steps))


def run_case(case: str, work: Path, max_minutes: float) -> dict:
    """The auto run, then the predicted T; one row of the table."""
    out = work / case
    started = time.monotonic()
    done = subprocess.run(_command(case, out, "auto", CASES[case][3]), check=False,
                          capture_output=True, text=True)
    if not (out / "summary.json").exists():
        return {"case": case, "outcome": "failed: " + done.stderr.strip().splitlines()[-1]}
    auto = _summary(out)["extra"]["auto_steps"]
    row = {"case": case, "budget_min": CASES[case][3], "level": auto["level"],
           "chosen": ",".join(map(str, auto["chosen"])), "stopped": auto["stopped"]}
    predicted = auto.get("predicted_steps")
    if not predicted:
        return {**row, "outcome": "converged within the budget: no prediction to test"}
    target = int(round(predicted))
    row.update(predicted_T=target, predicted_minutes=auto.get("predicted_minutes"),
               fit=f"a={auto['fit']['intercept']:.3g}, b={auto['fit']['slope']:.3g} "
                   f"over {auto['fit']['points']} T")
    if (auto.get("predicted_minutes") or 0) > max_minutes:
        return {**row, "outcome": f"skipped: predicted run over {max_minutes} minutes"}
    steps = ",".join(map(str, sorted(set(auto["chosen"]) | {target})))
    subprocess.run(_command(case, out, steps, None), check=False, capture_output=True,
                   text=True)
    measured = _row_at(_summary(out), target)
    predicted_bound = _fit_bound(auto["fit"], target)
    ratio = float(measured["bound_ci_high"]) / predicted_bound
    return {**row, "predicted_upper": predicted_bound,
            "measured_upper": measured["bound_ci_high"], "measured_bound": measured["bound"],
            "measured_interval": (f"{measured['bound_ci_low']:.3g} to "
                                  f"{measured['bound_ci_high']:.3g}"),
            "ratio": ratio, "within_3x": bool(1 / 3 <= ratio <= 3),
            "outcome": "tested", "seconds": round(time.monotonic() - started, 1)}


def write(rows: list[dict]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(rows, indent=1))
    columns = ["case", "budget_min", "level", "chosen", "predicted_T", "fit",
               "predicted_upper", "measured_upper", "measured_bound", "measured_interval",
               "ratio",
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
    parser.add_argument("--max-minutes", type=float, default=10.0)
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(CASES)
    previous = {}
    if (OUT / "results.json").exists():
        previous = {r["case"]: r for r in json.loads((OUT / "results.json").read_text())}
    for case in chosen:
        previous[case] = run_case(case, args.work, args.max_minutes)
        write([previous[c] for c in CASES if c in previous])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

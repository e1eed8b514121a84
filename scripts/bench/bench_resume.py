"""What a resumed ``path="auto"`` run spends before its first unfinished step count.

A run is made once with an output directory (its step counts saved), then resumed with
one more step count, twice, side by side in one process: with the path choice and the
Gaussian path it saved (``path_choice.json``, ``gaussian_path.json``), and with those two
files removed, which is what a resume did before they were kept (the choice made again:
q fitted, the Gaussian leg's pilot, the prior path's pilot).  Both resumes give the same
numbers (asserted); the table gives the seconds each spent and the seconds of the new
step count alone.

Models: eight schools, centred (no posterior mode: Pathfinder's q; the prior path's
pilot runs in the choice) and non-centred, with drafted simulators, and the test suite's
uncentred half-Cauchy regression (Laplace q, the Gaussian path without a prior pilot).

Usage: ``PYTHONPATH=$PWD nice python scripts/bench/bench_resume.py
[--out scripts/figures/bench_resume/results.md]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bread_stan.stan.draft import draft_simulator
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread
from bread_stan.workflows.saved_choice import CHOICE_FILE
from bread_stan.workflows.bread import GAUSSIAN_PATH_FILE

ROOT = Path(__file__).resolve().parents[2]
DRAFT = ROOT / "tests" / "stan" / "draft"
TEST_STAN = ROOT / "tests" / "stan"
EIGHT_DATA = {"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12],
              "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}


def _hard_data() -> dict:
    x = np.round(np.random.default_rng(3).uniform(5000, 20000, 12), 1)
    return {"N": 12, "x": x.tolist()}


def cases() -> list[tuple[str, Path, object, dict, int]]:
    centred = DRAFT / "eight_schools_centred.stan"
    noncentred = DRAFT / "eight_schools_noncentred.stan"
    return [("eight schools, centred", centred, draft_simulator(centred), EIGHT_DATA, 0),
            ("eight schools, non-centred", noncentred, draft_simulator(noncentred),
             EIGHT_DATA, 0),
            ("uncentred half-Cauchy regression", TEST_STAN / "uncentred_halfcauchy.stan",
             TEST_STAN / "uncentred_halfcauchy_sim.stan", _hard_data(), 4)]


def measure(model, simulator, data, seed: int, work: Path) -> dict:
    """Seconds of the two resumes (kept, made again) and of the new step count alone."""
    run = RunSettings(steps=(100,), chains=16, seed=seed, progress=False)
    bread(model, simulator, data, run=run, out_dir=work / "first")
    more = RunSettings(steps=(100, 200), chains=16, seed=seed, progress=False)
    seconds, results = {}, {}
    for how in ("kept", "again"):
        out = work / how
        shutil.copytree(work / "first", out)
        if how == "again":
            for name in (CHOICE_FILE, GAUSSIAN_PATH_FILE):
                (out / name).unlink(missing_ok=True)
        start = time.perf_counter()
        results[how] = bread(model, simulator, data, run=more, out_dir=out)
        seconds[how] = time.perf_counter() - start
    kept, again = results["kept"], results["again"]
    assert kept.extra["path_choice"] == again.extra["path_choice"]
    for a, b in zip(kept.steps, again.steps):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    step = kept.steps[-1]
    return {**seconds, "path": kept.extra["path_choice"]["path"],
            "step": step.forward.wall_time + step.reverse.wall_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path,
                        default=ROOT / "scripts" / "figures" / "bench_resume" / "results.md")
    args = parser.parse_args()
    rows = ["| model | path | resume, choice kept (s) | resume, choice made again (s) | "
            "ratio | the new step count's AIS (s) |", "|---|---|---|---|---|---|"]
    for name, model, simulator, data, seed in cases():
        with tempfile.TemporaryDirectory() as tmp:
            m = measure(model, simulator, data, seed, Path(tmp))
        rows.append(f"| {name} | {m['path']} | {m['kept']:.1f} | {m['again']:.1f} | "
                    f"{m['again'] / m['kept']:.1f}x | {m['step']:.1f} |")
        print(rows[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# A resumed run with its path choice kept, against the choice made again\n\n"
        "`scripts/bench/bench_resume.py`: a run of T = 100 (16 chains) resumed with T = 200 "
        "added, in one process, the two resumes side by side; the same numbers both "
        "ways (asserted). Seconds are wall time on this machine and include compiling "
        "nothing (the programs are cached by the first run).\n\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

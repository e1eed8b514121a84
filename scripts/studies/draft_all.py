"""Draft a simulator for every study model (stan_models/) and every drafter test
program (tests/stan/draft/), and run the simulator check on each draft.

Models the drafter refuses are listed with its message.  Output: a table on stdout
(committed as scripts/studies/draft_all.txt).  Usage:

    PYTHONPATH=$PWD python scripts/studies/draft_all.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from bread_stan.stan import datasets
from bread_stan.stan.compile import Program, compile_many
from bread_stan.stan.draft import DraftError, draft_simulator
from bread_stan.workflows.bread import SamplerSettings
from bread_stan.workflows.simulator_check import CheckSettings, check_simulator

ROOT = Path(__file__).resolve().parents[2]
MODELS, DRAFT = ROOT / "stan_models", ROOT / "tests" / "stan" / "draft"
SAMPLER = SamplerSettings(pilot_chains=16, pilot_grid=6, pilot_steps=20)


def _study_data() -> dict:
    rng = np.random.default_rng(0)
    x = rng.uniform(70, 140, 60)
    z = rng.integers(0, 2, 60).astype(float)
    n, d = 8, 6
    rows, cols = np.divmod(rng.choice(n * d, 30, replace=False), d)
    return {
        "linear_regression": datasets.load("nhefs"),
        "logistic_regression": datasets.load("pima"),
        "mf_uncollapsed": datasets.load("mf_pair"),
        "vague_regression": {"N": 60, "x": x, "z": z, "y": 5 + 2 * z + 0.5 * x
                             + rng.normal(0, 3, 60)},
        "matrix_factorisation": {"N": n, "D": d, "K": 2, "n_obs": 30,
                                 "obs_row": rows + 1, "obs_col": cols + 1,
                                 "y": rng.normal(size=30)},
        "ar1": datasets.load("goog"),
        "gaussian_mixture": datasets.load("faithful"),
        "mf_collapsed": datasets.load("mf_pair"),
    }


def main() -> int:
    cases = [(MODELS / f"{name}.stan", data) for name, data in _study_data().items()]
    cases += [(path, json.loads(path.with_suffix(".json").read_text()))
              for path in sorted(DRAFT.glob("*.stan"))]
    cases += [(ROOT / "tests" / "stan" / f"{name}.stan",
               json.loads((DRAFT / f"{name}.json").read_text()))
              for name in ("normal_mean", "poisson_regression", "group_scales")]
    drafted, rows = [], []
    for model, data in cases:
        try:
            drafted.append((model, data, draft_simulator(model)))
        except DraftError as error:
            rows.append(f"| {model.name} | refused | {str(error).split(': ', 1)[1]} |")
    started = time.perf_counter()
    programs = [p for m, _, text in drafted
                for p in (m, Program(text, f"{m.stem}_drafted"))]
    compile_many(programs, workers=2)
    print(f"compiled {len(programs)} programs in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)
    failed = 0
    for model, data, text in drafted:
        started = time.perf_counter()
        result = check_simulator(model, Program(text, f"{model.stem}_drafted"), data,
                                 sampler=SAMPLER, settings=CheckSettings(seed=0))
        failed += not result.passed
        rows.append(f"| {model.name} | {'passed' if result.passed else 'FLAGGED'} "
                    f"(min p = {result.min_p:.2g}, {time.perf_counter() - started:.0f} s) "
                    f"| {result.message} |")
        print(rows[-1], file=sys.stderr)
    print("| model | drafted simulator: check (seed 0) | message |")
    print("|---|---|---|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

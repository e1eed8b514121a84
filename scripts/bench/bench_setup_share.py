"""The share of gradients spent before the first scored transition (path choice, pilots,
simulator check) under ``--steps auto --budget M`` (issue 42), per program and per size
of the simulator check, each lever measured on its own against the default.

Each program runs ``bread`` (path auto, NUTS, seed 0) with ``steps="auto"``,
``budget_minutes`` (default 1) and ``chains`` (default 30), as
``bread-stan run MODEL --data DATA --steps auto --budget 1 --chains 30`` does, once per
variant of the check: 2000 prior draws (the default), other numbers of prior
draws (``--prior-draws``, default 1000), and a prior-stage depth cap
(``--depths``); the variant replaces ``bread``'s check settings and nothing else.
Per run: the chosen step counts and why it stopped, ``extra["setup_gradients"]`` (pilots:
every ``pilot_gradients`` of the path's tuning and the check's kernel at the prior; check:
its ``n_grad``; scored: the AIS steps'), the share, and "pilots only", the share the run
would have with no check at all (the floor any size of the check can reach).  Gradients,
unlike seconds, do not depend on the machine.

Writes ``scripts/figures/bench_pilot_levers/setup_share.md``.  Usage:
``PYTHONPATH=$PWD python scripts/bench/bench_setup_share.py [--prior-draws 1000]
[--depths 5] [--budget 1] [--chains 30] [--only TEXT ...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from pathlib import Path

import numpy as np

from bread_stan.rng import Purpose, derived_seed
from bread_stan.stan import datasets
from bread_stan.workflows import bread as bread_module
from bread_stan.workflows.bread import RunSettings, bread
from bread_stan.workflows.simulator_check import CheckSettings

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "bench_pilot_levers"
PDB = Path("/tmp/pdb")  # posteriordb programs: `git show HEAD:posterior_database/...`


def programs() -> dict:
    """name -> (model, simulator or None (drafted), data)."""
    models, draft = ROOT / "stan_models", ROOT / "tests" / "stan" / "draft"
    found = {
        "linear_regression / nhefs (README)": (models / "linear_regression.stan",
                                               models / "linear_regression_sim.stan",
                                               datasets.load("nhefs")),
        "eight_schools_centred (drafted)": (draft / "eight_schools_centred.stan", None,
                                            json.loads((draft / "eight_schools_centred.json")
                                                       .read_text())),
        "logistic_regression / pima": (models / "logistic_regression.stan",
                                       models / "logistic_regression_sim.stan",
                                       datasets.load("pima")),
    }
    for name, model, data in [("GLM_Binomial", "GLM_Binomial_model.stan",
                               "GLM_Binomial_data.json"),
                              ("eight_schools_noncentered", "eight_schools_noncentered.stan",
                               "eight_schools.json")]:
        if (PDB / model).exists():
            found[f"posteriordb {name} (drafted)"] = (PDB / model, None,
                                                      json.loads((PDB / data).read_text()))
    return found


@contextlib.contextmanager
def check_sizes(**sizes):
    """``bread``'s simulator check with ``sizes`` (CheckSettings fields) in place of
    the defaults; the seed as ``bread`` derives it."""
    saved = bread_module._check_settings
    bread_module._check_settings = lambda run: CheckSettings(
        seed=derived_seed(run.seed, Purpose.CHECK), **sizes)
    try:
        yield
    finally:
        bread_module._check_settings = saved


def measure(model, simulator, data, run: RunSettings, sizes: dict) -> dict:
    with check_sizes(**sizes):
        result = bread(model, simulator, data, run=run)
    setup = result.extra["setup_gradients"]
    auto = result.extra["auto_steps"]
    pilots_only = setup["pilots"] / (setup["pilots"] + setup["scored"])
    return {**setup, "chosen": auto["chosen"], "stopped": auto["stopped"],
            "pilots_only": pilots_only, "passed": result.extra["simulator_check"]["passed"],
            "seconds": auto["spent_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--chains", type=int, default=30)
    parser.add_argument("--prior-draws", default="1000")
    parser.add_argument("--depths", default="5")
    parser.add_argument("--only", nargs="+", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    run = RunSettings(steps="auto", budget_minutes=args.budget, chains=args.chains,
                      progress=False)
    variants = {"2000 prior draws (the default)": {"prior_draws": 2000}}
    for n in filter(None, args.prior_draws.split(",")):
        variants[f"{n} prior draws"] = {"prior_draws": int(n)}
    for d in filter(None, args.depths.split(",")):
        variants[f"prior-stage depth <= {d}"] = {"prior_max_depth": int(d)}
        for n in filter(None, args.prior_draws.split(",")):
            variants[f"{n} prior draws, depth <= {d}"] = {"prior_draws": int(n),
                                                          "prior_max_depth": int(d)}
    lines = ["# Gradients before the first scored transition under `--steps auto`", "",
             f"`bread` with `steps=\"auto\"`, `budget_minutes={args.budget:g}`, "
             f"`chains={args.chains}`, seed 0, path auto, NUTS, compiles cached "
             "(`scripts/bench/bench_setup_share.py`).  pilots = every `pilot_gradients` "
             "of the path's tuning and of the check's kernel at the prior; check = the "
             "simulator check's `n_grad`; scored = the AIS steps'; share = (pilots + "
             "check) / all; pilots only = the share with no check at all (the floor any "
             "size of the check can reach).  `s` = the run's seconds (pilots, check, AIS; "
             "compiles not), on a shared 2-core machine.", "",
             "| program | check | chosen T | stopped | pilots | check | scored | share | "
             "pilots only | check passed | s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    shares = {name: [] for name in variants}
    for program, (model, simulator, data) in programs().items():
        if args.only and not any(s in program for s in args.only):
            continue
        for name, sizes in variants.items():
            m = measure(model, simulator, data, run, sizes)
            shares[name].append(m["share"])
            lines.append(f"| {program} | {name} | {','.join(map(str, m['chosen']))} | "
                         f"{m['stopped']} | {m['pilots']:,.0f} | {m['check']:,.0f} | "
                         f"{m['scored']:,.0f} | {m['share']:.0%} | {m['pilots_only']:.0%} | "
                         f"{m['passed']} | {m['seconds']:.1f} |")
            print(lines[-1], flush=True)
    lines += ["", "Median share over the programs:", "", "| check | median share |",
              "|---|---|"]
    lines += [f"| {name} | {np.median(s):.0%} |" for name, s in shares.items() if s]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "setup_share.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT / 'setup_share.md'}")


if __name__ == "__main__":
    main()

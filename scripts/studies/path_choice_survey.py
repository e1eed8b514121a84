"""Which path ``path="auto"`` takes on the project's models, and the numbers behind it.

For each model and run seed, the decision :func:`bread` makes before anything is scored
(:func:`bread_stan.workflows.auto_path.resolve_path`): the sd of the log likelihood over
the pilot's 32 exact prior draws (above 1e12 nats tempering from the prior strands
chains), then, where the Gaussian-base path can run (a posterior mode, a trustworthy
prior normaliser), its pilot's thermodynamic length L and gradients a transition g, and
the prior path's pilot, abandoned once its cost g L^2 exceeds the Gaussian path's.  No
AIS is run.

Models: NHEFS linear regression and Pima logistic regression (``stan_models``), the
vague-prior regression of issue 15, eight schools centred and non-centred (simulators
drafted by ``bread_stan.stan.draft``), the conjugate normal mean and noise-scale test
models (``tests/stan``), and the half-Cauchy regression of ``scripts/bench/bench_hard.py`` on
its three data sets (N = 50 at the run seeds whose simulated sigma lies in [0.05, 0.15]
and [0.5, 2], N = 100) and at seeds 0-4, plus the test suite's small uncentred
half-Cauchy regression (``tests/stan/uncentred_halfcauchy.stan``).

Usage: ``PYTHONPATH=$PWD nice python scripts/studies/path_choice_survey.py [--seeds 5]
[--out scripts/figures/path_choice_survey/results.md]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

from bread_stan.stan import datasets
from bread_stan.stan.draft import draft_simulator
from bread_stan.stan.simulator import Simulator, compile_with_simulator
from bread_stan.workflows.auto_path import resolve_path
from bread_stan.workflows.problem import simulate_problem
from bread_stan.workflows.settings import RunSettings, SamplerSettings

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))  # bench_hard, bench_schedules
import bench_hard  # noqa: E402
import bench_schedules  # noqa: E402

MODELS, TESTS = ROOT / "stan_models", ROOT / "tests" / "stan"
DRAFT = TESTS / "draft"


def tiny_data() -> dict:
    """The data of the test suite's small half-Cauchy regression (tests/test_auto_path.py)."""
    x = np.round(np.random.default_rng(3).uniform(5000, 20000, 12), 1)
    return {"N": 12, "x": x.tolist()}


def cases(seeds: list[int]) -> list[tuple]:
    """(label, model, simulator, data, run seeds)."""
    eight = {"J": 8, "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}
    hard_seeds = [bench_hard.pick_seed(0.05, 0.15)[0], bench_hard.pick_seed(0.5, 2.0)[0]]
    return [
        ("NHEFS linear regression", MODELS / "linear_regression.stan",
         MODELS / "linear_regression_sim.stan", datasets.load("nhefs"), seeds),
        ("Pima logistic regression", MODELS / "logistic_regression.stan",
         MODELS / "logistic_regression_sim.stan", datasets.load("pima"), seeds),
        ("vague-prior regression (issue 15)", MODELS / "vague_regression.stan",
         MODELS / "vague_regression_sim.stan", bench_schedules.vague_data(), seeds),
        ("eight schools, non-centred", DRAFT / "eight_schools_noncentred.stan",
         draft_simulator(DRAFT / "eight_schools_noncentred.stan"), eight, seeds),
        ("eight schools, centred", DRAFT / "eight_schools_centred.stan",
         draft_simulator(DRAFT / "eight_schools_centred.stan"), eight, seeds),
        ("normal mean (conjugate)", TESTS / "normal_mean.stan", TESTS / "normal_mean_sim.stan",
         {"N": 20, "sigma": 1.0, "tau": 2.0}, seeds),
        ("noise scale", TESTS / "noise_scale.stan", TESTS / "noise_scale_sim.stan",
         {"N": 20}, seeds),
        ("half-Cauchy regression, N = 50 (bench_hard)", bench_hard.MODEL, bench_hard.SIMULATOR,
         bench_hard.data(50), sorted(set(hard_seeds + seeds))),
        ("half-Cauchy regression, N = 100 (bench_hard --n 100)", bench_hard.MODEL,
         bench_hard.SIMULATOR, bench_hard.data(100), sorted(set(hard_seeds[:1] + seeds))),
        ("small half-Cauchy regression, N = 12 (tests)", TESTS / "uncentred_halfcauchy.stan",
         TESTS / "uncentred_halfcauchy_sim.stan", tiny_data(), seeds),
    ]


def _cost(cost: dict | None) -> str:
    if cost is None:
        return "-"
    at_least = "" if cost["complete"] else ">= "
    return (f"{at_least}{cost['length']:.3g} x {cost['gradients']:.3g} = "
            f"{at_least}{cost['gradients'] * cost['length'] ** 2:.3g}")


def _spent(costs: dict) -> str:
    """The gradients each pilot spent (the prior pilot's budget is BUDGET_RATIO times
    the Gaussian pilot's)."""
    spent = [(costs.get(path) or {}).get("pilot_gradients") for path in ("prior", "gaussian")]
    return " / ".join("-" if value is None else f"{value:.3g}" for value in spent)


def _why(choice) -> str:
    if "not a candidate" in choice.reason:
        why = choice.reason.split("not a candidate: ")[-1].rstrip(")")
        return "Gaussian path not a candidate: " + (why if len(why) < 70 else why[:67] + "...")
    if "strand" in choice.reason:
        return "spread above 1e12"
    if "whole pilot" in choice.reason:
        return "prior pilot over its budget"
    if "abandoned" in choice.reason or "already costs more" in choice.reason:
        return "prior pilot abandoned"
    return "lower cost"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=None,
                    help="models whose label contains one of these strings (default: all)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    rows = ["| model | run seed | log lik sd over 32 prior draws | prior path: L x g | "
            "Gaussian path: L x g | pilots' gradients: prior / Gaussian | path | why |",
            "|---|---|---|---|---|---|---|---|"]
    for label, model, simulator, data, seeds in cases(list(range(args.seeds))):
        if args.only and not any(part in label for part in args.only):
            continue
        (compiled,), sim_compiled = compile_with_simulator([model], simulator)
        sim = Simulator(sim_compiled, data)
        for seed in seeds:
            problem = simulate_problem(label, compiled, sim, data, seed, None)
            choice = resolve_path([problem], sim, SamplerSettings(), RunSettings(seed=seed),
                                  label).choice
            costs = choice.costs or {}
            rows.append(f"| {label} | {seed} | {choice.loglik_sd:.3g} | "
                        f"{_cost(costs.get('prior'))} | {_cost(costs.get('gaussian'))} | "
                        f"{_spent(costs)} | {choice.path} | {_why(choice)} |")
            print(rows[-1], flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# path='auto' on the project's models "
                            "(scripts/studies/path_choice_survey.py)\n\n"
                            "Spread limit: 1e12 nats (1 / the pilot's smallest floor). "
                            "L: thermodynamic length of the path measured by its pilot; g: "
                            "gradients a chain and transition; cost g L^2 (AIS's gap at T "
                            "distributions is about L^2 / (2T)); '>=': the prior path's "
                            "pilot was abandoned there.  Pilots' gradients: the gradient "
                            "evaluations each pilot spent, all chains (the prior path's "
                            "pilot stops beyond BUDGET_RATIO = 2 times the Gaussian "
                            "pilot's).\n\n"
                            + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

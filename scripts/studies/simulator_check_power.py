"""Power and cost of the simulator check (issue 14), written to
``scripts/figures/simulator_check_power/power.md`` (and ``power.csv``).

Power: the check runs at 10 seeds on each planted bug (the ``tests/stan/*_sim_scaled``
simulators with ``factor`` != 1: prior scale 1.2x, hyperprior scale 2x, likelihood
noise 1.25x, Poisson rate 2x), which must be flagged at 9 or more seeds, and on right
simulators (the same programs at ``factor`` = 1 and every study model of
``stan_models/`` on its study data), which may be flagged at 1 seed at most.  Every
check is standalone (``bread_stan.check_simulator`` with default settings, its own
pilot tuning), as ``bread-stan check`` runs it.  Weaker bugs (prior scale 1.1x,
hyperprior scale 1.3x, likelihood noise 1.1x, Poisson rate 1.2x; expected "compare")
need not be flagged: they compare kernels where power is not saturated.

Cost: a default BREAD run (steps 10, 100, 1000; 100 chains) on a few of the models,
with the check on; inside ``bread`` the check reuses the run's tuned kernel, so its
cost is its own seconds against the run's.

``--kernel`` chooses the sampler's kernel (default: the default of
:class:`~bread_stan.SamplerSettings`); the tables keep one row per case and kernel,
so a run with one kernel replaces only that kernel's rows.

    PYTHONPATH=$PWD python scripts/studies/simulator_check_power.py [--seeds 10] [--no-cost]
        [--kernel nuts|hmc] [--cases TEXT ...] [--skip TEXT ...] [--prior-draws N]

``--prior-draws N`` runs the check with N prior draws instead of the default and writes
its tables to ``power_prior{N}.md`` (and ``.csv``) beside the default's, so that a
smaller check's power is read against the default's (issue 42: the check's size);
``--prior-max-depth D`` likewise caps NUTS's trees in the prior stage
(``power_..._depth{D}.md``).
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from bread_stan import RunSettings, SamplerSettings, bread, check_simulator
from bread_stan.reporting.report import markdown_table
from bread_stan.stan import datasets
from bread_stan.workflows.simulator_check import CheckSettings

ROOT = Path(__file__).resolve().parents[2]
TEST_STAN = ROOT / "tests" / "stan"
MODELS = ROOT / "stan_models"
OUT = ROOT / "scripts" / "figures" / "simulator_check_power"

_X = np.random.default_rng(0).normal(size=(50, 3))
_SCALED = {  # label -> (model, simulator, data without factor, planted factor)
    "normal mean, prior scale": (TEST_STAN / "normal_mean.stan",
                                 TEST_STAN / "normal_mean_sim_scaled.stan",
                                 {"N": 20, "sigma": 1.0, "tau": 2.0}, 1.2),
    "noise scale, hyperprior scale": (TEST_STAN / "noise_scale.stan",
                                      TEST_STAN / "noise_scale_sim_scaled.stan", {"N": 20}, 2.0),
    "linear regression (N=50), likelihood noise": (
        MODELS / "linear_regression.stan", TEST_STAN / "linear_regression_sim_scaled.stan",
        {"N": 50, "K": 3, "X": _X}, 1.25),
    "Poisson regression, rate": (TEST_STAN / "poisson_regression.stan",
                                 TEST_STAN / "poisson_regression_sim_scaled.stan",
                                 {"N": 30, "K": 2, "X": _X[:30, :2]}, 2.0),
}
_WEAKER = {  # label of _SCALED -> a smaller planted factor, where power is not saturated
    "normal mean, prior scale": 1.1, "noise scale, hyperprior scale": 1.3,
    "linear regression (N=50), likelihood noise": 1.1, "Poisson regression, rate": 1.2}
_STUDY = {  # label -> (model, simulator, data)
    "normal mean (normal_mean_sim)": (TEST_STAN / "normal_mean.stan",
                                      TEST_STAN / "normal_mean_sim.stan",
                                      {"N": 20, "sigma": 1.0, "tau": 2.0}),
    "noise scale (noise_scale_sim)": (TEST_STAN / "noise_scale.stan",
                                      TEST_STAN / "noise_scale_sim.stan", {"N": 20}),
    "ar1 / goog": (MODELS / "ar1.stan", MODELS / "ar1_sim.stan", "goog"),
    "gaussian_mixture / faithful": (MODELS / "gaussian_mixture.stan",
                                    MODELS / "gaussian_mixture_sim.stan", "faithful"),
    "linear_regression / nhefs": (MODELS / "linear_regression.stan",
                                  MODELS / "linear_regression_sim.stan", "nhefs"),
    "logistic_regression / pima": (MODELS / "logistic_regression.stan",
                                   MODELS / "logistic_regression_sim.stan", "pima"),
    "matrix_factorisation / movielens": (MODELS / "matrix_factorisation.stan",
                                         MODELS / "matrix_factorisation_sim.stan", "movielens"),
    "mf_collapsed / mf_pair": (MODELS / "mf_collapsed.stan", MODELS / "mf_pair_sim.stan",
                               "mf_pair"),
    "mf_uncollapsed / mf_pair": (MODELS / "mf_uncollapsed.stan", MODELS / "mf_pair_sim.stan",
                                 "mf_pair"),
}
_COST = ["normal mean (normal_mean_sim)", "ar1 / goog", "linear_regression / nhefs",
         "logistic_regression / pima"]


def _cases() -> list[tuple[str, str, object, object, object]]:
    """(label, expected, model, simulator, data) for every case of the power table."""
    cases = []
    for label, (model, sim, data, factor) in _SCALED.items():
        cases.append((f"{label} x{factor:g}", "flag", model, sim, {**data, "factor": factor}))
        weaker = _WEAKER[label]
        cases.append((f"{label} x{weaker:g} (weaker)", "compare", model, sim,
                      {**data, "factor": weaker}))
        cases.append((f"{label} x1 (right)", "pass", model, sim, {**data, "factor": 1.0}))
    for label, (model, sim, data) in _STUDY.items():
        cases.append((label, "pass", model, sim,
                      datasets.load(data) if isinstance(data, str) else data))
    return cases


def power(seeds: int, sampler: SamplerSettings, only: list[str] | None,
          skip: list[str], settings: CheckSettings = CheckSettings()) -> pd.DataFrame:
    rows = []
    for label, expected, model, sim, data in _cases():
        if (only and not any(s in label for s in only)) or any(s in label for s in skip):
            continue
        results = []
        for seed in range(seeds):
            results.append(check_simulator(model, sim, data, sampler=sampler,
                                           settings=replace(settings, seed=seed)))
        flagged = sum(not r.passed for r in results)
        rows.append({"case": label, "kernel": sampler.kernel, "expected": expected,
                     "flagged": f"{flagged}/{seeds}",
                     "ok": {"flag": flagged >= seeds - 1, "pass": flagged <= 1}.get(expected, "-"),
                     "median_min_p": float(np.median([r.min_p for r in results])),
                     "tests": len(results[0].tests),
                     "seconds": float(np.mean([r.seconds for r in results])),
                     "gradients": int(np.mean([r.n_grad for r in results])),
                     "message_seed0": results[0].message})
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def cost(sampler: SamplerSettings) -> pd.DataFrame:
    rows = []
    for label in _COST:
        model, sim, data = _STUDY[label]
        data = datasets.load(data) if isinstance(data, str) else data
        t0 = time.perf_counter()
        result = bread(model, sim, data, sampler=sampler, run=RunSettings(progress=False))
        total = time.perf_counter() - t0
        check = result.extra["simulator_check"]
        grads = sum(s.forward.n_grad + s.reverse.n_grad for s in result.steps)
        rows.append({"model": label, "kernel": sampler.kernel, "check_seconds": check["seconds"],
                     "bread_seconds": total, "share": check["seconds"] / total,
                     "check_gradients": check["n_grad"], "ais_gradients": grads,
                     "gradient_share": check["n_grad"] / (grads + check["n_grad"])})
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def _merge(path: Path, table: pd.DataFrame, key: str, order: list[str]) -> pd.DataFrame:
    """``table`` in place of the rows of the CSV at ``path`` with the same key and
    kernel (rows written before the kernel column existed were measured with HMC),
    one row per key and kernel, keys in ``order``."""
    if path.exists():
        old = pd.read_csv(path)
        if "kernel" not in old:
            old.insert(1, "kernel", "hmc")
        new = set(zip(table[key], table["kernel"]))
        old = old[[pair not in new for pair in zip(old[key], old["kernel"])]]
        table = pd.concat([old, table], ignore_index=True)
    order = {k: i for i, k in enumerate(order)}
    return table.sort_values([key, "kernel"], key=lambda c: c.map(order) if c.name == key
                             else c, kind="stable").reset_index(drop=True)


def _by_kernel(table: pd.DataFrame) -> pd.DataFrame | None:
    """One row per case measured with both kernels: flagged, median smallest p and
    gradients side by side, and NUTS's gradients as a share of HMC's."""
    if not {"hmc", "nuts"} <= set(table["kernel"]):
        return None
    both = table.pivot(index="case", columns="kernel",
                       values=["flagged", "median_min_p", "gradients"])
    both = both.dropna().reindex([c for c in dict.fromkeys(table["case"]) if c in both.index])
    both.columns = [f"{value} {kernel}" for value, kernel in both.columns]
    both["nuts/hmc gradients"] = both["gradients nuts"] / both["gradients hmc"]
    return both.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument("--kernel", choices=("nuts", "hmc"), default=SamplerSettings().kernel)
    parser.add_argument("--cases", nargs="+", metavar="TEXT",
                        help="run only the cases whose label contains one of these")
    parser.add_argument("--skip", nargs="+", metavar="TEXT", default=[],
                        help="leave out the cases whose label contains one of these")
    parser.add_argument("--prior-draws", type=int, default=None,
                        help="prior draws of the check (default: CheckSettings's); tables "
                        "then in power_prior{N}.md")
    parser.add_argument("--prior-max-depth", type=int, default=None,
                        help="NUTS's depth cap in the check's prior stage (default: "
                        "CheckSettings's); tables then in power_..._depth{D}.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    OUT.mkdir(parents=True, exist_ok=True)
    settings = CheckSettings()
    name = "power"
    if args.prior_draws is not None and args.prior_draws != settings.prior_draws:
        settings = replace(settings, prior_draws=args.prior_draws)
        name = f"power_prior{args.prior_draws}"
    if args.prior_max_depth is not None and args.prior_max_depth != settings.prior_max_depth:
        settings = replace(settings, prior_max_depth=args.prior_max_depth)
        name = f"{name}_depth{args.prior_max_depth}"
    sampler = SamplerSettings(kernel=args.kernel)
    table = _merge(OUT / f"{name}.csv",
                   power(args.seeds, sampler, args.cases, args.skip, settings), "case",
                   [case[0] for case in _cases()])
    table.to_csv(OUT / f"{name}.csv", index=False)
    lines = ["# Simulator check: power over seeds", "",
             f"{'Default settings' if name == 'power' else 'Settings'}: "
             f"{settings.prior_draws} prior draws"
             + (f" (prior-stage trees capped at depth {settings.prior_max_depth})"
                if settings.prior_max_depth else "") + f", {settings.datasets} "
             f"simulated data sets, {settings.transitions} frozen transitions per chain of "
             "the kernel in the `kernel` column (hmc: 10 leapfrog steps; nuts: maximum tree "
             f"depth {sampler.max_depth}; both with {sampler.rescue_prob:.0%} rescue "
             "transitions, pilot-tuned along beta as BREAD tunes), paired Wilcoxon "
             f"signed-rank tests, Bonferroni over all tests, alpha = {settings.alpha}; "
             "seeds 0..n-1 (`flagged` says n).  A planted bug must be flagged at "
             ">= n-1 seeds, a right simulator at <= 1; a weaker bug (expected `compare`) "
             "need not be flagged and compares the kernels where power is not saturated.  "
             "Seconds are per "
             "standalone check (its own pilot tuning included), on a shared 2-core machine; "
             "rows are replaced per case and kernel, so they may come from different runs "
             "(code, load): compare the kernels by gradients rather than seconds.",
             "", markdown_table(table.drop(columns=["message_seed0"])),
             ""]
    compared = _by_kernel(table)
    if compared is not None:
        lines += ["HMC against NUTS on the cases measured with both:", "",
                  markdown_table(compared), ""]
    lines += ["Message at seed 0:", ""]
    lines += [f"- {r.case} ({r.kernel}): {r.message_seed0}" for r in table.itertuples()]
    if name != "power":
        costs = None  # the cost table is of default runs
    elif args.no_cost:
        costs = pd.read_csv(OUT / "cost.csv") if (OUT / "cost.csv").exists() else None
    else:
        costs = _merge(OUT / "cost.csv", cost(sampler), "model", _COST)
        costs.to_csv(OUT / "cost.csv", index=False)
    if costs is not None:
        lines += ["", "# Cost inside a default BREAD run", "",
                  "Default `bread` (steps 10, 100, 1000; 100 chains per direction; the kernel "
                  "in the `kernel` column) with the check on; the check reuses the run's tuned "
                  "kernel. `share` is the check's share of the run's wall time, "
                  "`gradient_share` its share of the gradients (check + AIS; tuning left out "
                  "of both).", "", markdown_table(costs)]
    (OUT / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(f"written {OUT / f'{name}.md'}")


if __name__ == "__main__":
    main()

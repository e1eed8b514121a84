"""The cheap levers of issue 42 ("pilots and checks that cost a fraction of the run"),
each measured on its own, side by side in one run.

- lever 1: the simulator check's draws (centre, prior stage, joint stage) simulated once,
  before the pilot, and handed to the check (before: simulated again inside the check);
- lever 2: the pilot's prior draws simulated once per problem (before: again for the
  path's fit and for ``tune_prior_end``, the check's kernel at the prior).

Each program runs four times with the same seed: both levers off (the code before),
lever 1 alone, lever 2 alone, both (today's code); "off" puts back the old calls with
monkeypatches, so the four runs differ in nothing else.  Per run: wall seconds, the
simulator's calls and seconds, the gradients of the pilots (``pilot_gradients`` in the
path's tuning), of the check (its ``n_grad``) and of the scored AIS, the share before the
first scored transition, and whether the numbers (every step's log estimates and the
check's p-values) equal those of the first run bit for bit.  The levers change no
gradient: they save simulator time only.

- lever 3 (opt-in, ``CheckSettings(prior_max_depth=D)``): the check's prior stage on a
  funnel prior (eight schools centred, drafted simulator) with NUTS's trees capped at
  depth D at beta = 0, beside the kernel's own depth: the check's gradients and seconds,
  and how often it flags a right simulator and two planted bugs (tau's half-Cauchy
  scale 2x; theta's spread 1.2x) over ``--seeds`` seeds.

The share of gradients before the first scored transition under ``--steps auto`` on five
programs, per size of the check, is ``scripts/bench/bench_setup_share.py``
(``scripts/figures/bench_pilot_levers/setup_share.md``).

Writes ``scripts/figures/bench_pilot_levers/results.md``.  Usage:
``PYTHONPATH=$PWD python scripts/bench/bench_pilot_levers.py [--steps 10,100] [--chains 20]
[--seeds 3] [--depths 3,5]``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from pathlib import Path

import numpy as np

from bread_stan.stan import datasets
from bread_stan.stan.draft import draft_simulator
from bread_stan.stan.simulator import Simulator
from bread_stan.workflows import auto_path, bread as bread_module, problem as problem_module
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "bench_pilot_levers"
EIGHT = ROOT / "tests" / "stan" / "draft" / "eight_schools_centred.stan"
EIGHT_DATA = {"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12],
              "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}


def programs() -> dict:
    return {
        "linear_regression (nhefs)": (ROOT / "stan_models" / "linear_regression.stan",
                                      ROOT / "stan_models" / "linear_regression_sim.stan",
                                      datasets.load("nhefs")),
        "eight_schools_centred (drafted simulator)": (EIGHT, draft_simulator(EIGHT),
                                                      EIGHT_DATA),
    }


@contextlib.contextmanager
def levers(check_once: bool, pilot_once: bool, counter: dict):
    """Both levers as asked (off: the calls before them), the simulator's calls counted."""
    saved = []

    def patch(owner, name, value):
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    simulate = Simulator.simulate

    def counted(self, n, seed, **kwargs):
        started = time.perf_counter()
        try:
            return simulate(self, n, seed, **kwargs)
        finally:
            counter["calls"] += 1
            counter["seconds"] += time.perf_counter() - started

    patch(Simulator, "simulate", counted)
    if not check_once:
        check = bread_module.check_simulator
        patch(bread_module, "check_simulator",
              lambda *args, draws=None, **kwargs: check(*args, **kwargs))
    if not pilot_once:
        for owner in (bread_module, auto_path):
            patch(owner, "pilot_draws", problem_module.prior_draws)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


def _pilot_gradients(record) -> float:
    """Every ``pilot_gradients`` in a (nested) record, summed."""
    if isinstance(record, dict):
        return sum(_pilot_gradients(v) if k != "pilot_gradients" else
                   (float(v) if np.isfinite(float(v)) else 0.0) for k, v in record.items())
    if isinstance(record, list):
        return sum(_pilot_gradients(v) for v in record)
    return 0.0


def measure(model, simulator, data, run: RunSettings, check_once: bool,
            pilot_once: bool) -> dict:
    counter = {"calls": 0, "seconds": 0.0}
    with levers(check_once, pilot_once, counter):
        started = time.perf_counter()
        result = bread(model, simulator, data, run=run)
        seconds = time.perf_counter() - started
    check = result.extra["simulator_check"]
    pilot = _pilot_gradients(result.extra.get("tuning", {}))
    scored = float(sum(s.forward.n_grad + s.reverse.n_grad for s in result.steps))
    setup = pilot + float(check.get("n_grad", 0))
    numbers = [s.forward.log_estimates for s in result.steps] + [
        s.reverse.log_estimates for s in result.steps] + [
        np.array([row["p_raw"] for row in check.get("tests", [])])]
    return {"seconds": seconds, "sim_calls": counter["calls"],
            "sim_seconds": counter["seconds"], "pilot": pilot,
            "check": float(check.get("n_grad", 0)), "scored": scored,
            "share": setup / (setup + scored), "numbers": numbers,
            "check_seconds": float(check.get("seconds", float("nan")))}


FUNNEL_SIMULATORS = {  # name -> (text replaced, by): the drafted simulator, planted bugs
    "right": ("", ""),
    "tau scale 2x": ("abs(cauchy_rng(0, 5))", "abs(cauchy_rng(0, 10))"),
    "theta spread 1.2x": ("normal_rng(mu, tau)", "normal_rng(mu, 1.2 * tau)"),
}


def funnel(seeds: int, depths: list[int]) -> list[str]:
    """Lever 3: the check on eight schools centred at the kernel's own depth and capped."""
    from bread_stan.workflows.simulator_check import CheckSettings, check_simulator
    drafted = draft_simulator(EIGHT)
    data = {k: v for k, v in EIGHT_DATA.items() if k != "y"}
    lines = ["## Lever 3: the check's prior stage on a funnel prior (eight schools centred)",
             "", f"`check_simulator` with the default NUTS sampler, seeds 0-{seeds - 1}; "
             "gradients and seconds are the whole check's (prior and joint stages), "
             "averaged over seeds; flagged = checks that failed at alpha = 0.01.", "",
             "| prior-stage depth | simulator | check grads | check s | flagged | min p |",
             "|---|---|---|---|---|---|"]
    for depth in [None, *depths]:
        for name, (old, new) in FUNNEL_SIMULATORS.items():
            simulator = drafted.replace(old, new) if old else drafted
            assert not old or simulator != drafted, name
            grads, secs, flagged, ps = [], [], 0, []
            for seed in range(seeds):
                check = check_simulator(EIGHT, simulator, data, settings=CheckSettings(
                    seed=seed, prior_max_depth=depth))
                grads.append(check.n_grad)
                secs.append(check.seconds)
                flagged += not check.passed
                ps.append(min(row["p"] for row in check.tests))
            own = f"own ({SamplerSettings().max_depth})"
            lines.append(f"| {own if depth is None else depth} | {name} | "
                         f"{np.mean(grads):.0f} | {np.mean(secs):.1f} | {flagged}/{seeds} | "
                         f"{min(ps):.2g} |")
            print(lines[-1], flush=True)
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="10,100")
    parser.add_argument("--chains", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--depths", default="3,5")
    parser.add_argument("--only-funnel", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    run = RunSettings(steps=tuple(int(s) for s in args.steps.split(",")), chains=args.chains,
                      progress=False)
    configs = {"before (both off)": (False, False), "lever 1 alone (check draws once)":
               (True, False), "lever 2 alone (pilot draws once)": (False, True),
               "both (today)": (True, True)}
    lines = ["# The cheap pilot-and-check levers of issue 42, each on its own", "",
             f"`bread` with `steps={args.steps}`, `chains={args.chains}`, seed 0, path auto, "
             "compiles cached; one run per row on a shared 2-core machine (wall seconds "
             "are noisy; the simulator's calls and seconds are the levers' own measure). "
             "Gradients: pilot = `pilot_gradients` of the path's tuning, check = the "
             "simulator check's `n_grad`, scored = the AIS steps' forward and reverse; "
             "share = (pilot + check) / all. `same` = every log estimate and the check's "
             "p-values equal the first row's bit for bit.", ""]
    for name, (model, simulator, data) in ({} if args.only_funnel else programs()).items():
        measure(model, simulator, data, run, True, True)  # warm-up: loads and caches
        lines += [f"## {name}", "", "| run | wall s | check s | simulator calls | "
                  "simulator s | pilot grads | check grads | scored grads | setup share | "
                  "same |", "|---|---|---|---|---|---|---|---|---|---|"]
        first = None
        for label, (check_once, pilot_once) in configs.items():
            m = measure(model, simulator, data, run, check_once, pilot_once)
            first = first or m["numbers"]
            same = all(np.array_equal(a, b, equal_nan=True)
                       for a, b in zip(first, m["numbers"]))
            lines.append(f"| {label} | {m['seconds']:.1f} | {m['check_seconds']:.1f} | "
                         f"{m['sim_calls']} | {m['sim_seconds']:.2f} | {m['pilot']:.0f} | "
                         f"{m['check']:.0f} | {m['scored']:.0f} | {m['share']:.0%} | "
                         f"{'yes' if same else 'NO'} |")
            print(lines[-1], flush=True)
        lines.append("")
    lines += funnel(args.seeds, [int(d) for d in args.depths.split(",")])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT / 'results.md'}")


if __name__ == "__main__":
    main()

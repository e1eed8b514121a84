"""The prior normaliser c of a program two ways: from its drafted simulator (exact, or
exact up to a rejection loop's acceptance) and by importance sampling, as the Gaussian
path computes each (bread_stan.workflows.simulator_normaliser,
bread_stan.ais.prior_normaliser), with the run's default seeds.

    PYTHONPATH=$PWD nice python scripts/studies/drafted_normaliser.py MODEL.stan DATA.json [OUT.md]

e.g. posteriordb's radon_hierarchical_intercept_centered (d = 391, c = 1/4 exactly).
Appends a row to OUT.md (default scripts/figures/drafted_normaliser/results.md).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bread_stan.ais import gaussian_path
from bread_stan.ais.prior_normaliser import estimate_log_normaliser, fit_draws
from bread_stan.rng import Purpose, Stream, chain_seed_sequences, derived_seed
from bread_stan.stan.data import load_data
from bread_stan.stan.prepare import prepare_programs
from bread_stan.stan.simulator import Simulator
from bread_stan.workflows.simulator_normaliser import simulator_normaliser
from bread_stan.workflows.problem import simulate_problem, unconstrained_draws

ROOT = Path(__file__).resolve().parents[2]
SEED = 0  # the CLI's default --seed


def main(model: str, data_path: str, out: str | None = None) -> None:
    data = load_data(data_path)
    with tempfile.TemporaryDirectory() as tmp:
        programs = prepare_programs(model, None, tmp)
        sim = Simulator(programs.simulator, data, threads=1)
        problem = simulate_problem(Path(model).stem, programs.model, sim, data, SEED, 1)
    d = problem.target.dim
    draws = sim.simulate(fit_draws(d), derived_seed(SEED, Purpose.NORMALISER_PRIOR))
    t0 = time.perf_counter()
    known = simulator_normaliser(sim, draws, derived_seed(SEED, Purpose.NORMALISER_TRIES),
                                 problem.target.compiled.program.code)
    t_known = time.perf_counter() - t0
    rng = np.random.Generator(np.random.PCG64(
        chain_seed_sequences(derived_seed(SEED, Purpose.PILOT), int(Stream.PRIOR_NORMALISER),
                             [0])[0]))
    est = estimate_log_normaliser(gaussian_path.prior_log_density(problem.target),
                                  unconstrained_draws(problem, draws), rng)
    row = (f"| {Path(model).stem} | {d} | {known.log_c:.4f} ({known.method}, se "
           f"{known.se:.2g}, {t_known:.2g} s) | {est.log_c:.4f} (se {est.se:.2g}, Pareto k "
           f"{est.pareto_k:.2f}, {est.n_draws} draws, {est.seconds:.2g} s) |")
    target = Path(out) if out else ROOT / "scripts" / "figures" / "drafted_normaliser" / \
        "results.md"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# The prior normaliser: drafted simulator vs importance sampling\n\n"
                          "Command: `PYTHONPATH=$PWD nice python "
                          "scripts/studies/drafted_normaliser.py MODEL DATA` "
                          "(seed 0, the run's streams).\n\n"
                          "| program | d | from the drafted simulator | importance sampling |\n"
                          "|---|---|---|---|\n")
    with open(target, "a") as f:
        f.write(row + "\n")
    print(row)


if __name__ == "__main__":
    main(*sys.argv[1:])

"""How the waypoint path shares T between its legs on the half-Cauchy regression.

Fits the waypoint path as ``bread()`` does under the defaults (path "auto" resolves to
the waypoint there; relative metric ridge, default pilot) on ``scripts/bench/bench_hard.py``'s
data set (N = 50, the first run seed with simulated sigma in [0.05, 0.15]), and prints
the legs' thermodynamic lengths, the split of T = 10,000 and the pilots' seconds per
chain and transition.  Result (2026-11-26, loaded machine): lengths 29.6 (prior to q) and 0.97
(q to posterior), T = 10,000 split 9,682 + 319: leg 1 carries 97% of the transitions,
which is why the waypoint path needed native transitions on leg 1 (``prior_base_point``
in the model library), not only on leg 2, whose target the library already ran.

Usage: ``PYTHONPATH=$PWD nice python scripts/studies/waypoint_split.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_hard  # noqa: E402  (the half-Cauchy problem, scripts/bench/bench_hard.py)
from bread_stan.ais import waypoint  # noqa: E402
from bread_stan.rng import Purpose, derived_seed  # noqa: E402
from bread_stan.stan.simulator import Simulator, compile_with_simulator  # noqa: E402
from bread_stan.workflows.problem import prior_draws, simulate_problem  # noqa: E402
from bread_stan.workflows.settings import SamplerSettings  # noqa: E402


def main() -> None:
    seed, sigma = bench_hard.pick_seed()
    data = bench_hard.data()
    (compiled,), sim_compiled = compile_with_simulator([bench_hard.MODEL], bench_hard.SIMULATOR)
    sim = Simulator(sim_compiled, data)
    problem = simulate_problem("halfcauchy", compiled, sim, data, seed, None)
    sampler = SamplerSettings().for_path("waypoint")
    kernel, params = sampler.make()
    pilot_seed = derived_seed(seed, Purpose.PILOT)
    start = time.perf_counter()
    path = waypoint.fit_waypoint(problem.target, kernel, params,
                                 prior_draws(problem, sim, sampler.pilot_chains, pilot_seed),
                                 seed=pilot_seed, config=sampler.tuning_config())
    seconds = time.perf_counter() - start
    print(f"seed {seed} (sigma {sigma:.4g}): waypoint fitted in {seconds:.0f} s; "
          f"thermodynamic lengths {path.lengths[0]:.3g} (prior to q), {path.lengths[1]:.3g} "
          f"(q to posterior); T = 10,000 splits {path.split(10_000)}; seconds per chain and "
          f"transition {[f'{leg.seconds_per_transition:.3g}' for leg in path.tunings]}")


if __name__ == "__main__":
    main()

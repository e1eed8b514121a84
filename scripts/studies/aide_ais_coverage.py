"""Coverage of AIDE's interval with an AIS target, against an exact answer.

With an exact gold standard and forward AIS as the target, one trace each (M_g = M_t = 1),
AIDE's per-run terms are U_i - log Z at the gold runs (reverse AIS from each gold
output, an exact posterior draw of its own) and log Z - L_i at the target runs (forward
AIS from the prior), so the estimate is mean(U) - mean(L) and its expectation is
E[U] - E[L], the bound of SPEC section 3.  On the 7 x 7 "hard" grid target (one-cell
Metropolis moves, linear schedule) that expectation is exact (``grid_bounds``), so the
miss shares of :func:`~bread_stan.ais.intervals.skew_corrected_interval` (what
``estimate_aide`` prints) are measured directly.  Writes
``scripts/figures/aide_ais_coverage/aide_ais.md``:

    nice python scripts/studies/aide_ais_coverage.py --reps 1000 --runs 20 50 100 --steps 10 30
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bread_stan.ais import engine
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.ais.intervals import skew_corrected_interval
from bread_stan.exact.calibration import binomial_limit
from bread_stan.exact.grid import GridTarget, grid_log_f
from bread_stan.exact.oracle import grid_bounds, linear_schedule
from bread_stan.kernels.grid_mh import GridMetropolis

OUT = Path(__file__).resolve().parents[1] / "figures" / "aide_ais_coverage" / "aide_ais.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 30])
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--first-rep", type=int, default=10000)
    args = parser.parse_args()
    log_f = grid_log_f("hard")
    tg = GridTarget(log_f)
    n_max = max(args.runs)
    nominal = (1 - args.level) / 2
    limit = binomial_limit(nominal, args.reps)
    lines = [f"AIDE's interval, exact gold vs forward AIS on the 7 x 7 'hard' grid, "
             f"M = 1, level {args.level:g} (nominal miss {nominal:.3f} per side), "
             f"{args.reps} replications (seeds from {args.first_rep}); a side is within "
             f"binomial error at most {limit:.3f}.", "",
             "| T | runs per side | truth E[U] - E[L] | miss low | miss high | "
             "median width | verdict |", "|---|---|---|---|---|---|---|"]
    for T in args.steps:
        exact = grid_bounds(log_f, T)
        truth = exact.reverse_mean - exact.forward_mean
        schedule = KernelSchedule(linear_schedule(T), 1)
        rng = np.random.default_rng([args.first_rep, T])
        seed = args.first_rep + T
        L = engine.forward(tg, GridMetropolis(), schedule, tg.sample_prior(rng, args.reps * n_max),
                           seed=seed, stream=0).log_estimates.reshape(args.reps, n_max)
        U = engine.reverse(tg, GridMetropolis(), schedule,
                           tg.sample_posterior(rng, args.reps * n_max),
                           seed=seed, stream=1).log_estimates.reshape(args.reps, n_max)
        for n in args.runs:
            ends = np.array([skew_corrected_interval([(U[r, :n], 1), (L[r, :n], -1)],
                                                     level=args.level, seed=r)[2:]
                             for r in range(args.reps)])
            low, high = np.mean(truth < ends[:, 0]), np.mean(truth > ends[:, 1])
            ok = "ok" if max(low, high) <= limit else "MISSES TOO OFTEN"
            lines.append(f"| {T} | {n} | {truth:.3f} | {low:.3f} | {high:.3f} | "
                         f"{np.median(ends[:, 1] - ends[:, 0]):.2f} | {ok} |")
            print(lines[-1], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

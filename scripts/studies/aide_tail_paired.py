"""Paired misses of AIDE's interval with and without its exponential tail, on the same
runs and bootstrap seed (docs/method/intervals.md, "On fresh seeds").

Replication r draws ``--runs`` gold and target runs of the 2-d pair of
``bread_stan.exact.calibration.AIDE_PAIRS`` from seed (r, runs), per-run terms in closed
form, and computes ``skew_corrected_interval`` (level 0.9, seed r) with ``tail=True``
(printed) and ``tail=False``.  Prints, per side, the misses of each and the replications
that only one of them misses, with the exact McNemar p-value of "the tail does not
change the miss rate":

    nice python scripts/studies/aide_tail_paired.py --first-rep 30000 --reps 1000 --runs 100
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from bread_stan.ais.intervals import skew_corrected_interval
from bread_stan.exact.calibration import AIDE_PAIRS


def misses(first_rep: int, reps: int, runs: int) -> np.ndarray:
    """(reps, 4) booleans: miss low, miss high with the tail, then without it."""
    gold, target = AIDE_PAIRS["two Gaussians"]
    truth = gold.kl_to(target) + target.kl_to(gold)
    out = np.zeros((reps, 4), bool)
    for i, r in enumerate(range(first_rep, first_rep + reps)):
        rng = np.random.default_rng([r, runs])
        x, y = gold.sample(rng, runs), target.sample(rng, runs)
        parts = [(gold.log_density(x) - target.log_density(x), 1),
                 (target.log_density(y) - gold.log_density(y), 1)]
        for j, tail in enumerate((True, False)):
            lo, hi = skew_corrected_interval(parts, level=0.9, seed=r, tail=tail)[2:]
            out[i, 2 * j:2 * j + 2] = truth < lo, truth > hi
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-rep", type=int, default=30000)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    t0 = time.perf_counter()
    m = misses(args.first_rep, args.reps, args.runs)
    print(f"2-d pair, {args.runs} runs per side, replications {args.first_rep} to "
          f"{args.first_rep + args.reps - 1}")
    for j, side in enumerate(("low", "high")):
        with_tail, without = m[:, j], m[:, 2 + j]
        only_tail, only_plain = int(np.sum(with_tail & ~without)), int(np.sum(without & ~with_tail))
        discordant = only_tail + only_plain
        p = stats.binomtest(only_tail, discordant).pvalue if discordant else 1.0
        print(f"miss {side}: tail {int(with_tail.sum())}, no tail {int(without.sum())}; only with "
              f"the tail {only_tail}, only without {only_plain}; exact McNemar p {p:.2f}")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

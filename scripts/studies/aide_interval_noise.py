"""How much AIDE's interval moves with its own bootstrap seed (the Monte Carlo error of
its ends), at fixed runs: the two Gaussian pairs of ``scripts/studies/calibration.py``.

For replications 0 to ``--reps`` - 1 (the runs of ``estimate_aide`` at that seed), the
interval is computed twice from the same runs with two bootstrap seeds; printed are the
standard deviation of each end over seeds (the sd of the difference over sqrt 2),
as a share of that end's mean reach from the estimate, and the mean time per interval.
Noise in an end raises its miss rate (the miss probability is convex in the end's
position in the tail), so less is better at equal cost:

    nice python scripts/studies/aide_interval_noise.py --runs 100 --reps 60

Run it with ``PYTHONPATH`` at another checkout to measure that checkout's interval.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bread_stan.ais.intervals import skew_corrected_interval
from bread_stan.exact.calibration import AIDE_PAIRS
from bread_stan.meta.algorithms import TractableAlgorithm
from bread_stan.meta.estimator import estimate_aide


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--runs", type=int, nargs="+", default=[100])
    parser.add_argument("--pair", choices=sorted(AIDE_PAIRS), default="two Gaussians")
    parser.add_argument("--tail", choices=["yes", "no"], default="yes")
    args = parser.parse_args()
    gold, target = AIDE_PAIRS[args.pair]
    for n in args.runs:
        diffs, reach, seconds = [], [], 0.0
        for r in range(args.reps):
            res = estimate_aide(TractableAlgorithm(gold, "gold"),
                                TractableAlgorithm(target, "target"),
                                n_gold=n, n_target=n, seed=r, level=0.9)
            parts = [(res.per_run_gold, 1), (res.per_run_target, 1)]
            t0 = time.perf_counter()
            a, b = (skew_corrected_interval(parts, level=0.9, seed=[seed, r],
                                            tail=args.tail == "yes") for seed in (1, 2))
            seconds += time.perf_counter() - t0
            diffs.append((a[2] - b[2], a[3] - b[3]))
            reach.append((a[0] - a[2], a[3] - a[0]))
        sd = np.std(diffs, axis=0) / np.sqrt(2) / np.mean(reach, axis=0)
        print(f"{args.pair}, {n} runs per side, {args.reps} replications, tail {args.tail}: "
              f"bootstrap sd of the lower end {sd[0]:.3f}, of the upper end {sd[1]:.3f} of "
              f"their reach; {1000 * seconds / (2 * args.reps):.0f} ms per interval", flush=True)


if __name__ == "__main__":
    main()

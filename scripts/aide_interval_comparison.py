"""Miss rates of candidate intervals for AIDE's estimate, from per-run terms sampled in
closed form (the table "How often it misses" in docs/method/intervals.md).

Between two Gaussians the per-run terms are log density ratios at exact draws, so many
replications are cheap.  Compares the normal interval, the plain bootstrap-t
(``studentized_interval``), BCa, and the printed skew-corrected bootstrap
(``skew_corrected_interval``), at level 0.9 (nominal miss 0.05 per side):

    nice python scripts/aide_interval_comparison.py --reps 2000 --pair 2-d --runs 20 50 100
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from bread_stan.ais.intervals import skew_corrected_interval, studentized_interval
from bread_stan.exact.calibration import AIDE_PAIRS, Gaussian

PAIRS = {"2-d": AIDE_PAIRS["two Gaussians"], "3-d": AIDE_PAIRS["two Gaussians, 3-d"],
         "1-d": (Gaussian(np.zeros(1), np.ones(1)), Gaussian(np.zeros(1), np.array([0.6])))}


def normal(parts, level):
    """estimate +- z se."""
    est = sum(s * v.mean() for v, s in parts)
    se = np.sqrt(sum(v.var(ddof=1) / v.size for v, _ in parts))
    z = stats.norm.ppf((1 + level) / 2)
    return est - z * se, est + z * se


def bca(parts, level, seed, n_boot=2000):
    """BCa percentile interval, each sample resampled on its own; acceleration from the
    empirical influence values of both samples."""
    rng = np.random.default_rng(seed)
    est = sum(s * v.mean() for v, s in parts)
    est_b = sum(s * v[rng.integers(0, v.size, (n_boot, v.size))].mean(1) for v, s in parts)
    z0 = stats.norm.ppf(np.mean(est_b < est) + 0.5 * np.mean(est_b == est))
    u = np.concatenate([s * (v - v.mean()) / v.size for v, s in parts])
    acc = np.sum(u ** 3) / (6 * np.sum(u ** 2) ** 1.5)
    zq = stats.norm.ppf([(1 - level) / 2, (1 + level) / 2])
    return tuple(np.quantile(est_b, stats.norm.cdf(z0 + (z0 + zq) / (1 - acc * (z0 + zq)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--pair", choices=sorted(PAIRS), default="2-d")
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--level", type=float, default=0.9)
    args = parser.parse_args()
    gold, target = PAIRS[args.pair]
    truth = gold.kl_to(target) + target.kl_to(gold)
    for n in args.runs:
        rng = np.random.default_rng(12345)
        ends = {k: [] for k in ("normal", "bootstrap-t", "BCa", "skew-corrected")}
        for r in range(args.reps):
            x, y = gold.sample(rng, n), target.sample(rng, n)
            parts = [(gold.log_density(x) - target.log_density(x), 1),
                     (target.log_density(y) - gold.log_density(y), 1)]
            ends["normal"].append(normal(parts, args.level))
            ends["bootstrap-t"].append(studentized_interval(parts, level=args.level,
                                                            n_boot=2000, seed=r)[2:])
            ends["BCa"].append(bca(parts, args.level, r))
            ends["skew-corrected"].append(skew_corrected_interval(parts, level=args.level,
                                                                  n_boot=2000, seed=r)[2:])
        print(f"{args.pair} pair, symmetric KL {truth:.3f}, {n} runs per side, {args.reps} reps")
        for k, v in ends.items():
            v = np.array(v)
            print(f"  {k:15s} miss low {np.mean(truth < v[:, 0]):.3f}  "
                  f"high {np.mean(truth > v[:, 1]):.3f}  width {np.mean(v[:, 1] - v[:, 0]):.3f}")


if __name__ == "__main__":
    main()

"""Miss rates of candidate intervals for AIDE's estimate, from per-run terms sampled in
closed form (the table "How often it misses" in docs/method/intervals.md).

Between two Gaussians the per-run terms are log density ratios at exact draws, so many
replications are cheap.  Compares the normal interval, the plain bootstrap-t
(``studentized_interval``), BCa, the bootstrap of Hall's skew-corrected statistic
without calibration, the same with its ends' levels calibrated by a double bootstrap
(``skew_corrected_interval(..., tail=False)``, printed before), and the printed interval
(``skew_corrected_interval``: the same, resampling from the runs with their largest
terms smoothed into an exponential tail), at level 0.9 (nominal miss 0.05 per side).
Replication r draws its runs from seed (r, runs); the default first replication is
10000, away from the seeds 0-199 of ``scripts/studies/calibration.py``:

    nice python scripts/studies/aide_interval_comparison.py --reps 2000 --pair 2-d --runs 20 50 100

``--methods printed`` (or any subset of the names below) measures only those.  Prints
miss shares per side, the median width of each interval and its mean time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

from bread_stan.ais.intervals import skew_corrected_interval, studentized_interval
from bread_stan.exact.calibration import AIDE_PAIRS, Gaussian

PAIRS = {"2-d": AIDE_PAIRS["two Gaussians"], "3-d": AIDE_PAIRS["two Gaussians, 3-d"],
         "1-d": (Gaussian(np.zeros(1), np.ones(1)), Gaussian(np.zeros(1), np.array([0.6])))}


def normal(parts, level, seed=None):
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


def hall_uncalibrated(parts, level, seed, n_boot=2000):
    """Bootstrap of Hall's skewness-corrected studentised statistic, no calibration of
    the levels (AIDE's interval before the double bootstrap)."""
    def hall(t, g):
        return t + g * t ** 2 / 3 + g ** 2 * t ** 3 / 27 + g / 6

    def moments(samples):
        est = sum(s * v.mean(-1) for v, s in samples)
        var = sum(v.var(-1, ddof=1) / v.shape[-1] for v, _ in samples)
        k3 = sum(s ** 3 * ((v - v.mean(-1)[..., None]) ** 3).mean(-1) / v.shape[-1] ** 2
                 for v, s in samples)
        return est, np.sqrt(var), k3 / var ** 1.5

    rng = np.random.default_rng(seed)
    est, se, g = moments(parts)
    est_b, se_b, g_b = moments([(v[rng.integers(0, v.size, (n_boot, v.size))], s)
                                for v, s in parts])
    h = hall((est_b - est) / se_b, g_b)
    q = np.quantile(h[np.isfinite(h)], [(1 - level) / 2, (1 + level) / 2])
    a = g / 3
    inv = (np.cbrt(1 + 3 * a * (q - g / 6)) - 1) / a if abs(a) > 1e-12 else q - g / 6
    return est - se * inv[1], est - se * inv[0]


METHODS = {
    "normal": normal,
    "bootstrap-t": lambda parts, level, r: studentized_interval(
        parts, level=level, n_boot=2000, seed=r)[2:],
    "BCa": bca,
    "skew-corrected": hall_uncalibrated,
    "calibrated": lambda parts, level, r: skew_corrected_interval(
        parts, level=level, n_boot=2000, seed=r, tail=False)[2:],
    "printed": lambda parts, level, r: skew_corrected_interval(
        parts, level=level, n_boot=2000, seed=r)[2:],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--pair", choices=sorted(PAIRS), default="2-d")
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 50, 100])
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--first-rep", type=int, default=10000)
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=list(METHODS))
    args = parser.parse_args()
    gold, target = PAIRS[args.pair]
    truth = gold.kl_to(target) + target.kl_to(gold)
    for n in args.runs:
        ends = {k: [] for k in args.methods}
        seconds = dict.fromkeys(args.methods, 0.0)
        for r in range(args.first_rep, args.first_rep + args.reps):
            rng = np.random.default_rng([r, n])
            x, y = gold.sample(rng, n), target.sample(rng, n)
            parts = [(gold.log_density(x) - target.log_density(x), 1),
                     (target.log_density(y) - gold.log_density(y), 1)]
            for k in args.methods:
                t0 = time.perf_counter()
                ends[k].append(METHODS[k](parts, args.level, r))
                seconds[k] += time.perf_counter() - t0
        print(f"{args.pair} pair, symmetric KL {truth:.3f}, {n} runs per side, {args.reps} reps "
              f"(seeds {args.first_rep} to {args.first_rep + args.reps - 1})")
        for k, v in ends.items():
            v = np.array(v)
            print(f"  {k:20s} miss low {np.mean(truth < v[:, 0]):.3f}  "
                  f"high {np.mean(truth > v[:, 1]):.3f}  "
                  f"median width {np.median(v[:, 1] - v[:, 0]):.3f}  "
                  f"{1000 * seconds[k] / args.reps:.0f} ms", flush=True)


if __name__ == "__main__":
    main()

"""Intervals for AIDE's estimate that use the per-run terms' known structure, tried and
not adopted (docs/method/intervals.md, "Why no interval can do without an assumption
about the upper tail").

Each AIDE term is a log ratio of normalised densities, so E[exp(-term)] = 1 on each side.
Measured here against the plain bootstrap-t (``studentized_interval``), at level 0.9:

- ``tilted``: bootstrap-t resampling each set of runs from its empirical-likelihood
  weights p_i proportional to 1 / (1 + lam (exp(-v_i) - 1)), which satisfy
  sum p_i exp(-v_i) = 1 (the bootstrap world obeys the identity; its truth is the
  tilted mean);
- ``control variate``: bootstrap-t of the control-variate mean
  mean(v) - beta (mean(exp(-v)) - 1), beta fitted by least squares, per set;
- ``variance-stabilised``: Tibshirani's (1988) variance-stabilised bootstrap: 100 outer
  resamples with 25 inner ones each estimate se as a linear function of the estimate,
  the transform g = integral of 1 / se maps 1000 more resamples, percentile interval on
  the g scale mapped back.

Replication r draws its runs from seed (r, runs), as ``aide_interval_comparison.py``:

    nice python scripts/studies/aide_interval_alternatives.py --reps 1000 --pair 1-d --runs 20 --first-rep 20000
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import optimize

from bread_stan.ais.intervals import studentized_interval
from bread_stan.exact.calibration import AIDE_PAIRS, Gaussian

PAIRS = {"2-d": AIDE_PAIRS["two Gaussians"], "3-d": AIDE_PAIRS["two Gaussians, 3-d"],
         "1-d": (Gaussian(np.zeros(1), np.ones(1)), Gaussian(np.zeros(1), np.array([0.6])))}


def el_weights(v: np.ndarray) -> np.ndarray:
    """Empirical-likelihood weights with sum p exp(-v) = 1 (uniform when impossible)."""
    s = np.expm1(-np.clip(v, -700, None))
    if s.max() <= 0 or s.min() >= 0:
        return np.full(v.size, 1 / v.size)
    lo, hi = -1 / s.max(), -1 / s.min()
    lo, hi = lo + 1e-12 * (hi - lo), hi - 1e-12 * (hi - lo)
    lam = optimize.brentq(lambda x: np.sum(s / (1 + x * s)), lo, hi, xtol=1e-14)
    p = 1 / (1 + lam * s)
    return p / p.sum()


def _t_interval(est, se, est_b, se_b, truth_b, level):
    t = (est_b - truth_b) / se_b
    q_low, q_high = np.quantile(t[np.isfinite(t)], [(1 - level) / 2, (1 + level) / 2])
    return est - q_high * se, est - q_low * se


def tilted(parts, level, seed, n_boot=2000):
    rng = np.random.default_rng(seed)
    est = sum(v.mean() for v in parts)
    se = np.sqrt(sum(v.var(ddof=1) / v.size for v in parts))
    est_b = var_b = truth_b = 0.0
    for v in parts:
        p = el_weights(v)
        draws = v[rng.choice(v.size, size=(n_boot, v.size), p=p)]
        est_b, var_b = est_b + draws.mean(1), var_b + draws.var(1, ddof=1) / v.size
        truth_b += np.sum(p * v)
    return _t_interval(est, se, est_b, np.sqrt(var_b), truth_b, level)


def _cv(d):
    c = np.expm1(-np.clip(d, -50, None))
    dm, cm = d - d.mean(-1, keepdims=True), c - c.mean(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.nan_to_num(np.sum(dm * cm, -1) / np.sum(cm * cm, -1))
    r = dm - beta[..., None] * cm
    return d.mean(-1) - beta * c.mean(-1), np.sum(r * r, -1) / (d.shape[-1] - 2) / d.shape[-1]


def control_variate(parts, level, seed, n_boot=2000):
    rng = np.random.default_rng(seed)
    est = var = est_b = var_b = 0.0
    for v in parts:
        e, s2 = _cv(v)
        e_b, s2_b = _cv(v[rng.integers(0, v.size, (n_boot, v.size))])
        est, var, est_b, var_b = est + e, var + s2, est_b + e_b, var_b + s2_b
    return _t_interval(est, np.sqrt(var), est_b, np.sqrt(var_b), est, level)


def variance_stabilised(parts, level, seed, b1=100, b2=25, b3=1000):
    rng = np.random.default_rng(seed)
    est = sum(v.mean() for v in parts)
    outer = [v[rng.integers(0, v.size, (b1, v.size))] for v in parts]
    theta = sum(d.mean(1) for d in outer)
    se = np.array([sum(d[b][rng.integers(0, d.shape[1], (b2, d.shape[1]))].mean(1)
                       for d in outer).std(ddof=1) for b in range(b1)])
    c1, c0 = np.polyfit(theta, se, 1)
    if abs(c1) > 1e-9 and c0 + c1 * est > 0:
        def g(t):
            return np.log(np.maximum(c0 + c1 * t, 1e-300)) / c1

        def g_inv(u):
            return (np.exp(c1 * u) - c0) / c1
    else:
        def g(t):
            return t
        g_inv = g
    theta3 = sum(v[rng.integers(0, v.size, (b3, v.size))].mean(1) for v in parts)
    z = g(theta3) - g(est)
    q_low, q_high = np.quantile(z[np.isfinite(z)], [(1 - level) / 2, (1 + level) / 2])
    return g_inv(g(est) - q_high), g_inv(g(est) - q_low)


METHODS = {
    "bootstrap-t": lambda parts, level, r: studentized_interval(
        [(v, 1) for v in parts], level=level, n_boot=2000, seed=r)[2:],
    "tilted": tilted,
    "control variate": control_variate,
    "variance-stabilised": variance_stabilised,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--pair", choices=sorted(PAIRS), default="1-d")
    parser.add_argument("--runs", type=int, nargs="+", default=[20])
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--first-rep", type=int, default=20000)
    args = parser.parse_args()
    gold, target = PAIRS[args.pair]
    truth = gold.kl_to(target) + target.kl_to(gold)
    for n in args.runs:
        ends = {k: [] for k in METHODS}
        for r in range(args.first_rep, args.first_rep + args.reps):
            rng = np.random.default_rng([r, n])
            x, y = gold.sample(rng, n), target.sample(rng, n)
            parts = [gold.log_density(x) - target.log_density(x),
                     target.log_density(y) - gold.log_density(y)]
            for k, method in METHODS.items():
                ends[k].append(method(parts, args.level, r))
        print(f"{args.pair} pair, symmetric KL {truth:.3f}, {n} runs per side, {args.reps} reps "
              f"(seeds {args.first_rep} to {args.first_rep + args.reps - 1})")
        for k, v in ends.items():
            v = np.array(v)
            print(f"  {k:20s} miss low {np.mean(truth < v[:, 0]):.3f}  "
                  f"high {np.mean(truth > v[:, 1]):.3f}  "
                  f"median width {np.median(v[:, 1] - v[:, 0]):.3f}", flush=True)


if __name__ == "__main__":
    main()

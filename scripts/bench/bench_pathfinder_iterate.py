"""Cost of one Pathfinder iterate's Gaussian: the compact low-rank form against the dense
BFGS inverse Hessian it replaced, side by side in one process.

Per dimension d (m = 5 curvature pairs, 25 ELBO draws, as Stan's defaults): the time to
form the Gaussian N(x + Sigma g, Sigma) and draw and score the ELBO's draws, (a) as
``bread_stan.approx.pathfinder`` now does (diag(alpha) + W M W', a thin QR of W), and
(b) as it did before (Sigma as a dense (d, d) matrix by pair-by-pair BFGS updates, then
a Cholesky factor for the draws and densities).  Both give the same Gaussian: the
largest difference of the covariances is printed.

Usage: ``PYTHONPATH=$PWD python scripts/bench/bench_pathfinder_iterate.py [--dims 100 300 669]``.
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np

from bread_stan.ais.gaussian_base import GaussianBase

pathfinder = importlib.import_module("bread_stan.approx.pathfinder")


def dense_iterate(alpha, pairs, point, grad, rng, draws):
    """The replaced code path: dense BFGS updates, then a GaussianBase."""
    h, eye = np.diag(alpha), np.eye(alpha.size)
    for s, y in pairs:
        rho = 1.0 / float(y @ s)
        left = eye - rho * np.outer(s, y)
        h = left @ h @ left.T + rho * np.outer(s, s)
    h = 0.5 * (h + h.T)
    q = GaussianBase(point + h @ grad, h)
    x = q.sample(rng, draws)
    return h, q.log_density(x)[0]


def low_rank_iterate(alpha, pairs, point, grad, rng, draws):
    q = pathfinder._LowRankGaussian(point, grad, alpha,
                                    *pathfinder._inverse_hessian(alpha, pairs))
    return q, q.sample(rng, draws)


def timed(f, repeats):
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", type=int, nargs="*", default=[100, 300, 669])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("| d | dense (s) | low rank (s) | ratio | max cov difference |")
    print("|---|---|---|---|---|")
    for d in args.dims:
        rng = np.random.default_rng(d)
        alpha = rng.uniform(0.5, 2.0, d)
        pairs = []
        for _ in range(5):
            s = rng.normal(size=d)
            a = rng.normal(size=(d, d)) / np.sqrt(d)
            pairs.append((s, (a @ a.T + np.eye(d)) @ s))
        point, grad = rng.normal(size=d), rng.normal(size=d)
        t_dense, (h, _) = timed(lambda: dense_iterate(alpha, pairs, point, grad,
                                                      np.random.default_rng(0), 25),
                                args.repeats)
        t_low, (q, _) = timed(lambda: low_rank_iterate(alpha, pairs, point, grad,
                                                       np.random.default_rng(0), 25),
                              args.repeats)
        diff = float(np.max(np.abs(q.dense()[1] - h)))
        print(f"| {d} | {t_dense:.4g} | {t_low:.4g} | {t_dense / t_low:.3g} | {diff:.2g} |",
              flush=True)


if __name__ == "__main__":
    main()

"""What one IMH step costs in the Stan bridge: the log density alone against the log
density with its gradient, per point, on the peer benchmark's models (issue 28).

The IMH kernel (:mod:`bread_stan.kernels.imh`) needs the tempered log density only;
:meth:`StanTarget.evaluate(points, gradient=False)
<bread_stan.stan.tempered.StanTarget.evaluate>` computes it with plain doubles, no
autodiff.  This times both paths on one thread over 1,024 points near the origin of the
unconstrained space (20 repetitions after one warm-up call), with the benchmark's base
data (``scripts/bench/bench_peers.py``).

Usage: ``PYTHONPATH=$PWD nice python scripts/bench/bench_density.py`` (writes
``scripts/figures/bench_density/results.md``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from bread_stan.stan.tempered import StanTarget, compile_tempered

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_peers  # noqa: E402  (the models and their base data)

OUT = Path(__file__).resolve().parents[1] / "figures" / "bench_density"


def per_point(target: StanTarget, x: np.ndarray, gradient: bool, reps: int = 20) -> float:
    target.evaluate(x, gradient=gradient)
    start = time.perf_counter()
    for _ in range(reps):
        target.evaluate(x, gradient=gradient)
    return (time.perf_counter() - start) / reps / x.shape[0] * 1e6


def main() -> None:
    load = os.getloadavg()[0]
    lines = ["# scripts/bench/bench_density.py: log density alone vs with gradient (us per point)",
             "", f"One thread, 1,024 points, 20 repetitions; load average {load:.2f}.", "",
             "| problem | d | density only | density and gradient | ratio |", "|---|---|---|---|---|"]
    for problem in ("nhefs", "pima", "eight_schools"):
        target = StanTarget(compile_tempered(f"{bench_peers.PROGRAMS[problem]}.stan"),
                            bench_peers.base_data(problem), threads=1)
        x = 0.1 * np.random.default_rng(0).standard_normal((1024, target.dim))
        dens, grad = per_point(target, x, False), per_point(target, x, True)
        lines.append(f"| {problem} | {target.dim} | {dens:.2f} | {grad:.2f} | {grad / dens:.2f} |")
        print(lines[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

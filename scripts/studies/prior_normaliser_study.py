"""The prior normaliser's estimator (bread_stan.ais.prior_normaliser): coverage and width.

Two measurements, written to ``scripts/figures/prior_normaliser_study/results.md``:

1. Coverage of "log c_hat +- 1.96 se" on the five priors with known normaliser of
   ``tests/test_prior_normaliser.py`` (half-normal, half-Cauchy, funnel, bounded uniform,
   their product), 200 seeds each, 4,096 importance draws from a proposal fitted to
   512 exact prior draws: the share of seeds whose interval holds the true log c, and
   the mean and sd of the z-scores (0 and 1 when the standard error is honest).
2. The NHEFS linear regression's prior (``stan_models/linear_regression.stan``: two
   inverse-gamma(1, 1) variances, six coefficients normal(0, sqrt(scale_sq)); c = 1):
   relative variance of the weights, log c_hat and its se with the components' scale
   factor ``widen`` 1.0 (the default) and 1.5, three disjoint fits of 512 prior draws,
   65,536 importance draws each.

    PYTHONPATH=$PWD nice python scripts/studies/prior_normaliser_study.py
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np

from bread_stan.ais.gaussian_path import prior_log_density
from bread_stan.ais.prior_normaliser import DefensiveProposal, estimate_log_normaliser
from bread_stan.stan import datasets
from bread_stan.stan.simulator import Simulator, compile_with_simulator, split_draw
from bread_stan.stan.tempered import StanTarget

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import test_prior_normaliser as known  # noqa: E402  (the priors with known c)

OUT = ROOT / "scripts" / "figures" / "prior_normaliser_study"


def coverage(seeds: int = 200) -> list[str]:
    lines = ["| prior | true log c | seeds | covered by +-1.96 se | mean z | sd z | "
             "median relative variance |", "|---|---|---|---|---|---|---|"]
    for name, (density, draws, log_c) in known.CASES.items():
        z, rel = [], []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            est = estimate_log_normaliser(density, draws(rng, 512), rng, n_draws=4096)
            z.append((est.log_c - log_c) / est.se)
            rel.append(est.relative_variance)
        z = np.asarray(z)
        lines.append(f"| {name} | {log_c:.4f} | {seeds} | {np.mean(np.abs(z) < 1.96):.3f} | "
                     f"{z.mean():+.3f} | {z.std():.3f} | {np.median(rel):.3g} |")
    return lines


def nhefs() -> list[str]:
    program = ROOT / "stan_models" / "linear_regression"
    data = datasets.load("nhefs")
    (compiled,), sim_compiled = compile_with_simulator([f"{program}.stan"],
                                                       f"{program}_sim.stan")
    target = StanTarget(compiled, data, threads=1)
    params, _ = split_draw(Simulator(sim_compiled, data, threads=1).simulate(3 * 512, 1),
                           target.compiled)
    u = target.param_unconstrain_batch(params)
    density = prior_log_density(target)
    lines = ["| widen | fit | log c_hat (true 0) | se | relative variance | Pareto k |",
             "|---|---|---|---|---|---|"]
    for widen in (1.0, 1.5):
        for fit in range(3):
            draws = u[512 * fit:512 * (fit + 1)]
            est = estimate_log_normaliser(density, draws, np.random.default_rng(fit),
                                          n_draws=65_536,
                                          proposal=DefensiveProposal.fit(draws, widen))
            lines.append(f"| {widen} | {fit} | {est.log_c:+.4f} | {est.se:.4f} | "
                         f"{est.relative_variance:.3g} | {est.pareto_k:.2f} |")
    return lines


def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    text = ["# The prior normaliser's estimator: coverage and width", "",
            "Command: `PYTHONPATH=$PWD nice python scripts/studies/prior_normaliser_study.py`.", "",
            "## Coverage on priors with known normaliser (4,096 draws, 512 fit draws)", ""]
    text += coverage() + ["", "## NHEFS prior (c = 1), 65,536 draws", ""] + nhefs()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()

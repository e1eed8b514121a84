"""What q's covariance as the metric buys on the Gaussian path of a large hierarchical model.

A radon-like non-centred program with varying intercepts and slopes (posteriordb's
radon_variable_intercept_slope_noncentered: J groups, 2 J + 5 parameters, N
observations) is put on the Gaussian path: the Laplace fit q at the posterior's mode,
sds times 1.5, then the leg from q to the posterior.  Its pilot is tuned side by side,
from the same exact draws of q with the same seed, two ways:

- ``diagonal``: what ``--metric auto`` estimates above 20 parameters, the pooled pilot
  chains' variances at each grid beta;
- ``q's covariance``: the default now wherever q is strongly correlated: one dense
  metric, q's covariance, at every beta, the step size alone tuned.

The group effects and their mean are correlated in q up to about 0.99, so a diagonal
metric sees a narrow direction as wide as the coordinates' sds.  Prints, per metric,
the tuned step sizes at the pilot betas (q first, the posterior last), the pilot's
gradients a transition, its seconds and milliseconds a gradient (what a dense metric's
O(d^2) products add to each leapfrog step), and the ratios.  The grid is cut to ``--betas`` grid betas up to 1.
``--program`` and ``--data`` run a program of your own instead (one with ``prior_only``,
as the automatic split generates it; the mode search starts at 0).
Usage: ``python scripts/bench/bench_base_metric.py [--groups 85] [--obs 919] [--betas 4]
[--program P.stan --data D.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bread_stan.ais.gaussian_base import GaussianBase
from bread_stan.ais.tuning import TuningConfig, metric_from_base, tune
from bread_stan.ais.waypoint import base_leg_target
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.stan.tempered import StanTarget

PROGRAM = """
data {
  int<lower=0> N;
  int<lower=0> J;
  array[N] int<lower=1, upper=J> county_idx;
  vector[N] floor_measure;
  vector[N] log_radon;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real<lower=0> sigma_y;
  real<lower=0> sigma_alpha;
  real<lower=0> sigma_beta;
  vector[J] alpha_raw;
  vector[J] beta_raw;
  real mu_alpha;
  real mu_beta;
}
model {
  sigma_y ~ normal(0, 1);
  sigma_beta ~ normal(0, 1);
  sigma_alpha ~ normal(0, 1);
  mu_alpha ~ normal(0, 10);
  mu_beta ~ normal(0, 10);
  alpha_raw ~ normal(0, 1);
  beta_raw ~ normal(0, 1);
  if (!prior_only) {
    vector[J] alpha = mu_alpha + sigma_alpha * alpha_raw;
    vector[J] beta = mu_beta + sigma_beta * beta_raw;
    log_radon ~ normal(alpha[county_idx] + floor_measure .* beta[county_idx], sigma_y);
  }
}
"""


def data(rng, groups: int, obs: int) -> dict:
    county = rng.integers(1, groups + 1, obs)
    alpha = rng.normal(1.5, 0.3, groups)
    beta = rng.normal(-0.6, 0.2, groups)
    floor = rng.integers(0, 2, obs).astype(float)
    return {"N": obs, "J": groups, "county_idx": county, "floor_measure": floor,
            "log_radon": alpha[county - 1] + beta[county - 1] * floor
            + 0.7 * rng.normal(size=obs)}


def pilot(leg, base, base_metric, betas, chains: int, seed: int):
    draws = base.sample(np.random.default_rng(seed), chains)
    config = TuningConfig(metric="auto", metric_ridge="relative")  # the Gaussian legs' ridge
    began = time.perf_counter()
    tuned = tune(leg, NUTS(native=True), NUTSParams(0.5, max_depth=10), draws, seed=seed,
                 config=config, at=betas, base_metric=base_metric)
    return tuned, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=85)
    parser.add_argument("--obs", type=int, default=919)
    parser.add_argument("--chains", type=int, default=32)
    parser.add_argument("--betas", type=int, default=4)
    parser.add_argument("--program", type=Path, default=None)
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    if args.program is not None:
        target = StanTarget(args.program, json.loads(args.data.read_text()))
        start = np.zeros(target.dim)
        args.obs = "the data's"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "radon_slopes_noncentred.stan"
            path.write_text(PROGRAM)
            target = StanTarget(path, data(rng, args.groups, args.obs))
        start = np.concatenate([np.full(3, -1.0), np.zeros(target.dim - 3)])
    base = GaussianBase.laplace(target, start, 1.5)
    sd = np.sqrt(np.diag(base.cov))
    corr = np.max(np.abs(base.cov / np.outer(sd, sd) - np.eye(target.dim)))
    leg = base_leg_target(target, base)
    betas = np.concatenate([[0.0], np.geomspace(1e-3, 1.0, args.betas - 1)])
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; d = "
          f"{target.dim}, {args.obs} observations, largest correlation in q {corr:.4f}; "
          f"{args.chains} pilot chains x 25 NUTS transitions at betas "
          + ", ".join(f"{b:.3g}" for b in betas))
    fixed = metric_from_base(base.cov, TuningConfig(), args.chains)
    if fixed is None:
        raise SystemExit("q is not strongly correlated here: nothing to compare")
    rows = {}
    for label, metric in (("diagonal", None), ("q's covariance", fixed)):
        tuned, seconds = pilot(leg, base, metric, betas, args.chains, seed=2)
        rows[label] = (tuned, seconds)
        per_gradient = 1e3 * seconds / tuned.pilot_gradients
        print(f"{label:15s} step sizes " + ", ".join(f"{h:.3g}" for h in tuned.step_size)
              + f"; {tuned.gradients_per_transition:7.1f} gradients a transition; "
              f"{seconds:7.1f} s ({per_gradient:.3g} ms a gradient)")
    (d_tuned, d_sec), (q_tuned, q_sec) = rows.values()
    fewer = d_tuned.gradients_per_transition / q_tuned.gradients_per_transition
    print(f"q's covariance against diagonal: {fewer:.1f}x fewer gradients a transition, "
          f"{d_sec / q_sec:.1f}x less time")


if __name__ == "__main__":
    main()

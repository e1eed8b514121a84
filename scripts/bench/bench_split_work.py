"""What the automatic split saves by skipping the likelihood's own work under prior_only.

A radon-like program (posteriordb's radon_variable_slope_centered: a linear predictor
filled in a loop over N observations, in the model block) is run as a tempered target
two ways, side by side in one process:

- ``wrapped``: only the likelihood statement inside ``if (!prior_only)``, as the split
  did before (and as a hand-written ``prior_only`` often does): the prior instance still
  fills the linear predictor;
- ``split``: the program the automatic split generates now, which skips the whole loop
  under ``prior_only``.

Every leapfrog step on the prior path evaluates both instances (the prior, then the
joint), so the prior instance's cost is paid at every beta.  Prints the time per
evaluation of a batch (log prior, log likelihood and gradients) and checks that the two
targets give the same numbers bit for bit.
Usage: ``python scripts/bench/bench_split_work.py [--groups 85] [--obs 919] [--points 400]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bread_stan.stan.draft import split_model
from bread_stan.stan.tempered import StanTarget

PROGRAM = """
data {
  int<lower=0> J;
  int<lower=0> N;
  array[N] int<lower=1, upper=J> county_idx;
  vector[N] floor_measure;
  vector[N] log_radon;
}
parameters {
  real alpha;
  vector[J] beta;
  real mu_beta;
  real<lower=0> sigma_beta;
  real<lower=0> sigma_y;
}
model {
  vector[N] mu;
  alpha ~ normal(0, 10);
  sigma_y ~ normal(0, 1);
  sigma_beta ~ normal(0, 1);
  mu_beta ~ normal(0, 10);
  beta ~ normal(mu_beta, sigma_beta);
  for (n in 1 : N) {
    mu[n] = alpha + floor_measure[n] * beta[county_idx[n]];
    LIKELIHOOD
  }
}
"""
STATEMENT = "target += normal_lpdf(log_radon[n] | mu[n], sigma_y);"


def data(rng, groups: int, obs: int) -> dict:
    county = rng.integers(1, groups + 1, obs)
    floor = rng.integers(0, 2, obs).astype(float)
    return {"J": groups, "N": obs, "county_idx": county, "floor_measure": floor,
            "log_radon": 1.3 - 0.6 * floor + 0.8 * rng.normal(size=obs)}


def seconds_per_batch(evaluate, points: np.ndarray, repeats: int) -> float:
    evaluate(points)  # warm up
    began = time.perf_counter()
    for _ in range(repeats):
        evaluate(points)
    return (time.perf_counter() - began) / repeats


def prior_alone(target: StanTarget):
    """The prior instance alone, as the native kernels evaluate it at beta = 0."""
    return lambda points: target.prior_model.log_density_gradient_batch(points, jacobian=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=85)
    parser.add_argument("--obs", type=int, default=919)
    parser.add_argument("--points", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    values = data(rng, args.groups, args.obs)
    with tempfile.TemporaryDirectory() as tmp:
        user = Path(tmp) / "radon_slope.stan"
        user.write_text(PROGRAM.replace("LIKELIHOOD", STATEMENT))
        wrapped = Path(tmp) / "radon_slope_wrapped.stan"
        wrapped.write_text(PROGRAM.replace("LIKELIHOOD", f"if (!prior_only) {{ {STATEMENT} }}")
                           .replace("  vector[N] log_radon;",
                                    "  vector[N] log_radon;\n  int<lower=0, upper=1> prior_only;"))
        split = Path(tmp) / "radon_slope_split.stan"
        split.write_text(split_model(user).program)
        targets = {"wrapped": StanTarget(wrapped, values, threads=1),
                   "split": StanTarget(split, values, threads=1)}
    d = targets["split"].dim
    points = rng.normal(size=(args.points, d)) * 0.5
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; d = {d}, "
          f"{args.obs} observations, batches of {args.points} points, 1 thread")
    times = {}
    for _ in range(3):  # interleaved, so that load changes hit both alike
        for label, target in targets.items():
            times.setdefault((label, "both"), []).append(
                seconds_per_batch(target.evaluate, points, args.repeats))
            times.setdefault((label, "prior"), []).append(
                seconds_per_batch(prior_alone(target), points, args.repeats))
    for (label, what), spent in times.items():
        print(f"{label:8s} {1e6 * min(spent) / args.points:8.2f} us per point, "
              + ("prior and joint instances (beta > 0)" if what == "both"
                 else "prior instance alone (beta = 0)") + ", with gradients")
    for what in ("both", "prior"):
        print(f"speed-up, {'beta > 0' if what == 'both' else 'beta = 0'}: "
              f"{min(times['wrapped', what]) / min(times['split', what]):.2f}x")
    a, b = (targets[k].evaluate(points) for k in ("wrapped", "split"))
    same = all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("log_prior", "log_lik", "grad_prior", "grad_lik"))
    print(f"same numbers bit for bit: {same}")


if __name__ == "__main__":
    main()

"""What beta = 0 costs on the prior path: the native kernels with the prior instance
alone, against the same transitions evaluating the likelihood too, in one run.

At beta = 0 the likelihood moves nothing, so the native leapfrog steps evaluate the
prior instance alone and the likelihood once, where a transition ends.  Side by side:
NUTS transitions at beta = 0 and at beta = 5e-324 (the smallest positive double: both
instances at every leapfrog step, and the same trajectories, since 5e-324 times any
finite gradient of the likelihood vanishes next to the prior's).  The model is a
radon-like centred hierarchical intercept (J groups, N observations): its prior is a
funnel, where trees reach the maximum depth, as in the simulator check's prior stage
and the prior pilot's first tuning stage.

Prints wall time per transition, gradients per transition, the ratio, and whether the
two runs gave the same states bit for bit.
Usage: ``python scripts/bench/bench_prior_alone.py [--groups 85] [--obs 919] [--chains 100]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bread_stan.kernels.base import initial_state
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.stan.tempered import StanTarget

PROGRAM = """
data {
  int<lower=1> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> group;
  vector[N] x;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] a;
  real b;
  real<lower=0> sigma;
}
model {
  mu ~ normal(0, 10);
  tau ~ normal(0, 1);
  a ~ normal(mu, tau);
  b ~ normal(0, 10);
  sigma ~ normal(0, 1);
  if (!prior_only) {
    y ~ normal(a[group] + b * x, sigma);
  }
}
"""


def data(rng, groups: int, obs: int) -> dict:
    group = rng.integers(1, groups + 1, obs)
    a = rng.normal(1.5, 0.3, groups)
    x = rng.normal(size=obs)
    return {"N": obs, "J": groups, "group": group, "x": x,
            "y": a[group - 1] - 0.6 * x + 0.7 * rng.normal(size=obs)}


def prior_draws(rng, n: int, groups: int) -> np.ndarray:
    """Exact prior draws, unconstrained: mu, log tau, a, b, log sigma."""
    mu = rng.normal(0, 10, n)
    tau = np.abs(rng.normal(size=n))
    a = mu[:, None] + tau[:, None] * rng.normal(size=(n, groups))
    return np.column_stack([mu, np.log(tau), a, rng.normal(0, 10, n),
                            np.log(np.abs(rng.normal(size=n)))])


def transitions(target, start, beta: float, params, steps: int, seed: int):
    kernel = NUTS(native=True)
    rng = ChainRandom.from_seed(seed, start.shape[0])
    state = initial_state(target, start)
    betas = np.full(start.shape[0], beta)
    n_grad, began = 0, time.perf_counter()
    for _ in range(steps):
        state, info = kernel.step(rng, state, target, betas, params)
        n_grad += int(info.n_grad.sum())
    return state, n_grad, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=85)
    parser.add_argument("--obs", type=int, default=919)
    parser.add_argument("--chains", type=int, default=100)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "radon_like.stan"
        path.write_text(PROGRAM)
        target = StanTarget(path, data(rng, args.groups, args.obs), threads=args.threads)
    start = prior_draws(rng, args.chains, args.groups)
    params = NUTSParams(step_size=np.full(args.chains, 0.05), inv_metric=np.ones(target.dim),
                        max_depth=10)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; d = "
          f"{target.dim}, {args.obs} observations, {args.chains} chains x {args.steps} "
          f"NUTS transitions, {args.threads} thread(s)")
    rows = {}
    for label, beta in (("beta = 0 (prior instance alone)", 0.0),
                        ("beta = 5e-324 (both instances)", 5e-324)):
        rows[label] = transitions(target, start, beta, params, args.steps, seed=2)
    (_, (s0, g0, t0)), (_, (s1, g1, t1)) = rows.items()
    for label, (_, grads, seconds) in rows.items():
        per = args.chains * args.steps
        print(f"{label:34s} {1e3 * seconds / per:9.2f} ms per transition, "
              f"{grads / per:7.1f} gradients per transition")
    same = (np.array_equal(s0.position, s1.position)
            and np.array_equal(s0.evaluation.log_lik, s1.evaluation.log_lik))
    print(f"speed-up {t1 / t0:.2f}x at equal gradients ({g0} vs {g1}); same states bit for "
          f"bit: {same}")


if __name__ == "__main__":
    main()

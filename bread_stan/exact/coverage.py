"""How often the bound's interval covers what it claims to, by simulation on a conjugate
Gaussian target (exact posterior draws, closed-form log p(y)).

- :func:`single_draw_coverage`: one data set y; each replication draws one exact x*
  from p(x | y), starts all its reverse chains there and forms the single-draw interval
  (chain-to-chain spread).  It measures how often that interval contains the expected
  bound E[U] - E[L] on y, averaged over x* ~ p(x | y) (estimated here from many chains
  that each start from their own exact draw) -- which the interval does not claim: it
  covers E[U | x*] - E[L], the bound given its draw (measured against exact values in
  :mod:`.calibration`), and falls short of the average when reverse chains remember x*.
- :func:`multi_draw_coverage`: each replication simulates K problems (x*_k, y*_k) from
  the model, splits its chains among them and forms the multi-draw interval
  (spread between problems).  What it claims to cover is E[U - L] averaged over data
  sets of the model, estimated by the mean over the other replications' problems.

Both use a fixed kernel (no tuning) so that the replications differ only in their
random draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..ais import engine
from ..ais import runs
from ..ais.estimators import grouped_bound, jeffreys_bound
from .conjugate import LinearRegression, simulate_regression

__all__ = ["Coverage", "single_draw_coverage", "multi_draw_coverage"]


@dataclass(frozen=True)
class Coverage:
    """Share of ``replications`` intervals at ``level`` that contain ``truth``."""

    coverage: float
    replications: int
    level: float
    truth: float
    mean_width: float

    @property
    def std_error(self) -> float:
        return float(np.sqrt(self.coverage * (1 - self.coverage) / self.replications))

    def as_dict(self) -> dict:
        return asdict(self)


def _config(T: int) -> engine.RunConfig:
    return engine.RunConfig(steps=(T,), increment_blocks=None, progress=False)


def single_draw_coverage(model: LinearRegression, kernel, params, *, steps: int, chains: int,
                         replications: int, truth_chains: int = 4000, level: float = 0.9,
                         seed: int = 0) -> Coverage:
    """Coverage of the single-draw interval on the data set of ``model`` (see module)."""
    rng = np.random.default_rng(seed)
    config = _config(steps)
    # What the interval claims: every reverse chain from its own exact draw.
    truth_run = runs.run(model, kernel, model.sample_prior(rng, truth_chains),
                           model.sample_posterior(rng, truth_chains), seed=seed + 1,
                           path=params, config=config).steps[0]
    truth = float(np.mean(truth_run.reverse.log_estimates)
                  - np.mean(truth_run.forward.log_estimates))
    # All replications in one batch: replication r's reverse chains share x*_r.
    x_star = np.repeat(model.sample_posterior(rng, replications), chains, axis=0)
    run = runs.run(model, kernel, model.sample_prior(rng, replications * chains), x_star,
                     seed=seed + 2, path=params, config=config).steps[0]
    L = run.forward.log_estimates.reshape(replications, chains)
    U = run.reverse.log_estimates.reshape(replications, chains)
    bounds = [jeffreys_bound(L[r], U[r], level=level) for r in range(replications)]
    hits = [b.ci_low <= truth <= b.ci_high for b in bounds]
    return Coverage(float(np.mean(hits)), replications, level, truth,
                    float(np.mean([b.ci_high - b.ci_low for b in bounds])))


def multi_draw_coverage(n_obs: int, dim: int, kernel, params, *, steps: int, chains: int,
                        problems: int, replications: int, noise_sd: float = 1.0,
                        level: float = 0.9, seed: int = 0) -> Coverage:
    """Coverage of the multi-draw interval with ``problems`` simulated problems of the
    regression model per replication and ``chains`` chains per direction in all."""
    rng = np.random.default_rng(seed)
    config = _config(steps)
    per_problem = np.array_split(np.arange(chains), problems)
    estimates = []  # per replication: (bound, per-problem bounds)
    for r in range(replications):
        L, U, groups = [], [], []
        for k, rows in enumerate(per_problem):
            model, w = simulate_regression(n_obs, dim, noise_sd=noise_sd, seed=rng)
            run = runs.run(model, kernel, model.sample_prior(rng, rows.size), w,
                             seed=int(rng.integers(2 ** 31)), path=params,
                             config=config).steps[0]
            L.append(run.forward.log_estimates)
            U.append(run.reverse.log_estimates)
            groups.append(np.full(rows.size, k))
        g = np.concatenate(groups)
        estimates.append(grouped_bound(np.concatenate(L), np.concatenate(U), g, g,
                                       level=level))
    per = np.array([b_k for _, b_k in estimates])  # (replications, problems)
    hits, widths = [], []
    for r, (bound, _) in enumerate(estimates):
        truth_r = float(np.mean(np.delete(per, r, axis=0)))  # leave this replication out
        hits.append(bound.ci_low <= truth_r <= bound.ci_high)
        widths.append(bound.ci_high - bound.ci_low)
    return Coverage(float(np.mean(hits)), replications, level, float(np.mean(per)),
                    float(np.mean(widths)))

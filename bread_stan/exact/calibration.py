"""How often each interval the toolkit prints misses, on targets with exact answers.

Every function returns a table with one row per (interval, chains, T): the share of
``seeds`` replications whose interval misses its truth on each side (``miss_low``: the
truth lies below the interval; ``miss_high``: above it), the nominal miss rate of each
side, and the mean distance from the estimate to each end (the price of the interval).

- :func:`sandwich_misses`: the log p(y) sandwich's one-sided confidence limits (and, for
  comparison, the delta-method "estimate -/+ z se" they replace) on simulated data sets
  of a conjugate regression, truth the closed-form log p(y*).  Reverse chains share the
  simulated truth x*, as in a BREAD run.
- :func:`grid_bound_misses`: the bound's single-draw interval, whose truth is
  E[U | x*] - E[L] (computed exactly by the grid oracle for the drawn x*), and the
  multi-draw interval (K exact draws), whose truth is the exact E[B].
- :func:`aide_misses`: AIDE's interval between two Gaussians (two pairs in
  :data:`AIDE_PAIRS`), truth the closed-form symmetric KL.
- :func:`tractable_subjective_misses`: the subjective divergence of a tractable
  approximation (the mean-field optimum of a conjugate regression's Gaussian posterior)
  against exact posterior draws, truth the closed-form Jeffreys divergence.

Each side of a two-sided interval at level c has nominal miss (1 - c) / 2; a one-sided
limit at level c has 1 - c.  :func:`binomial_limit` is the largest miss share that is
within binomial error of the nominal rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..ais import engine
from ..ais import runs
from ..ais.estimators import grouped_bound, jeffreys_bound, log_ml_sandwich
from ..ais.frozen_kernels import KernelSchedule
from ..meta.algorithms import TractableAlgorithm
from ..meta.estimator import estimate_aide
from ..approx.gaussian import GaussianApproximation
from ..kernels.grid_mh import GridMetropolis
from ..kernels.hmc import HMC, HMCParams
from .conjugate import simulate_regression
from .grid import GridTarget, grid_log_f, positions_to_cells
from .oracle import conditional_reverse_means, grid_bounds, linear_schedule
from ..workflows.subjective_tractable import subjective_tractable

__all__ = ["binomial_limit", "sandwich_misses", "grid_bound_misses", "aide_misses",
           "tractable_subjective_misses", "Gaussian", "REGRESSION", "AIDE_PAIRS"]

#: The conjugate regression of :func:`sandwich_misses`: 20 observations, 3 coefficients,
#: unit noise, HMC with step 0.3 and 10 leapfrog steps (heavy-tailed weights at T <= 100).
REGRESSION = {"n_obs": 20, "dim": 3, "noise_sd": 1.0,
              "params": HMCParams(step_size=0.3, n_leapfrog=10)}


def binomial_limit(nominal: float, n: int, *, confidence: float = 0.975) -> float:
    """The largest miss share of ``n`` replications consistent with a true miss rate of
    ``nominal`` (the ``confidence`` quantile of Binomial(n, nominal), over n)."""
    return float(stats.binom.ppf(confidence, n, nominal) / n)


def _rows(name, chains, T, level, nominal, lows, highs, below, above, **extra):
    return dict(interval=name, chains=chains, T=T, level=level, nominal_miss=nominal,
                miss_low=float(np.mean(lows)), miss_high=float(np.mean(highs)),
                seeds=len(lows), reach_low=float(np.mean(below)),
                reach_high=float(np.mean(above)), **extra)


def sandwich_misses(seeds: int, *, chains=(20, 50), steps=(10, 30, 100),
                    level: float = 0.95, first_seed: int = 0) -> pd.DataFrame:
    """Misses of the sandwich's limits (``sandwich lower limit``: log p(y*) below it;
    ``sandwich upper limit``: above it) and of the delta-method ends they replace."""
    z = stats.norm.ppf(level)
    config = engine.RunConfig(steps=tuple(steps), increment_blocks=None)
    n_max = max(chains)
    out: dict[tuple, list] = {}
    for s in range(first_seed, first_seed + seeds):
        model, w = simulate_regression(REGRESSION["n_obs"], REGRESSION["dim"],
                                       noise_sd=REGRESSION["noise_sd"], seed=s)
        truth = model.log_marginal_likelihood()
        rng = np.random.default_rng([s, 1])
        res = runs.run(model, HMC(), model.sample_prior(rng, n_max), w, seed=s,
                         path=REGRESSION["params"], config=config)
        for step in res.steps:
            for n in chains:
                sw = log_ml_sandwich(step.forward.log_estimates[:n],
                                     step.reverse.log_estimates[:n], level=level)
                for name, lo, hi, est in (
                        ("sandwich lower limit", sw.lower_limit, np.inf, sw.lower),
                        ("sandwich upper limit", -np.inf, sw.upper_limit, sw.upper),
                        ("delta-method lower (old)", sw.lower - z * sw.lower_se, np.inf,
                         sw.lower),
                        ("delta-method upper (old)", -np.inf, sw.upper + z * sw.upper_se,
                         sw.upper)):
                    out.setdefault((name, n, step.n_steps), []).append(
                        (truth < lo, truth > hi, est - lo, hi - est, truth - est))
    rows = []
    for (name, n, T), v in out.items():
        a = np.array(v, dtype=float)
        side = "lower" if "lower" in name else "upper"
        rows.append(_rows(name, n, T, level, 1 - level, *a[:, :4].T,
                          **{"estimate_minus_truth": float(-np.mean(a[:, 4])),
                             "one_sided": side}))
    return pd.DataFrame(rows).sort_values(["interval", "chains", "T"], ignore_index=True)


def _grid_runs(tg, schedule, starts, seed, stream):
    run = engine.forward if stream == 0 else engine.reverse
    return run(tg, GridMetropolis(), schedule, starts, seed=seed, stream=stream).log_estimates


def grid_bound_misses(seeds: int, *, chains=(20, 50), steps=(10, 30, 100),
                      level: float = 0.9, target: str = "hard", problems: int = 5,
                      first_seed: int = 0) -> pd.DataFrame:
    """Misses of the bound's single-draw interval (truth E[U | x*] - E[L], exact) and of
    the multi-draw interval over ``problems`` exact draws (truth E[B], exact), AIS with
    the grid's Metropolis kernel on the 7 x 7 grid target ``target``."""
    log_f = grid_log_f(target)
    tg = GridTarget(log_f)
    n_max = max(chains)
    rows = []
    for T in steps:
        exact = grid_bounds(log_f, T)
        v = conditional_reverse_means(log_f, exact.betas).ravel()
        schedule = KernelSchedule(linear_schedule(T), 1)
        rng = np.random.default_rng([first_seed, T])
        L = _grid_runs(tg, schedule, tg.sample_prior(rng, seeds * n_max), first_seed + T, 0)
        x_star = tg.sample_posterior(rng, seeds)
        U = _grid_runs(tg, schedule, np.repeat(x_star, n_max, axis=0), first_seed + T, 1)
        L, U = L.reshape(seeds, n_max), U.reshape(seeds, n_max)
        truth_single = v[positions_to_cells(x_star, log_f.shape)] - exact.forward_mean
        # Multi-draw: `problems` exact draws per replication, the chains split among them.
        x_multi = tg.sample_posterior(rng, seeds * problems)
        per = np.repeat(np.arange(seeds * problems), n_max // problems)
        U_multi = _grid_runs(tg, schedule, x_multi[per], first_seed + T, 3).reshape(
            seeds, -1)
        for n in chains:
            single, multi = [], []
            for r in range(seeds):
                b = jeffreys_bound(L[r, :n], U[r, :n], level=level)
                single.append((truth_single[r] < b.ci_low, truth_single[r] > b.ci_high,
                               b.estimate - b.ci_low, b.ci_high - b.estimate,
                               exact.bound < b.ci_low, exact.bound > b.ci_high))
                groups = np.repeat(np.arange(problems), n // problems)
                k = groups.size
                g, _ = grouped_bound(L[r, :k], U_multi[r].reshape(problems, -1)[
                    :, :n // problems].ravel(), groups, groups, level=level)
                multi.append((exact.bound < g.ci_low, exact.bound > g.ci_high,
                              g.estimate - g.ci_low, g.ci_high - g.estimate))
            a = np.array(single, dtype=float)
            rows.append(_rows("bound, single draw (given x*)", n, T, level, (1 - level) / 2,
                              *a[:, :4].T, uncond_miss_low=float(a[:, 4].mean()),
                              uncond_miss_high=float(a[:, 5].mean()),
                              exact_bound=exact.bound))
            a = np.array(multi, dtype=float)
            rows.append(_rows(f"bound, {problems} exact draws", n, T, level, (1 - level) / 2,
                              *a.T, exact_bound=exact.bound))
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Gaussian:
    """A diagonal Gaussian with exact draws and density (an AIDE test algorithm)."""

    mean: np.ndarray
    sd: np.ndarray

    @property
    def dim(self) -> int:
        return int(np.asarray(self.mean).size)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.mean + self.sd * rng.standard_normal((n, self.dim))

    def log_density(self, points: np.ndarray) -> np.ndarray:
        zz = (np.asarray(points) - self.mean) / self.sd
        return -0.5 * np.sum(zz ** 2 + np.log(2 * np.pi * self.sd ** 2), axis=1)

    def kl_to(self, other: "Gaussian") -> float:
        """KL(self || other), closed form."""
        r = (self.sd / other.sd) ** 2
        d = ((self.mean - other.mean) / other.sd) ** 2
        return float(0.5 * np.sum(r + d - 1 - np.log(r)))


#: AIDE's calibration pairs (gold, target): two Gaussians in 2-d (symmetric KL 0.79) and
#: a harder pair in 3-d (symmetric KL 3.1, per-run terms with skewness 2.3).
AIDE_PAIRS = {
    "two Gaussians": (Gaussian(np.zeros(2), np.ones(2)),
                      Gaussian(np.array([0.5, 0.0]), np.array([1.5, 0.7]))),
    "two Gaussians, 3-d": (Gaussian(np.zeros(3), np.ones(3)),
                           Gaussian(np.array([1.0, 0.0, -0.5]), np.array([2.0, 0.5, 1.0]))),
}


def aide_misses(seeds: int, *, runs=(20, 50), level: float = 0.9, first_seed: int = 0,
                pair: str = "two Gaussians", compare: bool = False) -> pd.DataFrame:
    """Misses of AIDE's interval between the gold and target Gaussians of
    ``AIDE_PAIRS[pair]`` (default N(0, I) and N((0.5, 0), diag(1.5, 0.7)^2) in two
    dimensions), truth the closed-form symmetric KL.  ``compare``: also the normal
    interval "estimate +- z se" from the same runs (rows named ``... (normal, old)``)."""
    if pair not in AIDE_PAIRS:
        raise ValueError(f"unknown AIDE pair {pair!r}; use one of {sorted(AIDE_PAIRS)}")
    gold, target = AIDE_PAIRS[pair]
    truth = gold.kl_to(target) + target.kl_to(gold)
    z = stats.norm.ppf((1 + level) / 2)
    rows = []
    for n in runs:
        a, b = [], []
        for s in range(first_seed, first_seed + seeds):
            res = estimate_aide(TractableAlgorithm(gold, "gold"),
                                TractableAlgorithm(target, "target"),
                                n_gold=n, n_target=n, seed=s, level=level)
            a.append((truth < res.lower, truth > res.upper, res.estimate - res.lower,
                      res.upper - res.estimate))
            b.append((truth < res.estimate - z * res.se, truth > res.estimate + z * res.se,
                      z * res.se, z * res.se))
        rows.append(_rows(f"AIDE, {pair}", n, 0, level, (1 - level) / 2,
                          *np.array(a, dtype=float).T, exact=truth))
        if compare:
            rows.append(_rows(f"AIDE, {pair} (normal, old)", n, 0, level, (1 - level) / 2,
                              *np.array(b, dtype=float).T, exact=truth))
    return pd.DataFrame(rows)


def _gaussian_kl(m0, s0, m1, s1) -> float:
    """KL(N(m0, s0) || N(m1, s1)), full covariances."""
    inv1 = np.linalg.inv(s1)
    d = m1 - m0
    return float(0.5 * (np.trace(inv1 @ s0) + d @ inv1 @ d - m0.size
                        + np.linalg.slogdet(s1)[1] - np.linalg.slogdet(s0)[1]))


def tractable_subjective_misses(seeds: int, *, draws=(20, 50, 100), level: float = 0.9,
                                first_seed: int = 0) -> pd.DataFrame:
    """Misses of the interval of the subjective divergence of a tractable approximation:
    the regression of :data:`REGRESSION` (correlated predictors, 0.8), the mean-field
    optimum N(m, diag(1 / diag(S^-1))) of its posterior N(m, S) as the approximation,
    ``n`` exact posterior draws as the reference and ``n`` draws of the approximation;
    truth J = KL(p || q) + KL(q || p), closed form."""
    model, _ = simulate_regression(REGRESSION["n_obs"], REGRESSION["dim"],
                                   noise_sd=REGRESSION["noise_sd"], correlation=0.8, seed=0)
    mean, cov = model.tempered_posterior(1.0)
    q_cov = np.diag(1 / np.diag(np.linalg.inv(cov)))
    approx = GaussianApproximation(mean, q_cov, method="mean-field optimum")
    truth = _gaussian_kl(mean, cov, mean, q_cov) + _gaussian_kl(mean, q_cov, mean, cov)
    rows = []
    for n in draws:
        a = []
        for s in range(first_seed, first_seed + seeds):
            ref = model.sample_posterior(np.random.default_rng([s, 2]), n)
            res = subjective_tractable(model, approx, ref, n=n, seed=s, level=level)
            lo, hi = res.interval
            a.append((truth < lo, truth > hi, res.estimate - lo, hi - res.estimate))
        a = np.array(a, dtype=float)
        rows.append(_rows("subjective, tractable approximation", n, 0, level,
                          (1 - level) / 2, *a.T, exact=truth))
    return pd.DataFrame(rows)

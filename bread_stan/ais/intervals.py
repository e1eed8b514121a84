"""Confidence limits that hold beyond normal theory: on log Z from per-run unbiased
estimates of Z (or 1/Z), and a studentised-bootstrap interval for sums of means.

:func:`lower_limit` and :func:`upper_limit` are below.  :func:`studentized_interval`
is the two-sided interval of a signed sum of independent sample means (the bound
mean(U) - mean(L)): the bootstrap distribution of
t* = (estimate* - estimate) / se* replaces the normal quantiles, which corrects the
skew of per-chain log estimates (a long left tail of L makes mean(U) - mean(L)
right-skewed, and its normal interval then misses low too often).
:func:`skew_corrected_interval` (AIDE's interval) bootstraps Hall's skewness-removing
transformation of that t instead, which reaches further on the side of a long tail
when few runs are drawn (see its docstring).

Input: a vector of per-run log estimates ``log_z_hat`` whose exponentials are
independent, non-negative and unbiased for Z (forward AIS chains, log-weights L;
independent SMC runs, log Z-hat) -- or, for an upper limit, whose negatives are
unbiased for 1/Z in the same sense (reverse AIS chains from exact posterior draws:
E[exp(-U)] = 1/Z).  Output: a limit that holds with probability at least ``level``
for every distribution of the weights, however heavy-tailed.

The construction is a test-martingale ("betting") confidence bound.  For a candidate
value m of log Z and a fraction lam in [0, 1], the product over runs

    K_lam(m) = prod_i (1 - lam + lam * exp(log_z_hat_i - m))

has expectation at most 1 when m >= log Z (each factor has mean <= 1 and the runs are
independent), so by Markov's inequality P(K(m) >= 1/alpha) <= alpha, also for the
average K(m) of K_lam(m) over a fixed grid of lam.  The limit is the largest m that
this test rejects; every m above it is kept.  lam = 1 alone gives mean(log_z_hat) -
log(1/alpha)/n (the per-chain tail bound P(L > log Z + c) < e^-c, multiplied over n
independent chains); small lam behaves like the arithmetic mean of the weights.  The
grid lets the data pick, at the cost of log(grid size)/n nats; with a single run
the grid is lam = 1 alone, which is Markov's inequality.  Nothing is assumed
about the weights beyond unbiasedness and independence, which the sandwich itself
needs, so the limit is exact at any number of runs; the delta-method standard error
of log-mean-exp is not, and under-states the error when few runs carry the weight.

Runs that are not independent -- BREAD's reverse chains all start from one exact
draw x*, and remember it -- are passed with ``independent=False``: their mean
weight is still unbiased (linearity needs no independence), so they count as one
run whose estimate is their log-mean-exp, and the limit is Markov's inequality on
it: log-mean-exp -/+ log(1 / (1 - level)).  No data-based interval can do better
from one x*, since the spread from one x* to the next is not in the data.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

__all__ = ["LAMBDAS", "lower_limit", "upper_limit", "studentized_interval",
           "skew_corrected_interval"]

#: The fixed grid of betting fractions averaged over (chosen before seeing any data).
LAMBDAS = np.array([1.0, 0.75, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02])


def _check(log_z_hat, level: float, name: str) -> np.ndarray:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    x = np.asarray(log_z_hat, dtype=float).ravel()
    if x.size == 0:
        raise ValueError(f"{name}: no runs")
    if np.any(np.isnan(x)) or np.any(x == np.inf):
        raise ValueError(f"{name}: a NaN or +inf log estimate; the runs are broken")
    return x


def _log_wealth(x: np.ndarray, m: float) -> float:
    """log of the average over LAMBDAS (lam = 1 alone for one run) of
    prod_i (1 - lam + lam exp(x_i - m))."""
    lam = (LAMBDAS if x.size > 1 else LAMBDAS[:1])[:, None]
    with np.errstate(divide="ignore"):
        terms = np.logaddexp(np.log1p(-lam), np.log(lam) + (x[None, :] - m))
    logs = terms.sum(axis=1)
    top = logs.max()
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.mean(np.exp(logs - top))))


def lower_limit(log_z_hat, *, level: float = 0.95, independent: bool = True) -> float:
    """A lower confidence limit on log Z at ``level`` from runs with E[exp(log_z_hat)] <= Z
    (see the module docstring); -inf when every run has weight 0.  ``independent=False``:
    the runs may depend on each other (only their mean weight is used)."""
    x = _check(log_z_hat, level, "lower_limit")
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return -np.inf
    if not independent:
        return float(logsumexp(x) - np.log(x.size) - np.log(1 / (1 - level)))
    target = np.log(1 / (1 - level))
    # The log wealth falls from +inf to log(mean(1-lam)^n) < target as m rises.
    lo, hi = float(finite.min()) - 1.0, float(finite.max()) + 1.0
    while _log_wealth(x, lo) < target:
        lo -= 2 * (hi - lo)
    while _log_wealth(x, hi) >= target:
        hi += 2 * (hi - lo)
    return float(optimize.brentq(lambda m: _log_wealth(x, m) - target, lo, hi, xtol=1e-10))


def upper_limit(upper_estimates, *, level: float = 0.95, independent: bool = True) -> float:
    """An upper confidence limit on log Z at ``level`` from runs U with E[exp(-U)] <= 1/Z
    (reverse AIS from exact posterior draws): minus the lower limit on log(1/Z)."""
    x = np.asarray(upper_estimates, dtype=float).ravel()
    if np.any(x == -np.inf):
        raise ValueError("upper_limit: a -inf reverse estimate; the runs are broken")
    return -lower_limit(-x, level=level, independent=independent)


def studentized_interval(parts, *, level: float = 0.95, n_boot: int = 4000,
                         seed=0) -> tuple[float, float, float, float]:
    """Estimate, standard error and bootstrap-t interval at ``level`` of
    sum_k sign_k * mean(values_k) over independent samples ``parts = [(values, sign)]``.

    Each sample is resampled on its own (``n_boot`` times, a fixed ``seed``, anything
    ``numpy.random.default_rng`` takes: the same data give the same interval).  With fewer than 2 values in a sample the standard
    error is NaN and so is the interval.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    arrays = [(np.asarray(v, dtype=float).ravel(), float(sign)) for v, sign in parts]
    if any(v.size == 0 for v, _ in arrays):
        raise ValueError("studentized_interval: an empty sample")
    estimate = float(sum(sign * v.mean() for v, sign in arrays))
    if any(v.size < 2 for v, _ in arrays):
        return estimate, np.nan, np.nan, np.nan
    se = float(np.sqrt(sum(v.var(ddof=1) / v.size for v, _ in arrays)))
    if not np.isfinite(se) or se == 0:
        return estimate, se, estimate, estimate
    rng = np.random.default_rng(seed)
    est_b = np.zeros(n_boot)
    var_b = np.zeros(n_boot)
    for v, sign in arrays:
        draws = v[rng.integers(0, v.size, size=(n_boot, v.size))]
        est_b += sign * draws.mean(axis=1)
        var_b += draws.var(axis=1, ddof=1) / v.size
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (est_b - estimate) / np.sqrt(var_b)
    t = t[~np.isnan(t)]  # a resample of identical values with the same mean
    q_low, q_high = np.quantile(t, [(1 - level) / 2, (1 + level) / 2])
    return estimate, se, float(estimate - q_high * se), float(estimate - q_low * se)


def _hall(t, gamma):
    """Hall's (1992) transformation g(t) = t + a t^2 + a^2 t^3 / 3 + gamma / 6 with
    a = gamma / 3: increasing in t, and g(T) is nearer N(0, 1) than T to order 1/n."""
    a = gamma / 3
    return t + a * t ** 2 + a ** 2 * t ** 3 / 3 + gamma / 6


def _hall_inverse(y: float, gamma: float) -> float:
    a = gamma / 3
    if abs(a) < 1e-12:
        return y - gamma / 6
    return float((np.cbrt(1 + 3 * a * (y - gamma / 6)) - 1) / a)


def _moments(samples):
    """Estimate, variance and third cumulant of sum_k sign_k mean_k, per row of the last axis."""
    est = var = k3 = 0.0
    for v, sign in samples:
        mean = v.mean(axis=-1)
        n = v.shape[-1]
        est = est + sign * mean
        var = var + v.var(axis=-1, ddof=1) / n
        k3 = k3 + sign ** 3 * np.mean((v - mean[..., None]) ** 3, axis=-1) / n ** 2
    return est, var, k3


def skew_corrected_interval(parts, *, level: float = 0.95, n_boot: int = 4000,
                            seed=0) -> tuple[float, float, float, float]:
    """Estimate, standard error and interval at ``level`` of sum_k sign_k * mean(values_k)
    over independent samples ``parts = [(values, sign)]``: a bootstrap of Hall's
    skewness-corrected studentised statistic.

    With T = (estimate - truth) / se and g the skewness of the estimate estimated from the
    samples (third cumulant sum_k sign_k^3 m3_k / n_k^2 over se^3), Hall's transformation
    h(T) = T + g T^2 / 3 + g^2 T^3 / 27 + g / 6 is monotone and removes the skew of T to
    order 1/n; its quantiles come from ``n_boot`` resamples of each sample on its own
    (h*(T*) with g* recomputed per resample; fixed ``seed``), and are mapped back through
    h's closed-form inverse.  Against the plain bootstrap-t (:func:`studentized_interval`)
    this corrects the upper end for the skewness the resamples under-state when the long
    tail is rarely drawn.  With fewer than 2 values in a sample the se and the interval
    are NaN.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    arrays = [(np.asarray(v, dtype=float).ravel(), float(sign)) for v, sign in parts]
    if any(v.size == 0 for v, _ in arrays):
        raise ValueError("skew_corrected_interval: an empty sample")
    estimate = float(sum(sign * v.mean() for v, sign in arrays))
    if any(v.size < 2 for v, _ in arrays):
        return estimate, np.nan, np.nan, np.nan
    _, var, k3 = _moments(arrays)
    se = float(np.sqrt(var))
    if not np.isfinite(se) or se == 0:
        return estimate, se, estimate, estimate
    gamma = float(k3) / se ** 3
    rng = np.random.default_rng(seed)
    draws = [(v[rng.integers(0, v.size, size=(n_boot, v.size))], sign) for v, sign in arrays]
    est_b, var_b, k3_b = _moments(draws)
    with np.errstate(divide="ignore", invalid="ignore"):
        se_b = np.sqrt(var_b)
        h = _hall((est_b - estimate) / se_b, k3_b / se_b ** 3)
    h = h[np.isfinite(h)]  # a resample of identical values
    q_low, q_high = np.quantile(h, [(1 - level) / 2, (1 + level) / 2])
    return (estimate, se, estimate - se * _hall_inverse(q_high, gamma),
            estimate - se * _hall_inverse(q_low, gamma))

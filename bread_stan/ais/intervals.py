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
when few runs are drawn, from the samples with their largest values smoothed into an
exponential tail (so a resample can reach beyond the largest value drawn), and
calibrates the levels of its ends by a second bootstrap (see its docstring).

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

from math import comb

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

__all__ = ["LAMBDAS", "lower_limit", "upper_limit", "studentized_interval",
           "skew_corrected_interval", "tail_size"]

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
    at = gamma / 3 * t
    return t * (1 + at * (1 + at / 3)) + gamma / 6


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


def tail_size(n: int) -> int:
    """How many of n sorted values :func:`skew_corrected_interval` replaces by an
    exponential tail: ceil(sqrt(n)) from 8 values on, none below."""
    return int(np.ceil(np.sqrt(n))) if n >= 8 else 0


def _tail(x: np.ndarray, k: int):
    """Threshold (the (k+1)-th largest value) and mean excess of the k largest over it,
    per row of sorted ``x``."""
    u = x[..., -k - 1]
    return u, x[..., -k:].mean(axis=-1) - u


def _tail_draws(rng: np.random.Generator, x: np.ndarray, n_boot: int, k: int) -> np.ndarray:
    """``n_boot`` resamples of the sorted values ``x`` in which a draw of one of the k
    largest is replaced by threshold + mean excess * Exp(1) (:func:`_tail`)."""
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    draws = x[idx]
    if k:
        u, excess = _tail(x, k)
        top = idx >= x.size - k
        draws[top] = u + excess * rng.standard_exponential(int(top.sum()))
    return draws


def _resample_counts(rng: np.random.Generator, n: int, n_boot: int) -> np.ndarray:
    """How often each of n values is drawn in each of ``n_boot`` resamples, (n_boot, n)."""
    idx = rng.integers(0, n, size=(n_boot, n))
    counts = np.bincount((np.arange(n_boot)[:, None] * n + idx).ravel(), minlength=n_boot * n)
    return counts.reshape(n_boot, n).astype(float)


def _tail_power_sums(rng: np.random.Generator, hits: np.ndarray, rows: int) -> list:
    """Sums of E^q, q = 0..3, over the ``hits[j]`` tail draws of inner resample j, with
    standard exponentials E drawn afresh for every one of ``rows`` rows: q = 0 is
    ``hits`` (n_inner,), the others (rows, n_inner)."""
    counts = hits.astype(int)
    starts = np.cumsum(counts) - counts
    total = int(counts.sum())
    block = max(1, 2_000_000 // (total + 1))
    sums = [np.empty((rows, hits.size)) for _ in range(3)]
    for r0 in range(0, rows, block):
        m = min(block, rows - r0)
        e = np.zeros((m, total + 1))  # a zero column closes the last segment
        e[:, :total] = rng.standard_exponential((m, total))
        power = e
        for q in range(3):
            seg = np.add.reduceat(power, starts, axis=1)
            seg[:, counts == 0] = 0.0  # reduceat gives an empty segment's first value
            sums[q][r0:r0 + m] = seg
            power = power * e if q < 2 else power
    return [hits] + sums


def _inner_moments(outer: np.ndarray, counts: np.ndarray, k: int = 0, rng=None):
    """Mean, variance of the mean and third cumulant of the mean of every resample
    (``counts`` (n_inner, n)) of every row of ``outer`` (n_outer, n): (n_outer, n_inner)
    each, from power sums of the row-centred values.  With k > 0 the rows are sorted and
    a draw of one of a row's k largest is threshold + mean excess * E (:func:`_tail`),
    the exponentials E drawn independently for every row and inner resample
    (:func:`_tail_power_sums`): their power sums enter the row's power sums through the
    binomial expansion of (base + scale E)^p."""
    n = outer.shape[1]
    centre = outer.mean(axis=1)
    d = outer - centre[:, None]
    body, tail_sums = counts, []
    if k:
        u, excess = _tail(outer, k)
        tail_sums = _tail_power_sums(rng, counts[:, n - k:].sum(axis=1), outer.shape[0])
        body, d, base = counts[:, :n - k], d[:, :n - k], u - centre
    s = []
    for p in (1, 2, 3):
        total = d ** p @ body.T
        for q in range(p + 1) if k else ():
            total = total + (comb(p, q) * base ** (p - q) * excess ** q)[:, None] * tail_sums[q]
        s.append(total / n)
    s1, s2, s3 = s
    var = (s2 - s1 * s1) / (n - 1)
    k3 = (s3 - s1 * (3 * s2 - 2 * s1 * s1)) / n ** 2
    return centre[:, None] + s1, var, k3


def _iterated_moments(rng, draws, sizes, n_calibrate: int, n_inner: int):
    """The sum's estimate, variance and third cumulant in ``n_inner`` inner resamples of
    each of the first ``n_calibrate`` outer resamples (arrays (n_calibrate, n_inner)),
    each sample resampled from its own smoothed tail (``sizes``: its k, 0 for none)."""
    est_bb = var_bb = k3_bb = 0.0
    for (draw, sign), k in zip(draws, sizes):
        outer = np.sort(draw[:n_calibrate], axis=1) if k else draw[:n_calibrate]
        mean, var_i, k3_i = _inner_moments(outer, _resample_counts(rng, draw.shape[1], n_inner),
                                           k, rng)
        est_bb, var_bb, k3_bb = est_bb + sign * mean, var_bb + var_i, k3_bb + sign ** 3 * k3_i
    return est_bb, var_bb, k3_bb


def _prepivots(outer: np.ndarray, h_inner: np.ndarray) -> np.ndarray:
    """u* of each outer resample: the share of its inner h** below its h* ``outer``
    (ties count half; non-finite values left out), uniform were the bootstrap exact."""
    usable = np.isfinite(h_inner)
    below = np.sum((h_inner < outer[:, None]) & usable, axis=1)
    ties = np.sum((h_inner == outer[:, None]) & usable, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (below + ties / 2) / usable.sum(axis=1)
    return u[np.isfinite(outer) & np.isfinite(u)]


def skew_corrected_interval(parts, *, level: float = 0.95, n_boot: int = 4000,
                            n_calibrate: int = 1000, n_inner: int = 200, tail: bool = True,
                            seed=0) -> tuple[float, float, float, float]:
    """Estimate, standard error and interval at ``level`` of sum_k sign_k * mean(values_k)
    over independent samples ``parts = [(values, sign)]``: a bootstrap of Hall's
    skewness-corrected studentised statistic from samples whose largest values are
    smoothed into an exponential tail, each end's nominal level calibrated by a second
    (iterated) bootstrap of the same kind.

    With T = (estimate - truth) / se and g the skewness of the estimate estimated from the
    samples (third cumulant sum_k sign_k^3 m3_k / n_k^2 over se^3), Hall's transformation
    h(T) = T + g T^2 / 3 + g^2 T^3 / 27 + g / 6 is monotone and removes the skew of T to
    order 1/n.  Its distribution comes from ``n_boot`` resamples of each sample on its
    own (h*(T*) with g* recomputed per resample; fixed ``seed``), mapped back through h's
    closed-form inverse.

    ``tail`` (the default): the resamples are drawn not from the sample itself but from
    the sample with its k = :func:`tail_size` (n) largest values (of sign * values, the
    side that lengthens the sum's upper tail) replaced by an exponential tail: a draw of
    one of them becomes u + s * Exp(1), u the (k+1)-th largest value and s the mean
    excess of the k largest over u (the maximum-likelihood
    exponential fit to the excesses, peaks over a threshold).  That distribution has the
    sample's mean, so the bootstrap's truth is still the estimate, but unlike the sample
    it reaches beyond the largest value drawn: a resample can hold a term larger than any
    run produced, as a new set of runs can.  It is a stated assumption about the upper
    tail of each sample (no heavier than exponential beyond its k-th largest value; true
    of chi-square-like log density ratios), which a plain resample (``tail=False``)
    replaces by "no tail beyond the sample's maximum".  Between two Gaussians at 20 runs
    per side it took 0.8 to 1.3 points off the upper miss rate; at 100 runs it did not
    help (docs/method/intervals.md).

    The ends are then calibrated (Hall and Martin 1988, Beran's prepivoting): the first
    ``n_calibrate`` resamples are each resampled ``n_inner`` times from their own smoothed
    tail (fresh exponential draws for each of them), giving u* = the share of its own
    h** below its h* (ties count half); had the bootstrap been exact, u* would be uniform.  The quantiles of u* at (1 -/+ level) / 2
    replace those nominal levels in the quantiles of h*.  The inner resamples' moments are
    power sums by matrix product, about 6 * n_calibrate * n_inner * n multiply-adds per
    sample.  With fewer than 2 values in a sample the se and the interval are NaN.
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
    if tail:  # the tail is smoothed where it lengthens the sum's upper tail
        arrays = [(np.sort(sign * v), 1.0) for v, sign in arrays]
    sizes = [tail_size(v.size) if tail else 0 for v, _ in arrays]
    rng = np.random.default_rng(seed)
    draws = [(_tail_draws(rng, v, n_boot, k), sign) for (v, sign), k in zip(arrays, sizes)]
    est_b, var_b, k3_b = _moments(draws)
    est_bb, var_bb, k3_bb = _iterated_moments(rng, draws, sizes, n_calibrate, n_inner)
    with np.errstate(divide="ignore", invalid="ignore"):
        se_b, se_bb = np.sqrt(var_b), np.sqrt(var_bb)
        h = _hall((est_b - estimate) / se_b, k3_b / se_b ** 3)
        h_inner = _hall((est_bb - est_b[:n_calibrate, None]) / se_bb, k3_bb / se_bb ** 3)
    u = _prepivots(h[:n_calibrate], h_inner)
    h = h[np.isfinite(h)]  # a resample of identical values has none
    if u.size == 0 or h.size == 0:  # every resample degenerate (a handful of values)
        return estimate, se, np.nan, np.nan
    levels = np.quantile(u, [(1 - level) / 2, (1 + level) / 2])
    q_low, q_high = np.quantile(h, levels)
    return (estimate, se, float(estimate - se * _hall_inverse(q_high, gamma)),
            float(estimate - se * _hall_inverse(q_low, gamma)))

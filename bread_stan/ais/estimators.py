"""Estimators built from per-chain AIS log estimates (SPEC section 2).

Inputs are plain arrays: ``lower`` holds the forward chains' log estimates L_i
(stochastic lower bounds on log p(y)) and ``upper`` the reverse chains' U_j
(stochastic upper bounds).  Everything here is arithmetic on those arrays, in
log space; nothing runs a sampler.

- :func:`jeffreys_bound`: B = mean(U) - mean(L), which upper-bounds the Jeffreys
  divergence between the forward chain's output and the posterior in
  expectation, with a normal or bootstrap confidence interval.
- :func:`log_ml_sandwich`: log-mean-exp(L) and -log-mean-exp(-U), the tighter
  stochastic bounds on log p(y), each with a one-sided confidence limit on log p(y)
  that holds however heavy-tailed the weights are (:mod:`.intervals`).
- :func:`consistency_check`: a test, exact under the AIS tail bounds, of whether
  the reverse estimates sit further below the forward ones than chance allows:
  the signature of a simulator that disagrees with the model, or a wrong kernel.
  Assumption-free, so it has little power: it needs a gap of tens of nats.
- :func:`sign_test`: a one-sided test of E[U] - E[L] >= 0 from the chains'
  spread (Welch's t: Student's t with Welch-Satterthwaite degrees of freedom), with
  the power the tail-bound test lacks.
- :func:`grouped_bound`: the multi-draw bound, averaged over K simulated data
  sets, with an interval from the spread between data sets.
- :func:`one_sided_bounds`: KL(q || p) and KL(p || q) bounds from a trusted
  bound on log p(y), refused (NaN) when the estimates contradict the given bound.
- :func:`bidirectional_log_ml`: Bennett's acceptance-ratio estimate of log p(y) from
  both directions at once (an estimate, not a bound).

With one exact draw x*, all reverse chains start from the same point, so the
interval of :func:`jeffreys_bound` and the sign test are *conditional on x**:
they see the chain-to-chain spread given x*, not the spread of the reverse
estimates over x* ~ posterior, and E[U | x*] - E[L] >= J need not hold for one
x* (the inequality holds on average over x*).  :func:`grouped_bound` on K
independent simulated problems measures the spread between problems instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats
from scipy.optimize import brentq
from ..errors import InputError

from .intervals import lower_limit, studentized_interval, upper_limit

__all__ = [
    "log_mean_exp", "JeffreysBound", "jeffreys_bound", "Sandwich", "log_ml_sandwich",
    "ConsistencyCheck", "consistency_check", "one_sided_bounds", "SignTest", "sign_test",
    "grouped_bound", "welch_df", "bidirectional_log_ml",
]


def _estimates(x, name: str, allowed_inf: float) -> np.ndarray:
    """Per-chain log estimates as a 1-d array.

    An infinite value is legitimate on one side only: a forward chain whose
    prior draw has zero likelihood has L = -inf (weight 0); a reverse chain
    may have U = +inf (a vacuous upper bound, from a log likelihood of +inf).
    A reverse chain through a point of zero likelihood would have logw_rev =
    +inf and so U = -inf, an upper bound of -inf on log p(y); it cannot happen
    in a correct run (every state it scores is an exact posterior draw or the
    output of a kernel at beta > 0, where the likelihood is positive).  NaN, or
    the other infinity, means the run is broken.
    """
    x = np.asarray(x, dtype=float).ravel()
    if x.size == 0:
        raise InputError(f"{name}: no chains")
    bad = np.isnan(x) | (np.isinf(x) & (x != allowed_inf))
    if np.any(bad):
        raise InputError(f"{name}: {int(bad.sum())} of {x.size} chains have an invalid "
                         "(NaN or wrong-signed infinite) log estimate; inspect the run's "
                         "diagnostics (divergences, rejected start points)")
    return x


def _lower(x) -> np.ndarray:
    return _estimates(x, "forward estimates", -np.inf)


def _upper(x) -> np.ndarray:
    return _estimates(x, "reverse estimates", np.inf)


def log_mean_exp(x: np.ndarray) -> float:
    """``log(mean(exp(x)))`` computed without overflow."""
    x = np.asarray(x, dtype=float).ravel()
    m = np.max(x)
    if not np.isfinite(m):
        return float(m)
    return float(m + np.log(np.mean(np.exp(x - m))))


def _log_mean_exp_se(x: np.ndarray) -> float:
    """Delta-method standard error of log-mean-exp: sd(w) / (sqrt(n) mean(w))."""
    if x.size < 2:
        return float("nan")
    w = np.exp(x - np.max(x))
    return float(np.std(w, ddof=1) / (np.sqrt(x.size) * np.mean(w)))


@dataclass(frozen=True)
class JeffreysBound:
    """B = mean(U) - mean(L) with a confidence interval at ``level``.

    ``df``: degrees of freedom of ``std_error`` (Welch-Satterthwaite over the two
    directions' chains; K - 1 for the multi-draw bound over K problems; inf when
    unknown, read as normal), which :func:`sign_test` uses.
    """

    estimate: float
    std_error: float
    ci_low: float
    ci_high: float
    level: float
    method: str
    n_forward: int
    n_reverse: int
    df: float = float("inf")

    def as_dict(self) -> dict:
        return asdict(self)


def jeffreys_bound(lower, upper, *, level: float = 0.95, method: str = "studentized",
                   n_boot: int = 2000, seed: int = 0) -> JeffreysBound:
    """Estimate of the Jeffreys-divergence bound B = mean(U) - mean(L).

    Per-chain log estimates are averaged as they are (not log-mean-exp): the
    inequality E[U] - E[L] >= J is about expectations of per-chain estimates.
    ``method`` is ``"studentized"`` (bootstrap-t over both directions' chains, each
    resampled on its own: corrects the skew of the chains' estimates; the default),
    ``"normal"`` (estimate +- z se) or ``"bootstrap"`` (percentile interval).  With one
    exact draw the interval covers E[U | x*] - E[L], the bound given that draw.
    """
    L = _lower(lower)
    U = _upper(upper)
    estimate = float(np.mean(U) - np.mean(L))
    if not np.isfinite(estimate):  # a chain with zero weight: the bound is vacuous
        return JeffreysBound(np.inf, np.inf, np.inf, np.inf, level, method, L.size, U.size)
    var_u = np.var(U, ddof=1) / U.size if U.size > 1 else np.nan
    var_l = np.var(L, ddof=1) / L.size if L.size > 1 else np.nan
    se = float(np.sqrt(var_u + var_l))
    df = welch_df(var_l, L.size, var_u, U.size)
    if method == "studentized":
        _, _, lo, hi = studentized_interval([(U, 1), (L, -1)], level=level, n_boot=n_boot,
                                            seed=seed)
    elif method == "normal":
        z = stats.norm.ppf(0.5 + level / 2)
        lo, hi = estimate - z * se, estimate + z * se
    elif method == "bootstrap":
        rng = np.random.default_rng(seed)
        bu = U[rng.integers(0, U.size, size=(n_boot, U.size))].mean(axis=1)
        bl = L[rng.integers(0, L.size, size=(n_boot, L.size))].mean(axis=1)
        lo, hi = np.quantile(bu - bl, [0.5 - level / 2, 0.5 + level / 2])
    else:
        raise InputError(f"unknown interval method {method!r}; use 'studentized', 'normal' "
                         "or 'bootstrap'")
    return JeffreysBound(estimate, se, float(lo), float(hi), level, method, L.size, U.size,
                         df)


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom of the standard error of a difference of
    two independent means, from each mean's variance ``var`` (s^2 / n) and sample
    size; inf when both variances are 0 (and NaN when either is)."""
    total = var_a + var_b
    if not np.isfinite(total):
        return float("nan")
    if total == 0:
        return float("inf")
    a, b = var_a / total, var_b / total     # scaled: total ** 2 overflows past 1e154
    return float(1.0 / (a ** 2 / (n_a - 1) + b ** 2 / (n_b - 1)))


@dataclass(frozen=True)
class Sandwich:
    """Stochastic bounds on log p(y): ``lower`` <= log p(y) <= ``upper`` in expectation.

    ``lower_limit`` and ``upper_limit`` are one-sided confidence limits at ``level``:
    P(log p(y) >= lower_limit) >= level and P(log p(y) <= upper_limit) >= level, each
    on its own, for any distribution of the chains' weights (:mod:`.intervals`; they
    assume only exact starting draws and correct kernels).  The lower limit is a
    test-martingale bound over independent forward chains; the upper limit, with
    reverse chains that share one exact draw (``reverse_independent=False``), is
    Markov's inequality on their mean weight: ``upper + log(1 / (1 - level))``.
    ``lower_se`` and ``upper_se`` are delta-method standard errors of the
    log-mean-exps, a measure of spread only: ``lower - k * lower_se`` is not a
    confidence limit when the weights are heavy-tailed.
    """

    lower: float
    lower_se: float
    upper: float
    upper_se: float
    lower_limit: float = float("nan")
    upper_limit: float = float("nan")
    level: float = 0.95

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def contains(self, value: float, n_se: float = 0.0) -> bool:
        """Whether ``value`` lies inside, widened by ``n_se`` standard errors on each side."""
        return (self.lower - n_se * self.lower_se <= value <= self.upper + n_se * self.upper_se)

    def covers(self, value: float) -> bool:
        """Whether ``value`` lies between the two confidence limits (probability at least
        ``2 * level - 1`` for the true log p(y))."""
        return bool(self.lower_limit <= value <= self.upper_limit)

    def as_dict(self) -> dict:
        return asdict(self)


def log_ml_sandwich(lower, upper, *, level: float = 0.95,
                    reverse_independent: bool = False) -> Sandwich:
    """log-mean-exp of forward estimates and minus log-mean-exp of minus reverse ones,
    with one-sided confidence limits on log p(y) at ``level`` (see :class:`Sandwich`).

    ``reverse_independent``: each reverse chain started from its own independent exact
    draw (a tighter upper limit); the default assumes they share one, as in BREAD.
    """
    L = _lower(lower)
    U = _upper(upper)
    return Sandwich(log_mean_exp(L), _log_mean_exp_se(L),
                    -log_mean_exp(-U), _log_mean_exp_se(-U),
                    lower_limit(L, level=level),
                    upper_limit(U, level=level, independent=reverse_independent), level)


@dataclass(frozen=True)
class ConsistencyCheck:
    """Outcome of the test that reverse estimates do not undercut forward ones.

    ``p_value`` is a valid p-value under the hypothesis that the simulator, the
    model and the kernels are right (it uses only the AIS tail bounds, no
    distributional assumption).  ``passed`` is ``p_value >= alpha``.
    """

    passed: bool
    p_value: float
    alpha: float
    sandwich_gap: float
    extreme_gap: float
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


def consistency_check(lower, upper, *, alpha: float = 1e-3) -> ConsistencyCheck:
    """Test whether reverse (upper) estimates sit below forward (lower) ones by more
    than the tail bounds allow.

    Two statistics, each with an exact tail bound when everything is right:

    - sandwich gap g = lme(L) - (-lme(-U)).  Markov's inequality gives
      P(lme(L) > log p + c) <= e^-c and P(-lme(-U) < log p - c) <= e^-c, so
      P(g > c) <= 2 e^(-c/2).
    - extreme gap e = max_i L_i - min_j U_j.  By the per-chain tail bounds and a
      union bound, P(e > c) <= (n + m) e^(-c/2).

    The p-value is the smaller of the two, doubled (Bonferroni), capped at 1.
    """
    L = _lower(lower)
    U = _upper(upper)
    sandwich_gap = log_mean_exp(L) + log_mean_exp(-U)
    extreme_gap = float(np.max(L) - np.min(U))
    p_sandwich = min(1.0, 2.0 * np.exp(min(0.0, -sandwich_gap / 2)))
    p_extreme = min(1.0, (L.size + U.size) * np.exp(min(0.0, -extreme_gap / 2)))
    p_value = float(min(1.0, 2.0 * min(p_sandwich, p_extreme)))
    passed = p_value >= alpha
    if passed:
        message = "reverse estimates lie above forward estimates as they must"
    else:
        message = (
            f"LIKELY BUG: reverse (upper) estimates sit {sandwich_gap:.3g} nats below the "
            f"forward (lower) estimates (log-mean-exp gap; largest single-chain gap "
            f"{extreme_gap:.3g}), which happens with probability at most {p_value:.2g} "
            "when the simulator draws from the model's prior and likelihood and the "
            "kernels are correct. Check that the simulator program matches the model "
            "program (priors, likelihood, parameter names) and the kernel settings. "
            "The Jeffreys bound is not reported as a divergence.")
    return ConsistencyCheck(passed, p_value, alpha, float(sandwich_gap), extreme_gap, message)


@dataclass(frozen=True)
class SignTest:
    """One-sided test of H0: E[U] - E[L] >= 0, which holds whenever the simulator,
    the model and the kernels are right (the bound is an expectation of a divergence).

    ``upper_limit`` is the one-sided upper confidence limit of E[U] - E[L] at
    level 1 - ``alpha``; the test fires (``negative``) when it lies below 0, that
    is when ``p_value`` < ``alpha``.  ``method`` says which spread it uses: the
    chains' (``"chains, given x*"``) or the simulated problems' (``"problems"``).
    """

    negative: bool
    p_value: float
    alpha: float
    estimate: float
    upper_limit: float
    method: str

    def as_dict(self) -> dict:
        return asdict(self)


def sign_test(bound: JeffreysBound, *, alpha: float = 0.01,
              df: float | None = None) -> SignTest:
    """Test whether B = mean(U) - mean(L) lies below 0 by more than its standard error
    allows: t = B / se, p = P(T <= t) for Student's t with ``df`` degrees of freedom
    (default the bound's own: Welch-Satterthwaite over the chains for
    :func:`jeffreys_bound`, K - 1 for a mean over K simulated problems; normal when
    infinite).

    Welch's t, not the normal: with 30 + 30 chains (about 58 degrees of freedom) the
    normal quantile gives a test of size 0.0063 where it claims 0.005, 25% over, at
    the boundary E[U] - E[L] = 0 where a run close to convergence works.

    A vacuous (infinite) bound never fires.  With a single exact draw this tests
    E[U | x*] - E[L] >= 0, which an unlucky x* can violate when the bound is
    close to 0 (the module docstring); with K problems (``df = K - 1``) it tests
    the unconditional expectation.
    """
    if not 0 < alpha < 1:
        raise InputError("alpha must lie in (0, 1)")
    est, se = bound.estimate, bound.std_error
    method = "chains, given x*" if df is None else "problems"
    df = bound.df if df is None else df
    if not np.isfinite(est) or not np.isfinite(se):
        return SignTest(False, 1.0, alpha, est, np.inf, method)
    dist = stats.t(df) if np.isfinite(df) and df > 0 else stats.norm
    if se > 0:
        p = float(dist.cdf(est / se))
    else:
        p = 0.0 if est < 0 else 1.0
    upper = float(est + dist.ppf(1 - alpha) * se)
    return SignTest(p < alpha, p, alpha, est, upper, method)


def grouped_bound(lower, upper, lower_groups, upper_groups, *,
                  level: float = 0.95) -> tuple[JeffreysBound, np.ndarray]:
    """The multi-draw bound: B_k = mean(U_k) - mean(L_k) on each of K simulated problems
    (data set y*_k with its exact draw x*_k), averaged over k.

    Its expectation bounds the expected Jeffreys divergence over data sets of the
    model, E_y[J(p(.|y), q_y)].  The interval is a Student-t interval from the
    spread of the B_k (K - 1 degrees of freedom), which covers the variation
    from one exact draw and one data set to the next.  Returns the bound (method
    ``"problems"``) and the per-problem B_k.
    """
    L, U = _lower(lower), _upper(upper)
    gl = np.asarray(lower_groups).ravel()
    gu = np.asarray(upper_groups).ravel()
    if gl.size != L.size or gu.size != U.size:
        raise InputError("one group label per chain is needed in each direction")
    labels = np.unique(gl)
    if not np.array_equal(labels, np.unique(gu)):
        raise InputError("forward and reverse chains must cover the same problems")
    per = np.array([np.mean(U[gu == k]) - np.mean(L[gl == k]) for k in labels])
    K = per.size
    estimate = float(np.mean(per))
    if not np.isfinite(estimate):
        return JeffreysBound(np.inf, np.inf, np.inf, np.inf, level, "problems", L.size,
                             U.size), per
    if K < 2:
        raise InputError("the multi-draw interval needs at least 2 simulated problems")
    se = float(np.std(per, ddof=1) / np.sqrt(K))
    half = stats.t.ppf(0.5 + level / 2, df=K - 1) * se
    return JeffreysBound(estimate, se, estimate - half, estimate + half, level, "problems",
                         L.size, U.size, float(K - 1)), per


def one_sided_bounds(lower, upper, *, known_upper: float | None = None,
                     known_lower: float | None = None,
                     alpha: float = 0.01) -> dict[str, float]:
    """KL bounds from a trusted bound on log p(y) (SPEC section 2).

    With a trusted upper bound U*, ``U* - mean(L)`` bounds KL(q_fwd || p) (key
    ``kl_q_p``); with a trusted lower bound L*, ``mean(U) - L*`` bounds KL(p || q_fwd)
    (``kl_p_q``).  Each comes with the p-value (``kl_q_p_p``, ``kl_p_q_p``) of a z test
    of its expectation being >= 0, as in :func:`sign_test`: below ``alpha`` the estimates
    contradict the given bound (the forward estimates, stochastic lower bounds, sit above
    U*, or the reverse ones below L*), so the given value is no bound on log p(y) and
    the KL bound is NaN, not a negative divergence.
    """
    out: dict[str, float] = {}
    for key, known, terms, sign in (("kl_q_p", known_upper, lambda: _lower(lower), -1),
                                    ("kl_p_q", known_lower, lambda: _upper(upper), 1)):
        if known is None:
            continue
        x = terms()
        estimate = float(sign * (np.mean(x) - known))
        se = float(np.std(x, ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan
        if np.isfinite(estimate) and se > 0:
            p = float(stats.norm.cdf(estimate / se))
        else:  # an infinite estimate, one chain (se NaN) or chains that all agree
            p = 0.0 if se == 0 and estimate < 0 else 1.0
        out[key] = estimate if p >= alpha else np.nan
        out[f"{key}_p"] = p
    return out


def bidirectional_log_ml(lower, upper) -> float:
    """Bennett's acceptance-ratio (BAR) estimate of log p(y) from forward estimates L_i
    and reverse estimates U_j: the root c of

        sum_i sigmoid(L_i - c - M) = sum_j sigmoid(c - U_j + M),   M = log(n_L / n_U).

    Why it holds: a reverse AIS path started from an exact posterior draw has density
    exp(L - log p(y)) times a forward path's, where L is the forward log weight of the
    same path (Crooks' relation; U is that functional on the reverse path).  So the
    forward and reverse estimates are two samples related by a known tilt, and Bennett's
    equation gives the minimum-variance consistent estimate of the tilt's constant.  It
    is exact (c = log p(y)) when every chain is; it uses the reverse chains the bound
    runs anyway, and it is far less biased than either end of the sandwich when the
    two directions overlap.  It is an estimate, not a bound, and it assumes each reverse
    chain starts from an exact posterior draw (with one shared draw x*, as in BREAD's
    default, the root is consistent over x* but its spread given x* is understated).
    """
    L = _lower(lower)
    U = _upper(upper)
    if not (np.all(np.isfinite(L)) and np.all(np.isfinite(U))):
        return float("nan")
    shift = np.log(L.size / U.size)

    def gap(c: float) -> float:   # decreasing in c
        return float(np.sum(_sigmoid(L - c - shift)) - np.sum(_sigmoid(c - U + shift)))

    low = min(L.min(), U.min()) - abs(shift) - 50.0
    high = max(L.max(), U.max()) + abs(shift) + 50.0
    # A stranded chain can put the bracket's end at -1e84, where the sigmoids are flat
    # and Brent bisects: 1,100 halvings narrow any double-precision bracket to xtol.
    return float(brentq(gap, low, high, xtol=1e-12, rtol=1e-14, maxiter=1100))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))

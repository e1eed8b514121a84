"""Estimators on per-chain log estimates: exact arithmetic and the validity of the
consistency test's p-value under the AIS tail bounds."""

import numpy as np
import pytest

from bread_stan.ais.estimators import (consistency_check, jeffreys_bound, log_mean_exp,
                                   log_ml_sandwich, one_sided_bounds)


def _unbiased_log_estimates(rng, log_z, n, sigma):
    """Log of unbiased estimators of exp(log_z): lognormal weights with mean exp(log_z)."""
    return log_z - sigma**2 / 2 + sigma * rng.standard_normal(n)


def test_log_mean_exp_matches_naive_and_does_not_overflow():
    x = np.array([-1.0, 0.5, 2.0])
    assert log_mean_exp(x) == pytest.approx(np.log(np.mean(np.exp(x))), rel=1e-14)
    assert log_mean_exp(x + 1e4) == pytest.approx(log_mean_exp(x) + 1e4, rel=1e-14)


def test_jeffreys_bound_is_difference_of_means_with_normal_interval():
    L = np.array([-10.0, -11.0, -12.0, -9.0])
    U = np.array([-8.0, -7.5, -8.5])
    # The normal interval is no longer the default (issue 29: the studentised bootstrap
    # corrects the skew of per-chain estimates), so it is asked for by name.
    b = jeffreys_bound(L, U, level=0.9, method="normal")
    assert b.estimate == pytest.approx(np.mean(U) - np.mean(L))
    se = np.sqrt(np.var(U, ddof=1) / 3 + np.var(L, ddof=1) / 4)
    assert b.std_error == pytest.approx(se)
    assert b.ci_high - b.estimate == pytest.approx(1.6448536 * se, rel=1e-6)


def test_bootstrap_interval_agrees_with_normal_for_many_chains():
    rng = np.random.default_rng(1)
    L, U = rng.normal(-5, 1, 400), rng.normal(-3, 1, 400)
    normal = jeffreys_bound(L, U, method="normal")
    # Both intervals have half-width ~1.96 * 0.0707; bootstrap quantiles carry
    # a few percent Monte Carlo error at 4000 resamples.
    for method in ("bootstrap", "studentized"):
        boot = jeffreys_bound(L, U, method=method, n_boot=4000, seed=2)
        assert boot.ci_low == pytest.approx(normal.ci_low, abs=0.02)
        assert boot.ci_high == pytest.approx(normal.ci_high, abs=0.02)
    assert jeffreys_bound(L, U).ci_low == jeffreys_bound(L, U, method="studentized").ci_low


def test_studentized_interval_reaches_further_on_the_side_of_the_skew():
    # Forward estimates with a long left tail (a few stranded chains) make
    # mean(U) - mean(L) right-skewed: a sample without its rare stranded chains falls
    # short of the expectation, so the interval must reach further above the estimate
    # than below (measured 1.26 and 0.54 nats; the normal interval: 0.70 both ways).
    rng = np.random.default_rng(3)
    L = -rng.exponential(1.0, 30) ** 2
    U = rng.normal(0.0, 0.1, 30)
    b = jeffreys_bound(L, U, level=0.9)
    assert b.ci_high - b.estimate > 1.5 * (b.estimate - b.ci_low)


def test_invalid_estimates_are_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="invalid"):
        jeffreys_bound([0.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="invalid"):
        jeffreys_bound([0.0, np.inf], [1.0, 2.0])


def test_zero_weight_chains_give_a_vacuous_bound_but_a_valid_sandwich():
    L, U = np.array([-np.inf, -1.0, -1.2]), np.array([-0.5, np.inf, -0.7])
    assert jeffreys_bound(L, U).estimate == np.inf
    s = log_ml_sandwich(L, U)
    assert s.lower == pytest.approx(np.log(np.mean(np.exp([-np.inf, -1.0, -1.2]))))
    assert s.upper == pytest.approx(-np.log(np.mean(np.exp([0.5, -np.inf, 0.7]))))
    assert consistency_check(L, U).passed


def test_sandwich_contains_truth_for_unbiased_estimators():
    rng = np.random.default_rng(3)
    L = _unbiased_log_estimates(rng, 0.0, 200, 1.0)
    U = -_unbiased_log_estimates(rng, 0.0, 200, 1.0)  # exp(-U) unbiased for exp(-log_z)
    s = log_ml_sandwich(L, U)
    # Delta-method SE is ~ sqrt((e - 1) / 200) ~ 0.093; allow 4 SE.
    assert s.contains(0.0, n_se=4)
    assert s.lower == pytest.approx(0.0, abs=4 * s.lower_se)


def test_consistency_p_value_is_valid_under_the_null():
    """Under correct AIS, P(reject) <= alpha.  With 2000 replications at alpha = 0.2 the
    rejection rate's MC sd is <= 0.009; allow rate <= alpha + 4 sd (the test is
    conservative, so in practice the rate is far below)."""
    rng = np.random.default_rng(4)
    alpha, reps = 0.2, 2000
    rejections = 0
    for _ in range(reps):
        L = _unbiased_log_estimates(rng, 0.0, 20, 2.0)
        U = -_unbiased_log_estimates(rng, 0.0, 20, 2.0)
        rejections += not consistency_check(L, U, alpha=alpha).passed
    assert rejections / reps <= alpha + 4 * np.sqrt(alpha * (1 - alpha) / reps)


def test_consistency_check_fires_when_reverse_undercuts_forward():
    rng = np.random.default_rng(5)
    L = _unbiased_log_estimates(rng, 0.0, 50, 0.5)
    U = -_unbiased_log_estimates(rng, 30.0, 50, 0.5)  # reverse "upper" bounds 30 nats too low
    check = consistency_check(L, U)
    assert not check.passed
    assert check.p_value < 1e-3
    assert "LIKELY BUG" in check.message


def test_one_sided_bounds():
    L, U = np.array([-3.0, -5.0]), np.array([-1.0, -2.0])
    out = one_sided_bounds(L, U, known_upper=-1.5, known_lower=-4.0)
    assert out["kl_q_p"] == pytest.approx(2.5) and out["kl_p_q"] == pytest.approx(2.5)
    assert out["kl_q_p_p"] > 0.9 and out["kl_p_q_p"] > 0.9


def test_a_known_bound_the_estimates_contradict_gives_no_kl_bound():
    """A 'trusted' upper bound 1 nat below log p(y) = 0 (or a lower bound 1 nat above) is
    refused, not printed as a negative KL; the exact value passes at the test's level."""
    rng = np.random.default_rng(3)
    L = _unbiased_log_estimates(rng, 0.0, 50, 0.5)
    U = -_unbiased_log_estimates(rng, 0.0, 50, 0.5)
    out = one_sided_bounds(L, U, known_upper=-1.0, known_lower=1.0)
    assert np.isnan(out["kl_q_p"]) and np.isnan(out["kl_p_q"])
    assert out["kl_q_p_p"] < 1e-6 and out["kl_p_q_p"] < 1e-6
    # The exact log p(y) as both bounds: E[U* - L] = sigma^2 / 2 >= 0, so refusals are
    # false alarms, at most alpha = 0.01 of 400 trials (P(more than 12) < 1e-4).
    refused = 0
    for _ in range(400):
        L = _unbiased_log_estimates(rng, 0.0, 50, 0.5)
        U = -_unbiased_log_estimates(rng, 0.0, 50, 0.5)
        out = one_sided_bounds(L, U, known_upper=0.0, known_lower=0.0)
        refused += np.isnan(out["kl_q_p"]) + np.isnan(out["kl_p_q"])
    assert refused <= 12


def test_a_stranded_chain_of_astronomical_log_weight_is_summarised_not_a_crash():
    """posteriordb's soil_incubation (an ODE model) left one forward chain of 30 at a
    log weight of -6.8e83 (started from q where the ODE's likelihood is absurd): the
    BAR root-finder ran out of iterations bisecting a 1e84-wide bracket, and the Welch
    degrees of freedom overflowed (total ** 2 past 1e154), so the run ended in an
    internal error after its AIS was done.  Exact checks: the BAR estimate is the root
    of Bennett's equation without the stranded chain's term (its sigmoid is exactly 0
    at any plausible root; the shift log(n_L / n_U) = 0 stays), solved here on a narrow
    bracket, to 1e-9; and the Welch df is scale-free (the same at variances 1e200
    times larger).  Breaks tried: brentq's default 100 iterations (RuntimeError, the
    bug), and the unscaled Welch formula (OverflowError)."""
    from scipy.optimize import brentq

    from bread_stan.ais.estimators import bidirectional_log_ml, welch_df
    rng = np.random.default_rng(3)
    L = -37.2 + 0.3 * rng.standard_normal(30)
    U = -37.3 + 0.3 * rng.standard_normal(30)
    stranded = L.copy()
    stranded[8] = -6.784e83
    kept = np.delete(L, 8)

    def gap(c):
        return (np.sum(1 / (1 + np.exp(-(kept - c)))) - np.sum(1 / (1 + np.exp(-(c - U)))))
    assert bidirectional_log_ml(stranded, U) == pytest.approx(
        brentq(gap, -60.0, -20.0, xtol=1e-13), abs=1e-9)
    assert welch_df(2e200, 30, 1e200, 30) == pytest.approx(welch_df(2.0, 30, 1.0, 30),
                                                           rel=1e-12)
    assert np.isfinite(jeffreys_bound(stranded, U).df)

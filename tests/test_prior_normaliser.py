"""The prior normaliser c by importance sampling (bread_stan.ais.prior_normaliser).

Known answers: unconstrained-space priors (Jacobians included, all constants kept) whose
normaliser is known in closed form: a half-normal scale and a half-Cauchy scale (1/2
each: the untruncated density on a positive parameter), a hierarchical funnel (Neal's
funnel, log-scale v ~ normal(0, 1), two effects normal(0, exp(v)), with a half-normal
scale beside it: 1/2; a deeper neck, normal(0, 1.5) and three effects, makes p0~/g
reach e^10 there and the weights' Pareto k 0.8, flagged as untrustworthy), and a bounded uniform (``uniform(0, 2)`` on a parameter in
[0, 1]: 1/2), and a product of three of them (1/8).  Each estimate must lie within 4 of
its own standard errors of log c (a false failure is a 6e-5 event per case when the
standard error is right) and its weights must have a light tail (Pareto k <= 0.7).

Exact: the defensive mixture keeps p0~/g bounded out to |u| = 60 along every axis and
diagonal on the half-Cauchy and funnel priors; the light-tailed Gaussian alone does not
(the negative case: its ratio grows without bound), which is why it is not used.
Seed invariance: same seed, same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from bread_stan.ais.prior_normaliser import DefensiveProposal, estimate_log_normaliser
from bread_stan.errors import InputError

N_SE = 4.0
LOG_HALF = float(np.log(0.5))
_LOG_2PI = float(np.log(2 * np.pi))


def _normal(x, sd):
    return -0.5 * (x / sd) ** 2 - np.log(sd) - 0.5 * _LOG_2PI


def half_normal(u):  # sigma = exp(u) ~ normal(0, 2), untruncated: c = 1/2
    with np.errstate(over="ignore", invalid="ignore"):
        return _normal(np.exp(u[:, 0]), 2.0) + u[:, 0]


def half_cauchy(u):  # sigma = exp(u) ~ cauchy(0, 2.5), untruncated: c = 1/2
    with np.errstate(over="ignore"):
        s = np.exp(u[:, 0])
        return -np.log(np.pi * 2.5) - np.log1p((s / 2.5) ** 2) + u[:, 0]


def funnel(u):  # v ~ normal(0, 1), x_j ~ normal(0, exp(v)), tau = exp(u_3) ~ half-normal
    v = u[:, 0]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = np.exp(v)[:, None]
        effects = np.sum(_normal(u[:, 1:3], scale), axis=1)
        tau = np.exp(u[:, 3])
        out = _normal(v, 1.0) + effects + _normal(tau, 1.0) + u[:, 3]
        return np.where(np.isnan(out), -np.inf, out)


def bounded_uniform(u):  # theta = logistic(u) in [0, 1], theta ~ uniform(0, 2): c = 1/2
    return np.log(0.5) - np.logaddexp(0, -u[:, 0]) - np.logaddexp(0, u[:, 0])


def product(u):  # the half-normal, the half-Cauchy and the bounded uniform: c = 1/8
    return half_normal(u[:, :1]) + half_cauchy(u[:, 1:2]) + bounded_uniform(u[:, 2:3])


def draws_half_normal(rng, n):
    return np.log(np.abs(rng.normal(0, 2.0, (n, 1))))


def draws_half_cauchy(rng, n):
    return np.log(np.abs(2.5 * rng.standard_cauchy((n, 1))))


def draws_funnel(rng, n):
    v = rng.normal(0, 1.0, n)
    x = rng.normal(0, 1, (n, 2)) * np.exp(v)[:, None]
    return np.column_stack([v, x, np.log(np.abs(rng.normal(0, 1, n)))])


def draws_bounded_uniform(rng, n):
    return special.logit(rng.random((n, 1)))


def draws_product(rng, n):
    return np.column_stack([draws_half_normal(rng, n), draws_half_cauchy(rng, n),
                            draws_bounded_uniform(rng, n)])


CASES = {
    "half_normal": (half_normal, draws_half_normal, LOG_HALF),
    "half_cauchy": (half_cauchy, draws_half_cauchy, LOG_HALF),
    "funnel": (funnel, draws_funnel, LOG_HALF),
    "bounded_uniform": (bounded_uniform, draws_bounded_uniform, LOG_HALF),
    "product": (product, draws_product, 3 * LOG_HALF),
}


@pytest.mark.parametrize("name", list(CASES))
def test_estimate_is_within_its_own_standard_errors_of_the_known_normaliser(name):
    density, draws, log_c = CASES[name]
    rng = np.random.default_rng(2024)
    est = estimate_log_normaliser(density, draws(rng, 512), rng)
    assert abs(est.log_c - log_c) < N_SE * est.se, (est.log_c, log_c, est.se)
    assert est.trustworthy, est.pareto_k
    assert 0 < est.se < 0.05  # small against a sandwich's width at the default draws
    assert est.jensen_gap == pytest.approx(0.5 * est.se ** 2)


def _far_points(dim: int) -> np.ndarray:
    """Points out to |u| = 60 along every axis and the two main diagonals."""
    radii = np.concatenate([-np.geomspace(60, 0.1, 40), np.geomspace(0.1, 60, 40)])
    directions = np.vstack([np.eye(dim), np.ones((1, dim)) / np.sqrt(dim),
                            np.r_[1.0, -np.ones(dim - 1)][None, :] / np.sqrt(dim)])
    return (radii[:, None, None] * directions[None, :, :]).reshape(-1, dim)


@pytest.mark.parametrize("name", ["half_cauchy", "funnel", "half_normal"])
def test_the_defensive_mixture_bounds_the_ratio_and_the_gaussian_alone_does_not(name):
    density, draws, log_c = CASES[name]
    g = DefensiveProposal.fit(draws(np.random.default_rng(3), 512))
    gaussian_only = DefensiveProposal(g.loc, g.shape, (1.0, 0.0, 0.0))
    points = g.loc + _far_points(g.dim)
    with np.errstate(over="ignore", invalid="ignore"):
        lp = np.nan_to_num(density(points), nan=-np.inf)
    ratio = lp - g.log_density(points)
    assert np.max(ratio) < log_c + 6  # p0~/g at most e^6 c anywhere out there
    assert np.max(lp - gaussian_only.log_density(points)) > log_c + 50  # unbounded


def test_same_seed_same_numbers_and_bad_input_is_refused():
    density, draws, _ = CASES["funnel"]
    a = estimate_log_normaliser(density, draws(np.random.default_rng(1), 256),
                                np.random.default_rng(9), n_draws=2000)
    b = estimate_log_normaliser(density, draws(np.random.default_rng(1), 256),
                                np.random.default_rng(9), n_draws=2000)
    assert (a.log_c, a.se, a.pareto_k) == (b.log_c, b.se, b.pareto_k)
    with pytest.raises(InputError, match="at least 2d"):
        estimate_log_normaliser(density, draws(np.random.default_rng(1), 5),
                                np.random.default_rng(9))
    with pytest.raises(InputError, match="NaN"):
        estimate_log_normaliser(lambda u: np.full(u.shape[0], np.nan),
                                draws(np.random.default_rng(1), 64), np.random.default_rng(9))


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_proposal_is_a_normalised_density_with_its_own_draws():
    """Importance sampling g from g gives weight exactly 1 at every draw (log c = 0,
    se 0), and g integrates to 1: in 1-D by the trapezoid rule on [-2e4, 2e4] (the
    Cauchy parts' mass beyond is below 1e-4)."""
    g = DefensiveProposal(np.zeros(2), np.array([[1.0, 0.3], [0.3, 2.0]]))
    rng = np.random.default_rng(5)
    est = estimate_log_normaliser(g.log_density, g.sample(rng, 100), rng, n_draws=1000,
                                  proposal=g)
    assert est.log_c == pytest.approx(0.0, abs=1e-12) and est.se == pytest.approx(0, abs=1e-9)
    # 1-D check of normalisation by quadrature along a line through the product part
    one = DefensiveProposal(np.array([0.5]), np.array([[4.0]]))
    x = np.linspace(-2e4, 2e4, 2_000_001)
    mass = np.trapezoid(np.exp(one.log_density(x[:, None])), x)
    assert mass == pytest.approx(1.0, abs=2e-4)  # Cauchy tails beyond 2e4 hold < 1e-4

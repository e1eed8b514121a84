"""Inverse metrics estimated from pilot draws: Stan's regularised variance and
covariance, the choice between a dense and a diagonal metric, the test for pilot
chains that sit apart, in separate modes or a funnel they cross slowly (whose metric must
come from the spread within each chain, not the pooled spread), and the metrics of the
two windows the HMC/NUTS pilot adapts at each grid beta (:func:`arrival_metric`,
:func:`window_metric`).  Used by that pilot (:mod:`bread_stan.ais.tuning`), the IMH
pilot and the reference fits."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..linalg import covariance

__all__ = ["regularised_variance", "regularised_covariance", "metric_from_draws",
           "strongly_correlated", "SEPARATED_RATIO", "within_chain_deviations",
           "chains_separated", "arrival_metric", "window_metric"]


def regularised_variance(draws: np.ndarray, ridge: str = "stan") -> np.ndarray:
    """Stan's shrunk variance estimate for the diagonal inverse metric, over axis 0
    (draws), so (n, d) -> (d,) and (n, chains, d) -> (chains, d).  ``ridge``
    "relative" shrinks toward ``1e-3`` times the variance itself (a floor of the
    smallest positive double keeps it positive), not toward ``1e-3``."""
    n = draws.shape[0]
    var = np.var(draws, axis=0, ddof=1)
    if ridge == "relative":
        return np.maximum((n + 5e-3) / (n + 5.0) * var, np.finfo(float).tiny)
    return (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))


def regularised_covariance(draws: np.ndarray, ridge: str = "stan") -> np.ndarray:
    """Stan's shrunk covariance estimate for the dense inverse metric (``dense_e``):
    ``n / (n + 5) S + 1e-3 * 5 / (n + 5) I`` over draws (n, d); the covariance in a
    fixed order of operations (:func:`bread_stan.linalg.covariance`), not by BLAS.
    ``ridge`` "relative": ``1e-3 * 5 / (n + 5) diag(S)`` in place of the identity's
    multiple (scale-free: the same metric in any units)."""
    n, d = draws.shape
    cov = covariance(draws)
    if ridge == "relative":
        diag = np.maximum(np.diag(cov), np.finfo(float).tiny)
        return (n / (n + 5.0)) * cov + 1e-3 * (5.0 / (n + 5.0)) * np.diag(diag)
    return (n / (n + 5.0)) * cov + 1e-3 * (5.0 / (n + 5.0)) * np.eye(d)


SEPARATED_RATIO = 100.0  # pooled / within-chain variance beyond which chains sit apart


def within_chain_deviations(draws: np.ndarray) -> np.ndarray:
    """Each chain's deviations from its own mean, pooled: draws (T, n, d) of n chains
    over T >= 2 transitions -> (T * n, d), scaled by sqrt(T / (T - 1)) so that their
    variance estimates the mean variance within a chain."""
    t = draws.shape[0]
    deviations = (draws - draws.mean(axis=0)) * np.sqrt(t / (t - 1))
    return deviations.reshape(-1, draws.shape[2])


def chains_separated(draws: np.ndarray, ratio: float = SEPARATED_RATIO) -> bool:
    """Whether chains (draws (T, n, d)) sit apart: some coordinate's
    variance over all the draws exceeds ``ratio`` times its mean variance within a
    chain, and some chain moved in every coordinate (where none moved there is no
    width to measure)."""
    if draws.shape[0] < 2:
        return False
    within = np.var(within_chain_deviations(draws), axis=0)
    pooled = np.var(draws.reshape(-1, draws.shape[2]), axis=0)
    return bool(np.all(within > 0) and np.any(pooled > ratio * within))


def strongly_correlated(cov: np.ndarray, threshold: float) -> bool:
    """Whether some absolute correlation of the covariance ``cov`` (d, d) exceeds
    ``threshold``."""
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd) - np.eye(cov.shape[0])
    return bool(np.max(np.abs(corr), initial=0.0) > threshold)


def metric_from_draws(draws: np.ndarray, choice: str, threshold: float,
                      ridge: str = "stan") -> np.ndarray:
    """A dense inverse metric (d, d) from pooled pilot draws: the regularised
    covariance, or (``auto`` without strong correlation, or too few draws for a
    covariance) its diagonal as a diagonal matrix."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is named just below
        cov = regularised_covariance(draws, ridge)
    if not np.all(np.isfinite(cov)):
        top = float(np.max(np.abs(draws[np.isfinite(draws)]), initial=0.0))
        raise InputError(f"the pilot chains' draws reach |x| = {top:.3g} in the "
                         "unconstrained space, too far apart for a variance in double "
                         "precision (the metric overflows): the prior is too vague for "
                         "this model's scale; give proper, weakly informative priors")
    if choice == "dense":
        return cov
    n, d = draws.shape
    if n >= 10 * d and strongly_correlated(cov, threshold):
        return cov
    return np.diag(np.diag(cov))


def arrival_metric(position: np.ndarray, dense: bool, ridge: str) -> np.ndarray:
    """The pilot's metric for its first window at a grid beta: the regularised spread
    of the chains' ``position`` (n, d) as they arrive there (dense: their covariance,
    as (1, d, d); else their variance (d,))."""
    if dense:
        return metric_from_draws(position, "dense", 1.0, ridge)[None]
    return regularised_variance(position, ridge)


def window_metric(draws: np.ndarray, position: np.ndarray, separated: bool, dense: bool,
                  choice: str, threshold: float, ridge: str) -> np.ndarray:
    """The pilot's metric for its second window at a grid beta, from the first window's
    ``draws`` (steps, chains, d): their spread within each chain where the chains sat
    apart (``separated``); else dense: the pooled draws' (:func:`metric_from_draws`
    with ``choice`` and ``threshold``, as (1, d, d)); diagonal: the chains' variance at
    the window's end, ``position`` (n, d)."""
    if dense:
        pooled = (within_chain_deviations(draws) if separated
                  else draws.reshape(-1, draws.shape[-1]))
        return metric_from_draws(pooled, choice, threshold, ridge)[None]
    return regularised_variance(within_chain_deviations(draws) if separated else position,
                                ridge)

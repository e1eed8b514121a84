"""A Gaussian conjugate model with everything in closed form, as a numpy target.

Bayesian linear regression with known noise: ``w ~ N(0, s^2 I)``,
``y ~ N(X w, sigma^2 I)``.  It implements the :class:`~bread_stan.target.Target`
protocol and knows its exact log marginal likelihood ``log p(y)``, exact prior
and posterior draws, and the exact tempered posterior at any inverse
temperature, so it is the known-answer test of the AIS engine (and a cheap
target for benchmarks and docs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from ..target import Evaluation

__all__ = ["LinearRegression", "simulate_regression"]

_LOG_2PI = float(np.log(2 * np.pi))


@dataclass
class LinearRegression:
    """``w ~ N(0, prior_sd^2 I)``, ``y ~ N(X w, noise_sd^2 I)`` with X (N, d) and y (N,)."""

    X: np.ndarray
    y: np.ndarray
    prior_sd: float = 1.0
    noise_sd: float = 1.0
    _gram: np.ndarray = field(init=False, repr=False)
    _xty: np.ndarray = field(init=False, repr=False)
    _const: float = field(init=False, repr=False)

    def __post_init__(self):
        self.X = np.atleast_2d(np.asarray(self.X, dtype=float))
        self.y = np.asarray(self.y, dtype=float).ravel()
        if self.X.shape[0] != self.y.size:
            raise ValueError(f"X has {self.X.shape[0]} rows but y has {self.y.size} entries")
        if self.prior_sd <= 0 or self.noise_sd <= 0:
            raise ValueError("prior_sd and noise_sd must be positive")
        # The likelihood needs only X'X, X'y and y'y, so a call costs O(n d^2).
        self._gram = self.X.T @ self.X
        self._xty = self.X.T @ self.y
        n_obs = self.y.size
        self._const = (-0.5 * n_obs * (_LOG_2PI + 2 * np.log(self.noise_sd))
                       - 0.5 * float(self.y @ self.y) / self.noise_sd ** 2)

    @property
    def dim(self) -> int:
        return self.X.shape[1]

    def evaluate(self, points: np.ndarray, *, gradient: bool = True) -> Evaluation:
        """Log prior, log likelihood and their gradients at (n, d) points."""
        w = np.asarray(points, dtype=float)
        s2, v = self.prior_sd ** 2, self.noise_sd ** 2
        with np.errstate(all="ignore"):
            # einsum rather than BLAS: each row's result must not depend on the batch.
            gw = np.einsum("ij,jk->ik", w, self._gram)
            log_prior = (-0.5 * np.einsum("ij,ij->i", w, w) / s2
                         - 0.5 * self.dim * (_LOG_2PI + np.log(s2)))
            log_lik = self._const + (np.einsum("ij,j->i", w, self._xty)
                                     - 0.5 * np.einsum("ij,ij->i", w, gw)) / v
            if not gradient:
                return Evaluation(log_prior, log_lik)
            return Evaluation(log_prior, log_lik, -w / s2, (self._xty - gw) / v)

    def tempered_posterior(self, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the density proportional to prior * likelihood^beta."""
        precision = np.eye(self.dim) / self.prior_sd ** 2 + beta * self._gram / self.noise_sd ** 2
        cov = np.linalg.inv(precision)
        cov = 0.5 * (cov + cov.T)
        return cov @ (beta * self._xty / self.noise_sd ** 2), cov

    def log_marginal_likelihood(self) -> float:
        """Exact ``log p(y)``: y ~ N(0, s^2 X X' + sigma^2 I)."""
        cov = self.prior_sd ** 2 * self.X @ self.X.T + self.noise_sd ** 2 * np.eye(self.y.size)
        chol = linalg.cho_factor(cov, lower=True)
        alpha = linalg.cho_solve(chol, self.y)
        log_det = 2 * np.sum(np.log(np.diag(chol[0])))
        return float(-0.5 * (self.y @ alpha + log_det + self.y.size * _LOG_2PI))

    def sample_prior(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Exact prior draws, (n, d)."""
        return self.prior_sd * rng.standard_normal((n, self.dim))

    def sample_posterior(self, rng: np.random.Generator, n: int, beta: float = 1.0) -> np.ndarray:
        """Exact draws from the tempered posterior at ``beta`` (default: the posterior), (n, d)."""
        mean, cov = self.tempered_posterior(beta)
        return mean + rng.standard_normal((n, self.dim)) @ np.linalg.cholesky(cov).T


def simulate_regression(n_obs: int, dim: int, *, prior_sd: float = 1.0, noise_sd: float = 1.0,
                        correlation: float = 0.0, seed: int | np.random.Generator = 0
                        ) -> tuple[LinearRegression, np.ndarray]:
    """Simulate a data set from the model: returns the model and the true ``w``.

    The true ``w`` is a draw from the prior and the data from the likelihood, so
    it is an exact posterior draw for this data set (SPEC section 3).
    Predictors are standard normal with pairwise ``correlation``.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    corr = np.full((dim, dim), correlation) + (1 - correlation) * np.eye(dim)
    X = rng.standard_normal((n_obs, dim)) @ np.linalg.cholesky(corr).T
    w = prior_sd * rng.standard_normal(dim)
    y = X @ w + noise_sd * rng.standard_normal(n_obs)
    return LinearRegression(X, y, prior_sd, noise_sd), w

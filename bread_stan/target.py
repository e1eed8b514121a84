"""The target interface: what the AIS engine needs from a model, and nothing more.

A target evaluates, for a batch of chains at once, the log prior (with the
log-Jacobian of the constraining transform), the log likelihood, and their
gradients in the unconstrained space.  The tempered log density at inverse
temperature ``beta`` is ``log_prior + beta * log_lik``; its gradient is
``grad_prior + beta * grad_lik``.  Returning the two parts separately lets a
sampler change temperature without another call into the model.

The engine never knows where a target comes from: the Stan bridge provides one
(``bread_stan.stan_target.StanTarget``), small numpy models provide others
(``bread_stan.exact.conjugate``), and the exact grid oracle provides a discrete one.

A point whose density cannot be evaluated (a Stan ``reject``, a domain error,
an overflow) comes back with ``log_prior = -inf`` (or NaN); a sampler must treat
it as a rejected proposal, never crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from .errors import InputError

__all__ = ["Evaluation", "Target", "tempered_log_density", "tempered_gradient"]


@dataclass
class Evaluation:
    """Log prior, log likelihood and (optionally) their gradients for n points.

    Shapes: ``log_prior`` and ``log_lik`` are (n,); ``grad_prior`` and
    ``grad_lik`` are (n, d), or None when gradients were not requested.
    """

    log_prior: np.ndarray
    log_lik: np.ndarray
    grad_prior: np.ndarray | None = None
    grad_lik: np.ndarray | None = None

    def take(self, index: np.ndarray) -> "Evaluation":
        """The evaluation restricted to the points selected by ``index``."""
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return Evaluation(pick(self.log_prior), pick(self.log_lik),
                          pick(self.grad_prior), pick(self.grad_lik))


@runtime_checkable
class Target(Protocol):
    """A model the AIS engine can anneal over.

    ``dim`` is the number of unconstrained coordinates.  ``evaluate`` takes an
    (n, dim) array of unconstrained points and returns an :class:`Evaluation`
    for all of them in one call (implementations may use threads; results must
    not depend on the thread count).
    """

    @property
    def dim(self) -> int: ...

    def evaluate(self, points: np.ndarray, *, gradient: bool = True) -> Evaluation: ...


def tempered_log_density(ev: Evaluation, beta: float | np.ndarray) -> np.ndarray:
    """``log_prior + beta * log_lik`` per point; beta is a scalar or one per point.

    At ``beta == 0`` the likelihood is ignored even where it is not finite, so
    that a prior draw with an infinite log likelihood is still a valid state of
    the prior.
    """
    beta = np.asarray(beta, dtype=float)
    lik_term = np.where(beta == 0.0, 0.0, beta * ev.log_lik)
    return ev.log_prior + lik_term


def tempered_gradient(ev: Evaluation, beta: float | np.ndarray) -> np.ndarray:
    """``grad_prior + beta * grad_lik`` per point, shape (n, d)."""
    if ev.grad_prior is None or ev.grad_lik is None:
        raise InputError("this evaluation was made without gradients")
    beta = np.asarray(beta, dtype=float)
    if beta.ndim == 1:
        beta = beta[:, None]
    return ev.grad_prior + beta * ev.grad_lik

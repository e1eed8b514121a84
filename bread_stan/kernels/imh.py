"""Independent Metropolis-Hastings: a fixed proposal, one density evaluation per step.

Each step proposes, for every chain independently of where it is, a draw from a
multivariate t (or normal) proposal ``q`` with location ``mean`` and scale
``scale @ scale.T``, and accepts with probability

    min(1, [pi_b(x') q(x)] / [pi_b(x) q(x')]),

``pi_b`` the tempered density ``prior * lik^b``.  The proposal does not depend on
the chain's state, so the kernel is reversible with respect to ``pi_b`` for *any*
fixed ``q`` whose support covers ``pi_b``'s (a multivariate t covers everything);
a good ``q`` only makes it mix faster.  In AIS and SMC the proposal of each
temperature is frozen before any scored run (:mod:`bread_stan.ais.imh_tuning`), so
forward and reverse/conditional runs use the same Markov kernel at each
temperature, as they do with the tuned HMC and NUTS kernels.

No gradient is needed: a step costs one log-density evaluation per chain, which
on a near-Gaussian posterior of low dimension decorrelates particles far more
cheaply than a Hamiltonian trajectory.

Random numbers: each step draws ``d + df`` standard normals per chain (the
first ``d`` for the direction, the other ``df`` for the t's chi-square; ``d``
only for a normal proposal) and one uniform, all from the chain's own stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..linalg import cholesky, row_dot, triangular_inverse
from ..rng import ChainRandom
from ..target import Target, tempered_log_density
from .base import ChainState, StepInfo, batch_of, metropolis_accept

__all__ = ["IMH", "IMHParams", "MAX_DF"]

MAX_DF = 100  # the t's chi-square is a sum of df squared normals: keep it cheap


@dataclass(frozen=True, eq=False)
class IMHParams:
    """The proposal: ``mean`` (d,) or per chain (n, d); ``scale`` a square root of
    the scale matrix, (d, d) or (n, d, d) (``x = mean + s * scale @ z``);
    ``whiten`` its inverse (``whiten @ (x - mean) = s * z``), same shape; ``df``
    the t's degrees of freedom (a whole number up to :data:`MAX_DF`), or None for
    a normal proposal.

    The fields are what a frozen schedule computes per temperature
    (:class:`~bread_stan.ais.imh_tuning.TunedIMH`); :meth:`from_covariance` builds
    them from a mean and a covariance.
    """

    mean: np.ndarray
    scale: np.ndarray
    whiten: np.ndarray
    df: int | None = None

    def __post_init__(self):
        if self.df is not None and (isinstance(self.df, bool) or int(self.df) != self.df
                                    or not 1 <= self.df <= MAX_DF):
            raise ValueError(f"df must be a whole number in 1..{MAX_DF} or None (normal); "
                             f"got {self.df!r}")

    @classmethod
    def from_covariance(cls, mean, cov, df: int | None = None) -> "IMHParams":
        """The proposal with this mean and scale matrix ``cov`` (for a t, the
        covariance is ``df / (df - 2)`` times it)."""
        chol = cholesky(np.asarray(cov, dtype=float))
        return cls(np.asarray(mean, dtype=float), chol, triangular_inverse(chol), df)

    @classmethod
    def concat(cls, parts: list[tuple["IMHParams", int]], d: int) -> "IMHParams":
        """One per-chain params object for groups ``(params, n_chains)`` of a batch."""
        dfs = {p.df for p, _ in parts}
        if len(dfs) != 1:
            raise ValueError("cannot batch IMH proposals with different df")

        def per_chain(name, shape):
            return np.concatenate([np.broadcast_to(getattr(p, name), (n, *shape))
                                   for p, n in parts])
        return cls(per_chain("mean", (d,)), per_chain("scale", (d, d)),
                   per_chain("whiten", (d, d)), dfs.pop())


def _log_q(r2: np.ndarray, df: int | None, d: int) -> np.ndarray:
    """The proposal's log density up to a constant shared by all points of one chain,
    from the squared whitened distance ``r2``."""
    if df is None:
        return -0.5 * r2
    return -0.5 * (df + d) * np.log1p(r2 / df)


class IMH:
    """Independent Metropolis-Hastings with a frozen proposal; ``params`` is
    :class:`IMHParams` (one proposal for the batch, or one per chain)."""

    needs_gradient = False
    params_class = IMHParams

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: IMHParams, chains: np.ndarray | None = None
             ) -> tuple[ChainState, StepInfo]:
        chains, beta = batch_of("IMH", params, IMHParams, state, chains, beta)
        x0 = state.position
        n, d = x0.shape
        mean = np.broadcast_to(params.mean, (n, d))
        scale = np.broadcast_to(params.scale, (n, d, d))
        whiten = np.broadcast_to(params.whiten, (n, d, d))
        df = params.df
        normals = rng.normal(d + (df or 0), chains)
        z = normals[:, :d]
        if df is None:
            s = np.ones(n)
        else:
            s = np.sqrt(df / row_dot(normals[:, d:], normals[:, d:]))
        proposal = mean + s[:, None] * row_dot(scale, z[:, None, :])
        log_u = rng.log_uniform(chains)
        proposed = target.evaluate(proposal, gradient=False)
        w0 = row_dot(whiten, (x0 - mean)[:, None, :])
        with np.errstate(invalid="ignore", over="ignore"):
            log_q_new = _log_q(s * s * row_dot(z, z), df, d)
            log_q_old = _log_q(row_dot(w0, w0), df, d)
            log_ratio = (tempered_log_density(proposed, beta)
                         - tempered_log_density(state.evaluation, beta)
                         - log_q_new + log_q_old)
        return metropolis_accept(state, proposal, proposed, log_ratio, log_u)


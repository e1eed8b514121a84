"""Random-walk Metropolis with a frozen Gaussian proposal.

One step per chain: propose ``x' = x + step_size * L z`` with z standard normal and
``L L' = inv_metric`` (the proposal's shape: diagonal (d,) or (n, d), dense (1, d, d)
or (n, d, d), None for the identity), and accept with probability
``min(1, f_beta(x') / f_beta(x))`` for the tempered density ``log_prior + beta *
log_lik``.  The proposal is symmetric, so the kernel satisfies detailed balance with
respect to the tempered density (it is its own reversal).  A proposal the target
cannot evaluate (``-inf`` or NaN) is rejected.  No gradients: one density evaluation
per step.

Each step draws d normals and then one uniform per chain from that chain's stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rng import ChainRandom
from ..target import Target, tempered_log_density
from .base import ChainState, StepInfo, batch_of, metropolis_accept
from .integrator import per_chain_metric

__all__ = ["RWMParams", "RandomWalkMetropolis"]


@dataclass(frozen=True)
class RWMParams:
    """The proposal's scale (scalar or per chain) and shape (as HMC's inverse metric:
    the proposal covariance is ``step_size**2 * inv_metric``)."""

    step_size: float | np.ndarray = 1.0
    inv_metric: np.ndarray | None = None

    def __post_init__(self):
        s = np.asarray(self.step_size, dtype=float)
        if not np.all(np.isfinite(s) & (s > 0)):
            raise ValueError(f"step_size must be finite and positive, got {self.step_size}")


def _scaled_noise(z: np.ndarray, metric: np.ndarray) -> np.ndarray:
    """``L z`` per chain for a per-chain metric (n, d) diagonal or (n, d, d) dense."""
    if metric.ndim == 2:
        return np.sqrt(metric) * z
    chol = np.linalg.cholesky(metric)
    return np.einsum("nij,nj->ni", chol, z)


class RandomWalkMetropolis:
    """Gradient-free Metropolis with a Gaussian random-walk proposal (:class:`RWMParams`)."""

    needs_gradient = False

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: RWMParams,
             chains: np.ndarray | None = None) -> tuple[ChainState, StepInfo]:
        chains, beta = batch_of("random-walk Metropolis", params, RWMParams, state, chains, beta)
        n, d = state.position.shape
        z = rng.normal(d, chains)
        log_u = rng.log_uniform(chains)
        step = np.broadcast_to(np.asarray(params.step_size, dtype=float), (n,))
        metric = per_chain_metric(params.inv_metric, n, d)
        proposal = state.position + step[:, None] * _scaled_noise(z, metric)
        proposed = target.evaluate(proposal, gradient=False)
        with np.errstate(invalid="ignore"):
            log_ratio = (tempered_log_density(proposed, beta)
                         - tempered_log_density(state.evaluation, beta))
        return metropolis_accept(state, proposal, proposed, log_ratio, log_u)

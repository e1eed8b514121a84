"""Nearest-neighbour Metropolis-Hastings on an integer lattice (the grid oracle's kernel).

One step moves each chain to one of the 2d neighbouring lattice points, chosen
uniformly, and accepts with probability ``min(1, f_beta(new) / f_beta(old))``
for the tempered density ``log_prior + beta * log_lik``.  A proposal the target
cannot evaluate (off the grid: ``-inf``, or NaN) is rejected.  The proposal is
symmetric, so the kernel is reversible with respect to the tempered density;
:class:`bread_stan.exact.NeighbourMetropolis` gives its exact transition
probabilities on a grid.

Each step draws exactly two uniforms per chain from that chain's stream (the
direction, then the acceptance), whether or not the proposal is on the grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..rng import ChainRandom
from ..target import Evaluation, Target, tempered_log_density
from .base import ChainState, StepInfo

__all__ = ["GridMetropolis"]


class GridMetropolis:
    """Gradient-free MH with a uniform nearest-neighbour proposal; ``params`` is unused."""

    needs_gradient = False

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: Any = None, chains: np.ndarray | None = None
             ) -> tuple[ChainState, StepInfo]:
        n, d = state.position.shape
        chains = np.arange(n) if chains is None else np.asarray(chains, dtype=np.int64)
        u_direction = rng.uniform(chains)
        log_u = rng.log_uniform(chains)

        direction = np.minimum((u_direction * 2 * d).astype(np.int64), 2 * d - 1)
        proposal = state.position.copy()
        proposal[np.arange(n), direction // 2] += np.where(direction % 2 == 0, -1.0, 1.0)
        proposed = target.evaluate(proposal, gradient=False)

        beta = np.broadcast_to(np.asarray(beta, dtype=float), (n,))
        with np.errstate(invalid="ignore"):
            log_ratio = (tempered_log_density(proposed, beta)
                         - tempered_log_density(state.evaluation, beta))
        log_ratio = np.where(np.isnan(log_ratio), -np.inf, log_ratio)
        accept = log_u < log_ratio

        keep = lambda new, old: np.where(accept, new, old)  # noqa: E731
        position = np.where(accept[:, None], proposal, state.position)
        evaluation = Evaluation(keep(proposed.log_prior, state.evaluation.log_prior),
                                keep(proposed.log_lik, state.evaluation.log_lik))
        zeros = np.zeros(n)
        info = StepInfo(accept_stat=np.exp(np.minimum(log_ratio, 0.0)),
                        divergent=np.zeros(n, dtype=bool), energy_error=zeros,
                        n_grad=np.zeros(n, dtype=np.int64), tree_depth=np.zeros(n, dtype=np.int64))
        return ChainState(position, evaluation), info

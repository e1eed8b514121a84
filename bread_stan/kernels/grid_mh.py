"""Nearest-neighbour Metropolis-Hastings on an integer lattice (the grid oracle's kernel).

One step moves each chain to one of the 2d neighbouring lattice points, chosen
uniformly, and accepts with probability ``min(1, f_beta(new) / f_beta(old))``
for the tempered density ``log_prior + beta * log_lik``.  A proposal the target
cannot evaluate (off the grid: ``-inf``, or NaN) is rejected.  The proposal is
symmetric, so the kernel is reversible with respect to the tempered density;
:class:`bread_stan.exact.NeighbourMetropolis` gives its exact transition
probabilities on a grid.

Optional :class:`GridMHParams` make the kernel lazy: with probability
``stay_prob`` (per chain, so per temperature in an AIS schedule) a chain stays
put instead of proposing.  The mixture is chosen independently of the state, so
the kernel stays reversible; it gives the grid kernel a setting that a frozen
kernel schedule can vary by temperature.  A step that stays counts as a
rejection in the acceptance statistic.

Each step draws exactly two uniforms per chain from that chain's stream (the
direction, or staying, then the acceptance), whether or not the proposal is on
the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rng import ChainRandom
from ..target import Evaluation, Target, tempered_log_density
from .base import ChainState, StepInfo

__all__ = ["GridMetropolis", "GridMHParams"]


@dataclass(frozen=True)
class GridMHParams:
    """Probability (scalar or per chain, in [0, 1)) that a step stays put without proposing."""

    stay_prob: float | np.ndarray = 0.0

    def __post_init__(self):
        s = np.asarray(self.stay_prob, dtype=float)
        if not np.all((s >= 0.0) & (s < 1.0)):
            raise ValueError(f"stay_prob must be in [0, 1), got {self.stay_prob}")


class GridMetropolis:
    """Gradient-free MH with a uniform nearest-neighbour proposal.

    ``params`` is None (never lazy) or :class:`GridMHParams`.
    """

    needs_gradient = False

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: GridMHParams | None = None,
             chains: np.ndarray | None = None) -> tuple[ChainState, StepInfo]:
        n, d = state.position.shape
        chains = np.arange(n) if chains is None else np.asarray(chains, dtype=np.int64)
        u_direction = rng.uniform(chains)
        log_u = rng.log_uniform(chains)

        stay = np.zeros(n) if params is None else np.broadcast_to(
            np.asarray(params.stay_prob, dtype=float), (n,))
        lazy = u_direction < stay
        # Given a move, (u - stay) / (1 - stay) is uniform on [0, 1): it picks the direction.
        u_direction = np.where(lazy, 0.0, (u_direction - stay) / (1.0 - stay))
        direction = np.minimum((u_direction * 2 * d).astype(np.int64), 2 * d - 1)
        proposal = state.position.copy()
        proposal[np.arange(n), direction // 2] += np.where(direction % 2 == 0, -1.0, 1.0)
        proposed = target.evaluate(proposal, gradient=False)

        beta = np.broadcast_to(np.asarray(beta, dtype=float), (n,))
        with np.errstate(invalid="ignore"):
            log_ratio = (tempered_log_density(proposed, beta)
                         - tempered_log_density(state.evaluation, beta))
        log_ratio = np.where(np.isnan(log_ratio) | lazy, -np.inf, log_ratio)
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

"""What every Markov kernel of the AIS engine looks like.

A kernel advances a whole batch of chains by one transition that leaves the
tempered density ``log_prior + beta * log_lik`` invariant, with ``beta`` given
per chain (forward and reverse chains at different temperatures can share one
batch and so one call into the model).  The state carries the target's
evaluation at the current position, so a step costs no extra call to restore
it, and changing temperature costs nothing.

``step(rng, state, target, beta, params, chains=None)`` returns the new state
and a :class:`StepInfo`.  ``params`` holds per-chain settings (for HMC: step
size and number of leapfrog steps; a diagonal inverse metric); they are frozen
before any scored run (SPEC section 1).  ``chains`` are the indices into
``rng`` of the chains in ``state``, so each chain draws from its own stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..rng import ChainRandom
from ..target import Evaluation, Target

__all__ = ["ChainState", "StepInfo", "Kernel", "initial_state", "batch_of", "metropolis_accept"]


@dataclass
class ChainState:
    """Positions (n, d) and the target's evaluation there."""

    position: np.ndarray
    evaluation: Evaluation

    @property
    def n_chains(self) -> int:
        return self.position.shape[0]

    def take(self, rows: np.ndarray) -> "ChainState":
        """The state of the chains ``rows`` only."""
        return ChainState(self.position[rows], self.evaluation.take(rows))


@dataclass
class StepInfo:
    """Per-chain diagnostics of one transition (all arrays of shape (n,))."""

    accept_stat: np.ndarray
    divergent: np.ndarray
    energy_error: np.ndarray
    n_grad: np.ndarray
    tree_depth: np.ndarray


class Kernel(Protocol):
    """One transition on a batch of chains.

    ``needs_gradient`` tells the AIS loop whether states must carry gradients.
    """

    needs_gradient: bool

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: Any, chains: np.ndarray | None = None
             ) -> tuple[ChainState, StepInfo]: ...


def initial_state(target: Target, position: np.ndarray, *, gradient: bool = True) -> ChainState:
    """Evaluate the target at ``position`` (n, d) and wrap it as a state."""
    position = np.ascontiguousarray(position, dtype=float)
    return ChainState(position, target.evaluate(position, gradient=gradient))


def batch_of(kernel: str, params, params_class: type, state: ChainState,
             chains: np.ndarray | None, beta) -> tuple[np.ndarray, np.ndarray]:
    """The chain indices and per-chain betas of a step on ``state`` (checking that
    ``params`` is the kernel's own kind)."""
    if not isinstance(params, params_class):
        raise TypeError(f"{kernel} needs {params_class.__name__}, got {type(params).__name__}")
    n = state.position.shape[0]
    chains = np.arange(n) if chains is None else np.asarray(chains, dtype=np.int64)
    return chains, np.broadcast_to(np.asarray(beta, dtype=float), (n,))


def metropolis_accept(state: ChainState, proposal: np.ndarray, proposed: Evaluation,
                      log_ratio: np.ndarray, log_u: np.ndarray
                      ) -> tuple[ChainState, StepInfo]:
    """The Metropolis-Hastings decision of a gradient-free kernel: each chain moves to
    ``proposal`` (its density ``proposed``) where ``log_u`` < ``log_ratio`` (a NaN ratio
    rejects), else stays; the info of one such step (no gradients, no tree)."""
    log_ratio = np.where(np.isnan(log_ratio), -np.inf, log_ratio)
    accept = log_u < log_ratio
    n = accept.size
    keep = lambda new, old: np.where(accept, new, old)  # noqa: E731
    position = np.where(accept[:, None], proposal, state.position)
    evaluation = Evaluation(keep(proposed.log_prior, state.evaluation.log_prior),
                            keep(proposed.log_lik, state.evaluation.log_lik))
    info = StepInfo(accept_stat=np.exp(np.minimum(log_ratio, 0.0)),
                    divergent=np.zeros(n, dtype=bool), energy_error=np.zeros(n),
                    n_grad=np.zeros(n, dtype=np.int64), tree_depth=np.zeros(n, dtype=np.int64))
    return ChainState(position, evaluation), info

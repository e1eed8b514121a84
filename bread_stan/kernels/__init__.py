"""Markov kernels that advance a batch of chains at once (HMC, NUTS, grid MH)."""

from .base import ChainState, Kernel, StepInfo, initial_state

__all__ = ["ChainState", "Kernel", "StepInfo", "initial_state"]

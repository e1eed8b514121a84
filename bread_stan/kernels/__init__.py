"""Markov kernels that advance a batch of chains at once (HMC, NUTS, grid MH)."""

from .base import ChainState, Kernel, StepInfo, initial_state
from .hmc import HMC, HMCParams
from .nuts import NUTS, NUTSParams

__all__ = ["ChainState", "Kernel", "StepInfo", "initial_state", "HMC", "HMCParams", "NUTS",
           "NUTSParams"]

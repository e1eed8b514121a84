"""Markov kernels that advance a batch of chains at once (HMC, NUTS, random-walk
Metropolis, grid MH)."""

from .base import ChainState, Kernel, StepInfo, initial_state
from .hmc import HMC, HMCParams
from .nuts import NUTS, NUTSParams
from .rwm import RandomWalkMetropolis, RWMParams

__all__ = ["ChainState", "Kernel", "StepInfo", "initial_state", "HMC", "HMCParams", "NUTS",
           "NUTSParams", "RandomWalkMetropolis", "RWMParams"]

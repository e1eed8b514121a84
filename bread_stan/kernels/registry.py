"""The one registry of Markov kernels that AIS can run: name -> kernel, params, defaults.

A new kernel (an SMC move, say) is registered here once; the settings, the tuning and
the frozen schedules all read this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .hmc import HMC, HMCParams
from .imh import IMH, IMHParams
from .nuts import NUTS, NUTSParams

__all__ = ["KernelEntry", "KERNELS", "kernel_entry"]


@dataclass(frozen=True)
class KernelEntry:
    """One registered kernel: its class, its params class and the acceptance rate its
    step size is tuned to by default."""

    kernel: type
    params: type
    target_accept: float


KERNELS: dict[str, KernelEntry] = {
    "hmc": KernelEntry(HMC, HMCParams, 0.65),
    "nuts": KernelEntry(NUTS, NUTSParams, 0.8),
    # Independent Metropolis-Hastings: no step size; its proposals come from an SMC
    # pilot (bread_stan.ais.imh_tuning), not from dual averaging.
    "imh": KernelEntry(IMH, IMHParams, float("nan")),
}


def kernel_entry(name: str) -> KernelEntry:
    """The registry entry of ``name``; a one-line error names the known kernels."""
    try:
        return KERNELS[name]
    except KeyError:
        names = [repr(k) for k in KERNELS]
        raise ValueError(f"unknown kernel {name!r}; use {', '.join(names[:-1])} or "
                         f"{names[-1]}") from None

"""bread_stan: bidirectional Monte Carlo bounds on the accuracy of MCMC for Stan models.

The most used names are importable from the package itself (``bread_stan.StanModel``);
they are loaded on first use, so ``import bread_stan`` stays cheap.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "StanModel": "model",
    "StanTarget": "stan_target",
    "Simulator": "simulate",
    "compile_model": "compile",
    "bread": "workflow",
    "compare": "workflow",
    "RunSettings": "workflow",
    "SamplerSettings": "workflow",
    "BreadResult": "results",
}
_SUBMODULES = ("datasets", "exact", "workflow", "protocol", "plots", "report", "estimators")

__all__ = ["__version__", *_LAZY, *_SUBMODULES]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))

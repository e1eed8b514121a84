"""bread_stan: bidirectional Monte Carlo bounds on the accuracy of AIS for Stan models.

Subpackages, in the order data flows: ``stan`` (toolchain, compile, bridge, tempered
target, simulator, data) -> ``kernels`` (HMC, NUTS) -> ``ais`` (schedules, tuning,
engine, estimators, results, Gaussian base) -> ``approx`` (Laplace, ADVI,
Pathfinder) -> ``meta`` (AIDE's inference algorithms and estimator) -> ``workflows``
(bread, compare, protocol, subjective, aide) -> ``reporting`` (plots, reports) ->
``cli`` (the ``bread-stan`` command line); ``exact`` holds known answers for tests.

The names a user calls are importable from the package itself
(``bread_stan.bread``); they load on first use, so ``import bread_stan`` stays cheap.
A lower layer that offers what a higher one provides (a result's figures, drawn by
``reporting``) finds it by name at call time with :func:`late`, so no module imports
from a layer above it.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "StanModel": "stan.model",
    "StanTarget": "stan.tempered",
    "Simulator": "stan.simulator",
    "compile_model": "stan.compile",
    "bread": "workflows.bread",
    "compare": "workflows.bread",
    "RunSettings": "workflows.bread",
    "SamplerSettings": "workflows.bread",
    "protocol": "workflows.protocol",
    "aide": "workflows.aide",
    "AIDESettings": "workflows.aide",
    "check_simulator": "workflows.simulator_check",
    "CheckSettings": "workflows.simulator_check",
    "SimulatorCheck": "workflows.simulator_check",
    "draft_simulator": "stan.draft",
    "ProtocolSettings": "workflows.protocol",
    "BreadResult": "ais.results",
    "subjective": "workflows.subjective",
    "BaseSettings": "workflows.subjective",
    "GaussianBase": "ais.gaussian_base",
    "GaussianBaseTarget": "ais.gaussian_base",
    # approximations (bread_stan.approx)
    "GaussianApproximation": "approx",
    "laplace": "approx",
    "advi": "approx",
    "pathfinder": "approx",
    "subjective_tractable": "workflows.subjective_tractable",
    "Executor": "parallel.executor",
}
_SUBPACKAGES = ("stan", "kernels", "ais", "approx", "meta", "parallel", "workflows", "exact",
                "reporting", "cli")
# What a lower layer calls and a higher one provides: name -> "module:function".
_LATE = {"plot_result": "reporting.plots:plot_all",       # BreadResult.plot
         "result_html": "reporting.report:result_html"}    # BreadResult._repr_html_

__all__ = ["__version__", "late", *_LAZY, *_SUBPACKAGES]


def late(name: str):
    """The function registered as ``name`` in ``_LATE``, imported on first use: how
    ``BreadResult.plot`` (in ``ais``) reaches the figures of ``reporting``."""
    module, function = _LATE[name].split(":")
    return getattr(importlib.import_module(f".{module}", __name__), function)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))

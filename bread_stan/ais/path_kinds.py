"""The kinds of annealing path a run can name, in one table.

Each :class:`~bread_stan.ais.path.PathKind` gives the file a run directory keeps the
path in, the reader of its record and its fit from a pilot; the settings' choice of
path, the run directory and the workflows read this table and nothing else.  Adding a
path: its module in ``bread_stan/ais`` (a class implementing
:class:`~bread_stan.ais.path.Path` with a ``fit``) and one line here.
"""

from __future__ import annotations

from .gaussian_path import GaussianPath
from .imh_tuning import IMHTuningConfig, TunedIMH, tune_imh
from .path import Path, PathKind, PilotInputs
from .tuning import TunedKernel, tune
from .waypoint import WaypointPath

__all__ = ["KINDS", "kind", "read_path", "tune_prior", "read_prior"]


def tune_prior(model, kernel, base_params, pilot, *, seed: int, config, progress: bool = False):
    """The prior path's pilot: :func:`~bread_stan.ais.tuning.tune` (HMC, NUTS) or, for an
    :class:`~bread_stan.ais.imh_tuning.IMHTuningConfig`, the IMH kernel's SMC pilot."""
    if isinstance(config, IMHTuningConfig):
        return tune_imh(model, pilot, seed=seed, config=config, progress=progress)
    return tune(model, kernel, base_params, pilot, seed=seed, config=config,
                progress=progress)


def read_prior(record: dict) -> Path:
    return TunedIMH.from_dict(record) if record.get("kind") == "imh" else \
        TunedKernel.from_dict(record)


def _fit_prior(inputs: PilotInputs) -> Path:
    kernel, base_params, config = inputs.sampler("prior")
    return tune_prior(inputs.model, kernel, base_params, inputs.pilot, seed=inputs.seed,
                      config=config, progress=inputs.progress)


KINDS: dict[str, PathKind] = {k.name: k for k in (
    PathKind("prior", "tuning.json", read_prior, _fit_prior),
    PathKind("gaussian", "gaussian_path.json", GaussianPath.from_dict, GaussianPath.fit),
    PathKind("waypoint", "waypoint_path.json", WaypointPath.from_dict, WaypointPath.fit),
)}


def kind(name: str) -> PathKind:
    return KINDS[name]


def read_path(record: dict) -> Path:
    """The tuned path a saved record holds (the one reader of every kind of path)."""
    return KINDS[record.get("path", "prior")].read(record)

"""The settings of a run over several numbers of distributions, and the frozen
schedule of T distributions they give with a tuned kernel (what every path's legs
are made of: :mod:`bread_stan.ais.path`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .betas import ScheduleSpec
from .frozen_kernels import KernelSchedule

__all__ = ["RunConfig", "step_schedule", "jsonable_config"]


@dataclass(frozen=True)
class RunConfig:
    """Settings of a BREAD run over several numbers of temperatures.

    ``steps``: the numbers of temperatures T.  ``increment_blocks``: record the
    running estimates at about this many temperatures (None: not at all).
    ``combined``: forward and reverse chains share one batch per model call.
    """

    steps: tuple[int, ...] = (10, 100, 1000)
    schedule: ScheduleSpec = ScheduleSpec()
    steps_per_temperature: int = 1
    combined: bool = True
    increment_blocks: int | None = 50  # as RunSettings: one set of defaults
    progress: bool = False


def step_schedule(config: RunConfig, tuned, T: int) -> tuple:
    """The betas (lazy where the spec can: :meth:`ScheduleSpec.lazy`), frozen kernel
    schedule and increment thinning of ``T`` distributions under ``config`` (what
    every run of a path uses for that step count)."""
    # Only the adaptive schedule reads the pilot (other specs may be stand-ins
    # that take T alone).
    make = getattr(config.schedule, "lazy", config.schedule.betas)
    betas = (make(T, tuned) if getattr(config.schedule, "kind", None) == "adaptive"
             else make(T))
    schedule = _kernel_schedule(tuned, betas, config.steps_per_temperature)
    every = (None if config.increment_blocks is None
             else max(1, math.ceil((T - 1) / config.increment_blocks)))
    return betas, schedule, every


def _kernel_schedule(tuned, betas, steps_per_temperature):
    if tuned is None:
        return KernelSchedule(betas, steps_per_temperature)
    if hasattr(tuned, "schedule"):
        return tuned.schedule(betas, steps_per_temperature)
    return KernelSchedule.constant(betas, tuned, steps_per_temperature)


def _jsonable_config(config: RunConfig) -> dict:
    out = asdict(config)
    out["steps"] = list(config.steps)
    return out


def jsonable_config(config: RunConfig) -> dict:
    """``config`` as saved in a result's settings."""
    return _jsonable_config(config)

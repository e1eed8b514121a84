"""The annealing path: what a tuned path gives the rest of the toolkit, for any T.

A path is the sequence of distributions AIS (or SMC) anneals through, with the frozen
kernels that move the chains along it.  Four classes implement :class:`Path`:

- the prior path, tempering the likelihood from the prior
  (:class:`~bread_stan.ais.tuning.TunedKernel` for HMC and NUTS,
  :class:`~bread_stan.ais.imh_tuning.TunedIMH` for independent Metropolis-Hastings);
- the Gaussian path, from a Gaussian q fitted to the posterior
  (:class:`~bread_stan.ais.gaussian_path.GaussianPath`);
- the waypoint path, prior to q to posterior (:class:`~bread_stan.ais.waypoint.WaypointPath`).

A path is a list of *legs* (:class:`Leg`: a target, a frozen kernel schedule, the
increment thinning and the offset of its random streams), run one after the other by
:mod:`bread_stan.ais.runs`, with ``log_c`` subtracted from every estimate (the prior's
normaliser, on paths that do not start at the prior).  A new path is one class in one
file that implements :class:`Path` (most reuse :class:`OneLeg`) and a ``fit`` from a
pilot (:class:`PilotInputs`), plus its line in :data:`bread_stan.ais.path_kinds.KINDS`;
nothing outside ``bread_stan.ais`` tests which path it holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from ..store import load_for_run, save_for_run
from ..target import Target
from .frozen_kernels import KernelSchedule
from .run_config import RunConfig, step_schedule

__all__ = ["Leg", "Path", "OneLeg", "FixedKernel", "PilotInputs", "PathKind"]


@dataclass(frozen=True)
class Leg:
    """One leg of a path at one T: its target, frozen kernel schedule, increment
    thinning (None: no running estimates) and the offset added to its chains' random
    streams (0 on the first leg, so a one-leg path has the engine's streams)."""

    target: Target
    schedule: KernelSchedule
    every: int | None
    stream_offset: int = 0


@runtime_checkable
class Path(Protocol):
    """A tuned annealing path (see the module docstring).

    ``name``: the path as ``RunSettings.path`` names it ("prior", "gaussian",
    "waypoint"); ``log_c``: subtracted from every estimate; ``kind``, ``dense``,
    ``step_size``, ``seconds_per_transition``, ``gradients_per_transition``: the
    kernel and its cost as the pilot measured it (reports, cost warnings).
    """

    name: str
    log_c: float
    needs_prior_end: bool

    def legs(self, model: Target, config: RunConfig, T: int) -> list[Leg]:
        """The legs at T distributions, in forward order, on the split ``model``."""

    def betas(self, config: RunConfig, T: int) -> np.ndarray:
        """The positions along the path a step at T records (one schedule in [0, 1])."""

    def forward_starts(self, seed, n: int) -> np.ndarray | None:
        """Exact draws (n, d) of the path's start, or None where it is the prior
        (whose exact draws the caller's simulator makes)."""

    def check_kernel(self, prior_end=None):
        """The frozen kernel of the prior path's two ends (betas 0 and 1), for the
        simulator check; ``prior_end``: a kernel tuned at the prior, where the path
        has none of its own there (``needs_prior_end``)."""

    def describe(self) -> str | None:
        """What the path is, where that says more than its name (reports), or None."""

    def leg_tuning(self):
        """A one-leg path's pilot record (its log-likelihood curve sets SMC's
        resampling steps)."""

    def problems(self) -> list[str]:
        """Signs that the pilot went wrong, in words."""

    def to_dict(self) -> dict:
        """The path as JSON-ready data, read back bit for bit by ``from_dict``."""

    def save(self, path, fingerprint: str | None = None) -> None:
        """Write the path atomically, with the fingerprint of its run."""


class OneLeg:
    """A path of one leg on the model's own (prior/likelihood split) target, the
    tuned kernel's schedule at the run's betas: the prior path.  Subclasses
    override :meth:`leg_target`, :meth:`leg_tuning` and ``log_c`` for a one-leg path
    from elsewhere (the Gaussian path)."""

    name = "prior"
    log_c = 0.0
    what = "a tuned path"  # what a damaged file was not, in the error

    def leg_tuning(self):
        """What turns betas into the leg's frozen schedule (``schedule(betas, spt)``)."""
        return self

    def leg_target(self, model: Target) -> Target:
        return model

    def legs(self, model: Target, config: RunConfig, T: int) -> list[Leg]:
        _, schedule, every = step_schedule(config, self.leg_tuning(), T)
        return [Leg(self.leg_target(model), schedule, every)]

    def betas(self, config: RunConfig, T: int) -> np.ndarray:
        return step_schedule(config, self.leg_tuning(), T)[0]

    def forward_starts(self, seed, n: int) -> np.ndarray | None:
        return None

    needs_prior_end = False

    def check_kernel(self, prior_end=None):
        return self

    def describe(self) -> str | None:
        return None

    @classmethod
    def from_dict(cls, data: dict):
        raise NotImplementedError

    def save(self, path, fingerprint: str | None = None) -> None:
        save_for_run(path, self.to_dict(), fingerprint)

    @classmethod
    def load(cls, path, fingerprint: str | None = None):
        """Read a path saved by :meth:`save` (None when saved for a run of another
        ``fingerprint``); CorruptFileError if damaged."""
        return load_for_run(path, fingerprint, cls.from_dict, cls.what)


@dataclass(frozen=True)
class FixedKernel(OneLeg):
    """The prior path with the same kernel params at every temperature (``params``;
    None for a kernel without params): for tests and studies that tune nothing."""

    params: object = None

    def leg_tuning(self):
        return self.params

    @property
    def kind(self) -> str:
        return "fixed"

    def problems(self) -> list[str]:
        return []

    def to_dict(self) -> dict:
        if self.params is None:
            return {"path": "fixed", "params": None}
        return {"path": "fixed", "params": {k: np.asarray(v).tolist() if v is not None
                                            else None for k, v in asdict(self.params).items()}}


@dataclass(frozen=True)
class PilotInputs:
    """What fitting a path may use, given by the workflow: the split ``model`` target on
    the simulated data; ``sampler(name)``, the kernel, its base params and the pilot's
    settings on the path ``name``; the pilot's exact prior draws ``pilot`` (n, d) and
    its ``seed``; the run's ``run_seed``; ``fitted``, a Gaussian q and its record when
    the path choice fitted one; ``fit_q()``, q fitted on the pilot draws;
    ``normaliser()``, (exact prior draws for the estimate of the prior's normaliser,
    or None; the normaliser when the drafted simulator computes it, or None)."""

    model: Target
    sampler: Callable[[str], tuple]
    pilot: np.ndarray
    seed: int
    run_seed: int
    progress: bool
    fitted: tuple | None
    fit_q: Callable[[], tuple]
    normaliser: Callable[[], tuple]


@dataclass(frozen=True)
class PathKind:
    """A kind of path as runs name it: the file a run directory keeps it in, the
    reader of that file's record and the fit from a pilot."""

    name: str
    file: str
    read: Callable[[dict], Path]
    fit: Callable[[PilotInputs], Path]

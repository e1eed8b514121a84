"""An automatic path choice kept in the run's output directory, so that a resumed run
does not pilot again.

``path="auto"`` settles the path by pilots that can take as long as the run
(:func:`~bread_stan.workflows.auto_path.resolve_path`: a Gaussian q fitted, its leg
tuned, the prior path's pilot run until it costs more).  :func:`settle` saves the choice
(``path_choice.json``: the choice and, for the waypoint path, q with its fit record)
under the fingerprint of the settings as requested, and a rerun with the same settings
reads it back instead.  The chosen path's own tuning is kept beside it by the run
(``tuning.json`` for the prior path, ``gaussian_path.json`` or ``waypoint_path.json``
for the paths from a Gaussian q), so
the resumed run starts at its first unfinished step count.  The pilots are seeded, so a
choice made again would be the same one: keeping it saves time, not accuracy.  The
exception is a choice a budget in minutes decided (a prior-path pilot dropped because it
would overrun it, :attr:`PathChoice.budget_minutes`): it depends on the machine's speed,
so a run with a larger budget, or none, chooses again where no results are saved yet (a
run stopped in its set-up); where they are, it keeps the choice and its results.
Choosing again, it takes the Gaussian path the stopped run tuned and saved (on the
requested pilot, the same seeds) as it is, rather than tune it again.  A
choice saved for other
settings is ignored and made again; a damaged file is set aside with a warning.  A
leaner pilot that a budget took (:mod:`~bread_stan.workflows.lean_pilot`) is kept the
same way, for a path chosen automatically or set by hand: it is a budget's choice too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..ais.gaussian_base import GaussianBase
from ..ais.path_choice import PathChoice
from ..ais.run_directory import CHOICE_FILE, RunDirectory
from ..stan.simulator import Simulator
from .auto_path import Resolution, concrete, resolve_path
from .problem import Problem
from .settings import RunSettings, SamplerSettings

__all__ = ["CHOICE_FILE", "settle", "save_choice", "load_choice"]

log = logging.getLogger(__name__)


def settle(problems: list[Problem], simulator: Simulator, sampler: SamplerSettings,
           run: RunSettings, name: str, out_dir: Path | None, key: str,
           lean: dict | None = None,
           fingerprint: Callable[[Resolution], str] | None = None) -> Resolution:
    """The run's path: read from ``out_dir`` when a choice for the settings ``key`` is
    saved there, else chosen (:func:`~bread_stan.workflows.auto_path.resolve_path`) and
    saved.  An automatic choice is kept, and so is any choice made with ``lean``, the
    leaner pilot settings a budget took (:mod:`~bread_stan.workflows.lean_pilot`; the
    choice records them and the budget); a path set by hand with the requested pilot
    needs nothing kept.  Where a choice a budget decided is made again, the Gaussian path
    the earlier run tuned on the requested pilot (saved under ``fingerprint`` of its
    resolution) is a candidate as it is: the same seeds would tune the same one."""
    kept = None
    if out_dir is not None and lean is None:
        saved = load_choice(out_dir, key, sampler, run)
        holds = saved is not None and saved.choice.holds_for(run.budget_minutes)
        if saved is not None and (holds or RunDirectory(out_dir, None).header() is not None):
            log.info("%s: the path choice saved in %s: %s%s", name, out_dir,
                     saved.choice.message, "" if holds
                     else "; kept, as results on it are saved there (a new output "
                     "directory chooses again, within this run's budget)")
            return saved
        if saved is not None:
            log.info("%s: choosing the path again: the saved choice (%s) was decided by a "
                     "budget of %g minutes, and this run has %s", name, saved.choice.path,
                     saved.choice.budget_minutes,
                     "none" if run.budget_minutes is None else f"{run.budget_minutes:g}")
            kept = _kept_gaussian(out_dir, saved, fingerprint)
    if lean is None:
        settled = resolve_path(problems, simulator, sampler, run, name, kept)
    else:
        settled = resolve_path(problems, simulator, replace(sampler, **lean), run, name)
        settled = replace(settled, choice=replace(settled.choice, pilot=dict(lean),
                                                  budget_minutes=run.budget_minutes))
    if out_dir is not None and (run.path == "auto" or lean is not None):
        save_choice(out_dir, key, settled)
    return settled


def _kept_gaussian(out_dir: Path, saved: Resolution,
                   fingerprint: Callable[[Resolution], str] | None):
    """The Gaussian path saved in ``out_dir`` for ``saved``'s settings, where they are the
    requested pilot's (not a leaner one a budget took), else None."""
    if fingerprint is None or saved.choice.path != "gaussian" or saved.choice.pilot:
        return None
    return RunDirectory(out_dir, fingerprint(saved)).load_path("gaussian")


def save_choice(out_dir: Path, key: str, settled: Resolution) -> None:
    """Write ``settled``'s choice (and the waypoint's q) under ``key``, atomically."""
    fitted = None
    if settled.fitted is not None:
        base, record = settled.fitted
        fitted = {"base": base.to_dict(), "record": record}
    RunDirectory(out_dir, None).save_choice(
        key, {"choice": settled.choice.to_dict(), "fitted": fitted})


def load_choice(out_dir: Path, key: str, sampler: SamplerSettings, run: RunSettings
                ) -> Resolution | None:
    """The resolution saved in ``out_dir`` for the settings ``key`` (the requested
    ``sampler`` and ``run`` made concrete for its path), or None."""
    def read(record: dict) -> Resolution:
        fitted = record["fitted"]
        if fitted is not None:
            fitted = GaussianBase.from_dict(fitted["base"]), dict(fitted["record"])
        return concrete(sampler, run, PathChoice(**record["choice"]), fitted)
    return RunDirectory(out_dir, None).load_choice(key, read)

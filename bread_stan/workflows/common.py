"""The shared workflow layer: what every workflow does around its AIS runs.

A program's text and default name (:func:`program_text`, :func:`default_name`,
:func:`check_program`); the run's header and its fingerprints (:func:`fingerprints`);
resuming a saved run (:func:`check_resumable`, :func:`resume_steps`); entering the
output directory (:func:`output_directory`); warnings about cost and set-up
(:func:`warn_if_costly`, :func:`setup_warnings`).  ``bread``, ``compare``,
``protocol``, ``subjective`` and ``aide`` all use these, so each is written once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..ais.results import BreadResult, load_steps
from ..ais.imh_tuning import IMHTuningConfig
from ..ais.path_kinds import tune_prior
from ..ais.run_directory import RunDirectory
from ..ais.tuning import TunedKernel, TuningConfig
from ..errors import BreadStanError, InputError
from ..progress import duration
from ..stan.compile import CompiledModel
from ..store import check_writable, clean_temporaries, lock

__all__ = ["ResumeMismatchError", "check_known_bounds", "check_program", "check_resumable",
           "cost_estimate", "default_name", "fingerprint", "fingerprints",
           "output_directory", "program_text", "load_or_tune", "resume_steps",
           "setup_warnings", "warn_if_costly"]

log = logging.getLogger(__name__)

class ResumeMismatchError(BreadStanError):
    """The output directory holds results of a run with different settings."""


def fingerprint(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def program_text(program) -> str:
    program = getattr(program, "stan_file", None) or program  # a cmdstanpy.CmdStanModel
    path = Path(str(program))
    if str(program).endswith(".stan") and path.exists():
        return path.read_text()
    return str(program)


def default_name(program) -> str:
    text = str(getattr(program, "stan_file", None) or program)  # a cmdstanpy.CmdStanModel
    if text.endswith(".stan"):
        return Path(text).stem
    return "model_" + hashlib.sha256(text.encode()).hexdigest()[:8]


def check_program(role: str, program) -> None:
    """Refuse a ``program`` that is neither a path, program text nor a compiled model."""
    if isinstance(program, (CompiledModel, os.PathLike)) or (
            isinstance(program, str) and program.strip()) or (
            type(program).__name__ == "CmdStanModel"):  # cmdstanpy is optional: no import
        return
    raise InputError(f"{role} must be a Stan program: the path of a .stan file, the program "
                     f"text, a cmdstanpy.CmdStanModel or a compiled model; got {program!r}")


def resume_steps(result: BreadResult, out_dir: Path, header: dict) -> set[int]:
    """Load finished steps from ``out_dir`` if it holds a run with the same settings."""
    saved = RunDirectory(out_dir, header["fingerprint"]).header()
    if saved is not None:
        check_resumable(out_dir, saved.get("settings", {}), header)
        check = saved.get("extra", {}).get("simulator_check")
        if check and check.get("ran"):  # the same simulator and model: no need to rerun it
            result.extra["simulator_check"] = check
        if header["steps"] == "auto" and saved.get("extra", {}).get("auto_steps"):
            result.extra["auto_steps"] = saved["extra"]["auto_steps"]  # its setup seconds
    previous = load_steps(out_dir, header["fingerprint"])
    wanted = header["steps"]  # "auto": every step count saved (chosen within a budget)
    result.steps.extend(s for s in previous if wanted == "auto" or s.n_steps in set(wanted))
    return {s.n_steps for s in result.steps}


def check_resumable(out_dir: Path, saved: Mapping, header: Mapping) -> None:
    """Refuse to resume into ``out_dir`` when its saved settings differ from
    ``header``'s, naming what differs."""
    if saved.get("fingerprint") == header["fingerprint"]:
        return
    old, new = saved.get("fingerprints") or {}, header["fingerprints"]
    differences = []
    for part, digest in new.items():
        if old.get(part) == digest or (part == "tuning" and old.get("sampler") != new["sampler"]):
            continue
        before, after = saved.get(part), header.get(part)
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            differences += [f"{part}.{k}: {before.get(k)!r} then, {after.get(k)!r} now"
                            for k in sorted(set(before) | set(after))
                            if before.get(k) != after.get(k)]
        else:
            differences.append(_PART_NAMES.get(part, part))
    what = "; ".join(differences) if differences else "settings saved by an older version"
    raise ResumeMismatchError(
        f"{out_dir} holds results of a run with different settings ({what}); use a new "
        "output directory, delete this one, or rerun with the settings it was made with")


_PART_NAMES = {"model": "the model program", "simulator": "the simulator program",
               "data": "the data", "tuning": "the tuning settings"}


# Settings added after results were first saved, at the values that reproduce the
# numbers from before: left out of a fingerprint, so those results still resume.
# "auto" path and ridge: bread and compare fingerprint the resolved path and ridge, and
# every other workflow runs the prior path, where "auto" is "prior" and "stan".
_LATER_DEFAULTS = {"metric_ridge": ("stan", "auto"), "ridge": ("stan",),
                   "floor_min": (1e-12,), "path": ("prior", "auto")}


def _without_later_defaults(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    return {k: v for k, v in part.items()
            if not (k in _LATER_DEFAULTS and v in _LATER_DEFAULTS[k])}


def fingerprints(**parts: Any) -> tuple[str, dict[str, str]]:
    """The fingerprint of all ``parts`` together and of each part (to say which differs)."""
    parts = {k: _without_later_defaults(v) for k, v in parts.items()}
    return fingerprint(*parts.values()), {k: fingerprint(v) for k, v in parts.items()}


@contextlib.contextmanager
def output_directory(out: Path | None):
    """Check ``out`` is a writable directory, hold its lock and clear temporaries
    left by an interrupted run; nothing when ``out`` is None."""
    if out is None:
        yield None
        return
    check_writable(out)
    with lock(out):
        clean_temporaries(out)
        yield out


_LONG_SECONDS = 600.0        # warn before a run estimated to take longer than this


_LARGE_BYTES = 1 << 30       # or to need more memory than this


_BLOCK_BYTES = 4 << 20       # cached blocks of betas and kernel params, whatever T


def cost_estimate(tuned: TunedKernel, steps: Sequence[int], chains: int, dim: int
                  ) -> tuple[float, float]:
    """Seconds (from the pilot's time per chain and transition) and peak bytes of
    running ``chains`` chains in each direction (all transitions) at each T.

    Memory does not grow with T: betas and kernel params are computed in cached
    blocks of a few MB (:class:`~bread_stan.ais.betas.Betas`,
    :class:`~bread_stan.ais.frozen_kernels.InterpolatedSchedule`); what grows is
    per chain: its state, recorded increments and per-chain metric, about
    ``8 (20 d + 100)`` bytes, ``8 d^2`` more with a dense metric."""
    seconds = sum(T - 1 for T in steps) * chains * tuned.seconds_per_transition
    per_chain = 8.0 * (20 * dim + 100 + (dim * dim if getattr(tuned, "dense", False) else 0))
    peak = _BLOCK_BYTES + 2 * chains * per_chain if steps else 0.0
    return seconds, peak


def warn_if_costly(name: str, tuned: TunedKernel, steps: Sequence[int], chains: int,
                   dim: int) -> None:
    """Log the estimated cost of the coming runs; warn before a long or large one."""
    if not steps:
        return
    seconds, peak = cost_estimate(tuned, steps, chains, dim)
    text = (f"{name}: {', '.join(map(str, steps))} distributions will take about "
            f"{duration(seconds)} and {peak / 2**30:.2g} GB of memory (estimated from the "
            "pilot)")
    for note in (getattr(tuned, "depth_note", lambda: None)(),
                 getattr(tuned, "separated_note", lambda: None)()):
        if note:
            text += f"; {note}"
    if seconds > _LONG_SECONDS or peak > _LARGE_BYTES:
        log.warning("%s; interrupt now (Ctrl-C) and choose fewer --steps if that is too "
                    "much", text)
    else:
        log.info("%s", text)


def setup_warnings(extra: dict, tuned: TunedKernel, name: str) -> None:
    """Log the tuned kernel's problems loudly and record them in ``extra``
    (``setup_warnings``)."""
    extra["setup_warnings"] = tuned.problems()
    for text in extra["setup_warnings"]:
        log.warning("%s: SET-UP PROBLEM: %s", name, text)


def tune_kernel(target, kernel, base_params, prior_draws, *, seed: int,
                config: TuningConfig | IMHTuningConfig, progress: bool = False):
    """The pilot of the sampler's kernel on the prior path
    (:func:`~bread_stan.ais.path_kinds.tune_prior`: HMC and NUTS tuned along beta, or
    the IMH kernel's SMC pilot)."""
    return tune_prior(target, kernel, base_params, prior_draws, seed=seed, config=config,
                      progress=progress)


def load_or_tune(path: Path | None, target, kernel, base_params, config: TuningConfig,
                 seed: int, draw_pilot: Callable[[int], np.ndarray], *,
                 progress: bool = False, fingerprint: str | None = None
                 ) -> tuple[TunedKernel, float | None]:
    """The kernel tuned along beta (the prior path): loaded from ``path`` (a run
    directory's ``tuning.json``, or another name in it) when a sound one is saved there for the run
    ``fingerprint`` (:class:`~bread_stan.ais.run_directory.RunDirectory`), else tuned
    with ``seed`` on the pilot draws ``draw_pilot(seed)`` (drawn only when tuning) and
    saved there.  Returns the tuned kernel and the seconds tuning took (None if loaded)."""
    directory = RunDirectory(None if path is None else Path(path).parent, fingerprint)
    # the file named, not the kind's tuning.json: the protocol keeps its simulated and
    # real data's (and each replicate's) kernels side by side, AIDE one a kernel kind
    return directory.load_or_fit("prior", lambda: tune_kernel(
        target, kernel, base_params, draw_pilot(seed), seed=seed, config=config,
        progress=progress), file=None if path is None else Path(path).name)


def check_known_bounds(known: Mapping[str, float] | None) -> None:
    """Refuse trusted bounds on log p(y) that cannot be bounds: other keys than "upper"
    and "lower", values that are not finite, an upper bound below the lower bound."""
    known = dict(known or {})
    unknown = sorted(set(known) - {"upper", "lower"})
    if unknown:
        raise InputError(f"known_log_ml_bounds takes 'upper' and 'lower', not {unknown}")
    for side, value in known.items():
        if not np.isfinite(value):
            raise InputError(f"the known {side} bound on log p(y) must be a finite number, "
                             f"not {value}")
    if known.get("upper", np.inf) < known.get("lower", -np.inf):
        raise InputError(f"the known upper bound {known['upper']:g} on log p(y) lies below "
                         f"the known lower bound {known['lower']:g}: swap them "
                         "(--known-upper takes the larger)")

"""The files of a BREAD result: what :mod:`.results` saves and how it is read back.

A result directory holds ``run.json`` (model, settings and extras: :func:`write_header`),
one ``steps_T.npz`` per number of distributions T (:func:`write_step`, one unit written
atomically through :mod:`bread_stan.store`, so an interrupted run loses nothing it
finished) and ``summary.json``/``summary.csv`` (:func:`write_summary`).  In a step
file a direction's arrays are named ``forward_*`` or ``reverse_*``
(:func:`direction_arrays`), its scalars sit in the unit's metadata
(:func:`direction_meta`), and the draws are ``draw__NAME``.

Reading gives plain fields, the keyword arguments of the result types
(:func:`read_step`, :func:`direction_fields`), so this module does not import the types
whose methods (``StepResult.save``/``load``, ``BreadResult.save``/``load``) call it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..store import (CorruptFileError, load_json, load_unit, save_json, save_unit, set_aside,
                     write_atomic)
from .betas import Betas, ScheduleError

__all__ = ["RUN_FILE", "direction_arrays", "direction_meta", "direction_fields", "write_step",
           "read_step", "step_path", "read_steps", "write_header", "read_header",
           "write_summary"]

log = logging.getLogger(__name__)

RUN_FILE = "run.json"


def direction_arrays(direction, prefix: str) -> dict[str, np.ndarray]:
    """The arrays of a :class:`~.results.DirectionResult`, named ``{prefix}_*``."""
    out = {f"{prefix}_log_estimates": direction.log_estimates}
    if direction.cumulative is not None:
        out[f"{prefix}_cumulative"] = direction.cumulative
        out[f"{prefix}_cumulative_at"] = direction.cumulative_at
    if direction.problems is not None:
        out[f"{prefix}_problems"] = direction.problems
    return out


def direction_meta(direction) -> dict[str, Any]:
    """The scalars of a :class:`~.results.DirectionResult`, JSON-ready."""
    return {"wall_time": direction.wall_time, "n_grad": int(direction.n_grad),
            "diagnostics": {k: float(v) for k, v in direction.diagnostics.items()}}


def direction_fields(arrays, meta: dict, prefix: str) -> dict[str, Any]:
    """The fields of a :class:`~.results.DirectionResult` saved by :func:`direction_arrays`
    and :func:`direction_meta` (KeyError when one is missing)."""
    return {"log_estimates": arrays[f"{prefix}_log_estimates"],
            "wall_time": meta["wall_time"], "n_grad": meta["n_grad"],
            "diagnostics": meta.get("diagnostics", {}),
            "cumulative": arrays.get(f"{prefix}_cumulative"),
            "cumulative_at": arrays.get(f"{prefix}_cumulative_at"),
            "problems": arrays.get(f"{prefix}_problems")}


def write_step(path: Path, step, fingerprint: str | None = None) -> None:
    """Write a :class:`~.results.StepResult` to the one file ``path`` (.npz), atomically;
    ``fingerprint`` names the run settings it belongs to."""
    arrays = {**direction_arrays(step.forward, "forward"),
              **direction_arrays(step.reverse, "reverse")}
    meta = {"n_steps": int(step.n_steps), "forward": direction_meta(step.forward),
            "reverse": direction_meta(step.reverse), "fingerprint": fingerprint}
    if isinstance(step.betas, Betas):  # its description, not T numbers
        meta["betas"] = step.betas.to_dict()
    elif step.betas is not None:
        arrays["betas"] = step.betas
    for name, value in step.draws.items():
        arrays[f"draw__{name}"] = value
    save_unit(path, arrays, meta)


def read_step(path: Path) -> dict[str, Any]:
    """The fields of a step saved by :func:`write_step` (``forward`` and ``reverse`` as
    the fields of a direction); CorruptFileError if the file is damaged."""
    arrays, meta = load_unit(path)
    try:
        draws = {k[len("draw__"):]: v for k, v in arrays.items() if k.startswith("draw__")}
        return {"n_steps": meta["n_steps"],
                "forward": direction_fields(arrays, meta["forward"], "forward"),
                "reverse": direction_fields(arrays, meta["reverse"], "reverse"),
                "betas": (Betas.from_dict(meta["betas"]) if "betas" in meta
                          else arrays.get("betas")),
                "draws": draws, "fingerprint": meta.get("fingerprint")}
    except (KeyError, TypeError, ScheduleError) as error:
        raise CorruptFileError(Path(path), f"missing entry {error}") from None


def step_path(out_dir: Path, n_steps: int) -> Path:
    """Where a result directory keeps the step count ``n_steps``."""
    return Path(out_dir) / f"steps_{n_steps}.npz"


def read_steps(out_dir: Path, fingerprint: str | None) -> list[dict[str, Any]]:
    """The fields (:func:`read_step`) of the readable ``steps_T.npz`` files of ``out_dir``
    saved under ``fingerprint``, sorted by T; corrupt ones are set aside (logged),
    foreign ones skipped."""
    steps = []
    for path in Path(out_dir).glob("steps_*.npz"):
        if not path.stem[len("steps_"):].isdigit():
            continue
        try:
            step = read_step(path)
        except CorruptFileError as error:
            set_aside(error)
            continue
        if fingerprint is not None and step["fingerprint"] != fingerprint:
            log.warning("%s was saved by a run with other settings; ignored", path)
            continue
        steps.append(step)
    return sorted(steps, key=lambda s: s["n_steps"])


def write_header(out_dir: Path, result) -> None:
    """Write a :class:`~.results.BreadResult`'s model, settings and extras (``run.json``)."""
    save_json(Path(out_dir) / RUN_FILE,
              {"model": result.model, "settings": result.settings, "extra": result.extra})


def read_header(out_dir: Path) -> tuple[str, dict, dict]:
    """Model, settings and extras from ``run.json``: FileNotFoundError when there is none,
    CorruptFileError when it is damaged."""
    run_file = Path(out_dir) / RUN_FILE
    if not run_file.exists():
        raise FileNotFoundError(f"{out_dir} holds no BREAD results (no {RUN_FILE})")
    header = load_json(run_file)
    try:
        model, settings = header["model"], header["settings"]
    except (KeyError, TypeError):
        raise CorruptFileError(run_file, "no model or settings in it") from None
    return model, settings, header.get("extra", {})


def write_summary(out_dir: Path, result) -> None:
    """Write a result's ``summary.json`` and ``summary.csv``, atomically."""
    save_json(Path(out_dir) / "summary.json", result.summary_json())
    write_atomic(Path(out_dir) / "summary.csv", result.summary().to_csv(index=False))

"""The programs a run needs, from the user's model program as it is.

:func:`prepare_programs` takes the user's model (and simulator, if given): a model
without ``prior_only`` is split automatically into prior and likelihood
(:func:`~bread_stan.stan.draft.split_model`), and when no simulator is given one is
drafted from the (split) model (:func:`~bread_stan.stan.draft.draft_simulator`).  The
generated programs and the split table are saved in a directory, so a run's output
holds exactly what ran.  The user's files are never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import InputError, StanDataError
from ..store import write_atomic
from .compile import CompiledModel, Program, compile_model, read_program, stanc_info
from .data import load_data
from .draft import Promotion, Split, draft_program, relax_data_bounds, split_model
from .model import StanModel, unflatten_draws

__all__ = ["PreparedPrograms", "prepare_programs", "parse_likelihood", "split_table_markdown",
           "SPLIT_TABLE", "promoted_data"]

SPLIT_TABLE = "split_table.md"


@dataclass(frozen=True)
class PreparedPrograms:
    """The model program to run (the user's, or the generated split), the simulator
    (given or drafted), the split (None when the model declares ``prior_only``) and
    the saved files."""

    model: Any           # a path; the program as given when it ran as it is
    simulator: Any
    split: Split | None
    drafted: bool
    table: Path | None
    relaxed_bounds: dict[str, str] = field(default_factory=dict)

    def run_data(self, data):
        """The data the run's programs read: ``data`` itself, or (for a split that
        promotes transformed data to modelled data) the user's data with the promoted
        variables computed by the program's own transformed data."""
        promotion = self.split.promotion if self.split is not None else None
        return data if promotion is None else promoted_data(promotion, data)

    def describe(self) -> str:
        """One line on what was generated."""
        parts = []
        if self.split is not None and self.split.promotion is not None:
            parts.append(self.split.promotion.sentence())
        if self.split is not None:
            parts.append(f"split the model automatically ({self.model}; table {self.table})")
        if self.drafted:
            parts.append(f"drafted the simulator {self.simulator}")
        if self.relaxed_bounds:
            parts.append("declared the simulated " + ", ".join(self.relaxed_bounds)
                         + " without their data-block bounds (" + "; ".join(
                             self.relaxed_bounds.values()) + ")")
        return "; ".join(parts) or "used the programs as given"


def parse_likelihood(text: str | None) -> list[str] | None:
    """``--likelihood NAME,...`` as a list of names (None when not given)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError("--likelihood needs at least one data variable name")
    return names


def split_table_markdown(split: Split, label: str) -> str:
    """The split table as a Markdown pipe table (a sentence for a program that declares
    ``prior_only`` itself)."""
    if split.own_split:
        return (f"{label} declares `prior_only`: its own split is used (the likelihood is "
                "what the program guards with `if (!prior_only)`; the run sets "
                "prior_only = 1 for the prior and 0 for the posterior).\n")
    lines = [f"Prior/likelihood split of {label} (automatic; modelled data: "
             f"{', '.join(split.modelled_data)}).", "", "| line | role | statement |",
             "|---|---|---|"]
    for r in split.rows:
        text = " ".join(r.text.split()).replace("|", "\\|")
        lines.append(f"| {r.line} | {r.role} | `{text}` |")
    if split.promotion is not None:
        lines += ["", split.promotion.sentence() + " (the run's programs declare it as "
                  "data; " + (", ".join(split.promotion.dropped) or "no data") +
                  " dropped from them)."]
    return "\n".join(lines) + "\n"


def prepare_programs(model, simulator, directory: str | os.PathLike,
                     likelihood: Sequence[str] | None = None, *, name: str | None = None,
                     toolchain=None, hyper: Sequence[str] | None = None,
                     given: Sequence[str] = ()) -> PreparedPrograms:
    """The model and simulator to run, generating what is missing into ``directory``.

    ``model`` is a path, program text, a ``cmdstanpy.CmdStanModel`` or a compiled model;
    ``name`` the stem of the files generated for it (default: the file's stem, or the
    program's name).  A model that declares ``prior_only`` runs as it is given.
    When the drafted simulator can draw data outside bounds the data block declares,
    the model run is the (split) program with those bounds dropped
    (:func:`~bread_stan.stan.draft.relax_data_bounds`; the same density).

    ``hyper`` and ``given`` go to the drafter (:func:`~bread_stan.stan.draft.draft_program`:
    the hyperparameters, None for its automatic choice, and those given in any case).

    Raises :class:`~bread_stan.stan.draft.SplitError` or
    :class:`~bread_stan.errors.DraftError` (one line naming the statement) when the
    model cannot be split or no simulator can be drafted.
    """
    compiled = isinstance(model, CompiledModel)
    program = model.program if compiled else read_program(model)
    stem = name or (program.path.stem if program.path is not None else program.name)
    label = program.path.name if program.path is not None else f"{stem}.stan"
    directory = Path(directory)
    info = model.info if compiled else stanc_info(program, toolchain)
    own = "prior_only" in info.get("inputs", {})
    if own and likelihood is not None:
        raise InputError(f"{label} declares prior_only (its own split); --likelihood "
                         "applies only to programs without it")
    split = (Split(program.code, "", [], [], own_split=True) if own
             else split_model(program, likelihood, toolchain=toolchain))
    directory.mkdir(parents=True, exist_ok=True)
    table = directory / SPLIT_TABLE
    write_atomic(table, split_table_markdown(split, label))
    run_model = _as_given(model)
    if not own:
        run_model = directory / f"{stem}.stan"
        write_atomic(run_model, split.program)
        write_atomic(directory / f"{stem}_prior_part.stan", split.prior_program)
    if simulator is not None:
        return PreparedPrograms(run_model, _as_given(simulator), None if own else split,
                                False, table)
    drafted = draft_program(program if own else run_model, hyper, toolchain=toolchain,
                            given=given)
    sim = directory / f"{stem}_sim.stan"
    write_atomic(sim, drafted.text)
    if drafted.relaxed_bounds:
        code = program.code if own else split.program
        run_model = directory / f"{stem}.stan"
        write_atomic(run_model, relax_data_bounds(code, drafted.relaxed_bounds))
        write_atomic(table, table.read_text() + _relaxed_note(drafted.relaxed_bounds))
    return PreparedPrograms(run_model, sim, None if own else split, True, table,
                            drafted.relaxed_bounds)


def promoted_data(promotion: Promotion, data) -> dict:
    """The user's ``data`` (dict or JSON path) with the promoted variables computed by
    the program's transformed data (:attr:`Promotion.data_program`, through BridgeStan)
    and the dropped data left out."""
    values = load_data(data)
    model = StanModel(compile_model(Program(promotion.data_program, "promoted_data")),
                      values)
    flat = np.empty((1, model.param_num(True, True)))
    if model.generate_batch(0, 0, flat):
        raise StanDataError("the program's transformed data fail on the data: "
                            f"{model.last_errors[0]}")
    draws = unflatten_draws(flat, model.param_names(True, True))
    out = {k: v for k, v in values.items() if k not in promotion.dropped}
    for copy, name in promotion.copies.items():
        value = draws[copy][0]
        out[name] = (np.rint(value).astype(int) if name in promotion.integers
                     else value).tolist()
    return out


def _as_given(program):
    """A program that runs as it is: a path as a ``Path``, anything else unchanged."""
    if isinstance(program, os.PathLike) or (
            isinstance(program, str) and program.endswith(".stan") and "\n" not in program
            and "{" not in program):
        return Path(program)
    return program


def _relaxed_note(relaxed: dict[str, str]) -> str:
    """The split table's note on the data bounds the run's model does not declare."""
    lines = ["", "Simulated data declared without their data-block bounds (the bounds check "
             "the input and are not part of the density, so the program's posterior is that "
             "of the model drawing from the whole support; the run's model reads the "
             "simulated data sets without them and computes the same numbers on yours):", ""]
    return "\n".join(lines + [f"- {name}: {why}" for name, why in relaxed.items()]) + "\n"

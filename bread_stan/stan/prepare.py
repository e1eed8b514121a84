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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..store import write_atomic
from .compile import read_program, stanc_info
from .draft import Split, draft_simulator, split_model

__all__ = ["PreparedPrograms", "prepare_programs", "parse_likelihood", "split_table_markdown",
           "SPLIT_TABLE"]

SPLIT_TABLE = "split_table.md"


@dataclass(frozen=True)
class PreparedPrograms:
    """The model program to run (the user's, or the generated split), the simulator
    (given or drafted), the split (None when the model declares ``prior_only``) and
    the saved files."""

    model: Path
    simulator: Path
    split: Split | None
    drafted: bool
    table: Path | None

    def describe(self) -> str:
        """One line on what was generated."""
        parts = []
        if self.split is not None:
            parts.append(f"split the model automatically ({self.model}; table {self.table})")
        if self.drafted:
            parts.append(f"drafted the simulator {self.simulator}")
        return "; ".join(parts) or "used the programs as given"


def parse_likelihood(text: str | None) -> list[str] | None:
    """``--likelihood NAME,...`` as a list of names (None when not given)."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("--likelihood needs at least one data variable name")
    return names


def split_table_markdown(split: Split, label: str) -> str:
    """The split table as a Markdown pipe table."""
    lines = [f"Prior/likelihood split of {label} (automatic; modelled data: "
             f"{', '.join(split.modelled_data)}).", "", "| line | role | statement |",
             "|---|---|---|"]
    for r in split.rows:
        text = " ".join(r.text.split()).replace("|", "\\|")
        lines.append(f"| {r.line} | {r.role} | `{text}` |")
    return "\n".join(lines) + "\n"


def prepare_programs(model: str | os.PathLike, simulator: str | os.PathLike | None,
                     directory: str | os.PathLike, likelihood: Sequence[str] | None = None,
                     *, toolchain=None) -> PreparedPrograms:
    """The model and simulator to run, generating what is missing into ``directory``.

    Raises :class:`~bread_stan.stan.draft.SplitError` or
    :class:`~bread_stan.errors.DraftError` (one line naming the statement) when the
    model cannot be split or no simulator can be drafted.
    """
    model = Path(model)
    program = read_program(model)
    directory = Path(directory)
    info = stanc_info(program, toolchain)
    split = None
    run_model = model
    table = None
    if "prior_only" not in info.get("inputs", {}) or likelihood is not None:
        if "prior_only" in info.get("inputs", {}):
            raise ValueError(f"{model} declares prior_only (its own split); --likelihood "
                             "applies only to programs without it")
        split = split_model(model, likelihood, toolchain=toolchain)
        directory.mkdir(parents=True, exist_ok=True)
        run_model = directory / model.name
        write_atomic(run_model, split.program)
        write_atomic(directory / f"{model.stem}_prior_part.stan", split.prior_program)
        table = directory / SPLIT_TABLE
        write_atomic(table, split_table_markdown(split, model.name))
    if simulator is not None:
        return PreparedPrograms(run_model, Path(simulator), split, False, table)
    directory.mkdir(parents=True, exist_ok=True)
    text = draft_simulator(run_model, toolchain=toolchain)
    sim = directory / f"{model.stem}_sim.stan"
    write_atomic(sim, text)
    return PreparedPrograms(run_model, sim, split, True, table)

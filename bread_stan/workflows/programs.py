"""The programs a workflow runs, from the user's programs as they are.

:func:`prepared` is the one place where ``bread``, ``compare``, ``protocol`` and
``check_simulator`` (from Python and from the command line alike) turn the user's
programs into those that run: a model without ``prior_only`` is split into prior and
likelihood, and without a simulator one is drafted (``compare``: from the first model,
shared by all), by :func:`bread_stan.stan.prepare.prepare_programs`.  The generated
programs and the split table are written to ``OUT/programs`` (``OUT/programs/LABEL``
for several models), or to a temporary folder that lives while the run does when there
is no output directory; what was generated is kept in the result
(``extra["programs"]``, see :func:`record`).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..errors import InputError
from ..stan.compile import CompiledModel, read_program, stanc_info
from ..stan.data import load_data
from ..stan.draft import Split
from ..stan.prepare import (PreparedPrograms, parse_likelihood, prepare_programs,
                            split_table_markdown)

__all__ = ["Programs", "PROGRAMS_DIR", "attach", "likelihood_names", "prepared", "record"]

log = logging.getLogger(__name__)

PROGRAMS_DIR = "programs"


@dataclass(frozen=True)
class Programs:
    """The models to run (in the order given), the simulator, and per label what was
    generated (:func:`record`)."""

    models: list
    simulator: Any
    records: dict[str, dict]
    # the user's data -> the data the programs read (PreparedPrograms.run_data)
    run_data: Callable[[Any], Any] = staticmethod(lambda data: data)


def likelihood_names(likelihood: str | Sequence[str] | None) -> list[str] | None:
    """The modelled data's names: ``"y,z"`` (as ``--likelihood``) or a list of names."""
    if likelihood is None or isinstance(likelihood, str):
        return parse_likelihood(likelihood)
    return parse_likelihood(",".join(likelihood))


def _declares_prior_only(model) -> bool:
    info = model.info if isinstance(model, CompiledModel) else stanc_info(read_program(model))
    return "prior_only" in info.get("inputs", {})


def record(prepared_programs: PreparedPrograms, directory: Path | None) -> dict:
    """What ``extra["programs"]`` holds for one model: how it was split ("automatic",
    or "own" for a program declaring ``prior_only``), the modelled data, the split
    table (its rows: line, role, statement; and as Markdown), whether the simulator was
    drafted, the data bounds the run's model drops, the generated programs' texts by file
    name, and the folder they were saved in (None: a temporary one, gone after the run)."""
    p = prepared_programs
    split = p.split
    generated = [path for path in (p.model, p.simulator) if isinstance(path, Path)
                 and p.table is not None and path.parent == p.table.parent]
    if split is not None:
        prior = p.table.parent / f"{p.model.stem}_prior_part.stan"
        generated += [prior] if prior.is_file() else []
    return {"split": "own" if split is None else "automatic",
            "modelled_data": [] if split is None else list(split.modelled_data),
            "rows": [] if split is None else [
                {"line": r.line, "role": r.role, "statement": " ".join(r.text.split())}
                for r in split.rows],
            "table": p.table.read_text() if p.table is not None else "",
            "drafted": p.drafted, "relaxed_bounds": dict(p.relaxed_bounds),
            **({"promoted": split.promotion.sentence()}
               if split is not None and split.promotion is not None else {}),
            "files": {path.name: path.read_text() for path in generated},
            "directory": None if directory is None else str(directory)}


@contextlib.contextmanager
def prepared(models: Sequence, simulator, out: Path | None, labels: Sequence[str],
             likelihood: str | Sequence[str] | None = None) -> Iterator[Programs]:
    """The programs to run for ``models`` (labelled ``labels``) and ``simulator`` (None:
    drafted), generated into ``out/programs`` (or a temporary folder while the block
    runs when ``out`` is None).  Programs that declare ``prior_only`` with a simulator
    given and no output directory run as they are, and nothing is written."""
    names = likelihood_names(likelihood)
    if out is None and simulator is not None and names is None and all(
            _declares_prior_only(m) for m in models):
        yield Programs(list(models), simulator, {label: _own(label) for label in labels})
        return
    with contextlib.ExitStack() as stack:
        base = (Path(out) / PROGRAMS_DIR if out is not None else
                Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bread-programs-"))))
        run, records, converters = [], {}, []
        for label, model in zip(labels, models):
            directory = base / label if len(models) > 1 else base
            given = model.program if isinstance(model, CompiledModel) else read_program(model)
            p = prepare_programs(model, simulator, directory, names,  # text: files by label
                                 name=None if given.path is not None else label)
            simulator = p.simulator  # compare: the simulator drafted from the first model
            if p.split is not None or p.drafted:
                log.info("%s: %s", label, p.describe())
            run.append(p.model)
            converters.append(p.run_data)
            records[label] = record(p, directory if out is not None else None)
        yield Programs(run, simulator, records, _one_data_set(converters, list(labels)))


def _one_data_set(converters: list[Callable], labels: list[str]) -> Callable[[Any], Any]:
    """The user's data -> the data every program reads.  Programs run together
    (compare) share one data set and one simulator, so every program must read the same
    data: where the splits promote transformed data differently (one computes the
    modelled data from --data, another reads them as given), the data sets differ and
    the programs are refused in one line."""
    if len(converters) == 1:
        return converters[0]

    def run_data(data):
        values = load_data(data)
        read = [convert(values) for convert in converters]
        for label, other in zip(labels[1:], read[1:]):
            if not _same_data(read[0], other):
                raise InputError(
                    f"programs {labels[0]!r} and {label!r} read different data: their "
                    "splits compute the modelled data from --data differently (transformed "
                    "data promoted to modelled data in one and not the other), and a "
                    "comparison runs on one data set; run bread on each program instead")
        return read[0]
    return run_data


def _same_data(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def _own(label: str) -> dict:
    """The record of a program that ran as it was given (its own ``prior_only``)."""
    table = split_table_markdown(Split("", "", [], [], own_split=True), label)
    return {"split": "own", "modelled_data": [], "rows": [], "table": table, "drafted": False,
            "relaxed_bounds": {}, "files": {}, "directory": None}


def attach(result, programs: dict, out: Path | None, save=None) -> None:
    """Keep ``programs`` (one model's record) in ``result.extra["programs"]`` and rewrite
    the saved header with it (``save(out)``, by default ``result.save_header``)."""
    result.extra["programs"] = programs
    if out is not None:
        (save or result.save_header)(out)

"""Draft a simulator program from a model program.

``draft_simulator(model)`` reads the model through stanc (``--info`` for the
declared names, ``--debug-decorated-ast`` for the types of the ``~`` arguments),
parses it (:mod:`.parse`), translates every ``~`` into an ``_rng`` draw in
dependency order (:mod:`.translate`) and writes the simulator (:mod:`.emit`), then
type-checks the result with stanc.  What it cannot translate exactly it refuses
with a :class:`DraftError` naming the statement; it never writes a program whose
draws differ from the model's joint distribution.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ...errors import DraftError, ImproperPriorError, StanCompileError
from ..compile import Program, run_stanc, resolve_toolchain, read_program
from .coverage import SIZE_REJECTED
from .emit import emit, emit_parameter_part
from .normaliser import DIGEST_TAG, LOG_C_EXACT, PRIOR_TRIES, prior_digest
from .parse import parse_program
from .relax import relax_data_bounds
from .replay import OBSERVED_SUFFIX, REJECTED, Replayable, Unreplayable
from .promote import Promotion
from .split import Split, SplitError, split_program
from .targets import targets_as_tildes
from .support import density_types, tilde_types
from .translate import translate

__all__ = ["draft_simulator", "draft_program", "DraftedSimulator", "relax_data_bounds",
           "split_model", "DraftError", "Split", "Promotion", "SplitError", "OBSERVED_SUFFIX", "REJECTED",
           "SIZE_REJECTED",
           "LOG_C_EXACT", "PRIOR_TRIES", "DIGEST_TAG", "prior_digest"]


@dataclass(frozen=True)
class DraftedSimulator:
    """A drafted simulator's text, and the simulated data whose declared data-block bounds
    its likelihood can cross (name -> why), which the model run on its draws must
    declare without them (:func:`relax_data_bounds`)."""

    text: str
    relaxed_bounds: dict[str, str] = field(default_factory=dict)
    # the parameters alone, drawn as ``text`` draws them (:func:`.emit_parameter_part`)
    parameter_part: str | None = None


def split_model(model_program: str | os.PathLike | Program,
                likelihood: Sequence[str] | None = None, *, toolchain=None) -> Split:
    """The automatic prior/likelihood split of ``model_program`` (path or text).

    ``likelihood`` names the modelled data (None: every data variable that is the
    outcome of a density).  A program declaring ``prior_only`` keeps its own split
    (``Split.own_split``).  Raises :class:`SplitError` (one line, naming the line) for a
    program that cannot be split exactly.
    """
    program = read_program(model_program)
    toolchain = resolve_toolchain(toolchain)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = program.code
        if "#include" in source:
            source = run_stanc(program, toolchain, ["--print-canonical"], work, None)
        info = json.loads(run_stanc(Program(source, program.name), toolchain, ["--info"],
                                 work, None))
        label = program.path.name if program.path else program.name
        try:
            split = split_program(source, info, likelihood)
        except DraftError as error:
            raise SplitError(f"cannot split {label} into prior and likelihood: "
                             f"{error}") from None
        for text in (split.program, split.prior_program) if not split.own_split else ():
            try:
                run_stanc(Program(text, f"{program.name}_split"), toolchain, ["--info"],
                       work, None)
            except StanCompileError as error:
                raise SplitError(f"the split program generated for {label} does not "
                                 f"type-check (a splitter bug; please report it): "
                                 f"{' '.join(str(error).split())[:300]}") from None
    return split


def draft_simulator(model_program: str | os.PathLike | Program,
                    hyper: Sequence[str] | None = None, *, toolchain=None) -> str:
    """The text of a simulator program for ``model_program`` (path or text); see
    :func:`draft_program`."""
    return draft_program(model_program, hyper, toolchain=toolchain).text


def draft_program(model_program: str | os.PathLike | Program,
                  hyper: Sequence[str] | None = None, *, toolchain=None,
                  given: Sequence[str] = ()) -> DraftedSimulator:
    """A simulator program for ``model_program`` (path or text).

    ``hyper``: names of the parameters to treat as hyperparameters (given through
    ``hyper_given``/``h_given``); None takes the scalar parameters whose prior uses no
    other parameter, ``[]`` none.  ``given``: parameters that are hyperparameters in
    any case (added to ``hyper``'s), which may have no proper prior: the simulator then
    only takes them as given.  Raises :class:`DraftError` (one line, naming the
    statement) for a model outside the translated subset, and its
    :class:`~bread_stan.errors.ImproperPriorError` naming every parameter with no proper
    prior that is not in ``given``.
    """
    given = frozenset(given)
    program = read_program(model_program)
    toolchain = resolve_toolchain(toolchain)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = program.code
        if "#include" in source:   # parse stanc's printout, with the includes inlined
            source = run_stanc(program, toolchain, ["--print-canonical"], work, None)
        digest = prior_digest(source)        # the program the simulator's c belongs to
        constants: dict[int, list[str]] = {}   # the constant terms that reading drops
        source = targets_as_tildes(source, constants)   # target += foo_lpdf(x | ..): x ~ foo(..)
        text = Program(source, program.name)
        info = json.loads(run_stanc(text, toolchain, ["--info"], work, None))
        ast = run_stanc(text, toolchain, ["--debug-decorated-ast"], work, None)
        types, densities = tilde_types(ast), density_types(ast)
        label = program.path.name if program.path else program.name
        lines = (" (line numbers of stanc's printout, with the includes inlined)"
                 if "#include" in program.code else "")
        try:
            try:
                draft = translate(parse_program(source), info, types, hyper, densities,
                                  constants=constants, given=given)
            except Replayable as direct:    # drawn in the model's statement order?
                try:
                    draft = translate(parse_program(source), info, types, hyper, densities,
                                      replay=True, constants=constants, given=given)
                except Unreplayable:
                    raise DraftError(str(direct)) from None
        except DraftError as error:
            message = f"cannot draft a simulator for {label}{lines}: {error}"
            if isinstance(error, ImproperPriorError):
                raise ImproperPriorError(message, error.parameters) from None
            raise DraftError(message) from None
        simulator = emit(draft, label)
        parameter_part = emit_parameter_part(draft, label)
        if draft.normaliser and digest is not None:
            simulator = f"{DIGEST_TAG} {digest}\n" + simulator
        try:
            run_stanc(Program(simulator, f"{program.name}_sim"), toolchain, ["--info"], work,
                   None)
        except StanCompileError as error:
            raise DraftError(f"the simulator drafted for {label} does not type-check "
                             f"(a drafter bug; please report it): "
                             f"{' '.join(str(error).split())[:300]}") from None
    return DraftedSimulator(simulator, draft.relaxed, parameter_part)

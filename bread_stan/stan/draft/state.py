"""What the translator of a model program carries from one statement to the next.

:class:`Translation` groups it by what it is for: what the translator has read of the
model (:class:`Read`: fixed once the copies are found), what it has drawn so far
(:class:`Drawn`), what it writes besides each statement's own lines (:class:`Written`),
and where the statement being translated stands (the loops and conditionals around it).
The statement handlers (:mod:`.tilde`, :mod:`.elements`, :mod:`.render`) read and
update one :class:`Translation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

from ...errors import DraftError
from .copies import Copy
from .coverage import Coverage, integer_data, size_aliases

if TYPE_CHECKING:  # the field's type in full (exact.coverage has a Coverage too)
    import bread_stan.stan.draft.coverage
from .normaliser import Normaliser
from .parse import Decl, StanProgram, Stmt
from .replay import Site
from .statements import lhs_form, walk
from .support import refuse

__all__ = ["Read", "Drawn", "Written", "Translation"]


@dataclass
class Read:
    """What the translator has read of the model: the program, its names by block (from
    ``stanc --info``), the declarations of data, parameters and drawn copies, and the
    transformed parameters that copy parameter elements (:mod:`.copies`)."""

    program: StanProgram
    inputs: dict
    parameters: list[str]
    transformed: list[str]
    decls: dict[str, Decl]
    scalar_data: set[str]
    copies: dict[str, Copy] = field(default_factory=dict)   # transformed parameters drawn
    not_copies: dict[str, str] = field(default_factory=dict)   # ... and why the others not

    @classmethod
    def of(cls, program: StanProgram, info: dict) -> Read:
        inputs = info.get("inputs", {})
        decls = {s.decl.name: s.decl for block in ("data", "parameters")
                 for s in program.blocks.get(block, []) if s.kind == "decl"}
        return cls(program, inputs, list(info.get("parameters", {})),
                   list(info.get("transformed parameters", {})), decls,
                   {n for n, d in decls.items() if n in inputs and not d.dims and not d.sizes})

    def is_transformed_data(self, name: str) -> bool:
        return any(s.kind == "decl" and s.decl.name == name
                   for s in self.program.blocks.get("transformed data", []))

    def tildes_on_data(self, s: Stmt) -> bool:
        """Whether every ~ inside ``s`` draws a data variable."""
        return all(lhs_form(x.lhs) is not None and lhs_form(x.lhs)[0] in self.inputs
                   and lhs_form(x.lhs)[0] not in self.parameters
                   for x in walk([s]) if x.kind == "tilde")


@dataclass
class Drawn:
    """What the translator has drawn so far: each variable's ~ statement, the simulated
    data in order, the elements covered
    (:class:`~bread_stan.stan.draft.coverage.Coverage`), the simulated data whose
    declared bounds the likelihood can cross, and the priors truncated by their bounds."""

    cover: bread_stan.stan.draft.coverage.Coverage
    tilde_of: dict[str, Stmt] = field(default_factory=dict)   # variable -> its ~ statement
    simulated: list[str] = field(default_factory=list)
    relaxed: dict[str, str] = field(default_factory=dict)   # simulated data -> bound crossed
    truncated: dict[str, str] = field(default_factory=dict)   # variable -> bounds' condition

    def twice(self, s: Stmt, var: str) -> DraftError:
        return refuse(s, f"{var} is on the left of ~ more than once (also on line "
                         f"{self.tilde_of[var].line}); the drafter cannot tell whether "
                         "the statements cover each element once")


@dataclass
class Written:
    """What the translator writes besides each statement's lines: the prior's normaliser
    log c (where exact) with the lines the last ~ adds to it, whether a bernoulli_logit
    needs the INV_LOGIT helper, and the ~ statements on data of a replayed program."""

    normaliser: Normaliser
    factor: list[str] = field(default_factory=list)
    inv_logit_helper: bool = False
    sites: list[Site] = field(default_factory=list)


@dataclass
class Translation:
    """The state of one translation: ``replay`` draws the data in the model's statement
    order; ``types`` yields the stanc types of each ~ statement's sides in turn;
    ``loops`` and ``conditions`` are the for loops and the (if, branch) around the
    statement being translated."""

    read: Read
    drawn: Drawn
    written: Written
    replay: bool
    types: Iterator
    loops: list[Stmt] = field(default_factory=list)
    conditions: list[tuple[Stmt, int]] = field(default_factory=list)

    @classmethod
    def start(cls, program: StanProgram, info: dict, types: list, replay: bool,
              constants: dict[int, list[str]]) -> Translation:
        return cls(Read.of(program, info),
                   Drawn(Coverage(size_aliases(program), integer_data(program))),
                   Written(Normaliser(program.source, constants)), replay, iter(types))

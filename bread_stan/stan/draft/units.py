"""The simulator's statements as units to order, and the units the model has no
statement for: the uniform draw of a parameter bounded on both sides, and the choice
of hyperparameters among the drawn parameters."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import DraftError
from .parse import Decl, Stmt
from .restrict import uniform_constrained
from .support import ZERO, refuse

__all__ = ["Unit", "uniform_unit", "given_only_unit", "hyperparameters"]


@dataclass
class Unit:
    """One top-level statement of the simulator: its lines, what it defines and uses."""

    index: int
    stmt: Stmt
    lines: list[str]
    defines: set[str]
    uses: set[str]
    tildes: set[str]        # variables drawn by this unit
    likelihood: bool        # inside if (!prior_only)


def uniform_unit(decl: Decl, scalar_data: set[str], index: int) -> Unit:
    """A parameter with no density: uniform on its bounds when it has both (a proper
    prior); otherwise its prior is improper and the draft is refused."""
    lower, upper = decl.bounds.get("lower"), decl.bounds.get("upper")
    uniform = uniform_constrained(decl)
    if uniform is not None:
        uses = {n for d in (*decl.dims, *decl.sizes) for n in d.names()}
        stmt = Stmt("other", decl.line, decl.text)
        return Unit(index, stmt, [uniform], {decl.name}, uses, {decl.name}, False)
    flat = lower is None or upper is None
    if flat or (lower.names() | upper.names()) - scalar_data or decl.base not in (
            "real", "vector", "row_vector") or len(decl.dims) + bool(decl.sizes) > 1:
        example = ("normal(0, 10)" if lower is None or lower.text in ZERO
                   else f"a distribution on ({lower.text}, infinity)")
        if upper is not None and lower is not None:
            why = ("its bounds are not scalar data or numbers, or it is not a real, "
                   "vector or 1-d array, so the drafter cannot draw it uniformly")
        else:
            why = ("its prior is flat (improper), so nothing can be simulated from it")
        raise DraftError(f"line {decl.line}: parameter {decl.name} has no density "
                         f"statement: {why}; add a proper prior, e.g. `{decl.name} ~ "
                         f"{example};`" + (" (a half-normal on <lower=0>)"
                                            if lower is not None and upper is None else "")
                         + ", or give it both bounds for a uniform prior")
    draw = f"uniform_rng({lower.text}, {upper.text})"
    if decl.dims or decl.sizes:
        i = f"{decl.name}_i_"
        line = f"  for ({i} in 1:num_elements({decl.name})) {decl.name}[{i}] = {draw};"
    else:
        line = f"  {decl.name} = {draw};"
    stmt = Stmt("other", decl.line, decl.text)
    uses = lower.names() | upper.names() | {n for d in (*decl.dims, *decl.sizes)
                                            for n in d.names()}
    return Unit(index, stmt, [line], {decl.name}, uses, {decl.name}, False)


def given_only_unit(decl: Decl, index: int) -> Unit:
    """A parameter with no proper prior that the simulator only takes as given (a
    hyperparameter fixed at a fitted value): drawing it is a rejection."""
    uses = {n for d in (*decl.dims, *decl.sizes) for n in d.names()}
    stmt = Stmt("other", decl.line, decl.text)
    line = (f'  reject("{decl.name} has no proper prior: the simulator takes it as given '
            f'(hyper_given = 1) and cannot draw it");')
    return Unit(index, stmt, [line], {decl.name}, uses, {decl.name}, False)


def hyperparameters(parameters: list[str], transformed: list[str], decls: dict[str, Decl],
                    units: list[Unit], hyper, given: frozenset[str] = frozenset()
                    ) -> list[str]:
    """The hyperparameters, checked: each drawn from a prior that uses no other
    (non-hyper) parameter or transformed parameter.  ``given``: parameters that are
    hyperparameters whatever ``hyper`` says (None: the automatic choice, the scalars whose
    prior uses no parameter but these, plus these)."""
    unit_of = {v: u for u in units for v in u.tildes}
    unknowns = {*parameters, *transformed}
    if hyper is None:   # scalars whose prior uses no other parameter (but given ones)
        auto = [p for p in parameters
                if decls[p].base == "real" and not decls[p].dims
                and not (unit_of[p].uses & (unknowns - given))]
        if not given:
            return auto
        hyper = [p for p in parameters if p in set(auto) | given]
    hyper = list(hyper) + sorted(given - set(hyper))
    for h in hyper:
        if h not in parameters:
            raise DraftError(f"hyperparameter {h!r} is not a parameter of the model "
                             f"(parameters: {', '.join(parameters)})")
        others = unit_of[h].uses & (unknowns - set(hyper))
        if others:
            raise refuse(unit_of[h].stmt, f"hyperparameter {h}'s prior uses "
                                           f"{sorted(others)[0]}, which is not given with "
                                           "it; make that a hyperparameter too or drop "
                                           f"{h} from the hyperparameters")
    return [p for p in parameters if p in hyper]

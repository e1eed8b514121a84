"""Model program -> simulator statements: which ``~`` becomes which ``_rng`` draw.

Every parameter's ``~`` statement becomes a draw from its prior, the statements of
transformed parameters (and model-block locals) are recomputed, and the ``~``
statements on data inside ``if (!prior_only)`` become the simulated data; all of them
in an order where each uses only what is already drawn.  Anything that cannot be
translated exactly is refused with a :class:`DraftError` naming the statement.

:func:`translate` runs the phases in turn: each statement rendered (:mod:`.render`,
reading and updating one :class:`.state.Translation`) into a unit of lines, the
copies' write-backs and the flat priors added, the transformed data the simulator
needs, the units in dependency order with the hyperparameters made optional, and the
prior's rejection loop around them (:mod:`.restrict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import DraftError, ImproperPriorError
from .mixture import fold_mixtures
from .order import dependency_order
from .parse import Decl, Expr, StanProgram, tokenize
from .render import render
from .state import Read, Translation
from .statements import defines, flatten, lhs_form, refuse_target_in
from .copies import Copy, drop_copies, find_copies
from .normaliser import LOG_C_EXACT, PRIOR_TRIES
from .restrict import rejection_loop
from .tdata import simulator_transformed_data, transformed_data_split
from .replay import OBSERVED_SUFFIX, Replayable, replay_section
from .units import Unit, given_only_unit, hyperparameters, uniform_unit
from .zero_inflated import fold_zero_inflated
from .support import INV_LOGIT_FUNCTIONS, refuse

__all__ = ["Draft", "translate"]

@dataclass
class Draft:
    """What the emitter writes: kept data, blocks copied verbatim, the outputs and the
    ordered statements of generated quantities."""

    data: list[Decl]
    hyper: list[Decl]
    functions: str | None
    transformed_data: str | None
    outputs: list[Decl]
    statements: list[str]
    simulated: list[str]
    observed: list[Decl]       # simulated data whose observed values the simulator reads
    relaxed: dict[str, str] = field(default_factory=dict)   # data -> why its bounds go
    normaliser: list[str] = field(default_factory=list)     # its outputs' declarations
    normaliser_note: str = ""                                 # what it says of c
    # the statements with the data draws left out, consuming the RNG as ``statements``
    # do up to the first data draw (None when a data draw comes before a prior draw)
    parameter_statements: list[str] | None = None


def translate(program: StanProgram, info: dict, types: list, hyper=None,
              densities: list | None = None, replay: bool = False,
              constants: dict[int, list[str]] | None = None,
              given: frozenset[str] = frozenset()) -> Draft:
    """Translate a parsed model program (``info``: its ``stanc --info``; ``types``:
    :func:`tilde_types`; ``densities``: :func:`density_types`).  ``hyper``: names of the
    hyperparameters, or None for the scalar parameters whose prior uses no other
    parameter.  ``replay``: draw the data in the model's statement order
    (:mod:`.replay`); without it, a refusal that the replay may lift is
    :class:`.Replayable`.  ``constants``: the constant terms of ``target +=`` statements
    that :func:`.targets_as_tildes` dropped, by line (for the prior's normaliser).
    ``given``: parameters that are hyperparameters in any case, taken as given only when
    their prior is improper (:func:`.given_only_unit`)."""
    tr = Translation.start(program, info, types, replay, constants or {})
    read, drawn = tr.read, tr.drawn
    if "prior_only" not in read.inputs:
        raise DraftError("the model does not declare `int<lower=0, upper=1> prior_only;` "
                         "with the likelihood inside if (!prior_only) { ... }: the "
                         "drafter needs it to tell the prior from the likelihood")
    fold_mixtures(program)
    fold_zero_inflated(program, densities or [])
    _copies(read)
    for block in ("transformed data", "transformed parameters", "model"):
        for s in program.blocks.get(block, []):
            refuse_target_in(s)
    units = _rendered_units(tr)
    try:
        drawn.cover.finish()
    except DraftError as error:
        raise Replayable(str(error)) if set(drawn.cover.pieces) & set(drawn.simulated) and \
            not replay else error from None
    _write_back_copies(tr, units)
    _flat_units(tr, units, given)
    outputs = [read.decls[p] for p in read.parameters] + [read.decls[v] for v in drawn.simulated]
    sizes = {n for d in outputs for e in (*d.bounds.values(), *d.sizes, *d.dims)
             for n in e.names()}
    td, prior, replayed = (_replayed(tr, units, sizes) if replay
                           else _direct(tr, units, sizes))
    order = dependency_order(prior)
    hyper_names = hyperparameters(read.parameters, read.transformed, read.decls, units, hyper,
                                  given)
    known = tr.written.normaliser
    checks = drawn.cover.size_checks(read.copies.values(), drawn.simulated)

    def statements(units: list[Unit], tail: list[str]) -> list[str]:
        lines, cut = _ordered_lines(units, hyper_names, drawn.truncated)
        lines += tail
        return checks + rejection_loop(known.finish(lines[:cut]), known.finish(lines[cut:]),
                                       drawn.truncated, hyper_names,
                                       None if known.unavailable else PRIOR_TRIES)

    lines = statements(order, replayed)
    data_first = next((k for k, u in enumerate(order) if u.likelihood), len(order))
    prefix = all(u.likelihood for u in order[data_first:])   # the data drawn last
    draft = _draft(tr, hyper_names, td, outputs, lines)
    draft.parameter_statements = statements(order[:data_first], []) if prefix else None
    return draft


def _flat_units(tr: Translation, units: list[Unit], given: frozenset[str]) -> None:
    """The units of the parameters with no ``~``: uniform on both bounds, given only
    when improper and in ``given``; the improper others refused together
    (:class:`~bread_stan.errors.ImproperPriorError`, the first one's message)."""
    read = tr.read
    refused: list[tuple[str, DraftError]] = []
    for p in [p for p in read.parameters if p not in tr.drawn.tilde_of]:   # flat priors
        try:
            units.append(uniform_unit(read.decls[p], read.scalar_data, len(units)))
        except DraftError as error:
            if p in given:
                units.append(given_only_unit(read.decls[p], len(units)))
            else:
                refused.append((p, error))
            continue
        factor = tr.written.normaliser.uniform(read.decls[p])
        units[-1].lines += ["  " + factor] if factor else []
    if refused:
        raise ImproperPriorError(str(refused[0][1]), [p for p, _ in refused])


def _rendered_units(tr: Translation) -> list[Unit]:
    """Each statement of transformed parameters and of the model block (the likelihood
    flattened out of its guard) rendered, with what it defines, draws and uses."""
    program = tr.read.program
    units: list[Unit] = []
    statements = [(s, False) for s in program.blocks.get("transformed parameters", [])]
    statements += flatten(program.blocks.get("model", []))
    for k, (s, likelihood) in enumerate(statements):
        lines = render(tr, s, likelihood, "  ")
        defined, drawn, local = defines(s)
        uses = s.names() - defined - local
        if s.kind == "assign":      # x[i] = ...: the index reads, the whole x is written
            uses |= Expr(s.lhs.tokens[1:], s.lhs.source).names()
        units.append(Unit(k, s, lines, defined | drawn, uses, drawn, likelihood))
    return units


def _write_back_copies(tr: Translation, units: list[Unit]) -> None:
    """The draws of each drawn copy written back to its parameters, as a unit."""
    tilde_of = tr.drawn.tilde_of
    for c in tr.read.copies.values():
        if c.name not in tilde_of:
            continue
        for p in c.parameters:
            if p in tilde_of:
                raise tr.drawn.twice(tilde_of[p], p)
            tilde_of[p] = tilde_of[c.name]
        extents = set().union(*(line.names() for line in c.statements))
        units.append(Unit(len(units), tilde_of[c.name], c.write_back, set(c.parameters),
                          {c.name} | (extents - set(c.parameters)), set(c.parameters), False))


def _replayed(tr: Translation, units: list[Unit], sizes: set[str]
              ) -> tuple[str | None, list[Unit], list[str]]:
    """A replayed program's transformed data, prior units and replayed likelihood lines
    (:mod:`.replay`)."""
    read, drawn = tr.read, tr.drawn
    simulated = set(drawn.simulated)
    td, tainted, depends = transformed_data_split(read.program, simulated)
    prior, replayed = replay_section(units, tr.written.sites, drawn.simulated, read.decls,
                                     (tainted, depends), set(read.parameters), drawn.twice)
    for name in sorted(sizes & {n for n, v in depends.items() if v}):
        raise DraftError(f"the size or bound of an output reads {name}, computed from "
                         "the simulated data")
    names = {t.text for t in tokenize(read.program.source) if t.kind == "id"}
    for v in sorted(v for v in simulated if v + OBSERVED_SUFFIX in names):
        raise DraftError(f"the program uses the name {v}{OBSERVED_SUFFIX}, which the "
                         f"simulator needs for the observed values of {v}")
    return td, prior, replayed


def _direct(tr: Translation, units: list[Unit], sizes: set[str]
            ) -> tuple[str | None, list[Unit], list[str]]:
    """A program drawn in dependency order: its transformed data, all units, nothing
    replayed."""
    simulated = set(tr.drawn.simulated)
    _direct_checks(units, simulated)
    used = set().union(*(u.uses for u in units)) | sizes
    try:
        td = simulator_transformed_data(tr.read.program, simulated, used)
    except DraftError as error:
        raise Replayable(str(error)) from None
    return td, units, []


def _ordered_lines(order: list[Unit], hyper_names: list[str], truncated: dict[str, str]
                   ) -> tuple[list[str], int]:
    """The units' lines in order, a hyperparameter's draw skipped when it is given; and
    how many lines go up to the last draw of a prior truncated by its bounds."""
    lines: list[str] = [f"  {LOG_C_EXACT} = 0;"]   # reset at every try of a rejection
    cut = 0
    for u in order:
        drawn = u.tildes & set(hyper_names)
        if drawn:
            h = drawn.pop()
            if u.defines - {h}:
                raise refuse(u.stmt, f"hyperparameter {h} is drawn together with "
                                      f"{sorted(u.defines - {h})[0]}; give it its own ~")
            lines += ["  if (hyper_given) {", f"    {h} = {h}_given[1];", "  } else {",
                      *["  " + x for x in u.lines], "  }"]
        else:
            lines += u.lines
        cut = len(lines) if u.tildes & set(truncated) else cut
    return lines, cut


def _draft(tr: Translation, hyper_names: list[str], td: str | None, outputs: list[Decl],
           lines: list[str]) -> Draft:
    """The draft: the data the simulator keeps, the blocks it copies and its lines."""
    read, drawn, known = tr.read, tr.drawn, tr.written.normaliser
    program = read.program
    simulated = set(drawn.simulated)
    kept = [s.decl for s in program.blocks.get("data", [])
            if s.kind == "decl" and s.decl.name not in simulated
            and s.decl.name != "prior_only"]
    functions = program.block_text("functions") if "functions" in program.spans else None
    functions = ((functions or "\n") + INV_LOGIT_FUNCTIONS if tr.written.inv_logit_helper
                 else functions)
    return Draft(kept, [read.decls[h] for h in hyper_names], functions, td, outputs, lines,
                 list(drawn.simulated),
                 [read.decls[v] for v in drawn.simulated] if tr.replay else [],
                 dict(drawn.relaxed), known.outputs(bool(drawn.truncated)),
                 known.note(bool(drawn.truncated)))


def _direct_checks(units: list[Unit], simulated: set[str]) -> None:
    """Refuse a prior that reads simulated data; a quantity computed from them is
    :class:`.Replayable`."""
    for u in units:
        if u.uses & simulated and (u.tildes - simulated or not u.likelihood):
            data = sorted(u.uses & simulated)[0]
            if not u.tildes and u.defines:
                raise Replayable(str(refuse(
                    u.stmt, f"{sorted(u.defines)[0]} is computed from the data {data} that "
                            "the simulator draws (outcomes that enter the model's own "
                            "quantities, as a behavioural or autoregressive effect does, "
                            "are drafted only when each element's density reads elements "
                            "stated before it); write the simulator by hand and pass "
                            "--simulator")))
            raise refuse(u.stmt, f"the prior uses the data {data} that the simulator draws")


def _copies(read: Read) -> None:
    """Find the transformed parameters with a ~ that copy parameter elements
    (:mod:`.copies`), and drop their copy statements: the simulator draws them."""
    def tildes(stmts):
        return {f[0] for x in stmts for f in [lhs_form(x.lhs) if x.kind == "tilde" else None]
                if f} | {v for x in stmts for v in tildes([*x.body, *x.orelse])}
    program = read.program
    found = find_copies(program, tildes(program.blocks.get("model", [])) & set(read.transformed))
    read.copies = {n: c for n, c in found.items() if isinstance(c, Copy)}
    read.not_copies = {n: c for n, c in found.items() if isinstance(c, str)}
    drop_copies(program, list(read.copies.values()))
    read.decls.update({s.decl.name: s.decl for s in program.blocks.get("transformed parameters",
                                                                        []) if s.kind == "decl"
                       and s.decl.name in read.copies})

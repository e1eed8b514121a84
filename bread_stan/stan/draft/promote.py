"""Promotion of transformed data to modelled data.

A program whose modelled data reach the likelihood only through a transformed-data
variable computed from data alone (``vector[N] log_earn = log(earn);`` and
``log_earn ~ normal(...)``) models that variable: the programs generated for a run
declare it in the data block instead of computing it (its definition removed from
transformed data, and the source data nothing else reads dropped), so the simulator
draws it directly.  Its value on the user's data is computed by the program's own
transformed data (:attr:`Promotion.data_program`, whose generated quantities copy it).
Log p(y) is then of the promoted variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parse import StanProgram, Stmt
from .support import refuse

__all__ = ["Promotion", "promote"]


@dataclass(frozen=True)
class Promotion:
    """The promoted transformed data (name -> the data computed from), the data the
    run's programs no longer declare, and the program computing the promoted values
    from the user's data (its generated quantities: ``copies`` name -> promoted name)."""

    promoted: dict[str, list[str]]
    dropped: list[str]
    data_program: str
    copies: dict[str, str] = field(default_factory=dict)
    integers: list[str] = field(default_factory=list)

    def sentence(self) -> str:
        """One line on what the model's data are."""
        names = ", ".join(self.promoted)
        sources = sorted({s for v in self.promoted.values() for s in v})
        return (f"the model's data are {names}, computed from {', '.join(sources)} by the "
                f"program's transformed data; log p(y) is of {names}")


def _assigned(s: Stmt) -> set[str]:
    """Names a top-level statement declares or assigns (its own locals left out)."""
    names, local = set(), set()

    def walk(x: Stmt, top: bool):
        if x.kind == "decl" and x.decl is not None:
            (names if top else local).add(x.decl.name)
        elif x.kind == "assign" and x.lhs is not None and x.lhs.tokens:
            names.add(x.lhs.tokens[0].text)
        if x.kind in ("for", "foreach"):
            local.add(x.var)
        for b in (*x.body, *x.orelse):
            walk(b, False)
    walk(s, True)
    return names - local


def _names(s: Stmt) -> set[str]:
    return {n for e in s.exprs() for n in e.names()}


def _calls(s: Stmt) -> set[str]:
    return {n for e in s.exprs() for n in e.calls()}


def promote(program: StanProgram, names: set[str], sources: dict[str, list[str]]
            ) -> tuple[str, Promotion]:
    """The source with the transformed data ``names`` declared as data, and the
    :class:`Promotion`.  ``sources``: name -> the data its value is computed from.
    Raises a :class:`~bread_stan.errors.DraftError` (one line) when the promotion cannot
    be honoured."""
    tdata = program.blocks.get("transformed data", [])
    data = program.blocks.get("data", [])
    data_names = {s.decl.name for s in data if s.kind == "decl"}
    decls = {s.decl.name: s for s in tdata if s.kind == "decl" and s.decl.name in names}
    defining = [s for s in tdata if _assigned(s) & names]
    for s in defining:
        other = sorted(_assigned(s) - names)
        if other:
            raise refuse(s, f"the statement computing {sorted(_assigned(s) & names)[0]} "
                            f"also computes {other[0]}, so it cannot be promoted to data")
        rng = sorted(c for c in _calls(s) if c.endswith("_rng"))
        if rng:
            raise refuse(s, f"{sorted(_assigned(s) & names)[0]} is computed with {rng[0]}, "
                            "not from the data alone")
    tdata_names = {s.decl.name for s in tdata if s.kind == "decl"}
    for name, s in decls.items():
        sized = sorted({n for e in (*s.decl.sizes, *s.decl.dims) for n in e.names()}
                       & tdata_names)
        if sized:
            raise refuse(s, f"the size of {name} is the transformed data {sized[0]}, "
                            "which the data block cannot read")
    removed = {id(s) for s in defining}
    rest = [s for block, stmts in program.blocks.items() if block != "data"
            for s in stmts if id(s) not in removed]
    read = set().union(*(_names(s) for s in rest)) if rest else set()
    for name in sorted(names):
        for source in sources[name]:
            if source in read:
                user = next(s for s in rest if source in _names(s))
                raise refuse(user, f"the data {source}, from which {name} is computed, are "
                                   "also read here: promoting " f"{name} to modelled data "
                                   f"would draw {name} while {source} stays fixed")
    read |= {n for d in decls.values() for e in (*d.decl.sizes, *d.decl.dims)
             for n in e.names()}              # the sizes of the promoted, now data
    candidates = set().union(*(_names(s) for s in defining)) & data_names
    dropped: list[str] = []
    while True:      # data nothing else reads (a size read only by a dropped one, too)
        live = [s for s in data if s.kind == "decl" and s.decl.name not in dropped]
        needed = read | {n for s in live for n in _names(s) if n != s.decl.name}
        more = [s.decl.name for s in live
                if s.decl.name in candidates and s.decl.name not in needed]
        if not more:
            break
        dropped += more
    source = program.source
    patches = [(s.start, s.start + len(s.text), "") for s in defining]
    patches += [(s.start, s.start + len(s.text), "") for s in data
                if s.kind == "decl" and s.decl.name in dropped]
    _, end = program.spans["data"]
    declared = " ".join(f"{decls[n].decl.type_text()} {n};" for n in sorted(names))
    patches.append((end, end, f" {declared} "))
    for start, stop, text in sorted(patches, key=lambda p: p[0], reverse=True):
        old = source[start:stop]
        source = source[:start] + text + "\n" * old.count("\n") + source[stop:]
    copies = {}
    for n in sorted(names):
        copy = f"promoted_{n}"
        while copy in program.source:
            copy += "_"
        copies[copy] = n
    gq = " ".join(f"{decls[n].decl.type_text(bounds=False)} {c} = {n};"
                  for c, n in copies.items())
    blocks = "".join(f"{b} {{{program.block_text(b)}}}\n" for b in
                     ("functions", "data", "transformed data") if b in program.spans)
    return source, Promotion({n: list(sources[n]) for n in sorted(names)}, sorted(dropped),
                             blocks + f"generated quantities {{ {gq} }}\n", copies,
                             sorted(n for n in names if decls[n].decl.base == "int"))


"""The simulator's transformed data block: the model's, less what is computed from the
data the simulator draws.

A model's transformed data may read the modelled data (the capture-recapture programs
count the observed rows, ``s[i] = sum(y[i])``, ``C = C + 1``).  The simulator has no
such data: it draws them.  When nothing the simulator computes reads those transformed
data (a zero-inflated condition on ``s[i]`` is folded into the draw of ``y[i]``), the
statements that compute them are left out; when something does, the model's data enter
their own distribution and the draft is refused.
"""

from __future__ import annotations

from .parse import StanProgram, Stmt
from .support import refuse

__all__ = ["simulator_transformed_data", "transformed_data_split", "assigned_names"]


def assigned_names(s: Stmt, local: frozenset[str] = frozenset()) -> set[str]:
    """Names a top-level statement declares or assigns (not its blocks' locals)."""
    if s.kind == "decl":
        return {s.decl.name} - local
    if s.kind == "assign":
        return {s.lhs.tokens[0].text} - local
    inner = set(local) | {b.decl.name for b in (*s.body, *s.orelse) if b.kind == "decl"
                          and s.kind in ("block", "for", "foreach", "while")}
    if s.kind in ("for", "foreach"):
        inner.add(s.var)
    return {n for b in (*s.body, *s.orelse) for n in assigned_names(b, frozenset(inner))}


def simulator_transformed_data(program: StanProgram, simulated: set[str],
                               used: set[str]) -> str | None:
    """The text of the simulator's transformed data block (None: the model has none).

    ``simulated``: the data the simulator draws; ``used``: every name the simulator's
    statements and declarations read.  Refuses when a used name is computed from
    simulated data."""
    if "transformed data" not in program.spans:
        return None
    stmts = program.blocks.get("transformed data", [])
    reads = [s.names() for s in stmts]
    tainted: set[str] = set()
    while True:
        grown = set(tainted)
        for s, names in zip(stmts, reads):
            if names & (simulated | grown):
                grown |= assigned_names(s)
        if grown == tainted:
            break
        tainted = grown
    if not tainted:
        return program.block_text("transformed data")
    kept = []
    for s, names in zip(stmts, reads):
        defined = assigned_names(s)
        if (defined & tainted) & used or (defined & tainted and defined - tainted):
            source = sorted(names & (simulated | tainted)) or sorted(defined & tainted)
            raise refuse(s, f"transformed data use {source[0]}, which the simulator draws "
                            "(a model whose data enter their own distribution, like an "
                            "autoregression, needs a hand-written simulator)")
        if not defined & tainted and not names & (simulated | tainted):
            kept.append(s.text)
    return "".join(f"\n  {text}" for text in kept) + "\n" if kept else None


def transformed_data_split(program: StanProgram, simulated: set[str]
                           ) -> tuple[str | None, list[Stmt], dict[str, set[str]]]:
    """For a simulator that replays the likelihood (:mod:`.replay`): the text of its
    transformed data block (the statements that read no simulated data, directly or
    through others), the statements that do (to recompute in generated quantities),
    and name -> the simulated variables each name computed there depends on."""
    if "transformed data" not in program.spans:
        return None, [], {}
    stmts = program.blocks.get("transformed data", [])
    depends: dict[str, set[str]] = {}
    while True:
        before = {k: set(v) for k, v in depends.items()}
        for s in stmts:
            names = s.names()
            found = (names & simulated) | set().union(
                *(depends.get(n, set()) for n in names | assigned_names(s)))
            for name in assigned_names(s) if found else ():
                depends.setdefault(name, set()).update(found)
        if depends == before:
            break
    reads = set(depends) | simulated
    tainted = [s for s in stmts
               if (assigned_names(s) | s.names()) & reads]
    kept = [s.text for s in stmts if not any(s is t for t in tainted)]
    text = "".join(f"\n  {t}" for t in kept) + "\n" if kept else None
    return (text if tainted else program.block_text("transformed data")), tainted, depends

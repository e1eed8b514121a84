"""Transformed parameters that only copy parameter elements, drawn in their place.

posteriordb's hier_2pl gathers two parameter vectors into pairs and puts the prior on
the pairs::

    transformed parameters {
      array[I] vector[2] xi;
      for (i in 1:I) { xi[i, 1] = xi1[i]; xi[i, 2] = xi2[i]; ... }
    }
    model { for (i in 1:I) xi[i] ~ multi_normal_cholesky(mu, L_Sigma); ... }

When every element of a transformed parameter X is assigned exactly once, from one
element of a parameter, with no arithmetic, X is a re-indexing of those parameter
elements (a bijection, so no Jacobian): a density on X is a density on them.  The
simulator draws X from it and writes the draws back (``xi1[i] = xi[i, 1];``).  X and
the parameters it copies have the same bounds (none, or the same ``lower``/``upper``),
so a draw of X is a draw on the parameters' support.  brms writes such copies
("vector versions of real parameters")::

    vector<lower=0>[Kgp_1] vsdgp_1;
    vsdgp_1[1] = sdgp_1;

A dimension filled by integer indices whose size is a data variable (``Kgp_1``) is
filled exactly once only when that size is the number of indices; the simulator checks
it (:attr:`Copy.sizes`) and rejects data where it does not hold.

The copies read here: statements ``X[a, ...] = P[b, ...];`` inside ``for (v in 1:E)``
loops (and blocks, no conditionals), each index a loop variable or an integer; every
loop variable indexes X once and P once, running over the declared extent of the
dimension it indexes; the integer indices of X's statements enumerate their
dimensions once (1 to the size, or 1 to m for a size read from data, checked to be m);
each copied parameter is copied whole by one statement.
:func:`find_copies` returns, for each transformed parameter with a density, either its
:class:`Copy` or why it is not one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from .parse import Decl, StanProgram, Stmt
from .support import top_level_split

__all__ = ["Copy", "find_copies", "drop_copies"]


@dataclass
class Copy:
    """A transformed parameter that copies parameter elements: the parameters it copies,
    the statements copying them, the simulator's lines writing the draws back, and the
    sizes read from data that must equal the number of elements the copies fill."""

    name: str
    parameters: list[str]
    statements: list[Stmt]
    write_back: list[str]
    sizes: list[tuple[str, int]] = field(default_factory=list)   # data size -> must be


def _decls(program: StanProgram, block: str) -> dict[str, Decl]:
    return {s.decl.name: s.decl for s in program.blocks.get(block, []) if s.kind == "decl"}


def _assignments(stmts: list[Stmt], name: str, loops: list) -> list[tuple[Stmt, list]]:
    """Every assignment to ``name`` with its enclosing statements (None: a conditional)."""
    out = []
    for s in stmts:
        if s.kind == "assign" and s.lhs.tokens[0].text == name:
            out.append((s, loops))
        if s.kind in ("for", "block"):
            out += _assignments(s.body, name, loops + [s])
        elif s.body or s.orelse:
            out += _assignments([*s.body, *s.orelse], name, loops + [None])
    return out


def _indices(tokens) -> tuple[str, list[str]] | None:
    """(variable, index texts) of ``v[i, 1]``: each index one identifier or integer."""
    texts = [t.text for t in tokens]
    if len(texts) == 1:
        return texts[0], []
    if len(texts) < 4 or texts[1] != "[" or texts[-1] != "]":
        return None
    parts = [[t.text for t in p] for p in top_level_split(tokens[2:-1], ",")]
    if any(len(p) != 1 for p in parts):
        return None
    return texts[0], [p[0] for p in parts]


def _copy(program: StanProgram, name: str, params: dict[str, Decl], tdecl: Decl
          ) -> Copy | str:
    extents = [e.text for e in (*tdecl.dims, *tdecl.sizes)]
    if tdecl.init is not None or tdecl.base not in ("real", "vector", "row_vector", "matrix"):
        return "it is declared with a constrained type or an initial value"
    found = _assignments(program.blocks.get("transformed parameters", []), name, [])
    if not found:
        return "it is never assigned"
    constants, copied, lines = [], [], []
    for s, loops in found:
        where = f"line {s.line} `{' '.join(s.text.split())}`"
        lhs, rhs = _indices(s.lhs.tokens), _indices(s.rhs.tokens)
        if s.op != "=" or lhs is None or rhs is None or rhs[0] not in params:
            return f"{where} is not a copy of a parameter element"
        fors = [x for x in loops if x is not None and x.kind == "for"]
        if None in loops or any(f.lhs.text != "1" for f in fors):
            return f"{where} is inside a conditional or a loop not starting at 1"
        loop_of = {f.var: f.rhs.text for f in fors}
        p = params[rhs[0]]
        p_extents = [e.text for e in (*p.dims, *p.sizes)]
        if p.base not in ("real", "vector", "row_vector", "matrix"):
            return f"{where} copies {rhs[0]}, which has a constrained type"
        if _support(p) != _support(tdecl):
            return (f"{where} copies {rhs[0]}, whose bounds differ from {name}'s (a draw "
                    f"of {name} would not keep to {rhs[0]}'s support)")
        if len(lhs[1]) != len(extents) or len(rhs[1]) != len(p_extents):
            return f"{where} copies a part of a variable, not one element"
        if rhs[0] in copied:
            return f"{where}: {rhs[0]} is copied by more than one statement"
        for side, ext in ((lhs[1], extents), (rhs[1], p_extents)):
            used = [i for i in side if i in loop_of]
            if sorted(used) != sorted(loop_of) or any(
                    not i.isdigit() and (i not in loop_of or loop_of[i] != e)
                    for i, e in zip(side, ext)):
                return (f"{where}: each loop variable must index each side once, over "
                        "the declared extent of its dimension")
        if any(i.isdigit() for i in rhs[1]):
            return f"{where} copies a part of {rhs[0]}, not all of it"
        constants.append(tuple((k, i) for k, i in enumerate(lhs[1]) if i.isdigit()))
        copied.append(rhs[0])
        head = "".join(f"for ({f.var} in 1:{f.rhs.text}) " for f in fors)
        lines.append(f"  {head}{s.rhs.text} = {s.lhs.text};")
    positions = {tuple(k for k, _ in c) for c in constants}
    if len(positions) != 1:
        return "its copy statements fix different dimensions"
    fixed = positions.pop()
    got = [tuple(int(i) for _, i in c) for c in constants]
    filled = [max((g[j] for g in got), default=0) for j in range(len(fixed))]
    checks = []
    for j, k in enumerate(fixed):
        if extents[k].isdigit():
            filled[j] = int(extents[k])
        elif extents[k].isidentifier():
            checks.append((extents[k], filled[j]))
        else:
            return "a dimension it fills by integer indices has a size that is an expression"
    expected = set(product(*(range(1, n + 1) for n in filled)))
    if len(got) != len(set(got)) or set(got) != expected:
        return "its copy statements do not fill each element exactly once"
    return Copy(name, copied, [s for s, _ in found], lines, checks)


def _support(decl: Decl) -> dict[str, str]:
    """The lower and upper bounds of a declaration, as text without spaces."""
    return {k: "".join(v.text.split()) for k, v in decl.bounds.items()
            if k in ("lower", "upper")}


def find_copies(program: StanProgram, names: set[str]) -> dict[str, Copy | str]:
    """For each transformed parameter in ``names``: its :class:`Copy`, or why it is not
    one (a sentence)."""
    params = _decls(program, "parameters")
    tdecls = _decls(program, "transformed parameters")
    return {n: _copy(program, n, params, tdecls[n]) for n in sorted(names) if n in tdecls}


def drop_copies(program: StanProgram, copies: list[Copy]) -> None:
    """Remove the copy statements from the transformed parameters block, in place (the
    simulator draws the copies and writes them back instead)."""
    drop = {id(s) for c in copies for s in c.statements}

    def prune(stmts: list[Stmt]) -> list[Stmt]:
        out = []
        for s in stmts:
            if id(s) in drop:
                continue
            s.body, s.orelse = prune(s.body), prune(s.orelse)
            out.append(s)
        return out

    program.blocks["transformed parameters"] = prune(
        program.blocks.get("transformed parameters", []))

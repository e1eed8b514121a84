"""Transformed data that are the row totals of data: ``s[k] = sum(y[k]);``.

The capture-recapture programs read their detection histories ``y`` (an
``array[M, T] int<lower=0, upper=1>``) through the row totals ``s``.  A total is zero
exactly when its row is, and the total of T independent bernoulli(p) draws is
binomial(T, p), so both the zero-inflated reader (:mod:`.zero_inflated`) and the
splitter (a density on ``s[i]`` is a density on the data ``y``) use these totals.
:func:`row_sums` finds them, conservatively: s declared ``array[E] int`` without an
initial value and assigned once, by ``s[k] = sum(y[k]);`` in ``for (k in 1:E)`` (no
conditional around it), with y data of first extent E.
"""

from __future__ import annotations

from .parse import StanProgram, Stmt

__all__ = ["row_sums"]


def _assignments(stmts: list[Stmt], name: str, loops: list) -> list[tuple[Stmt, list]]:
    out = []
    for t in stmts:
        if t.kind == "assign" and t.lhs.tokens[0].text == name:
            out.append((t, loops))
        out += _assignments(t.body, name, loops + [t if t.kind in ("for", "block") else None])
        out += _assignments(t.orelse, name, loops + [None])
    return out


def row_sums(program: StanProgram) -> dict[str, str]:
    """{s: y} for each transformed data s holding the row totals of the data y."""
    data = {s.decl.name: s.decl for s in program.blocks.get("data", []) if s.kind == "decl"}
    tdata = program.blocks.get("transformed data", [])
    out = {}
    for st in tdata:
        decl = st.decl if st.kind == "decl" else None
        if decl is None or decl.base != "int" or decl.init is not None or decl.sizes \
                or len(decl.dims) != 1:
            continue
        found = _assignments(tdata, decl.name, [])
        if len(found) != 1:
            continue
        t, loops = found[0]
        lhs, rhs = [x.text for x in t.lhs.tokens], [x.text for x in t.rhs.tokens]
        if None in loops or t.op != "=" or len(lhs) != 4 or len(rhs) != 7 \
                or rhs[:2] != ["sum", "("] or rhs[3:] != ["[", lhs[2], "]", ")"]:
            continue
        y = data.get(rhs[2])
        extent = decl.dims[0].text
        if y is None or y.base != "int" or not y.dims or y.dims[0].text != extent:
            continue
        if any(f.kind == "for" and f.var == lhs[2] and f.lhs.text == "1"
               and f.rhs.text == extent for f in loops):
            out[decl.name] = rhs[2]
    return out

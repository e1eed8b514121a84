"""The K-component mixture of the Stan User's Guide, read as a categorical draw::

    for (k in 1:K) {
      lp[k] = log(theta[k]) + foo_lpdf(y[n] | a[k], b[k]);
    }
    target += log_sum_exp(lp);          // possibly inside if (!prior_only)

with ``lp`` declared of size K and ``theta`` a simplex of size K is the density
sum_k theta[k] foo(y[n] | a[k], b[k]) of y[n]: a draw of the component k from
categorical(theta), then of y[n] from foo with that k's arguments.  :func:`fold_mixtures`
replaces the loop and the ``target +=`` by one statement of kind ``mixture`` (outcome
``lhs``, distribution ``dist``, arguments ``args``, weights ``rhs``, component variable
``var``) that the translator draws; anything else is left as it was.
"""

from __future__ import annotations

from typing import Iterable

from .parse import Decl, Expr, StanProgram, Stmt
from .support import top_level_split

__all__ = ["fold_mixtures"]


def _walk_lists(stmts: list[Stmt]) -> Iterable[list[Stmt]]:
    yield stmts
    for s in stmts:
        for inner in (s.body, s.orelse):
            yield from _walk_lists(inner)


def _decls(stmts: list[Stmt]) -> dict[str, Decl]:
    return {s.decl.name: s.decl for lst in _walk_lists(stmts) for s in lst
            if s.kind == "decl"}


def _sum_target(s: Stmt) -> tuple[Stmt, str] | None:
    """(the target statement, the name summed) of ``target += log_sum_exp(lp);``, bare or
    as the only statement of ``if (!prior_only)``."""
    if s.kind == "if" and not s.orelse and [t.text for t in s.rhs.tokens] == [
            "!", "prior_only"]:
        body = s.body[0].body if len(s.body) == 1 and s.body[0].kind == "block" else s.body
        return _sum_target(body[0]) if len(body) == 1 else None
    if s.kind != "target":
        return None
    toks = [t.text for t in s.rhs.tokens]
    if len(toks) == 4 and toks[:2] == ["log_sum_exp", "("] and toks[3] == ")":
        return s, toks[2]
    return None


def _component(loop: Stmt, lp: str, source: str):
    """(weights, distribution, outcome, arguments) of the loop's one statement
    ``lp[k] = log(w[k]) + foo_lpdf(y | args);`` (either order of the terms), or None."""
    if loop.kind != "for" or loop.lhs.text != "1":
        return None
    body = loop.body[0].body if len(loop.body) == 1 and loop.body[0].kind == "block" \
        else loop.body
    if len(body) != 1 or body[0].kind != "assign" or body[0].op != "=":
        return None
    k, s = loop.var, body[0]
    if [t.text for t in s.lhs.tokens] != [lp, "[", k, "]"]:
        return None
    terms = top_level_split(s.rhs.tokens, "+")
    if len(terms) != 2:
        return None
    weights = density = None
    for term in terms:
        texts = [t.text for t in term]
        if len(texts) == 7 and texts[:2] == ["log", "("] and texts[3:] == ["[", k, "]", ")"]:
            weights = Expr((term[2],), source)
        elif len(texts) > 3 and texts[0].endswith(("_lpdf", "_lpmf")) and texts[1] == "(" \
                and texts[-1] == ")":
            density = term
    if weights is None or density is None:
        return None
    parts = top_level_split(density[2:-1], "|")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return None
    args = [Expr(tuple(a), source) for a in top_level_split(parts[1], ",")]
    return weights, density[0].text[:-5], Expr(tuple(parts[0]), source), args


def fold_mixtures(program: StanProgram) -> None:
    """Replace each K-component mixture of the model block (see the module docstring) by
    one ``mixture`` statement, in place."""
    model = program.blocks.get("model", [])
    decls = {**_decls(model), **{s.decl.name: s.decl for block in ("data", "parameters")
                                 for s in program.blocks.get(block, []) if s.kind == "decl"}}
    for stmts in list(_walk_lists(model)):
        i = 0
        while i + 1 < len(stmts):
            found = _sum_target(stmts[i + 1])
            component = found and _component(stmts[i], found[1], program.source)
            if component:
                target, lp = found
                weights, dist, outcome, args = component
                size = stmts[i].rhs.text
                lp_decl, w_decl = decls.get(lp), decls.get(weights.text)
                if (lp_decl is not None and [e.text for e in (*lp_decl.dims, *lp_decl.sizes)]
                        == [size] and w_decl is not None and w_decl.base == "simplex"
                        and not w_decl.dims and [e.text for e in w_decl.sizes] == [size]):
                    folded = Stmt("mixture", target.line, target.text, lhs=outcome,
                                  rhs=weights, dist=dist, args=args, var=stmts[i].var)
                    if stmts[i + 1] is target:
                        stmts[i:i + 2] = [folded]
                    else:               # inside if (!prior_only): keep the guard
                        guard = stmts[i + 1]
                        inner = guard.body[0].body if guard.body[0].kind == "block" \
                            else guard.body
                        inner[0] = folded
                        del stmts[i]
            i += 1

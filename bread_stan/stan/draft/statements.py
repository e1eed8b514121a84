"""Statements of the model block as the drafter reads them: the ``if (!prior_only)``
guard, the form of a ``~`` left side, and what a top-level statement defines and draws."""

from __future__ import annotations

from .parse import Expr, Stmt
from .support import log_mix, refuse

__all__ = ["is_prior_only_guard", "flatten", "lhs_form", "defines", "has_tilde", "walk",
           "refuse_target_in"]


def is_prior_only_guard(stmt: Stmt) -> bool:
    return (stmt.kind == "if" and not stmt.orelse
            and [t.text for t in stmt.rhs.tokens] == ["!", "prior_only"])


def flatten(stmts: list[Stmt]) -> list[tuple[Stmt, bool]]:
    """Top-level model statements with the ``if (!prior_only)`` blocks opened:
    (statement, inside the likelihood)."""
    out = []
    for s in stmts:
        if is_prior_only_guard(s):
            body = s.body[0].body if s.body[0].kind == "block" else s.body
            out += [(b, True) for b in body]
        else:
            out.append((s, False))
    return out


def lhs_form(lhs: Expr) -> tuple[str, str] | None:
    """(variable, form) of a ``~`` left side: form is name, index or to_vector."""
    toks = [t.text for t in lhs.tokens]
    if len(toks) == 1 and lhs.tokens[0].kind == "id":
        return toks[0], "name"
    if len(toks) >= 4 and lhs.tokens[0].kind == "id" and toks[1] == "[" and toks[-1] == "]":
        depth = 0
        for k, t in enumerate(toks[1:], start=1):
            depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(t, 0)
            if depth == 0 and k != len(toks) - 1:
                return None
        return toks[0], "index"
    if toks[:2] == ["to_vector", "("] and len(toks) == 4 and toks[3] == ")" \
            and lhs.tokens[2].kind == "id":
        return toks[2], "to_vector"
    return None


def defines(s: Stmt) -> tuple[set[str], set[str], set[str]]:
    """(variables defined at this level, drawn by ~, local names) of a statement."""
    if s.kind == "decl":
        return {s.decl.name}, set(), set()
    if s.kind == "tilde":
        form = lhs_form(s.lhs)
        return {form[0]}, {form[0]}, set()
    if s.kind == "assign":
        return {s.lhs.tokens[0].text}, set(), set()
    if s.kind == "target" and log_mix(s) is not None:
        form = lhs_form(log_mix(s)[1][1])
        return ({form[0]}, {form[0]}, set()) if form else (set(), set(), set())
    if s.kind in ("mixture", "zero_inflated"):
        form = lhs_form(s.lhs)
        return ({form[0]}, {form[0]}, {s.var}) if form else (set(), set(), {s.var})
    defined, drawn, local = set(), set(), set()
    if s.kind in ("for", "foreach"):
        local.add(s.var)
    for b in (*s.body, *s.orelse):
        d, t, l = defines(b)
        drawn |= t
        local |= l
        if b.kind == "decl" and s.kind in ("block", "for", "foreach"):
            local |= d       # declared inside a block: local to it
        else:
            defined |= d
    return defined - local, drawn, local


def has_tilde(s: Stmt) -> bool:
    return s.kind == "tilde" or any(has_tilde(b) for b in (*s.body, *s.orelse))


def walk(stmts):
    """Every statement of ``stmts``, nested ones included, in program order."""
    for s in stmts:
        yield s
        yield from walk([*s.body, *s.orelse])


def refuse_target_in(s: Stmt) -> None:
    """Refuse a ``target +=`` in ``s`` or its body, unless it is a ``log_mix`` the
    drafter folds, and a ``jacobian +=``."""
    if s.kind == "target" and log_mix(s) is not None:
        return
    if s.kind == "target":
        raise refuse(s, "target += has no _rng counterpart; write the simulator by hand "
                         "(or state this term as a ~ statement)")
    if s.kind == "assign" and s.op == "+=" and s.lhs is not None and s.lhs.text == "jacobian":
        raise refuse(s, "jacobian += (Stan 2.36+) makes the prior a density of transformed "
                         "parameters, which the drafter does not draw; write the simulator "
                         "by hand")
    for b in (*s.body, *s.orelse):
        refuse_target_in(b)

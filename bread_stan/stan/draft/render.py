"""One statement of the model -> its lines in the simulator, by the statement's kind.

``~`` statements become draws (:mod:`.tilde`), folded mixtures and ``log_mix`` draws of
one data element (:mod:`.elements`); declarations and assignments are copied; blocks,
for loops and conditionals on data keep their shape, their bodies rendered in turn.
Anything else is refused with the statement's line.
"""

from __future__ import annotations

from typing import Callable

from .elements import categorical, mixture, zero_inflated
from .parse import Stmt
from .replay import Replayable, Unreplayable, site_lines
from .state import Translation
from .statements import has_tilde, is_prior_only_guard
from .support import log_mix, refuse
from .tilde import tilde

__all__ = ["render"]


def render(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    """The simulator's lines for the model statement ``s`` (``likelihood``: inside
    ``if (!prior_only)``), indented by ``indent``."""
    if tr.replay and s.kind in ("mixture", "zero_inflated", "target"):
        raise Unreplayable("a mixture or target += is not replayed")
    handler = _HANDLERS.get(s.kind)
    if handler is None:
        raise refuse(s, "this statement is not translated (only ~, declarations, "
                         "assignments, for loops, blocks and conditionals on data are)")
    return handler(tr, s, likelihood, indent)


def _tilde(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    written = tr.written
    n, written.factor = len(written.sites), []
    line = tilde(tr, s, likelihood)
    return site_lines(written.sites[-1], indent) if len(written.sites) > n \
        else [indent + line] + [indent + x for x in written.factor]


def _mixture(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    return [indent + categorical(tr, s, likelihood)]


def _zero_inflated(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    return [indent + zero_inflated(tr, s, likelihood)]


def _target(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    if log_mix(s) is not None:
        return [indent + mixture(tr, s, likelihood)]
    raise refuse(s, "target += has no _rng counterpart; write the simulator by "
                     "hand (or state this term as a ~ statement)")


def _copied(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    """A declaration or an assignment, as the model states it."""
    if "prior_only" in s.names():
        raise refuse(s, "prior_only is used outside if (!prior_only)")
    return [indent + s.text]


def _block(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    inner = [x for b in s.body for x in render(tr, b, likelihood, indent + "  ")]
    return [indent + "{", *inner, indent + "}"]


def _loop(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    head = (f"for ({s.var} in {s.lhs.text}:{s.rhs.text})" if s.kind == "for"
            else f"for ({s.var} in {s.lhs.text})")
    tr.loops.append(s)
    body = _body(tr, s.body, likelihood, indent)
    tr.loops.pop()
    return [indent + head + " {", *body, indent + "}"]


def _conditional(tr: Translation, s: Stmt, likelihood: bool, indent: str) -> list[str]:
    """``if (!prior_only)`` (its body is the likelihood), or a conditional on data;
    a ~ inside one draws data, in a replayed program only."""
    if is_prior_only_guard(s):
        return [indent + "{", *_body(tr, s.body, True, indent), indent + "}"]
    read = tr.read
    if s.rhs.names() & {*read.parameters, *read.transformed, "prior_only"}:
        raise refuse(s, "a conditional on a parameter (or on prior_only other "
                         "than if (!prior_only) { ... }) is not translated")
    if has_tilde(s) and not tr.replay:
        error = refuse(s, "a ~ inside a conditional is not translated (the "
                          "variable would be left undrawn when the condition is "
                          "false)")
        raise Replayable(str(error)) if read.tildes_on_data(s) else error
    if has_tilde(s) and not read.tildes_on_data(s):
        raise refuse(s, "a ~ on a parameter inside a conditional is not translated")
    tr.conditions.append((s, 0))
    lines = [indent + f"if ({s.rhs.text}) {{", *_body(tr, s.body, likelihood, indent)]
    tr.conditions[-1] = (s, 1)
    if s.orelse:
        lines += [indent + "} else {", *_body(tr, s.orelse, likelihood, indent)]
    tr.conditions.pop()
    return lines + [indent + "}"]


def _body(tr: Translation, stmts: list[Stmt], likelihood: bool, indent: str) -> list[str]:
    stmts = stmts[0].body if len(stmts) == 1 and stmts[0].kind == "block" else stmts
    return [x for b in stmts for x in render(tr, b, likelihood, indent + "  ")]


_HANDLERS: dict[str, Callable[[Translation, Stmt, bool, str], list[str]]] = {
    "tilde": _tilde, "mixture": _mixture, "zero_inflated": _zero_inflated,
    "target": _target, "decl": _copied, "assign": _copied, "block": _block,
    "for": _loop, "foreach": _loop, "if": _conditional,
}

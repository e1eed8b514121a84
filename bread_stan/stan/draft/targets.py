"""Read ``target += foo_lpdf(x | ...)`` as ``x ~ foo(...)`` for the drafter.

A ``target +=`` statement of the model block that is a sum of density terms (each
``foo_lpdf``/``_lpmf``/``_lupdf``/``_lupmf`` call with a plus sign and no factor) is
rewritten, on the same source line, as one ``~`` statement per term.  A ``_lcdf`` or
``_lccdf`` term whose arguments read no parameter is a constant (brms's
``- 1 * student_t_lccdf(0 | 3, 0, 2.5)``, the normaliser of a prior truncated at a
bound the parameter is declared with) and is dropped: it does not change the
distribution, whose support the drafter then checks against the declaration.  The
drawing distribution of the rewritten program is the model's; its normalising constants
are not, so the rewrite is for drafting only, and the dropped terms are handed back (by
line) to whoever accounts for the prior's normaliser (:mod:`.normaliser`).
"""

from __future__ import annotations

from typing import Iterable

from .parse import StanProgram, Stmt, Token, parse_program
from .terms import CDF, DENSITY, density_term, split_sum

__all__ = ["targets_as_tildes"]


def _walk(stmts: Iterable[Stmt]) -> Iterable[Stmt]:
    for s in stmts:
        yield s
        yield from _walk(s.body)
        yield from _walk(s.orelse)


def _text(source: str, tokens: tuple[Token, ...]) -> str:
    return source[tokens[0].start:tokens[-1].end] if tokens else ""


def _unknowns(program: StanProgram) -> set[str]:
    """Names whose value is not fixed by the data: parameters and every local."""
    names = set()
    for block in ("parameters", "transformed parameters", "model"):
        for s in _walk(program.blocks.get(block, [])):
            if s.kind == "decl":
                names.add(s.decl.name)
    return names


def _as_tildes(source: str, s: Stmt, unknowns: set[str], dropped: list[str]
               ) -> str | None:
    spans = split_sum(s.rhs.tokens)
    if spans is None:
        return None
    out = []
    for a, b in spans:
        term = density_term(s.rhs.tokens[a:b], set())
        if not term.call:
            return None
        if CDF.search(term.call):
            names = {t.text for t in term.tokens if t.kind == "id"}
            if names & unknowns:
                return None
            dropped.append(_text(source, term.tokens))
            continue
        if [t.text for t in term.prefix] not in ([], ["+"]) or not DENSITY.search(term.call):
            return None
        if all(t.kind == "num" for t in term.outcome):
            return None      # bernoulli_lpmf(1 | w): a mixture weight, not a draw of anything
        dist = DENSITY.sub("", term.call)
        out.append(f"{_text(source, term.outcome)} ~ {dist}({_text(source, term.args)});")
    return " ".join(out) if out else None


def targets_as_tildes(source: str, constants: dict[int, list[str]] | None = None) -> str:
    """The program with every ``target +=`` sum of densities of the model block written
    as ``~`` statements (line numbers kept); other statements unchanged.  ``constants``
    receives the constant terms dropped, by the line of their statement."""
    program = parse_program(source)
    unknowns = _unknowns(program)
    patches = []
    for s in _walk(program.blocks.get("model", [])):
        if s.kind != "target":
            continue
        dropped: list[str] = []
        text = _as_tildes(source, s, unknowns, dropped)
        if text is None:
            continue
        if dropped and constants is not None:
            constants.setdefault(s.line, []).extend(dropped)
        start = source.rfind("target", 0, s.rhs.tokens[0].start)
        end = start + len(s.text)
        old = source[start:end]
        patches.append((start, end, text + "\n" * max(0, old.count("\n") - text.count("\n"))))
    for start, end, text in sorted(patches, reverse=True):
        source = source[:start] + text + source[end:]
    return source

"""Terms of a ``target +=`` expression: its top-level sum, and each term read as a
density call ``[+-] [factor *] foo_lpdf(outcome | ...)`` where it is one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .parse import Token

__all__ = ["DENSITY", "CDF", "DensityTerm", "split_sum", "density_term", "call_extent"]

DENSITY = re.compile(r"_(lpdf|lpmf|lupdf|lupmf)$")
CDF = re.compile(r"_(lcdf|lccdf)$")
_OPERAND_END = {")", "]", "'"}


def split_sum(tokens: Sequence[Token]) -> list[tuple[int, int]] | None:
    """Spans (start, end token indices) of the top-level ``+``/``-`` terms, or None when
    the expression has a lower-precedence operator at the top level."""
    spans, start, depth = [], 0, 0
    for k, t in enumerate(tokens):
        if t.kind != "op":
            continue
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        elif depth == 0 and t.text in ("?", ":", "||", "&&", "==", "!=", "<", ">", "<=",
                                       ">="):
            return None
        elif depth == 0 and t.text in "+-" and k > 0 and (
                tokens[k - 1].kind in ("id", "num") or tokens[k - 1].text in _OPERAND_END):
            spans.append((start, k))
            start = k
    spans.append((start, len(tokens)))
    return spans


@dataclass
class DensityTerm:
    """One term of a sum; for a density call, its parts as token spans."""

    tokens: tuple[Token, ...]
    call: str = ""                       # the density or cdf called, "" for an expression
    outcome: tuple[Token, ...] = ()
    rest: tuple[Token, ...] = ()         # the density's other arguments and factors
    prefix: tuple[Token, ...] = ()       # sign and constant factor before the call
    args: tuple[Token, ...] = ()         # the arguments after the outcome


def call_extent(tokens: Sequence[Token], open_at: int) -> tuple[int | None, int | None]:
    """For the call whose ``(`` is ``tokens[open_at]``: the index of its closing
    bracket and of its first top-level ``|`` or ``,`` before it (None when absent)."""
    depth, first = 0, None
    for j in range(open_at, len(tokens)):
        t = tokens[j]
        if t.kind == "op" and t.text in "([{":
            depth += 1
        elif t.kind == "op" and t.text in ")]}":
            depth -= 1
            if depth == 0:
                return j, first
        elif depth == 1 and t.kind == "op" and t.text in ("|", ",") and first is None:
            first = j
    return None, first


def density_term(tokens: Sequence[Token], constants: set[str]) -> DensityTerm:
    """The term as ``[+-] [factor *] foo_lpdf(outcome | ...)``, or as an expression."""
    toks = tuple(tokens)
    k = 0
    while k < len(toks) and toks[k].text in "+-" and toks[k].kind == "op":
        k += 1
    factor_end = k
    while factor_end < len(toks) and (toks[factor_end].kind == "num" or (
            toks[factor_end].kind == "id" and toks[factor_end].text in constants
            and not (factor_end + 1 < len(toks) and toks[factor_end + 1].text == "("))
            or toks[factor_end].text == "*"):
        factor_end += 1
    if factor_end > k and toks[factor_end - 1].text != "*":
        return DensityTerm(toks)
    k = factor_end
    if not (k + 1 < len(toks) and toks[k].kind == "id" and toks[k + 1].text == "("
            and (DENSITY.search(toks[k].text) or CDF.search(toks[k].text))):
        return DensityTerm(toks)
    stop, bar = call_extent(toks, k + 1)
    if stop != len(toks) - 1:
        return DensityTerm(toks)
    bar = stop if bar is None else bar
    return DensityTerm(toks, toks[k].text, toks[k + 2:bar], toks[:k] + toks[bar:stop],
                       toks[:k], toks[bar + 1:stop])

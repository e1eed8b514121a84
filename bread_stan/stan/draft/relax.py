"""Data-block bounds dropped from a program: the generated model reads simulated data
that a likelihood may draw outside bounds the user declared as input checks.

Bounds in the data block only validate the input; they never enter the density.  A
program ``vector<lower=0>[N] y; ... y ~ normal(mu, sigma);`` defines the joint of a
model that draws y on the whole real line, and its posterior given any data is that
model's.  Simulated data sets from that model can fall below 0, so the program the run
evaluates on them declares ``y`` without the bound; on the user's own data it computes
the same numbers.
"""

from __future__ import annotations

from typing import Iterable

from ...errors import DraftError
from .parse import parse_program

__all__ = ["relax_data_bounds"]


def relax_data_bounds(source: str, names: Iterable[str]) -> str:
    """``source`` with the data-block declarations of ``names`` written without their
    lower/upper bounds (line numbers unchanged)."""
    names = set(names)
    if not names:
        return source
    program = parse_program(source)
    start, end = program.spans["data"]
    patches = []
    for s in program.blocks["data"]:
        if s.kind != "decl" or s.decl.name not in names:
            continue
        at = source.find(s.text, start, end)
        if at < 0 or source.find(s.text, at + 1, end) >= 0:
            raise DraftError(f"line {s.line} `{' '.join(s.text.split())}`: cannot rewrite "
                             f"this declaration without its bounds (it is not one "
                             f"statement of its own); declare {s.decl.name} on its own line")
        new = f"{s.decl.type_text(bounds=False)} {s.decl.name};"
        patches.append((at, at + len(s.text), new + "\n" * s.text.count("\n")))
    missing = names - {s.decl.name for s in program.blocks["data"] if s.kind == "decl"}
    if missing:
        raise DraftError(f"{sorted(missing)[0]} is not declared in the data block")
    for first, last, text in sorted(patches, reverse=True):
        source = source[:first] + text + source[last:]
    return source

"""Whether the indexed ``~`` statements on a variable draw each of its elements once.

An indexed left side ``v[i, j]`` is read one index at a time against v's declared
sizes: a loop variable of ``for (i in 1:n)`` with n the declared size, or ``:``, covers
its whole dimension.  A variable of one dimension may also be drawn in pieces by
several statements: a constant index (``v[1]``), a list of constants
(``v[{1, 3}]``) or a loop variable of ``for (i in a:b)`` with a a number; the pieces
are checked when the model is read, as intervals that must chain from 1 to the declared
size without gaps or overlaps (``v[1] ~ ...; for (n in 2:N) v[n] ~ ...``); of a
variable of several dimensions, the first dimension may be drawn so.  Pieces that end
at a number m where the declared size is an integer datum K (brms's ``vlscale_1[1]``
of ``array[K] vector[1]``) are a draw of every element only when K = m: the
simulator checks it on the data (:attr:`Coverage.sizes`).  Every loop
around a ``~`` must index its left side: otherwise the element would be drawn once per
iteration, while the model multiplies the densities.  A size may be written as a
transformed data alias of the declared one (``int J = n_dogs;``, never reassigned).
"""

from __future__ import annotations

from typing import Iterable

from ...errors import DraftError
from .copies import Copy
from .parse import Decl, Expr, StanProgram, Stmt
from .statements import walk
from .support import refuse, top_level_split

__all__ = ["Coverage", "integer_data", "size_aliases", "SIZE_REJECTED"]

SIZE_REJECTED = "the drafted simulator holds only where"   # starts its size checks' refusal


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class Coverage:
    """The pieces drawn so far of the variables drawn piecewise."""

    def __init__(self, aliases: dict[str, str] | None = None,
                 data_sizes: set[str] | frozenset = frozenset()):
        self.pieces: dict[str, list[tuple[Stmt, int, int | str]]] = {}
        self.decls: dict[str, Decl] = {}
        self.aliases = aliases or {}     # transformed data J = n_dogs: J -> n_dogs
        self.data_sizes = data_sizes     # integer data a size may name
        self.sizes: dict[str, tuple[int, str]] = {}   # data size -> (its value, variable)

    def size(self, text: str) -> str:
        """A size as written, or the declared size it is an alias of."""
        return self.aliases.get(text, text)

    def check(self, s: Stmt, decl: Decl, loops: list[Stmt], lhs: Expr | None = None,
              indexed: bool = True) -> bool:
        """Check one ``~`` (left side ``lhs``, default ``s.lhs``; ``indexed``: it has an
        index); True when it draws a piece of a variable of one dimension."""
        indices = self.check_loops(s, decl, loops, indexed, lhs)
        if not indexed:
            return False
        extents = [self.size(e.text) for e in (*decl.dims, *decl.sizes)]
        by_var = {loop.var: loop for loop in loops}
        if len(indices) == 1:     # pieces of the first dimension, the others whole
            piece = self._piece(indices[0], by_var, extents[0])
            piece = piece and [(a, self.size(b) if isinstance(b, str) else b)
                               for a, b in piece]
            if piece is not None and piece != [(1, extents[0])]:
                self.decls[decl.name] = decl
                self.pieces.setdefault(decl.name, []).extend((s, a, b) for a, b in piece)
                return True
        for position, index in enumerate(indices):
            texts = [t.text for t in index]
            loop = by_var.get(texts[0]) if len(texts) == 1 else None
            whole = texts == [":"] or (
                loop is not None and loop.kind == "for" and loop.lhs.text == "1"
                and position < len(extents)
                and self.size(loop.rhs.text) == self.size(extents[position]))
            if not whole or position >= len(extents):
                raise refuse(s, f"the drafter cannot tell that this draws every element "
                                 f"of {decl.name} once; index it only by loop variables "
                                 f"running over its declared sizes (for (i in "
                                 f"1:{extents[0]}) ...)")
        return False

    @staticmethod
    def check_loops(s: Stmt, decl: Decl, loops: list[Stmt], indexed: bool,
                    lhs: Expr | None = None) -> list:
        """Refuse a ``~`` in a loop whose variable does not index its left side (it would
        draw the variable once per iteration); the indices of the left side."""
        toks = (lhs or s.lhs).tokens
        indices = top_level_split(toks[2:-1], ",") if indexed else []
        used = {t.text for index in indices for t in index if t.kind == "id"}
        for loop in loops:
            if loop.var not in used:
                raise refuse(s, f"this ~ sits in the loop over {loop.var}, which does not "
                                 f"index {decl.name}: it would draw {decl.name} once per "
                                 "iteration, while the model multiplies the densities")
        return indices

    @staticmethod
    def _piece(index, loops: dict[str, Stmt], extent: str
               ) -> list[tuple[int, int | str]] | None:
        """The intervals [a, b] of one index (b a number or the declared size), or None."""
        texts = [t.text for t in index]
        if len(texts) == 1 and _int(texts[0]) is not None:
            return [(int(texts[0]), int(texts[0]))]
        if len(texts) >= 3 and texts[0] == "{" and texts[-1] == "}":
            values = [_int("".join(p.text for p in part))
                      for part in top_level_split(index[1:-1], ",")]
            return None if None in values else [(v, v) for v in values]
        loop = loops.get(texts[0]) if len(texts) == 1 else None
        if loop is None or loop.kind != "for" or _int(loop.lhs.text) is None:
            return None
        end = loop.rhs.text
        return [(int(loop.lhs.text), _int(end) if _int(end) is not None else end)]

    def finish(self) -> None:
        """Refuse any variable whose pieces do not chain from 1 to its declared size."""
        for name, pieces in self.pieces.items():
            extent = self.decls[name].dims or self.decls[name].sizes
            size = _int(extent[0].text) if _int(extent[0].text) is not None \
                else self.size(extent[0].text)
            at: int | str = 0
            for stmt, a, b in sorted(pieces, key=lambda p: p[1]):
                if isinstance(at, str) or a != at + 1 or (isinstance(b, int) and b < a):
                    raise refuse(stmt, f"the drafter cannot tell that this draws every "
                                       f"element of {name} once: the pieces drawn by "
                                       f"indexed ~ do not chain from 1 to {extent[0].text} "
                                       "without gaps or overlaps")
                at = b
            if isinstance(at, int) and isinstance(size, str) and size in self.data_sizes \
                    and self.sizes.get(size, (at,))[0] == at:
                self.sizes[size] = (at, name)     # checked by the simulator, on the data
                continue
            if at != size:
                raise refuse(pieces[-1][0], f"the drafter cannot tell that this draws "
                                            f"every element of {name} once: the pieces "
                                            f"drawn by indexed ~ end at {at}, not at its "
                                            f"size {extent[0].text}")

    def size_checks(self, copies: Iterable[Copy], simulated: list[str]) -> list[str]:
        """The simulator's checks that sizes read from data equal the number of elements
        drawn (:attr:`sizes`) or copied (:attr:`.Copy.sizes`): it rejects other data,
        whose remaining elements would have no density."""
        sizes = dict(self.sizes)
        for c in copies:
            for size, n in c.sizes:
                if sizes.setdefault(size, (n, c.name))[0] != n:
                    raise DraftError(f"{c.name} fills {n} element(s) of a dimension of size "
                                     f"{size} and {sizes[size][1]} {sizes[size][0]}: {size} "
                                     "cannot be both")
        lines = []
        for size, (n, name) in sorted(sizes.items()):
            if size in simulated:
                raise DraftError(f"{name} is drawn or copied into {n} element(s) of a "
                                 f"dimension of size {size}, which the simulator draws")
            lines.append(f'  if ({size} != {n}) reject("{SIZE_REJECTED} {size} = {n}: it '
                         f'draws {n} element(s) of {name}, and the model gives the others '
                         f'no density; these data have {size} = ", {size});')
        return lines


def size_aliases(program: StanProgram) -> dict[str, str]:
    """Transformed data ``int J = n;`` with n a name, J never assigned again: J -> n."""
    stmts = program.blocks.get("transformed data", [])
    assigned = {s.lhs.tokens[0].text for s in walk(stmts) if s.kind == "assign"}
    return {s.decl.name: s.decl.init.text for s in stmts
            if s.kind == "decl" and s.decl.base == "int" and not s.decl.dims
            and s.decl.init is not None and len(s.decl.init.tokens) == 1
            and s.decl.init.tokens[0].kind == "id" and s.decl.name not in assigned}


def integer_data(program: StanProgram) -> set[str]:
    """The integer data of one number, which a size may name."""
    return {s.decl.name for s in program.blocks.get("data", []) if s.kind == "decl"
            and s.decl.base == "int" and not s.decl.dims}

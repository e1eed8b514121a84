"""Drafting the prior of a ``sum_to_zero_vector`` or ``sum_to_zero_matrix`` (Stan 2.36+).

Stan's zero-sum types are coordinates on a subspace: a ``sum_to_zero_vector[N]`` is
``V y`` with ``y`` in R^(N-1) and ``V`` an N x (N-1) matrix of orthonormal columns
orthogonal to the ones vector (an isometry, with no Jacobian term); a
``sum_to_zero_matrix[N, M]`` is the same on rows and columns, (N-1)(M-1) coordinates.
So ``a ~ normal(0, s)`` (s a constant) gives ``y`` the density prod normal(a_k | 0, s)
in R^(N-1), which is the normal N(0, s^2 I) restricted to the subspace: the law of
the projection of an iid N(0, s^2) draw onto it, ``z - mean(z)`` (for a matrix, the
draw less its row and column means plus its grand mean).  That is what the simulator
draws.

The program's density has N normal factors but only N - 1 dimensions to integrate
over, so it integrates to (2 pi s^2)^(-1/2), not 1: the prior's normaliser gets
log c = -(K / 2) log(2 pi s^2), K the number of factors less the dimension: 1 for a
vector, N + M - 1 for an N x M matrix (the simulator's ``bread_log_c_exact_`` adds it,
as :mod:`.normaliser` does its other factors).

Refused, in one line: a scale that reads a parameter (the program's prior then
weights that parameter by s^(-K), which the simulator would have to draw; with a
half-normal scale this weight is not even integrable at 0), a location other than 0,
a scale per element, another distribution, arrays of zero-sum vectors, and elements
or slices on the left of ``~``.
"""

from __future__ import annotations

from .normaliser import LOG_C_EXACT
from .parse import Stmt
from .state import Translation
from .statements import lhs_form
from .support import ZERO, Type, refuse

__all__ = ["ZERO_SUM", "zero_sum_prior"]

ZERO_SUM = ("sum_to_zero_vector", "sum_to_zero_matrix")


def zero_sum_prior(tr: Translation, s: Stmt, shape: str, dist: str, args: list[str],
                   arg_types: list[Type]) -> str:
    """The simulator's line drawing the zero-sum parameter on the left of ``s`` (its
    normaliser factor left in ``tr.written.factor``), or a :class:`DraftError` naming
    ``s``."""
    var = lhs_form(s.lhs)[0]
    decl = tr.read.decls[var]
    matrix = decl.base == "sum_to_zero_matrix"
    if decl.dims:
        raise refuse(s, f"{var} is an array of {decl.base}s; the drafter draws one "
                         f"{decl.base} at a time: write a loop, or the simulator by hand")
    whole = "to_vector" if matrix else "name"
    if shape != whole:
        left = f"to_vector({var})" if matrix else var
        raise refuse(s, f"{var} is a {decl.base}: its prior is drafted only as "
                         f"`{left} ~ normal(0, s)` on the whole {decl.base}")
    if dist != "normal":
        raise refuse(s, f"{var} is a {decl.base}: only a normal(0, s) prior on it is "
                         f"drafted exactly (the projection of an iid normal draw), not {dist}")
    location, scale = args
    if location.strip() not in ZERO:
        raise refuse(s, f"{var} is a {decl.base}: its normal prior is drafted only with "
                         f"location 0, not {location}")
    if not arg_types[1].scalar:
        raise refuse(s, f"{var} is a {decl.base}: its normal prior is drafted only with one "
                         "scale for every element (a scale per element is not an iid draw "
                         "projected onto the subspace)")
    reads = sorted(n for n in s.args[1].names()
                   if n not in tr.read.inputs and not tr.read.is_transformed_data(n))
    if reads:
        kept = 1 if not matrix else "N + M - 1"
        raise refuse(s, f"the scale of the {decl.base} {var} reads {reads[0]}, not data: "
                         f"a normal on the zero-sum subspace integrates to "
                         f"(2 pi s^2)^(-{kept}/2), so the program's prior weights "
                         f"{reads[0]} by that factor, which the drafter does not draw; give "
                         "the scale as data, or write the simulator by hand")
    n = f"num_elements({var})"
    draw = f"to_vector(normal_rng(rep_vector(0, {n}), {scale}))"
    if matrix:
        rows, cols = f"rows({var})", f"cols({var})"
        line = (f"{var} = to_matrix({draw}, {rows}, {cols}); "
                f"{var} = {var} - rep_matrix(rep_row_vector(1, {rows}) * {var} / {rows}, "
                f"{rows}); "
                f"{var} = {var} - rep_matrix({var} * rep_vector(1, {cols}) / {cols}, {cols});")
        missing = f"({rows} + {cols} - 1)"
    else:
        line = f"{var} = {draw}; {var} = {var} - mean({var});"
        missing = "1"
    tr.written.factor = [f"{LOG_C_EXACT} -= {missing} * (0.5 * log(2 * pi()) + log({scale}));"]
    return line

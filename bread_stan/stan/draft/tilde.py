"""One ``~`` statement -> one ``_rng`` draw of the simulator.

:func:`tilde` checks what the left side is (a parameter, outside ``if (!prior_only)``;
modelled data, inside it; drawn once, each element covered once), rewrites the
distribution into one with an ``_rng`` (``std_normal``, the GLMs), checks a prior's
support against the parameter's declared constraint (a half distribution, a prior
truncated by its bounds and drawn by rejection), and writes the draw broadcast to the
left side's shape.  :func:`data_support` notes simulated data whose declared bounds
the likelihood can cross.
"""

from __future__ import annotations

from ...errors import DraftError
from .parse import Decl, Expr, Stmt
from .replay import Replayable, Site, lpdf_text
from .restrict import ORDERED, bound_condition, check_ordered
from .state import Translation
from .statements import lhs_form
from .zero_sum import ZERO_SUM, zero_sum_prior
from .support import (CONSTRAINED, GLM, INV_LOGIT, LOCATION, MULTI_LOCATION, POSITIVE, REAL,
                      SCALAR_ONLY, SIZE_FIRST, UNIT, UNIVARIATE, ZERO, Type, glm_as_univariate,
                      outside_bounds, refuse, within_bound)

__all__ = ["tilde", "data_support"]


def tilde(tr: Translation, s: Stmt, likelihood: bool) -> str:
    """The simulator's line for the ~ statement ``s`` (``likelihood``: inside
    ``if (!prior_only)``)."""
    lhs_type, arg_types = next(tr.types)
    var, shape = _left_side(tr, s)
    read = tr.read
    data = var in read.inputs and var not in read.parameters
    _check_role(tr, s, var, data, likelihood)
    _record(tr, s, var, data, shape)
    dist, args, arg_types = _distribution(tr, s, var, arg_types)
    if var in read.inputs:
        data_support(tr, s, var, dist)
    elif read.decls[var].base in ZERO_SUM:     # a parameter of Stan 2.36+: .zero_sum
        return zero_sum_prior(tr, s, shape, dist, args, arg_types)
    ordered = var in read.parameters and read.decls[var].base in ORDERED
    half = False
    if ordered:
        check_ordered(s, read.decls[var], dist, arg_types, lhs_type)
    elif var in read.parameters or var in read.copies:
        half = _support(tr, s, read.decls[var], dist, args)
    target = var if shape == "to_vector" else s.lhs.text
    if var in read.parameters or var in read.copies:
        tr.written.factor = tr.written.normaliser.tilde(s, read.decls[var], half, ordered,
                                                        lhs_type, target)
    draw = _draw(tr, s, dist, args, arg_types, lhs_type, s.lhs.text)
    if half:
        draw = f"abs({draw})"
    if shape == "to_vector":
        return _to_vector(s, read.decls[var], var, target, draw)
    draw = _convert(draw, lhs_type, dist)
    line = f"{target} = {f'sort_asc({draw})' if ordered else draw};"
    if data and tr.replay:
        _site(tr, s, var, shape, line, lhs_type)
    return line


def _left_side(tr: Translation, s: Stmt) -> tuple[str, str]:
    """The variable on the left of ~ and its form ("whole", "index" or "to_vector");
    refuses a truncation other than a half distribution's and an expression."""
    form = lhs_form(s.lhs)
    if s.truncation is not None and not _truncation_at_zero(tr, s, form):
        raise refuse(s, "truncation T[...] is not translated (the simulator would "
                         "need the truncated distribution); only T[0, ] on a "
                         "<lower=0> parameter is (a half distribution); write this "
                         "simulator by hand")
    if form is None:
        raise refuse(s, "the left of ~ is an expression, not a variable (a change of "
                         "variables needs a Jacobian); only x, x[...] and to_vector(x) "
                         "are translated")
    return form


def _check_role(tr: Translation, s: Stmt, var: str, data: bool, likelihood: bool) -> None:
    """Refuse a variable drawn twice, a transformed parameter that is not a copy, a prior
    inside if (!prior_only), data outside it, and anything else; note simulated data."""
    read, drawn = tr.read, tr.drawn
    if var in drawn.tilde_of and var not in drawn.cover.pieces and not (
            data and tr.replay):
        raise drawn.twice(s, var) if not data else Replayable(str(drawn.twice(s, var)))
    if var in read.transformed and var not in read.copies:
        why = read.not_copies.get(var)
        raise refuse(s, f"{var} is a transformed parameter; a ~ on it needs a Jacobian "
                         "and is not a draw of it" + (
                             f" ({var} is not a plain copy of parameter elements: {why})"
                             if why else ""))
    if var in read.parameters or var in read.copies:
        if likelihood:
            raise refuse(s, f"the prior of parameter {var} is inside if (!prior_only); "
                             "move it out (the prior must hold when prior_only = 1)")
    elif var in read.inputs and var != "prior_only":
        if not likelihood:
            raise refuse(s, f"data {var} is on the left of ~ outside "
                             "if (!prior_only); wrap the likelihood in it")
        drawn.simulated += [var] if var not in drawn.simulated else []
    else:
        what = ("transformed data" if read.is_transformed_data(var)
                else "neither a parameter nor a data variable")
        raise refuse(s, f"{var} is {what}; the simulator can draw only parameters "
                         "and data variables")


def _record(tr: Translation, s: Stmt, var: str, data: bool, shape: str) -> None:
    """Refuse a variable on both sides of ~ or covered twice; record ``s`` as its ~."""
    drawn = tr.drawn
    used = set().union(*(a.names() for a in s.args)) if s.args else set()
    if shape == "index":
        used |= Expr(s.lhs.tokens[1:], s.lhs.source).names()
    if var in used and not (data and shape == "index" and tr.replay):
        error = refuse(s, f"{var} appears on both sides of ~")
        raise Replayable(str(error)) if data and shape == "index" else error
    if data and tr.replay:
        drawn.cover.check_loops(s, tr.read.decls[var], tr.loops, shape == "index")
    elif not _check_cover(tr, s, var, data, shape == "index") and var in drawn.tilde_of:
        raise drawn.twice(s, var) if not data else Replayable(str(drawn.twice(s, var)))
    if not (data and tr.replay and var in drawn.tilde_of):   # replayed: the first
        drawn.tilde_of[var] = s


def _distribution(tr: Translation, s: Stmt, var: str, arg_types: list[Type]
                  ) -> tuple[str, list[str], list[Type]]:
    """The distribution to draw from, its arguments and their types: std_normal as
    normal(0, 1), a GLM likelihood as its univariate distribution."""
    dist, args = s.dist, [a.text for a in s.args]
    if dist == "std_normal":
        dist, args, arg_types = "normal", ["0", "1"], [Type("int"), Type("int")]
    if dist in GLM:
        if var in tr.read.parameters:
            raise refuse(s, f"{dist} is a likelihood, not a prior the drafter "
                             "translates")
        dist, args, arg_types = glm_as_univariate(s, dist, args, arg_types)
    return dist, args, arg_types


def _to_vector(s: Stmt, declared: Decl, var: str, target: str, draw: str) -> str:
    """``to_vector(x) ~ ...``: the draw written back as x's own type."""
    if declared.dims:
        raise refuse(s, f"to_vector of the array {var} is not translated")
    wrap = {"matrix": f"to_matrix({{}}, rows({var}), cols({var}))",
            "row_vector": "to_row_vector({})", "vector": "to_vector({})"}
    if declared.base not in wrap:
        raise refuse(s, f"to_vector of a {declared.base} is not translated")
    return f"{target} = {wrap[declared.base].format(draw)};"


def _check_cover(tr: Translation, s: Stmt, var: str, data: bool, indexed: bool) -> bool:
    """:meth:`.Coverage.check`; its refusal of data is :class:`.Replayable`."""
    try:
        return tr.drawn.cover.check(s, tr.read.decls[var], tr.loops, indexed=indexed)
    except DraftError as error:
        raise Replayable(str(error)) if data else error from None


def _site(tr: Translation, s: Stmt, var: str, shape: str, line: str, lhs_type: Type) -> None:
    """Record a ~ on data in a replayed program (drawn by :func:`.site_lines`)."""
    index = s.lhs.text[len(var):] if shape == "index" else ""
    control = {n for loop in tr.loops for e in (loop.lhs, loop.rhs) if e is not None
               for n in e.names()} | {n for c, _ in tr.conditions for n in c.rhs.names()}
    if index:
        control |= Expr(s.lhs.tokens[1:], s.lhs.source).names()
    decl = tr.read.decls[var]
    scalar = lhs_type.scalar or (not index and not decl.dims and not decl.sizes)
    tr.written.sites.append(Site(s, var, index, scalar, line, lpdf_text(s), control,
                                 tuple((id(c), b) for c, b in tr.conditions)))


def data_support(tr: Translation, s: Stmt, var: str, dist: str) -> None:
    """Note data whose declared bounds the distribution drawing them can cross.

    A data block's bounds are checks on the input, not part of the density: the
    program's likelihood is ``dist`` on its whole support, so its posterior is that
    of the model that draws from ``dist`` unrestricted.  The simulator draws so, and
    the generated programs declare ``var`` without the bounds."""
    where = outside_bounds(tr.read.decls[var], dist)
    if where is not None and var not in tr.drawn.relaxed:
        tr.drawn.relaxed[var] = (f"line {s.line}: {dist} can draw {var} {where}; the bound "
                                 "checks the input and is not part of the density")


def _truncation_at_zero(tr: Translation, s: Stmt, form: tuple[str, str] | None) -> bool:
    """Whether ``s`` is ``x ~ dist(...) T[0, ]`` on a ``<lower=0>`` parameter x with a
    positive distribution or one symmetric about a location of 0: the same prior as
    without the truncation (the support check then draws it)."""
    bounds = [t.text for t in s.truncation.tokens]
    if form is None or form[0] not in tr.read.parameters or \
            len(bounds) != 4 or bounds[0] != "[" or bounds[1] not in ZERO or \
            bounds[2:] != [",", "]"]:
        return False
    decl = tr.read.decls[form[0]]
    lower = decl.bounds.get("lower")
    if lower is None or lower.text not in ZERO or "upper" in decl.bounds:
        return False
    if s.dist == "std_normal":
        return True
    return s.dist in POSITIVE or (s.dist in LOCATION
                                   and s.args[LOCATION[s.dist]].text in ZERO)


def _support(tr: Translation, s: Stmt, decl: Decl, dist: str, args: list[str]) -> bool:
    """Check the prior's support against the declared constraint; True when the
    draw is |draw| (a half distribution on <lower=0>)."""
    if decl.base in CONSTRAINED:
        if dist not in CONSTRAINED[decl.base]:
            raise refuse(s, f"{decl.name} is a {decl.base}, whose support "
                             f"{dist} does not match (expected "
                             f"{' or '.join(sorted(CONSTRAINED[decl.base]))})")
        return False
    if decl.base not in ("real", "vector", "row_vector", "matrix"):
        raise refuse(s, f"parameters of type {decl.base} are not translated")
    lower = decl.bounds.get("lower")
    upper = decl.bounds.get("upper")
    for bound in (lower, upper):
        if bound is not None and bound.names() & {*tr.read.parameters, *tr.read.transformed}:
            raise refuse(s, f"the bound of {decl.name} depends on a parameter")
    low = lower.text if lower is not None else None
    high = upper.text if upper is not None else None
    if dist == "uniform":
        # the prior is uniform on (a, b) whenever the declared bounds do not cut into it
        if within_bound(low, args[0], below=True) and \
                within_bound(high, args[1], below=False):
            return False
        if _truncate(tr, decl):
            return False
        raise refuse(s, f"uniform({', '.join(args)}) needs {decl.name} declared "
                         f"with <lower={args[0]}, upper={args[1]}> (or unbounded)")
    if dist in MULTI_LOCATION:
        support = "real"
    elif dist in REAL:
        support = "real"
    elif dist in POSITIVE:
        support = "positive"
    elif dist in UNIT:
        support = "unit"
    else:
        raise refuse(s, f"{dist} is not a prior the drafter translates for a "
                         f"{decl.base} parameter")
    declared = {(None, None): "real", ("0", None): "positive", ("0", "1"): "unit"}.get(
        (low if low not in ZERO else "0", high), "other")
    if declared == support:
        return False
    if declared == "positive" and dist in LOCATION and \
            args[LOCATION[dist]] in ZERO:
        return True
    if _truncate(tr, decl):
        return False
    bounds = f"<{', '.join(f'{k}={v.text}' for k, v in decl.bounds.items())}>"
    raise refuse(s, f"{decl.name} is declared {bounds if decl.bounds else 'unbounded'}"
                     f" but {dist}({', '.join(args)}) has {support} support; the "
                     "model's prior would be truncated, which the drafter does not "
                     "translate")


def _truncate(tr: Translation, decl: Decl) -> bool:
    """Whether the prior of ``decl``, truncated by its declared bounds, is drawn by
    rejection (:mod:`.restrict`): bounds of numbers or scalar data."""
    condition = bound_condition(decl, tr.read.scalar_data)
    if condition is not None:
        tr.drawn.truncated[decl.name] = condition
    return condition is not None


def _draw(tr: Translation, s: Stmt, dist: str, args: list[str], arg_types: list[Type],
          lhs_type: Type, lhs: str) -> str:
    """The _rng call, with arguments broadcast to the left side's shape."""
    if dist == "binomial_logit":  # Stan 2.35 has no binomial_logit_rng: its equivalent
        dist, args = "binomial", [args[0], f"inv_logit({args[1]})"]
    if dist == "bernoulli_logit":  # its _rng, draw for draw, but certain at t = +-inf
        tr.written.inv_logit_helper = True
        dist, args = "bernoulli", [f"{INV_LOGIT}({args[0]})"]
    if dist in UNIVARIATE:
        if lhs_type.scalar:
            if not all(t.scalar for t in arg_types):
                raise refuse(s, "a scalar on the left of ~ with a container argument "
                                 "(several observations of one value) is not a prior "
                                 "the drafter translates")
        elif lhs_type.one_dimensional:
            if any(not (t.scalar or t.one_dimensional) for t in arg_types):
                raise refuse(s, "an argument of ~ is a matrix or nested array")
            if all(t.scalar for t in arg_types):
                args = [f"rep_array({args[0]}, num_elements({lhs}))", *args[1:]]
        else:
            raise refuse(s, f"the left of ~ is a {_describe(lhs_type)}; write "
                             "to_vector(...) ~ or a loop")
        return f"{dist}_rng({', '.join(args)})"
    if dist in MULTI_LOCATION:
        loc = MULTI_LOCATION[dist]
        if lhs_type.dims == 1 and arg_types[loc].dims == 0:
            args = [*args]
            args[loc] = f"rep_array({args[loc]}, size({lhs}))"
        elif lhs_type.dims > 1 or arg_types[loc].dims != lhs_type.dims:
            raise refuse(s, f"{dist} with a {_describe(lhs_type)} on the left and "
                             f"a {_describe(arg_types[loc])} location")
        return f"{dist}_rng({', '.join(args)})"
    if dist in SIZE_FIRST or dist in {d for ds in CONSTRAINED.values() for d in ds}:
        if lhs_type.dims:
            raise refuse(s, f"an array on the left of {dist}; write a loop")
        if dist in SIZE_FIRST:
            args = [f"rows({lhs})", *args]
        return f"{dist}_rng({', '.join(args)})"
    if dist in SCALAR_ONLY:
        if not lhs_type.scalar:
            raise refuse(s, f"{dist} on a container: write a loop over its elements")
        return f"{dist}_rng({', '.join(args)})"
    raise refuse(s, f"the distribution {dist} has no _rng the drafter knows")


def _convert(draw: str, lhs_type: Type, dist: str) -> str:
    """An _rng result (an array for vectorised calls) as the left side's type."""
    if dist in UNIVARIATE and lhs_type.dims == 0:
        if lhs_type.base == "vector":
            return f"to_vector({draw})"
        if lhs_type.base == "row_vector":
            return f"to_row_vector({draw})"
    if dist in MULTI_LOCATION and lhs_type == Type("row_vector"):
        return f"to_row_vector({draw})"
    return draw


def _describe(t: Type) -> str:
    """A stanc type in words, for messages."""
    return f"{t.dims}-d array of {t.base}" if t.dims else t.base

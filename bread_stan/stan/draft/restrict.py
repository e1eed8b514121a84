"""Priors restricted by a parameter's declared constraint, drawn exactly.

* Truncation by declared bounds.  ``x ~ normal(a, b)`` on ``real<lower=0> x`` is the
  density of normal(a, b) restricted to x > 0 with no normaliser added, so the joint
  prior is the product of the untruncated draws restricted to the event that every such
  parameter lies within its bounds.  Drawing the whole simulator again until the event
  holds (rejection) draws exactly that joint, whether or not the lost mass depends on
  other parameters (``mu ~ normal(3.28, kappa)`` with ``kappa`` a parameter); the
  simulated data are drawn with the accepted parameters.  A cap on the tries turns a
  prior that almost never meets its bounds into a run-time error, never a hang.
* ``ordered`` / ``positive_ordered`` with an iid univariate prior (every argument a
  scalar): the density is the product of the iid densities on the ordered cone, which
  is the density of the sorted iid draws divided by the constant K!, so ``sort_asc`` of
  iid draws is exact.
* A ``simplex`` or ``corr_matrix`` without a density statement: constant density in
  Stan's coordinates, which is dirichlet(1) and lkj_corr(1) (not so for a
  ``cholesky_factor_corr``, whose lkj_corr_cholesky(1) density is not constant).
"""

from __future__ import annotations

from .parse import Decl, Stmt
from .support import POSITIVE, REAL, Type, refuse

__all__ = ["ORDERED", "TRIES", "bound_condition", "check_ordered", "rejection_loop",
           "uniform_constrained"]

ORDERED = {"ordered": REAL, "positive_ordered": POSITIVE}
TRIES = 100000    # draws of the whole prior before a truncated prior is given up


def bound_condition(decl: Decl, scalar_data: set[str]) -> str | None:
    """The Stan condition that ``decl``'s variable lies inside its declared bounds, or
    None when the bounds are not numbers or scalar data, or the variable is not a real
    (or array of reals), vector, row_vector or matrix."""
    bounds = {k: decl.bounds[k] for k in ("lower", "upper") if k in decl.bounds}
    if any(b.names() - scalar_data for b in bounds.values()):
        return None
    name = decl.name
    if decl.base == "real":
        low = high = name if not decl.dims else (
            f"min({name})" if len(decl.dims) == 1 else f"min(to_array_1d({name}))")
        if decl.dims:
            high = low.replace("min(", "max(", 1)
    elif decl.base in ("vector", "row_vector", "matrix") and not decl.dims:
        low, high = f"min({name})", f"max({name})"
    else:
        return None
    parts = []
    if "lower" in bounds:
        parts.append(f"{low} > {bounds['lower'].text}")
    if "upper" in bounds:
        parts.append(f"{high} < {bounds['upper'].text}")
    return " && ".join(parts) or None


def rejection_loop(head: list[str], tail: list[str], conditions: dict[str, str],
                   hyper: list[str], tries: str | None = None) -> list[str]:
    """The simulator's statements (``head`` up to the last draw of a truncated prior, then
    ``tail``) repeated until every condition holds after ``head``, so that ``tail`` runs
    only with accepted draws; a given hyperparameter's condition is not tested.
    ``tries``: the output that records how many tries the draw took."""
    if not conditions:
        return head + tail
    tests = " && ".join(f"(hyper_given || ({c}))" if name in hyper else f"({c})"
                        for name, c in conditions.items())
    names = ", ".join(conditions)
    return ["  // the priors of " + names + " are truncated by their declared bounds:",
            "  // every draw is repeated until they lie inside them (rejection, exact)",
            "  for (try_ in 1:" + str(TRIES + 1) + ") {",
            f"    if (try_ > {TRIES}) reject(\"the prior draws of {names} fell outside "
            f"their declared bounds {TRIES} times\");",
            *["  " + x for x in head],
            f"    if (!({tests})) continue;",
            *["  " + x for x in tail],
            *([f"    {tries} = try_;"] if tries else []),
            "    break;",
            "  }"]


def check_ordered(s: Stmt, decl: Decl, dist: str, arg_types: list[Type],
                  lhs_type: Type) -> None:
    """Refuse unless ``s`` is an iid univariate prior of the right support on a whole
    ordered vector."""
    support = ORDERED[decl.base]
    if dist not in support or lhs_type != Type("vector") or \
            not all(t.scalar for t in arg_types):
        kind = "real" if support is REAL else "positive"
        raise refuse(s, f"{decl.name} is {decl.base}: only an iid prior with {kind} support "
                         "on the whole vector (scalar arguments) is translated, as sorted "
                         "iid draws")


def uniform_constrained(decl: Decl) -> str | None:
    """The draw of a simplex or corr_matrix without a density (uniform in Stan's
    coordinates), or None for other types."""
    size = decl.sizes[0].text if decl.sizes else None
    draw = {"simplex": f"dirichlet_rng(rep_vector(1, {size}))",
            "corr_matrix": f"lkj_corr_rng({size}, 1)"}.get(decl.base)
    if draw is None or size is None:
        return None
    if not decl.dims:
        return f"  {decl.name} = {draw};"
    if len(decl.dims) > 1:
        return None
    i = f"{decl.name}_i_"
    return f"  for ({i} in 1:{decl.dims[0].text}) {decl.name}[{i}] = {draw};"

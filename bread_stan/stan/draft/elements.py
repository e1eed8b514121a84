"""Mixtures drawn one element of modelled data at a time -> their simulator lines.

A two-component ``target += log_mix(...)``, a K-component mixture folded by
:func:`.mixture.fold_mixtures` and a zero-inflated mixture folded by
:func:`.zero_inflated.fold_zero_inflated` each draw one element y[i] of modelled data
(a zero-inflated one possibly a row y[i] whole), inside ``if (!prior_only)``, drawn
nowhere else and covered once by its loops.
"""

from __future__ import annotations

from .parse import Expr, Stmt
from .state import Translation
from .statements import lhs_form
from .support import UNIVARIATE, log_mix, refuse
from .tilde import data_support

__all__ = ["mixture", "categorical", "zero_inflated"]


def mixture(tr: Translation, s: Stmt, likelihood: bool) -> str:
    """``target += log_mix(theta, f_lpdf(y[i] | a), g_lpdf(y[i] | b));`` on one
    element of modelled data: y[i] drawn from f with probability theta, else g."""
    theta, (f, outcome, a), (g, _, b) = log_mix(s)
    if f not in UNIVARIATE or g not in UNIVARIATE:
        raise refuse(s, f"log_mix of {f} and {g}: only univariate distributions with "
                         "an _rng are translated")
    _data_element(tr, s, outcome, likelihood, "log_mix")
    for dist in (f, g):
        data_support(tr, s, lhs_form(outcome)[0], dist)
    return (f"{outcome.text} = bernoulli_rng({theta.text}) ? {f}_rng({a}) "
            f": {g}_rng({b});")


def categorical(tr: Translation, s: Stmt, likelihood: bool) -> str:
    """A K-component mixture folded by :func:`.mixture.fold_mixtures`: the component
    from categorical(weights), then y[i] from its distribution."""
    if s.dist not in UNIVARIATE:
        raise refuse(s, f"a mixture of {s.dist}: only univariate distributions with an "
                         "_rng are translated")
    _data_element(tr, s, s.lhs, likelihood, "a mixture")
    data_support(tr, s, lhs_form(s.lhs)[0], s.dist)
    return (f"{{ int {s.var} = categorical_rng({s.rhs.text}); {s.lhs.text} = "
            f"{s.dist}_rng({', '.join(a.text for a in s.args)}); }}")


def zero_inflated(tr: Translation, s: Stmt, likelihood: bool) -> str:
    """A zero-inflated mixture folded by :func:`.zero_inflated.fold_zero_inflated`,
    which wrote its draw: the coin, then the outcome."""
    _data_element(tr, s, s.lhs, likelihood, "a zero-inflated mixture", row=True)
    data_support(tr, s, lhs_form(s.lhs)[0], s.dist)
    return s.draw


def _data_element(tr: Translation, s: Stmt, outcome: Expr, likelihood: bool, what: str,
                  row: bool = False) -> None:
    """Record that ``s`` draws ``outcome``, which must be one element of modelled data
    (``row``: or a part y[i] drawn whole) inside if (!prior_only), drawn nowhere
    else, covered once by its loops."""
    drawn = tr.drawn
    form = lhs_form(outcome)
    if form is None or form[1] != "index" or form[0] not in tr.read.inputs:
        raise refuse(s, f"{what} is translated only over one element y[i] of a data "
                         "variable")
    var = form[0]
    decl = tr.read.decls[var]
    indexed = len([t for t in outcome.tokens if t.text == ","]) + 1
    if indexed != len(decl.dims) + len(decl.sizes) and not row:
        raise refuse(s, f"{what} over a part of {var} that is not one element")
    if not likelihood:
        raise refuse(s, f"data {var} is in {what} outside if (!prior_only)")
    if var in drawn.tilde_of:
        raise refuse(s, f"{var} is drawn more than once (also on line "
                         f"{drawn.tilde_of[var].line})")
    if var in {n for a in (*s.args, *([s.rhs] if row else [])) for n in a.names()}:
        raise refuse(s, f"{var} appears on both sides of {what}")
    drawn.cover.check(s, decl, tr.loops, outcome)
    drawn.tilde_of[var] = s
    drawn.simulated.append(var)

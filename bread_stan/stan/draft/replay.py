"""Outcomes drawn in the model's statement order: partly modelled and sequential data.

Some models state the density of their data element by element in an order where an
element's density reads elements stated before it (an autoregression reads y[t - k]; a
learning model's transformed data count earlier outcomes), and some leave elements out
of every density (arK conditions on y[1:K]; covid19imperial models a slice of each
column).  Their joint density of the drawn elements given the others is the product of
the conditionals in statement order, so the simulator **replays** the likelihood:

* the outcome starts at its observed values (``y = y_observed;``, filled from the data
  ``y`` by :class:`~bread_stan.stan.simulator.Simulator`): elements no ``~`` draws keep
  them, as conditioned-on covariates do;
* the model's likelihood statements run in the model's own order (not the dependency
  order of the other draws), each ``~`` drawing its elements; what the model computes
  from the outcome in transformed data, transformed parameters or at the top of the
  model block is recomputed after every draw, so each later statement reads the current
  values (cost: one recomputation per draw, O(N^2) for N draws with O(N) derived work);
* checks, at run time inside the simulator: an element drawn a second time is rejected
  (marks per element); after drawing, the statements run again at the simulated data
  (the model's own evaluation) and every ``~`` must give the same log density as when
  it was drawn: one that read an element drawn after it changes (almost surely, for a
  continuous outcome; for a discrete one a draw can agree by chance, and the check runs
  again on every simulated data set) and is rejected with the line; the ``~``
  statements visited must be the same.

Checks made when drafting: the loops, conditions and indices that decide which elements
a ``~`` draws read no simulated value (so both passes draw the same elements); an
outcome drawn whole reads nothing computed from itself, and is not drawn by another
statement that can run with it; no prior statement reads the outcome; parameters are
not drawn in a statement with the outcome.  Other folded forms (mixtures, zero-inflated
draws) are not replayed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import DraftError
from .parse import Decl, Stmt, tokenize
from .statements import walk
from .support import DISCRETE, SCALAR_ONLY, refuse

__all__ = ["Replayable", "Unreplayable", "Site", "site_lines", "replay_section",
           "local_type", "lpdf_text", "REFRESH", "OBSERVED_SUFFIX", "REJECTED"]

REFRESH = "@refresh@"
OBSERVED_SUFFIX = "_observed"   # the simulator's data variable of y's observed values
_LOCAL = {"int": "int", "real": "real", "complex": "complex", "vector": "vector",
          "row_vector": "row_vector", "matrix": "matrix", "simplex": "vector",
          "unit_vector": "vector", "ordered": "vector", "positive_ordered": "vector",
          "sum_to_zero_vector": "vector", "sum_to_zero_matrix": "matrix",
          "column_stochastic_matrix": "matrix", "row_stochastic_matrix": "matrix"}
_SQUARE = {"cov_matrix", "corr_matrix", "cholesky_factor_corr", "cholesky_factor_cov"}
_DISCRETE = DISCRETE | SCALAR_ONLY | {"binomial_logit", "bernoulli_logit_glm",
                                      "poisson_log_glm", "multinomial", "multinomial_logit"}

REJECTED = "the drafted simulator's replay rejects"   # starts its run-time refusals
_VISITED = (f"{REJECTED} the simulated data: it visited other ~ statements at them than "
            "while drawing them (which elements are drawn depends on the data)")


class Replayable(DraftError):
    """A refusal of the direct translation that a replay in statement order may lift."""


class Unreplayable(DraftError):
    """The replay cannot draft this program either: report the direct refusal."""


@dataclass
class Site:
    """One ``~`` on simulated data in a replayed program."""

    stmt: Stmt
    var: str
    index: str            # "[t]", "" for the whole variable
    scalar: bool
    draw: str             # the simulator's line drawing it
    lpdf: str             # the model's log density of it
    control: set[str]     # names deciding which elements it draws
    path: tuple           # (id of an enclosing if, branch) pairs


def _literal(text: str) -> str:
    return " ".join(text.replace('"', "'").replace("\\", "/").split())


def lpdf_text(s: Stmt) -> str:
    """The model's log density of a ``~`` statement's left side."""
    suffix = "_lpmf" if s.dist in _DISCRETE else "_lpdf"
    args = ", ".join(a.text for a in s.args)
    return f"{s.dist}{suffix}({s.lhs.text}{' | ' + args if args else ''})"


def site_lines(site: Site, indent: str) -> list[str]:
    """The simulator's lines for one site: draw and record in pass 1, check in pass 2."""
    text = _literal(site.stmt.text)
    where = f"line {site.stmt.line} `{text if len(text) <= 60 else text[:57] + '...'}`"
    mark, ones = f"{site.var}_drawn_{site.index}", f"{site.var}_ones_{site.index}"
    if site.scalar:
        drawn, set_mark, nonempty = mark, f"{mark} = 1;", None
    else:
        drawn = f"sum(to_array_1d({mark})) > 0"
        set_mark, nonempty = f"{mark} = {ones};", f"num_elements({mark}) > 0"
    twice = (f"{REJECTED} {where}: it would draw an element of {site.var} a second time "
             "(the model's statements give it more than one density)")
    later = (f"{REJECTED} {where}: this density changed after later draws: it reads an "
             f"element of {site.var} drawn after it, so the model is not a sequence of "
             "draws in statement order; write the simulator by hand")
    i = indent
    record = ["k_ += 1;", f"lp_drawn_[k_] = {site.lpdf};"]
    check = ["k_ += 1;", f'if (k_ > sites_) reject("{_VISITED}");',
             f"real lp_site_ = {site.lpdf};",
             "if (!(lp_site_ == lp_drawn_[k_] || abs(lp_site_ - lp_drawn_[k_]) <= "
             f'1e-8 * (1 + abs(lp_drawn_[k_])))) reject("{_literal(later)}");']
    if nonempty:
        record = [f"if ({nonempty}) {{", *["  " + x for x in record], "}"]
        check = [f"if ({nonempty}) {{", *["  " + x for x in check], "}"]
    return [f"{i}if (pass_ == 1) {{",
            f'{i}  if ({drawn}) reject("{_literal(twice)}");',
            f"{i}  {site.draw}", f"{i}  {set_mark}", *[f"{i}  {x}" for x in record],
            f"{i}  {REFRESH}",
            f"{i}}} else {{", *[f"{i}  {x}" for x in check], f"{i}}}"]


def local_type(decl: Decl) -> str | None:
    """The declaration of ``decl``'s variable as a local (no bounds), or None."""
    base = _LOCAL.get(decl.base)
    sizes = decl.sizes
    if decl.base in _SQUARE:
        base, sizes = "matrix", sizes * 2 if len(sizes) == 1 else sizes
    if base is None:
        return None
    text = base + (f"[{', '.join(s.text for s in sizes)}]" if sizes else "")
    if decl.dims:
        text = f"array[{', '.join(d.text for d in decl.dims)}] {text}"
    return f"{text} {decl.name};"


def _locals(stmt: Stmt) -> set[str]:
    """Loop variables and names declared inside a statement (not at its top)."""
    out = set()
    for s in walk([*stmt.body, *stmt.orelse]):
        if s.kind == "decl":
            out.add(s.decl.name)
    for s in walk([stmt]):
        if s.kind in ("for", "foreach"):
            out.add(s.var)
    return out


def _renamed(text: str, names: set[str], suffix: str) -> str:
    """``text`` with each identifier in ``names`` renamed ``name + suffix``."""
    out, at = [], 0
    for t in tokenize(text):
        if t.kind == "id" and t.text in names:
            out += [text[at:t.start], t.text + suffix]
            at = t.end
    return "".join(out) + text[at:]


def _assigned(s: Stmt) -> set[str]:
    if s.kind == "decl":
        return {s.decl.name}
    if s.kind == "assign":
        return {s.lhs.tokens[0].text}
    return set()


def _local_taint(stmts: list[Stmt], depends: dict[str, set[str]]) -> dict[str, set[str]]:
    """Names assigned inside ``stmts`` (and loop variables) from values that depend on
    simulated data: name -> the simulated variables, to a fixed point."""
    taint: dict[str, set[str]] = {}

    def of(names: set[str]) -> set[str]:
        return set().union(*(depends.get(n, set()) | taint.get(n, set()) for n in names))

    while True:
        before = {k: set(v) for k, v in taint.items()}
        for s in walk(stmts):
            if s.kind in ("decl", "assign"):
                found = of(s.names())
                for name in _assigned(s):
                    if found:
                        taint.setdefault(name, set()).update(found)
            elif s.kind in ("for", "foreach"):
                found = of({n for e in (s.lhs, s.rhs) if e is not None for n in e.names()})
                if found:
                    taint.setdefault(s.var, set()).update(found)
        if taint == before:
            return taint


def _exclusive(a: tuple, b: tuple) -> bool:
    branches = dict(a)
    return any(k in branches and branches[k] != v for k, v in b)


def replay_section(units: list, sites: list[Site], simulated: list[str],
                   decls: dict[str, Decl], tdata: tuple[list[Stmt], dict[str, set[str]]],
                   parameters: set[str], twice) -> tuple[list, list[str]]:
    """(the units drawn before the replay, in any order; the replay's lines).

    ``units``: every unit in program order; ``tdata``: (the transformed data statements
    computed from simulated data, name -> the simulated variables it depends on);
    ``twice(stmt, var)``: the refusal of a variable drawn more than once."""
    tdata_stmts, depends = tdata[0], {k: set(v) for k, v in tdata[1].items()}
    for v in simulated:
        depends[v] = {v}
    replayed: set[int] = set()
    while True:                          # units drawing or reading simulated data
        grown = False
        defined = {n for u in units if u.index in replayed for n in u.defines}
        for u in units:
            found = set().union(*(depends.get(n, set()) for n in u.uses))
            draws = bool(u.tildes & set(simulated))
            pulled = (u.defines - u.tildes) & defined    # declares or assigns them too
            if found or draws or pulled:
                for name in u.defines - u.tildes:
                    if not found <= depends.get(name, set()):
                        depends.setdefault(name, set()).update(found)
                        grown = True
                if u.index not in replayed:
                    replayed.add(u.index)
                    grown = True
        if not grown:
            break
    prior = [u for u in units if u.index not in replayed]
    replay = [u for u in units if u.index in replayed]
    tainted = {n for n, v in depends.items() if v}
    for u in prior:
        read = sorted(u.uses & tainted)
        if read:
            raise refuse(u.stmt, f"the prior uses the data {sorted(depends[read[0]])[0]} "
                                  "that the simulator draws")
    for u in replay:
        drawn = sorted(u.tildes & parameters)
        if drawn:
            raise refuse(u.stmt, f"the prior of {drawn[0]} is stated in the statement that "
                                  "draws the data, which the simulator replays in the "
                                  "model's order; state it in its own statement")
    local = _local_taint([u.stmt for u in replay] + tdata_stmts, depends)
    every = {k: set(v) for k, v in depends.items()}
    for k, v in local.items():
        every.setdefault(k, set()).update(v)
    by_var: dict[str, list[Site]] = {}
    for site in sites:
        steer = sorted(n for n in site.control if every.get(n))
        if steer:
            raise refuse(site.stmt, f"which elements this ~ draws depends on {steer[0]}, "
                                    "computed from the simulated data; the simulator "
                                    "cannot replay it")
        by_var.setdefault(site.var, []).append(site)
    for var, found in by_var.items():
        for k, a in enumerate(found):
            for b in found[k + 1:]:
                if (not a.index or not b.index) and not _exclusive(a.path, b.path):
                    raise twice(b.stmt, var)
    unit_of = {id(s): u for u in replay for s in walk([u.stmt])}
    for site in sites:
        if site.index:
            continue
        u = unit_of[id(site.stmt)]
        own = sorted(n for n in u.uses if site.var in every.get(n, set()))
        if own:
            raise Unreplayable(f"{site.var} is drawn whole but its density reads {own[0]}")
    return prior, _lines(replay, tdata_stmts, simulated, decls, sites)


def _lines(replay: list, tdata_stmts: list[Stmt], simulated: list[str],
           decls: dict[str, Decl], sites: list[Site]) -> list[str]:
    hoisted, derived = [], []          # declarations; (unit index, lines) recomputed
    for s in tdata_stmts:
        lines = _as_assignment(s, hoisted) if s.kind == "decl" else [s.text]
        derived.append((-1, _renamed("\n".join(lines), _locals(s), "_rf_").splitlines()))
    body = [f"    {x}" for s in tdata_stmts
            for x in (_as_assignment(s, []) if s.kind == "decl" else s.text.splitlines())]
    drawing = {id(site.stmt) for site in sites}
    for u in replay:
        lines = _as_assignment(u.stmt, hoisted) if u.stmt.kind == "decl" else u.lines
        if not any(id(s) in drawing for s in walk([u.stmt])):
            text = "\n".join(x.strip() for x in lines)
            derived.append((u.index, _renamed(text, _locals(u.stmt), "_rf_").splitlines()))
            body += [f"    {x.strip()}" for x in lines]
            continue
        refresh = [x for k, xs in derived if k < u.index for x in xs]
        for line in lines:
            if line.strip() != REFRESH:
                body.append("  " + line)
            else:
                pad = line[:len(line) - len(line.lstrip())]
                body += [f"  {pad}{x}" for x in refresh]
    marks, sizes = [], []
    for v in simulated:
        d = decls[v]
        extents = [e.text for e in (*d.dims, *d.sizes)]
        if len(extents) > 3:
            raise DraftError(f"line {d.line}: {v} has more than 3 dimensions; the replay "
                             "of its draws is not drafted")
        kind = f"array[{', '.join(extents)}] int" if extents else "int"
        marks += [f"    {kind} {v}_drawn_ = {_rep(0, extents)};",
                  f"    {kind} {v}_ones_ = {_rep(1, extents)};"]
        sizes.append(f"num_elements({v}_ones_)" if extents else "1")
    return ["  {",
            "    // the likelihood replayed in the model's statement order (pass 1 draws,",
            "    // pass 2 re-evaluates every ~ at the simulated data and must agree)",
            *[f"    {x}" for x in hoisted], *marks,
            f"    array[{' + '.join(sizes)}] real lp_drawn_;",
            "    int k_ = 0;", "    int sites_ = 0;",
            *[f"    {v} = {v}_observed;" for v in simulated],
            "    for (pass_ in 1:2) {", "      k_ = 0;",
            *["  " + x for x in body],
            "      if (pass_ == 1) sites_ = k_;", "    }",
            f'    if (k_ != sites_) reject("{_VISITED}");',
            "  }"]


def _rep(value: int, extents: list[str]) -> str:
    return f"rep_array({value}, {', '.join(extents)})" if extents else str(value)


def _as_assignment(s: Stmt, hoisted: list[str]) -> list[str]:
    """A declaration recomputed in the replay: hoisted (no bounds) and assigned."""
    text = local_type(s.decl)
    if text is None:
        raise refuse(s, f"{s.decl.name} is computed from simulated data and is a "
                        f"{s.decl.base}, which the replay does not declare")
    hoisted.append(text)
    return [f"{s.decl.name} = {s.decl.init.text};"] if s.decl.init is not None else []

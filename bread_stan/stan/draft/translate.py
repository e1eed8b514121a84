"""Model program -> simulator statements: which ``~`` becomes which ``_rng`` draw.

Every parameter's ``~`` statement becomes a draw from its prior, the statements of
transformed parameters (and model-block locals) are recomputed, and the ``~``
statements on data inside ``if (!prior_only)`` become the simulated data; all of them
in an order where each uses only what is already drawn.  Anything that cannot be
translated exactly is refused with a :class:`DraftError` naming the statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import DraftError
from .coverage import Coverage, integer_data, size_aliases
from .mixture import fold_mixtures
from .order import dependency_order
from .parse import Decl, Expr, StanProgram, Stmt, tokenize
from .statements import (defines, flatten, has_tilde, is_prior_only_guard, lhs_form,
                         refuse_target_in, walk)
from .copies import Copy, drop_copies, find_copies
from .normaliser import LOG_C_EXACT, PRIOR_TRIES, Normaliser
from .restrict import ORDERED, bound_condition, check_ordered, rejection_loop
from .tdata import simulator_transformed_data, transformed_data_split
from .replay import (OBSERVED_SUFFIX, Replayable, Site, Unreplayable, lpdf_text,
                     replay_section, site_lines)
from .units import Unit, hyperparameters, uniform_unit
from .zero_sum import ZERO_SUM, zero_sum_prior
from .zero_inflated import fold_zero_inflated
from .support import (CONSTRAINED, GLM, INV_LOGIT, INV_LOGIT_FUNCTIONS, LOCATION,
                      MULTI_LOCATION, POSITIVE, REAL, SCALAR_ONLY, SIZE_FIRST, UNIT,
                      UNIVARIATE, ZERO, Type, glm_as_univariate, log_mix, outside_bounds,
                      refuse, within_bound)

__all__ = ["Draft", "translate"]

@dataclass
class Draft:
    """What the emitter writes: kept data, blocks copied verbatim, the outputs and the
    ordered statements of generated quantities."""

    data: list[Decl]
    hyper: list[Decl]
    functions: str | None
    transformed_data: str | None
    outputs: list[Decl]
    statements: list[str]
    simulated: list[str]
    observed: list[Decl]       # simulated data whose observed values the simulator reads
    relaxed: dict[str, str] = field(default_factory=dict)   # data -> why its bounds go
    normaliser: list[str] = field(default_factory=list)     # its outputs' declarations
    normaliser_note: str = ""                                 # what it says of c


class _Translator:
    def __init__(self, program: StanProgram, info: dict, types: list, replay: bool,
                 constants: dict[int, list[str]]):
        self.program = program
        self.replay = replay                       # draw the data in statement order
        self.sites: list[Site] = []                # ... at these ~ statements
        self.conditions: list[tuple[Stmt, int]] = []   # enclosing ifs and branches
        self.inputs = info.get("inputs", {})
        self.parameters = list(info.get("parameters", {}))
        self.transformed = list(info.get("transformed parameters", {}))
        self.types = iter(types)
        self.decls = {s.decl.name: s.decl for block in ("data", "parameters")
                      for s in program.blocks.get(block, []) if s.kind == "decl"}
        self.tilde_of: dict[str, Stmt] = {}        # variable -> its ~ statement
        self.simulated: list[str] = []
        self.relaxed: dict[str, str] = {}          # simulated data -> bound it can cross
        self.inv_logit_helper = False              # a bernoulli_logit needs INV_LOGIT
        self.loops: list[Stmt] = []                # for loops around the statement
        self.truncated: dict[str, str] = {}        # variable -> its bounds' condition
        self.cover = Coverage(size_aliases(program), integer_data(program))
        self.copies: dict[str, Copy] = {}          # transformed parameters drawn in place
        self.not_copies: dict[str, str] = {}       # ... and why the others are not
        self.scalar_data = {n for n, d in self.decls.items() if n in self.inputs
                            and not d.dims and not d.sizes}
        self.normaliser = Normaliser(program.source, constants)   # log c, where exact
        self.factor: list[str] = []                    # ... the last ~'s lines adding to it

    def is_transformed_data(self, name: str) -> bool:
        return any(s.kind == "decl" and s.decl.name == name
                   for s in self.program.blocks.get("transformed data", []))

    # -- one ~ statement
    def tilde(self, s: Stmt, likelihood: bool) -> str:
        lhs_type, arg_types = next(self.types)
        form = lhs_form(s.lhs)
        if s.truncation is not None and not self.truncation_at_zero(s, form):
            raise refuse(s, "truncation T[...] is not translated (the simulator would need the "
                             "truncated distribution); only T[0, ] on a <lower=0> parameter is "
                             "(a half distribution); write this simulator by hand")
        if form is None:
            raise refuse(s, "the left of ~ is an expression, not a variable (a change of "
                             "variables needs a Jacobian); only x, x[...] and to_vector(x) "
                             "are translated")
        var, shape = form
        data = var in self.inputs and var not in self.parameters
        if var in self.tilde_of and var not in self.cover.pieces and not (
                data and self.replay):
            raise self.twice(s, var) if not data else Replayable(str(self.twice(s, var)))
        if var in self.transformed and var not in self.copies:
            why = self.not_copies.get(var)
            raise refuse(s, f"{var} is a transformed parameter; a ~ on it needs a Jacobian "
                             "and is not a draw of it" + (
                                 f" ({var} is not a plain copy of parameter elements: {why})"
                                 if why else ""))
        if var in self.parameters or var in self.copies:
            if likelihood:
                raise refuse(s, f"the prior of parameter {var} is inside if (!prior_only); "
                                 "move it out (the prior must hold when prior_only = 1)")
        elif var in self.inputs and var != "prior_only":
            if not likelihood:
                raise refuse(s, f"data {var} is on the left of ~ outside "
                                 "if (!prior_only); wrap the likelihood in it")
            self.simulated += [var] if var not in self.simulated else []
        else:
            what = ("transformed data" if self.is_transformed_data(var)
                    else "neither a parameter nor a data variable")
            raise refuse(s, f"{var} is {what}; the simulator can draw only parameters "
                             "and data variables")
        used = set().union(*(a.names() for a in s.args)) if s.args else set()
        if shape == "index":
            used |= Expr(s.lhs.tokens[1:], s.lhs.source).names()
        if var in used and not (data and shape == "index" and self.replay):
            error = refuse(s, f"{var} appears on both sides of ~")
            raise Replayable(str(error)) if data and shape == "index" else error
        if data and self.replay:
            self.cover.check_loops(s, self.decls[var], self.loops, shape == "index")
        elif not self.check_cover(s, var, data, shape == "index") and var in self.tilde_of:
            raise self.twice(s, var) if not data else Replayable(str(self.twice(s, var)))
        if not (data and self.replay and var in self.tilde_of):   # replayed: the first
            self.tilde_of[var] = s
        dist, args = s.dist, [a.text for a in s.args]
        if dist == "std_normal":
            dist, args, arg_types = "normal", ["0", "1"], [Type("int"), Type("int")]
        if dist in GLM:
            if var in self.parameters:
                raise refuse(s, f"{dist} is a likelihood, not a prior the drafter translates")
            dist, args, arg_types = glm_as_univariate(s, dist, args, arg_types)
        if var in self.inputs:
            self.data_support(s, var, dist)
        elif self.decls[var].base in ZERO_SUM:     # a parameter of Stan 2.36+: .zero_sum
            return zero_sum_prior(self, s, shape, dist, args, arg_types)
        ordered = var in self.parameters and self.decls[var].base in ORDERED
        half = False
        if ordered:
            check_ordered(s, self.decls[var], dist, arg_types, lhs_type)
        elif var in self.parameters or var in self.copies:
            half = self.support(s, self.decls[var], dist, args)
        target = var if shape == "to_vector" else s.lhs.text
        if var in self.parameters or var in self.copies:
            self.factor = self.normaliser.tilde(s, self.decls[var], half, ordered, lhs_type,
                                                target)
        draw = self.draw(s, dist, args, arg_types, lhs_type, s.lhs.text)
        draw = f"abs({draw})" if half else draw
        if shape == "to_vector":
            declared = self.decls[var]
            if declared.dims:
                raise refuse(s, f"to_vector of the array {var} is not translated")
            wrap = {"matrix": f"to_matrix({{}}, rows({var}), cols({var}))",
                    "row_vector": "to_row_vector({})", "vector": "to_vector({})"}
            if declared.base not in wrap:
                raise refuse(s, f"to_vector of a {declared.base} is not translated")
            return f"{target} = {wrap[declared.base].format(draw)};"
        draw = self.convert(draw, lhs_type, dist)
        line = f"{target} = {f'sort_asc({draw})' if ordered else draw};"
        if data and self.replay:
            self.site(s, var, shape, line, lhs_type)
        return line

    def check_cover(self, s: Stmt, var: str, data: bool, indexed: bool) -> bool:
        """:meth:`.Coverage.check`; its refusal of data is :class:`.Replayable`."""
        try:
            return self.cover.check(s, self.decls[var], self.loops, indexed=indexed)
        except DraftError as error:
            raise Replayable(str(error)) if data else error from None

    def site(self, s: Stmt, var: str, shape: str, line: str, lhs_type: Type) -> None:
        """Record a ~ on data in a replayed program (drawn by :func:`.site_lines`)."""
        index = s.lhs.text[len(var):] if shape == "index" else ""
        control = {n for loop in self.loops for e in (loop.lhs, loop.rhs) if e is not None
                   for n in e.names()} | {n for c, _ in self.conditions for n in c.rhs.names()}
        if index:
            control |= Expr(s.lhs.tokens[1:], s.lhs.source).names()
        decl = self.decls[var]
        scalar = lhs_type.scalar or (not index and not decl.dims and not decl.sizes)
        self.sites.append(Site(s, var, index, scalar, line, lpdf_text(s), control,
                               tuple((id(c), b) for c, b in self.conditions)))

    def data_support(self, s: Stmt, var: str, dist: str) -> None:
        """Note data whose declared bounds the distribution drawing them can cross.

        A data block's bounds are checks on the input, not part of the density: the
        program's likelihood is ``dist`` on its whole support, so its posterior is that
        of the model that draws from ``dist`` unrestricted.  The simulator draws so, and
        the generated programs declare ``var`` without the bounds."""
        where = outside_bounds(self.decls[var], dist)
        if where is not None and var not in self.relaxed:
            self.relaxed[var] = (f"line {s.line}: {dist} can draw {var} {where}; the bound "
                                 "checks the input and is not part of the density")

    def truncation_at_zero(self, s: Stmt, form: tuple[str, str] | None) -> bool:
        """Whether ``s`` is ``x ~ dist(...) T[0, ]`` on a ``<lower=0>`` parameter x with a
        positive distribution or one symmetric about a location of 0: the same prior as
        without the truncation (the support check then draws it)."""
        bounds = [t.text for t in s.truncation.tokens]
        if form is None or form[0] not in self.parameters or \
                len(bounds) != 4 or bounds[0] != "[" or bounds[1] not in ZERO or \
                bounds[2:] != [",", "]"]:
            return False
        decl = self.decls[form[0]]
        lower = decl.bounds.get("lower")
        if lower is None or lower.text not in ZERO or "upper" in decl.bounds:
            return False
        if s.dist == "std_normal":
            return True
        return s.dist in POSITIVE or (s.dist in LOCATION
                                       and s.args[LOCATION[s.dist]].text in ZERO)

    def twice(self, s: Stmt, var: str) -> DraftError:
        return refuse(s, f"{var} is on the left of ~ more than once (also on line "
                         f"{self.tilde_of[var].line}); the drafter cannot tell whether "
                         "the statements cover each element once")

    def support(self, s: Stmt, decl: Decl, dist: str, args: list[str]) -> bool:
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
            if bound is not None and bound.names() & {*self.parameters, *self.transformed}:
                raise refuse(s, f"the bound of {decl.name} depends on a parameter")
        low = lower.text if lower is not None else None
        high = upper.text if upper is not None else None
        if dist == "uniform":
            # the prior is uniform on (a, b) whenever the declared bounds do not cut into it
            if within_bound(low, args[0], below=True) and \
                    within_bound(high, args[1], below=False):
                return False
            if self.truncate(decl):
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
        if self.truncate(decl):
            return False
        bounds = f"<{', '.join(f'{k}={v.text}' for k, v in decl.bounds.items())}>"
        raise refuse(s, f"{decl.name} is declared {bounds if decl.bounds else 'unbounded'}"
                         f" but {dist}({', '.join(args)}) has {support} support; the "
                         "model's prior would be truncated, which the drafter does not "
                         "translate")

    def truncate(self, decl: Decl) -> bool:
        """Whether the prior of ``decl``, truncated by its declared bounds, is drawn by
        rejection (:mod:`.restrict`): bounds of numbers or scalar data."""
        condition = bound_condition(decl, self.scalar_data)
        if condition is not None:
            self.truncated[decl.name] = condition
        return condition is not None

    def draw(self, s: Stmt, dist: str, args: list[str], arg_types: list[Type],
             lhs_type: Type, lhs: str) -> str:
        """The _rng call, with arguments broadcast to the left side's shape."""
        if dist == "binomial_logit":  # Stan 2.35 has no binomial_logit_rng: its equivalent
            dist, args = "binomial", [args[0], f"inv_logit({args[1]})"]
        if dist == "bernoulli_logit":  # its _rng, draw for draw, but certain at t = +-inf
            self.inv_logit_helper = True
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
                raise refuse(s, f"the left of ~ is a {self.describe(lhs_type)}; write "
                                 "to_vector(...) ~ or a loop")
            return f"{dist}_rng({', '.join(args)})"
        if dist in MULTI_LOCATION:
            loc = MULTI_LOCATION[dist]
            if lhs_type.dims == 1 and arg_types[loc].dims == 0:
                args = [*args]
                args[loc] = f"rep_array({args[loc]}, size({lhs}))"
            elif lhs_type.dims > 1 or arg_types[loc].dims != lhs_type.dims:
                raise refuse(s, f"{dist} with a {self.describe(lhs_type)} on the left and "
                                 f"a {self.describe(arg_types[loc])} location")
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

    def mixture(self, s: Stmt, likelihood: bool) -> str:
        """``target += log_mix(theta, f_lpdf(y[i] | a), g_lpdf(y[i] | b));`` on one
        element of modelled data: y[i] drawn from f with probability theta, else g."""
        theta, (f, outcome, a), (g, _, b) = log_mix(s)
        if f not in UNIVARIATE or g not in UNIVARIATE:
            raise refuse(s, f"log_mix of {f} and {g}: only univariate distributions with "
                             "an _rng are translated")
        self.data_element(s, outcome, likelihood, "log_mix")
        for dist in (f, g):
            self.data_support(s, lhs_form(outcome)[0], dist)
        return (f"{outcome.text} = bernoulli_rng({theta.text}) ? {f}_rng({a}) "
                f": {g}_rng({b});")

    def categorical(self, s: Stmt, likelihood: bool) -> str:
        """A K-component mixture folded by :func:`.mixture.fold_mixtures`: the component
        from categorical(weights), then y[i] from its distribution."""
        if s.dist not in UNIVARIATE:
            raise refuse(s, f"a mixture of {s.dist}: only univariate distributions with an "
                             "_rng are translated")
        self.data_element(s, s.lhs, likelihood, "a mixture")
        self.data_support(s, lhs_form(s.lhs)[0], s.dist)
        return (f"{{ int {s.var} = categorical_rng({s.rhs.text}); {s.lhs.text} = "
                f"{s.dist}_rng({', '.join(a.text for a in s.args)}); }}")

    def data_element(self, s: Stmt, outcome: Expr, likelihood: bool, what: str,
                     row: bool = False) -> None:
        """Record that ``s`` draws ``outcome``, which must be one element of modelled data
        (``row``: or a part y[i] drawn whole) inside if (!prior_only), drawn nowhere
        else, covered once by its loops."""
        form = lhs_form(outcome)
        if form is None or form[1] != "index" or form[0] not in self.inputs:
            raise refuse(s, f"{what} is translated only over one element y[i] of a data "
                             "variable")
        var = form[0]
        decl = self.decls[var]
        indexed = len([t for t in outcome.tokens if t.text == ","]) + 1
        if indexed != len(decl.dims) + len(decl.sizes) and not row:
            raise refuse(s, f"{what} over a part of {var} that is not one element")
        if not likelihood:
            raise refuse(s, f"data {var} is in {what} outside if (!prior_only)")
        if var in self.tilde_of:
            raise refuse(s, f"{var} is drawn more than once (also on line "
                             f"{self.tilde_of[var].line})")
        if var in {n for a in (*s.args, *([s.rhs] if row else [])) for n in a.names()}:
            raise refuse(s, f"{var} appears on both sides of {what}")
        self.cover.check(s, decl, self.loops, outcome)
        self.tilde_of[var] = s
        self.simulated.append(var)

    @staticmethod
    def convert(draw: str, lhs_type: Type, dist: str) -> str:
        """An _rng result (an array for vectorised calls) as the left side's type."""
        if dist in UNIVARIATE and lhs_type.dims == 0:
            if lhs_type.base == "vector":
                return f"to_vector({draw})"
            if lhs_type.base == "row_vector":
                return f"to_row_vector({draw})"
        if dist in MULTI_LOCATION and lhs_type == Type("row_vector"):
            return f"to_row_vector({draw})"
        return draw

    @staticmethod
    def describe(t: Type) -> str:
        return f"{t.dims}-d array of {t.base}" if t.dims else t.base

    # -- statements
    def render(self, s: Stmt, likelihood: bool, indent: str) -> list[str]:
        if self.replay and s.kind in ("mixture", "zero_inflated", "target"):
            raise Unreplayable("a mixture or target += is not replayed")
        if s.kind == "tilde":
            n, self.factor = len(self.sites), []
            line = self.tilde(s, likelihood)
            return site_lines(self.sites[-1], indent) if len(self.sites) > n \
                else [indent + line] + [indent + x for x in self.factor]
        if s.kind == "mixture":
            return [indent + self.categorical(s, likelihood)]
        if s.kind == "zero_inflated":
            self.data_element(s, s.lhs, likelihood, "a zero-inflated mixture", row=True)
            self.data_support(s, lhs_form(s.lhs)[0], s.dist)
            return [indent + s.draw]
        if s.kind == "target":
            if log_mix(s) is not None:
                return [indent + self.mixture(s, likelihood)]
            raise refuse(s, "target += has no _rng counterpart; write the simulator by "
                             "hand (or state this term as a ~ statement)")
        if s.kind in ("decl", "assign"):
            if "prior_only" in {n for e in s.exprs() for n in e.names()}:
                raise refuse(s, "prior_only is used outside if (!prior_only)")
            return [indent + s.text]
        if s.kind == "block":
            inner = [x for b in s.body for x in self.render(b, likelihood, indent + "  ")]
            return [indent + "{", *inner, indent + "}"]
        if s.kind in ("for", "foreach"):
            head = (f"for ({s.var} in {s.lhs.text}:{s.rhs.text})" if s.kind == "for"
                    else f"for ({s.var} in {s.lhs.text})")
            self.loops.append(s)
            body = self.body(s.body, likelihood, indent)
            self.loops.pop()
            return [indent + head + " {", *body, indent + "}"]
        if s.kind == "if":
            if is_prior_only_guard(s):
                return [indent + "{", *self.body(s.body, True, indent), indent + "}"]
            if s.rhs.names() & {*self.parameters, *self.transformed, "prior_only"}:
                raise refuse(s, "a conditional on a parameter (or on prior_only other "
                                 "than if (!prior_only) { ... }) is not translated")
            if has_tilde(s) and not self.replay:
                error = refuse(s, "a ~ inside a conditional is not translated (the "
                                  "variable would be left undrawn when the condition is "
                                  "false)")
                raise Replayable(str(error)) if self.tildes_on_data(s) else error
            if has_tilde(s) and not self.tildes_on_data(s):
                raise refuse(s, "a ~ on a parameter inside a conditional is not translated")
            self.conditions.append((s, 0))
            lines = [indent + f"if ({s.rhs.text}) {{", *self.body(s.body, likelihood, indent)]
            self.conditions[-1] = (s, 1)
            if s.orelse:
                lines += [indent + "} else {", *self.body(s.orelse, likelihood, indent)]
            self.conditions.pop()
            return lines + [indent + "}"]
        raise refuse(s, "this statement is not translated (only ~, declarations, "
                         "assignments, for loops, blocks and conditionals on data are)")

    def tildes_on_data(self, s: Stmt) -> bool:
        """Whether every ~ inside ``s`` draws a data variable."""
        return all(lhs_form(x.lhs) is not None and lhs_form(x.lhs)[0] in self.inputs
                   and lhs_form(x.lhs)[0] not in self.parameters
                   for x in walk([s]) if x.kind == "tilde")

    def body(self, stmts: list[Stmt], likelihood: bool, indent: str) -> list[str]:
        stmts = stmts[0].body if len(stmts) == 1 and stmts[0].kind == "block" else stmts
        return [x for b in stmts for x in self.render(b, likelihood, indent + "  ")]


def translate(program: StanProgram, info: dict, types: list, hyper=None,
              densities: list | None = None, replay: bool = False,
              constants: dict[int, list[str]] | None = None) -> Draft:
    """Translate a parsed model program (``info``: its ``stanc --info``; ``types``:
    :func:`tilde_types`; ``densities``: :func:`density_types`).  ``hyper``: names of the
    hyperparameters, or None for the scalar parameters whose prior uses no other
    parameter.  ``replay``: draw the data in the model's statement order
    (:mod:`.replay`); without it, a refusal that the replay may lift is
    :class:`.Replayable`.  ``constants``: the constant terms of ``target +=`` statements
    that :func:`.targets_as_tildes` dropped, by line (for the prior's normaliser)."""
    tr = _Translator(program, info, types, replay, constants or {})
    if "prior_only" not in tr.inputs:
        raise DraftError("the model does not declare `int<lower=0, upper=1> prior_only;` "
                         "with the likelihood inside if (!prior_only) { ... }: the "
                         "drafter needs it to tell the prior from the likelihood")
    fold_mixtures(program)
    fold_zero_inflated(program, densities or [])
    _copies(tr, program)
    for block in ("transformed data", "transformed parameters", "model"):
        for s in program.blocks.get(block, []):
            refuse_target_in(s)
    units: list[Unit] = []
    statements = [(s, False) for s in program.blocks.get("transformed parameters", [])]
    statements += flatten(program.blocks.get("model", []))
    for k, (s, likelihood) in enumerate(statements):
        lines = tr.render(s, likelihood, "  ")
        defined, drawn, local = defines(s)
        uses = {n for e in s.exprs() for n in e.names()} - defined - local
        if s.kind == "assign":      # x[i] = ...: the index reads, the whole x is written
            uses |= Expr(s.lhs.tokens[1:], s.lhs.source).names()
        units.append(Unit(k, s, lines, defined | drawn, uses, drawn, likelihood))
    try:
        tr.cover.finish()
    except DraftError as error:
        raise Replayable(str(error)) if set(tr.cover.pieces) & set(tr.simulated) and \
            not replay else error from None
    for c in tr.copies.values():      # the draws of a copy written back to its parameters
        if c.name not in tr.tilde_of:
            continue
        for p in c.parameters:
            if p in tr.tilde_of:
                raise tr.twice(tr.tilde_of[p], p)
            tr.tilde_of[p] = tr.tilde_of[c.name]
        extents = {n for line in c.statements for e in line.exprs() for n in e.names()}
        units.append(Unit(len(units), tr.tilde_of[c.name], c.write_back, set(c.parameters),
                          {c.name} | (extents - set(c.parameters)), set(c.parameters), False))
    simulated = set(tr.simulated)
    for p in [p for p in tr.parameters if p not in tr.tilde_of]:
        units.append(uniform_unit(tr.decls[p], tr.scalar_data, len(units)))
        factor = tr.normaliser.uniform(tr.decls[p])
        units[-1].lines += ["  " + factor] if factor else []
    outputs = [tr.decls[p] for p in tr.parameters] + [tr.decls[v] for v in tr.simulated]
    sizes = {n for d in outputs for e in (*d.bounds.values(), *d.sizes, *d.dims)
             for n in e.names()}
    prior, replayed = units, []
    if replay:
        td, tainted, depends = transformed_data_split(program, simulated)
        prior, replayed = replay_section(units, tr.sites, tr.simulated, tr.decls,
                                         (tainted, depends), set(tr.parameters), tr.twice)
        for name in sorted(sizes & {n for n, v in depends.items() if v}):
            raise DraftError(f"the size or bound of an output reads {name}, computed from "
                             "the simulated data")
        names = {t.text for t in tokenize(program.source) if t.kind == "id"}
        for v in sorted(v for v in simulated if v + OBSERVED_SUFFIX in names):
            raise DraftError(f"the program uses the name {v}{OBSERVED_SUFFIX}, which the "
                             f"simulator needs for the observed values of {v}")
    else:
        _direct_checks(units, simulated)
        used = set().union(*(u.uses for u in units)) | sizes
        try:
            td = simulator_transformed_data(program, simulated, used)
        except DraftError as error:
            raise Replayable(str(error)) from None
    order = dependency_order(prior)
    hyper_names = hyperparameters(tr.parameters, tr.transformed, tr.decls, units, hyper)
    lines: list[str] = [f"  {LOG_C_EXACT} = 0;"]   # reset at every try of a rejection
    cut = 0         # the lines up to the last draw of a prior truncated by its bounds
    for u in order:
        drawn = u.tildes & set(hyper_names)
        if drawn:
            h = drawn.pop()
            if u.defines - {h}:
                raise refuse(u.stmt, f"hyperparameter {h} is drawn together with "
                                      f"{sorted(u.defines - {h})[0]}; give it its own ~")
            lines += ["  if (hyper_given) {", f"    {h} = {h}_given[1];", "  } else {",
                      *["  " + x for x in u.lines], "  }"]
        else:
            lines += u.lines
        cut = len(lines) if u.tildes & set(tr.truncated) else cut
    lines += replayed
    known = tr.normaliser
    lines = rejection_loop(known.finish(lines[:cut]), known.finish(lines[cut:]), tr.truncated,
                           hyper_names, None if known.unavailable else PRIOR_TRIES)
    lines = tr.cover.size_checks(tr.copies.values(), tr.simulated) + lines
    kept = [s.decl for s in program.blocks.get("data", [])
            if s.kind == "decl" and s.decl.name not in simulated
            and s.decl.name != "prior_only"]
    functions = program.block_text("functions") if "functions" in program.spans else None
    functions = (functions or "\n") + INV_LOGIT_FUNCTIONS if tr.inv_logit_helper else functions
    return Draft(kept, [tr.decls[h] for h in hyper_names], functions, td, outputs, lines,
                 list(tr.simulated), [tr.decls[v] for v in tr.simulated] if replay else [],
                 dict(tr.relaxed), known.outputs(bool(tr.truncated)),
                 known.note(bool(tr.truncated)))


def _direct_checks(units: list[Unit], simulated: set[str]) -> None:
    """Refuse a prior that reads simulated data; a quantity computed from them is
    :class:`.Replayable`."""
    for u in units:
        if u.uses & simulated and (u.tildes - simulated or not u.likelihood):
            data = sorted(u.uses & simulated)[0]
            if not u.tildes and u.defines:
                raise Replayable(str(refuse(
                    u.stmt, f"{sorted(u.defines)[0]} is computed from the data {data} that "
                            "the simulator draws (outcomes that enter the model's own "
                            "quantities, as a behavioural or autoregressive effect does, "
                            "are drafted only when each element's density reads elements "
                            "stated before it); write the simulator by hand and pass "
                            "--simulator")))
            raise refuse(u.stmt, f"the prior uses the data {data} that the simulator draws")


def _copies(tr: _Translator, program: StanProgram) -> None:
    """Find the transformed parameters with a ~ that copy parameter elements
    (:mod:`.copies`), and drop their copy statements: the simulator draws them."""
    def tildes(stmts):
        return {f[0] for x in stmts for f in [lhs_form(x.lhs) if x.kind == "tilde" else None]
                if f} | {v for x in stmts for v in tildes([*x.body, *x.orelse])}
    found = find_copies(program, tildes(program.blocks.get("model", [])) & set(tr.transformed))
    tr.copies = {n: c for n, c in found.items() if isinstance(c, Copy)}
    tr.not_copies = {n: c for n, c in found.items() if isinstance(c, str)}
    drop_copies(program, list(tr.copies.values()))
    tr.decls.update({s.decl.name: s.decl for s in program.blocks.get("transformed parameters",
                                                                      []) if s.kind == "decl"
                     and s.decl.name in tr.copies})


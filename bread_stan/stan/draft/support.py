"""What the drafter knows of Stan: the distributions with an ``_rng`` and their
supports, the types stanc reports, and the shapes of density expressions it reads."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import DraftError
from .parse import Decl, Expr, Stmt, read_sexp

__all__ = ["REAL", "POSITIVE", "UNIT", "DISCRETE", "LOCATION", "MULTI_LOCATION",
           "CONSTRAINED", "SIZE_FIRST", "SCALAR_ONLY", "UNIVARIATE", "ZERO", "GLM", "Type",
           "tilde_types", "density_types", "outside_bounds", "refuse", "log_mix",
           "top_level_split", "glm_as_univariate",
           "within_bound", "INV_LOGIT", "INV_LOGIT_FUNCTIONS"]

# bernoulli_logit_rng(t) is bernoulli_rng(inv_logit(t)) draw for draw, but refuses an
# infinite t (a prior draw whose logit overflows), where the outcome is certain:
# inv_logit(+-inf) is 1 or 0 (a NaN is still refused).  The drafter calls inv_logit under
# a name of the simulator's own (for each type a logit can have), since stanc rewrites
# bernoulli_rng(inv_logit(t)) as bernoulli_logit_rng(t).
INV_LOGIT = "bread_inv_logit_"
INV_LOGIT_FUNCTIONS = "".join(
    f"  {kind} {INV_LOGIT}({kind} t) {{ return inv_logit(t); }}\n"
    for kind in ("real", "vector", "row_vector")) + (
    f"  array[] real {INV_LOGIT}(array[] real t) {{ return inv_logit(t); }}\n")

# Supports of the univariate distributions with an _rng (Stan 2.35).
REAL = {"normal", "student_t", "cauchy", "double_exponential", "logistic", "gumbel",
         "skew_normal", "exp_mod_normal", "skew_double_exponential"}
POSITIVE = {"lognormal", "chi_square", "inv_chi_square", "scaled_inv_chi_square",
             "exponential", "gamma", "inv_gamma", "weibull", "frechet", "rayleigh",
             "loglogistic"}
UNIT = {"beta", "beta_proportion"}
DISCRETE = {"bernoulli", "bernoulli_logit", "binomial", "beta_binomial", "poisson",
             "poisson_log", "neg_binomial", "neg_binomial_2", "neg_binomial_2_log"}
# Symmetric about their location: with location 0 and <lower=0>, |draw| is exact.
LOCATION = {"normal": 0, "student_t": 1, "cauchy": 0, "double_exponential": 0,
             "logistic": 0}
# Multivariate: the argument that may be an array of locations.
MULTI_LOCATION = {"multi_normal": 0, "multi_normal_cholesky": 0, "multi_student_t": 1,
                   "multi_student_t_cholesky": 1}
# Distributions of one constrained matrix or vector: constraint type -> distributions.
CONSTRAINED = {"simplex": {"dirichlet"}, "cholesky_factor_corr": {"lkj_corr_cholesky"},
                "corr_matrix": {"lkj_corr"}, "cov_matrix": {"wishart", "inv_wishart"},
                "cholesky_factor_cov": {"wishart_cholesky", "inv_wishart_cholesky"}}
SIZE_FIRST = {"lkj_corr_cholesky", "lkj_corr"}      # their _rng takes the size first
SCALAR_ONLY = {"categorical", "categorical_logit", "ordered_logistic", "ordered_probit"}
UNIVARIATE = REAL | POSITIVE | UNIT | DISCRETE | {"uniform"}
ZERO = {"0", "0.0", "0.", "0e0"}


# The glm likelihoods: the univariate distribution of each outcome, given the linear
# predictor alpha + x * beta (x a matrix or row_vector, alpha a real or vector).
GLM = {"normal_id_glm": "normal", "bernoulli_logit_glm": "bernoulli_logit",
        "poisson_log_glm": "poisson_log"}


@dataclass(frozen=True)
class Type:
    """A Stan type as stanc reports it: base (real, int, vector, ...) and array dims."""

    base: str
    dims: int = 0

    @property
    def scalar(self) -> bool:
        return self.dims == 0 and self.base in ("real", "int")

    @property
    def one_dimensional(self) -> bool:
        return (self.dims == 0 and self.base in ("vector", "row_vector")) or (
            self.dims == 1 and self.base in ("real", "int"))


def _type(node) -> Type:
    if isinstance(node, list):        # (UArray inner)
        inner = _type(node[1])
        return Type(inner.base, inner.dims + 1)
    names = {"UReal": "real", "UInt": "int", "UVector": "vector", "URowVector": "row_vector",
             "UMatrix": "matrix", "UComplex": "complex"}
    return Type(names.get(node, node))


def _expr_type(node) -> Type:
    """Type of an expression node ``((expr ...) (emeta (... (type_ T))))``."""
    for item in node[1][1]:
        if item[0] == "type_":
            return _type(item[1])
    raise DraftError("stanc's typed syntax tree has an unexpected shape")


def tilde_types(ast_text: str) -> list[tuple[Type, list[Type]]]:
    """Types of the left side and the arguments of each ``~`` of the model block, in
    order, from ``stanc --debug-decorated-ast``."""
    found = []
    for node in _model_block_nodes(ast_text, "Tilde"):
        fields = {f[0]: f[1] for f in node[1:] if isinstance(f, list) and f}
        found.append((_expr_type(fields["arg"]), [_expr_type(a) for a in fields["args"]]))
    return found


def density_types(ast_text: str) -> list[tuple[str, list[Type]]]:
    """(name, types of the arguments) of each density call ``foo_lpdf(y | ...)`` of the
    model block, in source order, from ``stanc --debug-decorated-ast``."""
    return [(node[2][0][1], [_expr_type(a) for a in node[3]])
            for node in _model_block_nodes(ast_text, "CondDistApp", nested=True)
            if len(node) >= 4]


def _model_block_nodes(ast_text: str, tag: str, nested: bool = False) -> list[list]:
    """The AST nodes tagged ``tag`` inside the model block, in source order: the
    outermost ones, or with ``nested`` also those inside a returned node."""
    found: list[list] = []

    def walk(node, inside: bool):
        if not isinstance(node, list):
            return
        if node and node[0] == "modelblock":
            inside = True
        if inside and node and node[0] == tag:
            found.append(node)
            if not nested:
                return
        for child in node:
            walk(child, inside)

    walk(read_sexp(ast_text), False)
    return found


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def outside_bounds(decl: Decl, dist: str) -> str | None:
    """Why draws of ``dist`` can fall outside the bounds declared for the data
    ``decl`` (None when they cannot, or when the drafter cannot tell)."""
    if decl.base not in ("real", "int", "vector", "row_vector", "matrix"):
        return None
    low, high = (decl.bounds.get(k) for k in ("lower", "upper"))
    low_n, high_n = _number(low.text if low else None), _number(high.text if high else None)
    if dist in REAL or dist in MULTI_LOCATION:
        support = (None, None)
    elif dist in POSITIVE:
        support = (0.0, None)
    elif dist in UNIT:
        support = (0.0, 1.0)
    elif dist in ("bernoulli", "bernoulli_logit"):
        support = (0.0, 1.0)
    elif dist in ("binomial", "binomial_logit", "beta_binomial"):
        high = None      # draws up to N: upper=N, or a bound the drafter cannot compare
        support = (0.0, None)
    elif dist in DISCRETE:
        support = (0.0, None)
    else:
        return None
    if low is not None and (support[0] is None or (low_n is not None and low_n > support[0])):
        return f"below {decl.name}'s declared lower={low.text}"
    if high is not None and (support[1] is None or (high_n is not None and high_n < support[1])):
        return f"above {decl.name}'s declared upper={high.text}"
    return None


def refuse(stmt: Stmt | Decl, why: str) -> DraftError:
    """The drafter's one-line refusal of ``stmt``, naming its line."""
    text = " ".join(" ".join(x.split("//")[0] for x in stmt.text.splitlines()).split())
    if len(text) > 90:
        text = text[:87] + "..."
    return DraftError(f"line {stmt.line} `{text}`: {why}")


def log_mix(s: Stmt):
    """(theta, (f, outcome, args of f), (g, outcome, args of g)) of
    ``target += log_mix(theta, f_lpdf(y | ...), g_lpdf(y | ...));`` with the same
    outcome in both densities, else None."""
    toks = s.rhs.tokens
    if len(toks) < 4 or toks[0].text != "log_mix" or toks[1].text != "(" \
            or toks[-1].text != ")":
        return None
    parts = top_level_split(toks[2:-1], ",")
    if len(parts) != 3:
        return None
    out = []
    for part in parts[1:]:
        if len(part) < 4 or part[0].kind != "id" or part[1].text != "(" \
                or part[-1].text != ")" or not part[0].text.endswith(("_lpdf", "_lpmf")):
            return None
        inner = top_level_split(part[2:-1], "|")
        if len(inner) != 2:
            return None
        out.append((part[0].text[:-5], Expr(tuple(inner[0]), s.rhs.source),
                    s.rhs.source[inner[1][0].start:inner[1][-1].end] if inner[1] else ""))
    if out[0][1].text != out[1][1].text:
        return None
    return Expr(tuple(parts[0]), s.rhs.source), out[0], out[1]


def top_level_split(tokens, sep: str) -> list[list]:
    """``tokens`` split at ``sep`` outside brackets."""
    parts, current, depth = [], [], 0
    for t in tokens:
        if t.kind == "op" and t.text in "([{":
            depth += 1
        elif t.kind == "op" and t.text in ")]}":
            depth -= 1
        if depth == 0 and t.kind == "op" and t.text == sep:
            parts.append(current)
            current = []
        else:
            current.append(t)
    parts.append(current)
    return parts


def glm_as_univariate(s: Stmt, dist: str, args: list[str], arg_types: list[Type]
         ) -> tuple[str, list[str], list[Type]]:
    """``y ~ foo_glm(x, alpha, beta[, sigma])`` as ``y ~ foo(alpha + x * beta[, sigma])``."""
    x_type = arg_types[0]
    if x_type.dims or x_type.base not in ("matrix", "row_vector"):
        raise refuse(s, f"the predictors of {dist} are a {x_type.base}; only a matrix or "
                         "row_vector is translated")
    eta = f"({args[1]}) + ({args[0]}) * ({args[2]})"
    eta_type = Type("vector") if x_type.base == "matrix" else Type("real")
    return GLM[dist], [eta, *args[3:]], [eta_type, *arg_types[3:]]


def within_bound(bound: str | None, value: str, below: bool) -> bool:
    """Whether a declared bound (None: none) does not cut into ``value``'s side of a
    uniform: the same text, or numbers with the bound at or beyond the value."""
    if bound is None or bound == value:
        return True
    try:
        return float(bound) <= float(value) if below else float(bound) >= float(value)
    except ValueError:
        return False

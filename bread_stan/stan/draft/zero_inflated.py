"""Zero-inflated mixtures, read as a draw of a coin and then of the outcome.

The Stan User's Guide's zero-inflated Poisson and the capture-recapture programs state
the density of one outcome ``y[i]`` (a count, or a row of counts) in two branches::

    if (y[n] == 0)
      target += log_sum_exp(log(theta), log1m(theta) + poisson_lpmf(y[n] | lambda));
    else
      target += log1m(theta) + poisson_lpmf(y[n] | lambda);

    if (s[i] > 0)                      // s[i] = sum(y[i]) in transformed data
      target += bernoulli_lpmf(1 | omega) + bernoulli_lpmf(y[i] | p);
    else
      target += log_sum_exp(bernoulli_lpmf(1 | omega) + bernoulli_lpmf(y[i] | p),
                            bernoulli_lpmf(0 | omega));

Both say: with probability w the outcome is drawn from a count distribution F, else it
is zero; P(y = 0) = w F(0) + 1 - w.  The draw ``if (bernoulli_rng(w)) y[i] = F_rng(...);
else y[i] = 0;`` has exactly this law when

* y is declared ``int<lower=0>`` and F is a distribution on counts;
* the condition says exactly "y[i] is not all zero": ``y[i] > 0`` or ``y[i] != 0`` for
  one count, ``y[i] == 0`` with the branches swapped, ``sum(y[i]) > 0``, or ``s[i] > 0``
  with s transformed data filled only by ``s[k] = sum(y[k]);`` in a loop over all k;
* both branches state the same density ``F(y[i] | args)`` (the zero branch may write
  the outcome of one count as the literal 0) plus the same weight term;
* the weight term and the other term of ``log_sum_exp`` are the log probabilities of
  the two sides of one coin: ``log(w)``/``log1m(w)``, ``bernoulli_lpmf(1 | w)``/
  ``bernoulli_lpmf(0 | w)``, ``log_inv_logit(x)``/``log1m_inv_logit(x)``,
  ``bernoulli_logit_lpmf(1 | x)``/``(0 | x)``.

:func:`fold_zero_inflated` replaces such an ``if``/``else`` by one statement of kind
``zero_inflated`` (outcome ``lhs``, coin parameter ``rhs``, density ``dist`` and
``args``, the simulator's line ``draw``).  An ``if``/``else`` of this shape (one
``target +=`` a branch, one of them a two-term ``log_sum_exp``) that misses a condition
is refused, naming the condition.
"""

from __future__ import annotations

from typing import Iterable

from .parse import Expr, StanProgram, Stmt, Token, tokenize
from .rowsum import row_sums
from .support import DISCRETE, ZERO, Type, refuse, top_level_split
from .terms import DENSITY, density_term, split_sum

__all__ = ["fold_zero_inflated"]

# log probability of one side of a coin: function -> (family, side)
_COIN_CALLS = {"log": ("p", 1), "log1m": ("p", 0), "log_inv_logit": ("logit", 1),
               "log1m_inv_logit": ("logit", 0)}
_COIN_DENSITIES = {"bernoulli_lpmf": "p", "bernoulli_logit_lpmf": "logit"}


def _texts(tokens: Iterable[Token]) -> list[str]:
    return [t.text for t in tokens]


def _is_guard(s: Stmt) -> bool:
    return s.kind == "if" and not s.orelse and _texts(s.rhs.tokens) == ["!", "prior_only"]


def _unwrap(branch: list[Stmt]) -> tuple[Stmt | None, Stmt | None]:
    """(the one target statement of a branch, the if (!prior_only) around it, or None)."""
    guard = None
    while len(branch) == 1 and (branch[0].kind == "block" or
                                (_is_guard(branch[0]) and guard is None)):
        if branch[0].kind != "block":
            guard = branch[0]
        branch = branch[0].body
    return (branch[0], guard) if len(branch) == 1 and branch[0].kind == "target" \
        else (None, None)


def _coin(tokens: tuple[Token, ...]) -> tuple[str, tuple[str, ...], int] | None:
    """(family "p" or "logit", the coin's parameter, side 1 or 0) of a log probability
    ``log(w)``, ``bernoulli_lpmf(1 | w)``, ... (see the module docstring), else None."""
    texts = _texts(tokens)
    if len(texts) < 4 or texts[1] != "(" or texts[-1] != ")":
        return None
    inner = tokens[2:-1]
    if texts[0] in _COIN_CALLS and len(top_level_split(inner, ",")) == 1:
        family, side = _COIN_CALLS[texts[0]]
        return family, tuple(_texts(inner)), side
    parts = top_level_split(inner, "|")
    if texts[0] in _COIN_DENSITIES and len(parts) == 2 and _texts(parts[0]) in (["0"], ["1"]):
        return _COIN_DENSITIES[texts[0]], tuple(_texts(parts[1])), int(parts[0][0].text)
    return None


def _weighted(tokens: tuple[Token, ...], weight: list[str] | None = None):
    """(weight term, density term) of ``W + F_lpmf(y | ...)`` (either order), else None.
    Without ``weight`` the density's outcome must be a variable; with it (the other
    branch's weight, as texts) the density may be of a literal 0 and the weight is the
    term equal to ``weight`` when there is one."""
    spans = split_sum(tokens)
    if spans is None or len(spans) != 2:
        return None
    terms = [density_term(tokens[a:b], set()) for a, b in spans]
    pairs = []
    for k, t in enumerate(terms):
        if t.call and DENSITY.search(t.call) and _texts(t.prefix) in ([], ["+"]) and (
                weight is not None or not all(x.kind == "num" for x in t.outcome)):
            w = terms[1 - k].tokens
            pairs.append((tuple(w[1:] if w[0].text == "+" else w), t))
    if weight is None:
        return pairs[0] if len(pairs) == 1 else None
    return next((p for p in pairs if _texts(p[0]) == weight), pairs[0] if pairs else None)


def _condition(cond: Expr) -> tuple[tuple[str, ...], bool] | None:
    """(the tested expression, True when the if branch is the nonzero one) of
    ``X > 0``, ``X != 0`` or ``X == 0``."""
    texts = _texts(cond.tokens)
    if len(texts) >= 3 and texts[-1] in ZERO and texts[-2] in (">", "!=", "=="):
        if any(t in (">", "<", "==", "!=", ">=", "<=", "&&", "||", "?") for t in texts[:-2]):
            return None
        return tuple(texts[:-2]), texts[-2] != "=="
    return None


class _Folder:
    def __init__(self, program: StanProgram, densities: list[tuple[str, list[Type]]]):
        self.program = program
        self.densities = densities
        self.data = {s.decl.name: s.decl for s in program.blocks.get("data", [])
                     if s.kind == "decl"}
        self.tdata = {s.decl.name: s.decl for s in program.blocks.get("transformed data", [])
                      if s.kind == "decl"}
        self.totals = row_sums(program)
        start, end = program.spans.get("model", (0, 0))
        toks = tokenize(program.source)
        calls = [t.start for k, t in enumerate(toks) if start <= t.start < end
                 and t.kind == "id" and DENSITY.search(t.text) and k + 1 < len(toks)
                 and toks[k + 1].text == "("]
        self.ordinal = {at: k for k, at in enumerate(calls)} \
            if len(calls) == len(densities) else {}

    def fold(self, s: Stmt) -> Stmt | None:
        """The folded statement of a zero-inflated if/else (refused when of the shape but
        not exact); None when ``s`` is not of the shape."""
        if s.kind != "if" or not s.orelse:
            return None
        (first, g1), (second, g2) = _unwrap(s.body), _unwrap(s.orelse)
        if first is None or second is None:
            return None
        sums = [_texts(x.rhs.tokens[:2]) == ["log_sum_exp", "("] and x.rhs.tokens[-1].text
                == ")" and len(top_level_split(x.rhs.tokens[2:-1], ",")) == 2
                for x in (first, second)]
        if sums.count(True) != 1:
            return None
        why = "a zero-inflated mixture (if/else on the outcome, one branch a log_sum_exp)"
        if (g1 is None) != (g2 is None):
            raise refuse(s, f"{why}: wrap both branches in if (!prior_only), or neither")
        zero, nonzero = (first, second) if sums[0] else (second, first)
        weighted = _weighted(nonzero.rhs.tokens)
        if weighted is None:
            raise refuse(s, f"{why}: the branch without log_sum_exp must be a weight plus one "
                            "density of the outcome, w + F_lpmf(y[i] | ...)")
        weight, density = weighted
        other = None
        for a, b in ((0, 1), (1, 0)):
            parts = top_level_split(zero.rhs.tokens[2:-1], ",")
            inner = _weighted(tuple(parts[a]), _texts(weight))
            if inner is not None:
                other, (zweight, zdensity) = tuple(parts[b]), inner
                break
        if other is None:
            raise refuse(s, f"{why}: one term of log_sum_exp must be the weight plus the "
                            "density of the other branch")
        return self.checked(s, weight, density, zweight, zdensity, other, sums[0], g1)

    def checked(self, s, weight, density, zweight, zdensity, other, zero_first, guard):
        why = "a zero-inflated mixture"
        outcome = Expr(density.outcome, s.rhs.source)
        y = outcome.tokens[0].text
        decl = self.data.get(y) if y not in self.totals else self.tdata[y]
        indices = top_level_split(outcome.tokens[2:-1], ",") if len(outcome.tokens) > 1 else []
        if decl is None or decl.base != "int" or "lower" not in decl.bounds \
                or decl.bounds["lower"].text not in ZERO:
            raise refuse(s, f"{why} needs its outcome to be data declared int<lower=0>; "
                            f"{outcome.text} is not")
        dist = DENSITY.sub("", density.call)
        if dist not in DISCRETE | {"binomial_logit"} or not density.call.endswith("_lpmf"):
            raise refuse(s, f"{why} needs a count distribution _lpmf; {density.call} is not")
        if _texts(weight) != _texts(zweight) or density.call != zdensity.call or \
                _texts(density.args) != _texts(zdensity.args):
            raise refuse(s, f"{why} needs the same weight and density in both branches")
        extents = [e.text for e in (*decl.dims, *decl.sizes)]
        rest = extents[len(indices):]
        zero_outcome = _texts(zdensity.outcome)
        if zero_outcome != _texts(outcome.tokens) and not (zero_outcome == ["0"] and not rest):
            raise refuse(s, f"{why} needs the zero branch's density of {outcome.text} (or of "
                            "0, for one count)")
        coin, complement = _coin(weight), _coin(other)
        if coin is None or complement is None or coin[:2] != complement[:2] \
                or coin[2] == complement[2]:
            raise refuse(s, f"{why} needs {Expr(weight, s.rhs.source).text} and "
                            f"{Expr(other, s.rhs.source).text} to be the log probabilities "
                            "of the two sides of one coin (log(w) and log1m(w), "
                            "bernoulli_lpmf(1 | w) and bernoulli_lpmf(0 | w), ...)")
        self.check_condition(s, outcome, indices, rest, zero_first)
        family, _, side = coin
        w_text = s.rhs.source[self._param_span(weight)]
        toss = {("p", 1): f"bernoulli_rng({w_text})", ("p", 0): f"bernoulli_rng(1 - ({w_text}))",
                ("logit", 1): f"bernoulli_logit_rng({w_text})",
                ("logit", 0): f"bernoulli_logit_rng(-({w_text}))"}[family, side]
        args = [Expr(tuple(a), s.rhs.source) for a in top_level_split(density.args, ",")]
        if y in self.totals:       # binomial(T, p) of a row total: the row, elementwise
            outcome, draw, rest = self.row_of_total(s, outcome, density, dist, args)
        else:
            draw = self.draw(s, density, dist, [a.text for a in args], rest)
        zeros = "0" if not rest else f"rep_array(0, {rest[0]})"
        folded = Stmt("zero_inflated", s.line, s.text, lhs=outcome,
                      rhs=Expr(self._param_tokens(weight), s.rhs.source), dist=dist,
                      args=args, draw=f"if ({toss}) {outcome.text} = {draw}; "
                                      f"else {outcome.text} = {zeros};")
        if guard is None:
            return folded
        guard.body = [folded]
        return guard

    def row_of_total(self, s: Stmt, outcome: Expr, density, dist: str, args: list[Expr]):
        """(the row y[i], its draw, its extent) for ``binomial_lpmf(s[i] | T, p)`` with
        s[i] = sum(y[i]), y[i] of T elements in {0, 1} and p one number: the total of
        T independent bernoulli(p) is binomial(T, p), so drawing the row elementwise
        gives s[i] the stated law."""
        y = self.data[self.totals[outcome.tokens[0].text]]
        bounds = {k: v.text for k, v in y.bounds.items()}
        k = self.ordinal.get(next(t.start for t in density.tokens if t.text == density.call))
        types = self.densities[k][1][1:] if k is not None else []
        if dist != "binomial" or len(y.dims) != 2 or y.sizes or \
                bounds.get("lower") not in ZERO or bounds.get("upper") != "1" or \
                args[0].text != y.dims[1].text or not types or not types[1].scalar:
            raise refuse(s, f"a zero-inflated density of the row total {outcome.text} is "
                            f"translated only as binomial_lpmf({outcome.text} | T, p) with "
                            f"p one number, T the row length of {y.name} and {y.name} "
                            "declared int<lower=0, upper=1> (the total of T bernoulli(p))")
        text = f"{y.name}{outcome.text[len(outcome.tokens[0].text):]}"
        row = Expr(tuple(tokenize(text)), text)
        return row, f"bernoulli_rng(rep_array({args[1].text}, {args[0].text}))", \
            [y.dims[1].text]

    @staticmethod
    def _param_tokens(weight: tuple[Token, ...]) -> tuple[Token, ...]:
        parts = top_level_split(weight[2:-1], "|")
        return tuple(parts[-1])

    def _param_span(self, weight: tuple[Token, ...]) -> slice:
        toks = self._param_tokens(weight)
        return slice(toks[0].start, toks[-1].end)

    def check_condition(self, s: Stmt, outcome: Expr, indices, rest, zero_first) -> None:
        why = ("a zero-inflated mixture needs the condition to say exactly that "
               f"{outcome.text} is not all zero ({outcome.text} > 0 for one count, "
               f"sum({outcome.text}) > 0, or s[...] > 0 with s[k] = sum(y[k]) in "
               "transformed data), with the log_sum_exp branch taken when it is zero")
        found = _condition(s.rhs)
        if found is None:
            raise refuse(s, why)
        tested, nonzero_first = found
        out = tuple(_texts(outcome.tokens))
        ok = nonzero_first != zero_first
        if tested == out:
            ok = ok and not rest
        elif tested == ("sum", "(", *out, ")"):
            ok = ok and len(rest) == 1
        elif len(tested) >= 4 and tested[1] == "[" and tested[0] in self.tdata:
            ok = ok and len(rest) == 1 and tested[1:] == out[1:] and len(indices) == 1 \
                and self.totals.get(tested[0]) == outcome.tokens[0].text
        else:
            ok = False
        if not ok:
            raise refuse(s, why)

    def draw(self, s: Stmt, density, dist: str, args: list[str], rest: list[str]) -> str:
        """F_rng(args) with the shape of the outcome (one count, or a row of them)."""
        k = self.ordinal.get(density.tokens[next(i for i, t in enumerate(density.tokens)
                                                 if t.text == density.call)].start)
        if k is None or len(rest) > 1:
            raise refuse(s, "a zero-inflated mixture is translated for one count or a row "
                            "of counts y[i] only")
        types = self.densities[k][1][1:]
        if dist == "binomial_logit":   # Stan 2.35 has no binomial_logit_rng
            dist, args = "binomial", [args[0], f"inv_logit({args[1]})"]
        if not rest and not all(t.scalar for t in types):
            raise refuse(s, "a zero-inflated count with a container argument of its "
                            "density is not translated")
        if rest and all(t.scalar for t in types):
            args = [f"rep_array({args[0]}, {rest[0]})", *args[1:]]
        elif rest and any(not (t.scalar or t.one_dimensional) for t in types):
            raise refuse(s, "an argument of the zero-inflated density is a matrix or "
                            "nested array")
        return f"{dist}_rng({', '.join(args)})"


def fold_zero_inflated(program: StanProgram, densities: list[tuple[str, list[Type]]]
                       ) -> None:
    """Replace each zero-inflated if/else of the model block (see the module docstring)
    by one ``zero_inflated`` statement, in place.  ``densities``: :func:`density_types`."""
    folder = _Folder(program, densities)

    def visit(stmts: list[Stmt]) -> None:
        for k, s in enumerate(stmts):
            folded = folder.fold(s)
            if folded is not None:
                stmts[k] = folded
            else:
                visit(s.body)
                visit(s.orelse)

    visit(program.blocks.get("model", []))

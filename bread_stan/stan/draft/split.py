"""Automatic prior/likelihood split of a Stan program without ``prior_only``.

Every density statement of the model block (``~``, and each term of a ``target +=``
that is a sum of ``_lpdf``/``_lpmf``/``_lupdf``/``_lupmf``/``_lcdf``/``_lccdf`` calls,
in loops and local blocks too) is classified as **likelihood** when its outcome (the
left side of ``~``, the first argument of the density) is modelled data, **prior**
otherwise; a ``target +=`` that is not a sum of densities goes by what it reads.  The
generated program declares ``int<lower=0, upper=1> prior_only;`` in its data block and
wraps each likelihood term in ``if (!prior_only)``, on the same source line, so the
user's line numbers stay valid.  Terms that cannot be split exactly are refused with a
:class:`SplitError` naming the line.  The user's file is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ...errors import DraftError
from .parse import Expr, StanProgram, Stmt, Token, parse_program, tokenize
from .promote import Promotion, promote
from .rowsum import row_sums
from .terms import CDF, DENSITY, DensityTerm, call_extent, density_term, split_sum

__all__ = ["SplitError", "SplitRow", "Split", "split_program", "PRIOR_ONLY_DECL"]

PRIOR_ONLY_DECL = "int<lower=0, upper=1> prior_only;"


class SplitError(DraftError):
    """A model program whose prior and likelihood cannot be told apart exactly (the
    message names the line and what to do)."""


@dataclass(frozen=True)
class SplitRow:
    """One row of the split table: a density statement (or term) and its class."""

    line: int
    text: str
    role: str          # "prior", "likelihood" or "refused"
    reason: str = ""


@dataclass
class Split:
    """The split of one program: the generated program's text (the user's text when
    it declares ``prior_only`` itself), the same with the likelihood terms deleted
    (the prior alone, for checks), the table, and the modelled data."""

    program: str
    prior_program: str
    rows: list[SplitRow]
    modelled_data: list[str]
    own_split: bool = False
    refusals: list[SplitRow] = field(default_factory=list)
    promotion: Promotion | None = None   # transformed data modelled as data (.promote)

    def table(self) -> str:
        """The table "line -> prior | likelihood | refused" as aligned text."""
        if self.own_split:
            return "the program declares prior_only: its own split is used"
        out = []
        for r in self.rows:
            text = " ".join(r.text.split())
            text = text if len(text) <= 70 else text[:67] + "..."
            out.append(f"{r.line:>5}  {r.role:<10}  {text}"
                       + (f"  ({r.reason})" if r.reason else ""))
        return "\n".join(["line   role        statement", *out])


# --------------------------------------------------------------------------- names

def _value_names(tokens: Sequence[Token]) -> set[str]:
    """Identifiers read as values: not called, not inside ``[...]`` (indices)."""
    out, depth = set(), 0
    for k, t in enumerate(tokens):
        if t.kind == "op" and t.text == "[":
            depth += 1
        elif t.kind == "op" and t.text == "]":
            depth -= 1
        elif t.kind == "id" and depth == 0 and not (
                k + 1 < len(tokens) and tokens[k + 1].text == "("):
            out.add(t.text)
    return out


def _all_names(tokens: Sequence[Token]) -> set[str]:
    return {t.text for k, t in enumerate(tokens) if t.kind == "id"
            and not (k + 1 < len(tokens) and tokens[k + 1].text == "(")}


def _walk(stmts: Iterable[Stmt]) -> Iterable[Stmt]:
    for s in stmts:
        yield s
        yield from _walk(s.body)
        yield from _walk(s.orelse)


def _conditions(stmts: Iterable[Stmt], outer: tuple[Expr, ...] = ()
                ) -> Iterable[tuple[Stmt, tuple[Expr, ...]]]:
    """Every statement with the conditions of the ``if`` statements around it."""
    for s in stmts:
        yield s, outer
        inner = outer + ((s.rhs,) if s.kind == "if" and s.rhs is not None else ())
        yield from _conditions([*s.body, *s.orelse], inner)


def _dependencies(program: StanProgram, blocks: Sequence[str]) -> dict[str, set[str]]:
    """name -> the names its value is computed from (one step), over ``blocks``."""
    deps: dict[str, set[str]] = {}
    for block in blocks:
        for s in _walk(program.blocks.get(block, [])):
            if s.kind == "decl" and s.decl is not None:
                deps.setdefault(s.decl.name, set())
                if s.decl.init is not None:
                    deps[s.decl.name] |= _value_names(s.decl.init.tokens)
            elif s.kind == "assign" and s.lhs is not None and s.lhs.tokens:
                deps.setdefault(s.lhs.tokens[0].text, set()).update(
                    _value_names(s.rhs.tokens) if s.rhs else set())
    return deps


def _closure(names: set[str], deps: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += deps.get(name, ())
    return seen


# --------------------------------------------------------------------------- split

class _Classifier:
    def __init__(self, program: StanProgram, likelihood: Sequence[str] | None):
        decls = {b: [s.decl for s in program.blocks.get(b, []) if s.kind == "decl"]
                 for b in ("data", "transformed data", "parameters")}
        self.data = {d.name for d in decls["data"]}
        self.tdata = {d.name for d in decls["transformed data"]}
        self.params = {d.name for d in decls["parameters"]}
        self.deps = _dependencies(program, ("transformed parameters", "model"))
        tdeps = _dependencies(program, ("transformed data",))
        self.tdata_from = {n: sorted(_closure({n}, tdeps) & self.data) for n in self.tdata}
        self.totals = row_sums(program)    # s[k] = sum(y[k]): a density on s is one on y
        self.given = likelihood is not None
        if likelihood is not None:
            unknown = [n for n in likelihood if n not in self.data | self.tdata]
            if unknown:
                raise SplitError(f"--likelihood names {', '.join(unknown)}, not declared in "
                                 "the data or transformed data blocks")
            self.modelled = set(likelihood)
        else:
            self.modelled = set()          # filled by classify's first pass

    def reads(self, tokens: Sequence[Token], values_only: bool) -> set[str]:
        names = _value_names(tokens) if values_only else _all_names(tokens)
        return _closure(names, self.deps)

    def outcome_names(self, tokens: Sequence[Token]) -> set[str]:
        """What an outcome reads, a row total s[i] read as the data it totals."""
        names = self.reads(tokens, True)
        return names | {self.totals[n] for n in names if n in self.totals}

    def condition_on_data(self, conditions: Sequence[Expr]) -> bool:
        """Whether a condition reads modelled data (also through transformed data or
        locals computed from them): then what its branches add depends on the data."""
        for cond in conditions:
            names = self.reads(cond.tokens, False)
            if names & self.modelled or any(set(self.tdata_from.get(n, ())) & self.modelled
                                            for n in names & self.tdata):
                return True
        return False

    def outcome_modelled(self, term: DensityTerm) -> tuple[set[str], set[str], set[str]]:
        """(modelled data, parameters, data-derived transformed data) in the outcome."""
        names = self.outcome_names(term.outcome)
        if self.given:
            modelled = names & self.modelled
        else:
            modelled = names & self.data
        via = {n for n in names & self.tdata if self.tdata_from.get(n)} - self.modelled \
            - set(self.totals)
        return modelled, names & self.params, via

    def role(self, term: DensityTerm, line: int) -> tuple[str, str]:
        """("prior" | "likelihood" | "refused", reason) of one density term."""
        if not term.call:
            read = self.reads(term.tokens, False)
            return ("likelihood", "") if read & self.modelled else ("prior", "")
        modelled, params, via = self.outcome_modelled(term)
        if modelled and params:
            return ("refused", f"the outcome reads both the modelled data "
                    f"{', '.join(sorted(modelled))} and the parameter(s) "
                    f"{', '.join(sorted(params))}: write the data alone on the left")
        if modelled:
            return ("likelihood", "")
        if via and not self.given:
            name = sorted(via)[0]
            return ("refused", f"the outcome {name} is transformed data computed from "
                    f"the data {', '.join(self.tdata_from[name])}: the modelled data reach "
                    f"the model only through transformed data")
        other = self.reads(term.rest, False) & self.modelled
        if other and not CDF.search(term.call):
            return ("refused", f"a prior (outcome not data) that reads the modelled data "
                    f"{', '.join(sorted(other))}")
        return ("likelihood", "") if (other and CDF.search(term.call)) else ("prior", "")


def _statement_terms(s: Stmt, constants: set[str]) -> list[DensityTerm] | None:
    """The density terms of a ``~`` or ``target +=`` statement (None: neither)."""
    if s.kind == "tilde":
        rest = tuple(t for a in s.args for t in a.tokens)
        if s.truncation is not None:
            rest += s.truncation.tokens
        return [DensityTerm(s.lhs.tokens, s.dist + "_lpdf", s.lhs.tokens, rest)]
    if s.kind == "target":
        toks = s.rhs.tokens
        spans = split_sum(toks)
        if spans is None:
            return [DensityTerm(toks)]
        terms = [density_term(toks[a:b], constants) for a, b in spans]
        if not all(t.call for t in terms):      # not a sum of densities: one expression
            return [DensityTerm(toks)]
        return terms
    return None


def split_program(source: str, info: dict, likelihood: Sequence[str] | None = None,
                  ) -> Split:
    """The prior/likelihood split of a program's ``source`` (``info``: its stanc --info).

    ``likelihood`` names the modelled data (data or transformed data variables); None
    takes every data variable that is the outcome of a density.  Raises
    :class:`SplitError` (one line) for a program that cannot be split exactly.
    """
    if "prior_only" in info.get("inputs", {}):
        return Split(source, "", [], [], own_split=True)
    program = parse_program(source)
    _check_splittable(program, source)
    model = program.blocks["model"]
    c = _Classifier(program, likelihood)
    constants = c.data | c.tdata
    found: list[tuple[Stmt, list[DensityTerm]]] = []
    conditions: dict[int, tuple[Expr, ...]] = {}
    for s, conds in _conditions(model):
        terms = _statement_terms(s, constants)
        if terms is not None:
            found.append((s, terms))
            conditions[id(s)] = conds
    if likelihood is None:
        _find_modelled_data(c, model, found)
        promoted = _promoted(c, found)
        if promoted:           # the modelled data reach the model only through these
            text, promotion = promote(program, promoted, c.tdata_from)
            split = split_program(text, info)
            split.promotion = promotion
            return split
    rows, edits = _classify(c, found, conditions, source)
    _check_rows(rows, found)
    bare = {id(b) for p in _walk(model) if p.kind in ("if", "for", "foreach", "while")
            for b in (*p.body, *p.orelse)}     # an unbraced body: an edit there needs braces
    skipped = _likelihood_work(model, edits)
    return Split(_rewrite(program, edits, bare, keep_likelihood=True, skipped=skipped),
                 _rewrite(program, edits, bare, keep_likelihood=False, skipped=skipped),
                 rows, sorted(c.modelled))


def _promoted(c: _Classifier, found: list[tuple[Stmt, list[DensityTerm]]]) -> set[str]:
    """The transformed data, computed from data, that are the whole outcome of a density
    reading no modelled data itself: the variables to model as data (:mod:`.promote`)."""
    out: set[str] = set()
    for _, terms in found:
        for t in terms:
            if t.call and not CDF.search(t.call):
                modelled, params, via = c.outcome_modelled(t)
                out |= via if not modelled and not params else set()
    return out


def _check_splittable(program: StanProgram, source: str) -> None:
    """Refuse a program with no model block, one that names something else prior_only,
    and one whose functions add to the target themselves (``_lp``)."""
    if "model" not in program.blocks:
        raise SplitError("the program has no model block: nothing to split")
    if any(t.kind == "id" and t.text == "prior_only" for t in tokenize(source)):
        raise SplitError("the program uses the name prior_only for something other "
                         "than a data variable: rename it")
    for s in _walk([*program.blocks.get("transformed parameters", []),
                    *program.blocks["model"]]):
        for e in s.exprs() if s.kind not in ("block", "for", "foreach", "while", "if") \
                else [x for x in (s.lhs, s.rhs) if x is not None]:
            lp = sorted(c for c in e.calls() if c.endswith("_lp"))
            if lp:
                raise SplitError(f"line {s.line}: the function {lp[0]} adds to the target "
                                 "itself, which cannot be split: declare prior_only by hand")


def _find_modelled_data(c: _Classifier, model: Sequence[Stmt],
                        found: list[tuple[Stmt, list[DensityTerm]]]) -> None:
    """Add to ``c.modelled`` the data that are the outcome of a density, anywhere in the
    model (the default when the user names no modelled data)."""
    for s in _walk(model):
        init = s.decl.init if s.decl is not None else None
        for e in (x for x in (s.lhs, s.rhs, init) if x is not None):
            for outcome in _density_outcomes(e.tokens):
                c.modelled |= c.reads(outcome, True) & c.data
    for s, terms in found:
        for t in terms:
            if t.call and not CDF.search(t.call):
                c.modelled |= c.outcome_names(t.outcome) & c.data


def _classify(c: _Classifier, found: list[tuple[Stmt, list[DensityTerm]]],
              conditions: dict[int, tuple[Expr, ...]], source: str
              ) -> tuple[list[SplitRow], list[tuple[Stmt, list[tuple[DensityTerm, str]]]]]:
    """The role of every density term found: the table's rows, and the edits (each
    statement with its terms' roles)."""
    rows: list[SplitRow] = []
    edits: list[tuple[Stmt, list[tuple[DensityTerm, str]]]] = []
    for s, terms in found:
        roles = [(t, *c.role(t, s.line)) for t in terms]
        if c.condition_on_data(conditions[id(s)]):
            # inside if (<reads the data>): each branch's terms are factors of the
            # likelihood (a zero-inflated model's bernoulli_lpmf(1 | omega) is not a prior)
            roles = [(t, "likelihood" if r == "prior" else r, why) for t, r, why in roles]
        # a cdf term (a truncation's normaliser) goes with the densities of its sum
        pdf_roles = {r for t, r, _ in roles if t.call and not CDF.search(t.call)}
        if len(pdf_roles) == 1 and "refused" not in pdf_roles:
            only = next(iter(pdf_roles))
            roles = [(t, only if (t.call and CDF.search(t.call) and r != "refused") else r,
                      why) for t, r, why in roles]
        for t, role, why in roles:
            text = s.text if len(terms) == 1 else Expr(t.tokens, source).text
            rows.append(SplitRow(s.line, text, role, why))
        edits.append((s, [(t, r) for t, r, _ in roles]))
    return rows, edits


def _check_rows(rows: list[SplitRow], found: list[tuple[Stmt, list[DensityTerm]]]) -> None:
    """Refuse a split with a refused term, or with no likelihood term at all."""
    refused = [r for r in rows if r.role == "refused"]
    if refused:
        r = refused[0]
        raise SplitError(f"line {r.line}: cannot split `{' '.join(r.text.split())[:80]}`: "
                         f"{r.reason}; declare prior_only by hand (wrap the likelihood in "
                         "`if (!prior_only)`), or name the modelled data with "
                         "--likelihood NAME,...")
    if not any(r.role == "likelihood" for r in rows):
        unread = [f for f, terms in found if any(not t.call for t in terms)]
        text = " ".join(x.split("//")[0] for x in unread[0].text.splitlines()) \
            if unread else ""
        where = (f"line {unread[0].line} `{' '.join(text.split())[:70]}` is not "
                 "a sum of densities the splitter reads, and " if unread else "")
        raise SplitError(f"{where}no density statement of the model block has modelled data as "
                         "its outcome, so there is no likelihood to split off: declare "
                         "prior_only by hand, or name the modelled data with "
                         "--likelihood NAME,...")


_CONTROL = ("for", "foreach", "while", "if", "block")


def _likelihood_work(model: Sequence[Stmt], edits) -> list[Stmt]:
    """Top-level statements of the model block that only do the likelihood's work, for
    the tempered program to skip whole under ``prior_only`` (so that the prior instance
    does not compute, say, a linear predictor over every observation): loops, blocks,
    assignments and declarations with a value, in which every density statement is
    likelihood and every other statement an assignment or a declaration, and whose
    assigned model-block locals nothing else reads (likelihood statements aside, which
    ``prior_only`` skips anyway)."""
    role = {id(s): {r for _, r in roles} for s, roles in edits}

    def likelihood(s: Stmt) -> bool:
        return role.get(id(s)) == {"likelihood"}

    def only_likelihood_work(s: Stmt) -> bool:
        if id(s) in role:
            return likelihood(s)
        if s.kind in ("assign", "decl"):
            return True
        if s.kind in _CONTROL:
            return all(only_likelihood_work(b) for b in (*s.body, *s.orelse))
        return False           # a call (print, reject), or a statement the parser kept whole

    def written(s: Stmt) -> set[str]:
        if s.kind == "decl":
            return {s.decl.name}
        inner = list(_walk([s]))
        names = {x.lhs.tokens[0].text for x in inner if x.kind == "assign" and x.lhs
                 and x.lhs.tokens}
        return names - {x.decl.name for x in inner if x.kind == "decl" and x.decl}

    def reads(s: Stmt) -> set[str]:
        return set().union(*(_all_names(e.tokens) for e in s.exprs()))

    def candidate(s: Stmt) -> bool:
        if id(s) in role:      # a density statement: wrapped on its own
            return False
        if s.kind == "decl":
            return s.decl is not None and s.decl.init is not None
        return s.kind in (*_CONTROL, "assign") and only_likelihood_work(s) and any(
            x.kind == "assign" or likelihood(x) for x in _walk([s]))

    skipped = {id(s) for s in model if candidate(s)}
    while True:                # until nothing kept reads what a skipped statement assigns
        needed = set().union(*(reads(s) for s in model
                               if id(s) not in skipped and not likelihood(s)))
        dropped = {id(s) for s in model if id(s) in skipped and written(s) & needed}
        if not dropped:
            return [s for s in model if id(s) in skipped]
        skipped -= dropped


def _density_outcomes(tokens: Sequence[Token]) -> list[tuple[Token, ...]]:
    """The first argument of every density call in an expression."""
    out = []
    for k, t in enumerate(tokens):
        if t.kind == "id" and DENSITY.search(t.text) and k + 1 < len(tokens) \
                and tokens[k + 1].text == "(":
            close, first = call_extent(tokens, k + 1)
            end = first if first is not None else close if close is not None else len(tokens)
            out.append(tuple(tokens[k + 2:end]))
    return out


def _rewrite(program: StanProgram, edits, bare: set[int], keep_likelihood: bool,
             skipped: Sequence[Stmt] = ()) -> str:
    """The source with prior_only declared and each likelihood term wrapped in
    ``if (!prior_only)`` (or deleted), every edit on its own line; each statement of
    ``skipped`` (:func:`_likelihood_work`) wrapped whole, a declaration's value assigned
    inside the wrap."""
    source = program.source
    patches: list[tuple[int, int, str]] = []       # (start, end, replacement)
    for s in skipped:          # in the prior alone: declared, not computed
        end = s.start + len(s.text)
        if s.kind == "decl":   # `T x = e;` -> `T x; if (!prior_only) { x = e; }`
            init = s.decl.init.tokens
            equals = source.rfind("=", s.start, init[0].start)
            value = source[init[0].start:init[-1].end]
            assigned = f" if (!prior_only) {{ {s.decl.name} = {value}; }}"
            patches.append((equals, end, _padded(
                source[equals:end], ";" + (assigned if keep_likelihood else ""))))
        elif keep_likelihood:
            patches += [(s.start, s.start, "if (!prior_only) { "), (end, end, " }")]
        else:
            patches.append((s.start, end, _padded(source[s.start:end], "{ }")))
    inside = {id(x) for s in skipped for x in _walk([s])}
    for s, roles in edits:
        if all(r == "prior" for _, r in roles) or (id(s) in inside and not keep_likelihood):
            continue           # (a statement deleted with the skipped one around it)
        first, last = _stmt_span(source, s)
        braces = "{{ {} }}" if id(s) in bare else "{}"
        if s.kind == "tilde" or all(r == "likelihood" for _, r in roles):
            text = source[first:last]
            patches.append((first, last, braces.format(f"if (!prior_only) {{ {text} }}")
                            if keep_likelihood else _padded(text, "{ }")))
            continue
        prior = _join(source, [t for t, r in roles if r == "prior"])
        lik = _join(source, [t for t, r in roles if r == "likelihood"])
        text = f"target += {prior};"
        if keep_likelihood:
            text += f" if (!prior_only) {{ target += {lik}; }}"
        patches.append((first, last, _padded(source[first:last], braces.format(text))))
    if keep_likelihood:          # the prior alone reads no prior_only
        if "data" in program.spans:
            _, end = program.spans["data"]
            patches.append((end, end, f" {PRIOR_ONLY_DECL} "))
        else:
            at = program.spans["functions"][1] + 1 if "functions" in program.spans else 0
            patches.append((at, at, f" data {{ {PRIOR_ONLY_DECL} }} "))
    for start, end, text in sorted(patches, key=lambda p: p[0], reverse=True):
        source = source[:start] + text + source[end:]
    return source


def _stmt_span(source: str, s: Stmt) -> tuple[int, int]:
    """Source offsets of a ``~`` or ``target +=`` statement, from its first token to ';'."""
    if s.kind == "target":
        start = source.rfind("target", 0, s.rhs.tokens[0].start)
    else:
        start = s.lhs.tokens[0].start
    return start, start + len(s.text)


def _padded(old: str, new: str) -> str:
    """``new`` with as many line breaks as ``old``, so later line numbers stay put."""
    return new + "\n" * max(0, old.count("\n") - new.count("\n"))


def _join(source: str, terms: Sequence[DensityTerm]) -> str:
    text = " ".join(source[t.tokens[0].start:t.tokens[-1].end] for t in terms).strip()
    return text[1:].strip() if text.startswith("+") else text

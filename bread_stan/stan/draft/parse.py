"""A small parser for the part of a Stan program the drafter reads.

A tokenizer (with line numbers and source offsets) and a recursive-descent parser
for blocks, declarations and statements.  Expressions are not given a tree: they are
kept as token spans (delimited by bracket depth), so the drafter copies their text
unchanged and reads the identifiers they use.  Also a reader for the S-expressions
of ``stanc --debug-decorated-ast``, from which the drafter takes expression types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import DraftError

__all__ = ["Token", "Expr", "Decl", "Stmt", "StanProgram", "tokenize",
           "parse_program", "read_sexp"]


@dataclass(frozen=True)
class Token:
    kind: str        # "id", "num", "str", "op"
    text: str
    line: int
    start: int       # offsets into the source
    end: int


_OPERATORS = sorted(["<-", "+=", "-=", "*=", "/=", ".*=", "./=", ".*", "./", ".^", "==",
                     "!=", "<=", ">=", "&&", "||", "%/%", "+", "-", "*", "/", "%", "^",
                     "'", "!", "<", ">", "=", "?", ":", ";", ",", ".", "(", ")", "[",
                     "]", "{", "}", "|", "~", "\\"], key=len, reverse=True)


def tokenize(source: str) -> list[Token]:
    """Tokens of a Stan program; comments and whitespace dropped."""
    tokens, i, line, n = [], 0, 1, len(source)
    while i < n:
        c = source[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif source.startswith("//", i):
            i = source.find("\n", i) if "\n" in source[i:] else n
        elif source.startswith("/*", i):
            stop = source.find("*/", i + 2)
            stop = n if stop < 0 else stop + 2
            line += source.count("\n", i, stop)
            i = stop
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (source[j].isalnum() or source[j] == "_"):
                j += 1
            tokens.append(Token("id", source[i:j], line, i, j))
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and source[i + 1].isdigit()):
            j = i
            while j < n and (source[j].isdigit() or source[j] == "."):
                j += 1
            if j < n and source[j] in "eE":
                j += 1
                if j < n and source[j] in "+-":
                    j += 1
                while j < n and source[j].isdigit():
                    j += 1
            if j < n and source[j] == "i":   # imaginary literal
                j += 1
            tokens.append(Token("num", source[i:j], line, i, j))
            i = j
        elif c == '"':
            j = source.find('"', i + 1)
            j = n if j < 0 else j + 1
            tokens.append(Token("str", source[i:j], line, i, j))
            i = j
        elif c == "#":
            j = source.find("\n", i) if "\n" in source[i:] else n
            tokens.append(Token("op", source[i:j].strip(), line, i, j))  # #include
            i = j
        else:
            for op in _OPERATORS:
                if source.startswith(op, i):
                    tokens.append(Token("op", op, line, i, i + len(op)))
                    i += len(op)
                    break
            else:
                raise DraftError(f"line {line}: unexpected character {c!r}")
    return tokens


@dataclass(frozen=True)
class Expr:
    """An expression: its tokens (the source text is copied, never rewritten)."""

    tokens: tuple[Token, ...]
    source: str = field(repr=False, compare=False)

    @property
    def text(self) -> str:
        return self.source[self.tokens[0].start:self.tokens[-1].end] if self.tokens else ""

    @property
    def line(self) -> int:
        return self.tokens[0].line if self.tokens else 0

    def names(self) -> set[str]:
        """Identifiers used as variables (not called as functions)."""
        toks = self.tokens
        return {t.text for k, t in enumerate(toks) if t.kind == "id"
                and not (k + 1 < len(toks) and toks[k + 1].text == "(")}

    def calls(self) -> set[str]:
        """Identifiers called as functions."""
        toks = self.tokens
        return {t.text for k, t in enumerate(toks) if t.kind == "id"
                and k + 1 < len(toks) and toks[k + 1].text == "("}


_BASE_TYPES = {"int", "real", "complex", "vector", "row_vector", "matrix", "simplex",
               "ordered", "positive_ordered", "unit_vector", "sum_to_zero_vector",
               "sum_to_zero_matrix", "cholesky_factor_corr", "cholesky_factor_cov",
               "corr_matrix", "cov_matrix", "column_stochastic_matrix",
               "row_stochastic_matrix", "complex_vector", "complex_row_vector",
               "complex_matrix", "tuple"}


@dataclass
class Decl:
    """``array[dims] base<bounds>[sizes] name [= init];``"""

    base: str
    name: str
    bounds: dict[str, Expr]          # lower, upper, offset, multiplier
    sizes: list[Expr]
    dims: list[Expr]                 # array dimensions
    init: Expr | None
    line: int
    text: str                        # the whole statement

    def type_text(self, array: bool = True, bounds: bool = True) -> str:
        """The declared type, with only lower/upper bounds (as allowed everywhere);
        ``array=False`` leaves out the array dimensions, ``bounds=False`` the bounds."""
        text = self.base
        kept = [f"{k}={v.text}" for k, v in self.bounds.items()
                if k in ("lower", "upper") and bounds]
        if kept:
            text += f"<{', '.join(kept)}>"
        if self.sizes:
            text += f"[{', '.join(s.text for s in self.sizes)}]"
        if self.dims and array:
            text = f"array[{', '.join(d.text for d in self.dims)}] {text}"
        return text


@dataclass
class Stmt:
    """A statement.  ``kind`` is one of decl, tilde, assign, for, foreach, while, if,
    block, target, call, other; the fields used depend on it."""

    kind: str
    line: int
    text: str
    decl: Decl | None = None
    lhs: Expr | None = None
    rhs: Expr | None = None              # assignment right side, or if/while condition
    op: str = ""
    dist: str = ""
    args: list[Expr] = field(default_factory=list)
    truncation: Expr | None = None
    var: str = ""                        # loop variable
    body: list["Stmt"] = field(default_factory=list)
    orelse: list["Stmt"] = field(default_factory=list)
    draw: str = ""                       # a folded statement's simulator line
    start: int = -1                      # source offset of its first token (text follows)

    def exprs(self) -> list[Expr]:
        """Every expression of this statement and its body (declarations included)."""
        out = [e for e in (self.lhs, self.rhs, self.truncation) if e is not None]
        out += self.args
        if self.decl is not None:
            d = self.decl
            out += [*d.bounds.values(), *d.sizes, *d.dims, *([d.init] if d.init else [])]
        for s in (*self.body, *self.orelse):
            out += s.exprs()
        return out

    def names(self) -> set[str]:
        """Every name this statement and its body read or write (their expressions')."""
        return {n for e in self.exprs() for n in e.names()}


@dataclass
class StanProgram:
    """The blocks of a program: statement lists, and the source span of each block."""

    source: str
    blocks: dict[str, list[Stmt]]
    spans: dict[str, tuple[int, int]]     # block name -> (start, end) of its contents

    def block_text(self, name: str) -> str:
        start, end = self.spans[name]
        return self.source[start:end]


_BLOCKS = ("functions", "data", "transformed data", "parameters", "transformed parameters",
           "model", "generated quantities")


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.toks = tokenize(source)
        self.i = 0

    # -- token helpers
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.text == text and t.kind in ("op", "id")

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise DraftError("unexpected end of the program")
        self.i += 1
        return t

    def expect(self, text: str) -> Token:
        t = self.next()
        if t.text != text:
            raise DraftError(f"line {t.line}: expected {text!r}, found {t.text!r}")
        return t

    def expr(self, stops: tuple[str, ...]) -> Expr:
        """Tokens up to (not including) a stop token at bracket depth 0."""
        start, depth = self.i, 0
        while True:
            t = self.peek()
            if t is None:
                raise DraftError("unexpected end of the program inside an expression")
            if depth == 0 and t.kind == "op" and t.text in stops:
                break
            if t.text in "([{" and t.kind == "op":
                depth += 1
            elif t.text in ")]}" and t.kind == "op":
                if depth == 0:
                    break
                depth -= 1
            self.i += 1
        return Expr(tuple(self.toks[start:self.i]), self.source)

    def text_from(self, first: Token) -> str:
        return self.source[first.start:self.toks[self.i - 1].end]

    # -- program
    def program(self) -> StanProgram:
        blocks, spans = {}, {}
        while self.peek() is not None:
            first = self.next()
            name = first.text
            if name in ("transformed", "generated"):
                name += " " + self.next().text
            if name not in _BLOCKS:
                raise DraftError(f"line {first.line}: expected a program block, found "
                                 f"{first.text!r}")
            open_ = self.expect("{")
            if name in ("functions", "generated quantities"):
                depth = 1
                while depth:
                    t = self.next()
                    depth += {"{": 1, "}": -1}.get(t.text, 0) if t.kind == "op" else 0
                blocks[name] = []
            else:
                stmts = []
                while not self.at("}"):
                    stmts.append(self.statement())
                blocks[name] = stmts
                self.expect("}")
            spans[name] = (open_.end, self.toks[self.i - 1].start)
        return StanProgram(self.source, blocks, spans)

    # -- statements
    def statement(self) -> Stmt:
        first = self.peek()
        if first is None:
            raise DraftError("unexpected end of the program")
        stmt = self._statement(first)
        stmt.start = first.start
        return stmt

    def _statement(self, first: Token) -> Stmt:
        if first.text == "{" and first.kind == "op":
            self.next()
            body = []
            while not self.at("}"):
                body.append(self.statement())
            self.expect("}")
            return Stmt("block", first.line, self.text_from(first), body=body)
        if first.kind == "id" and first.text == "for":
            self.next()
            self.expect("(")
            var = self.next().text
            self.expect("in")
            low = self.expr((":", ")"))
            if self.at(":"):
                self.next()
                high = self.expr((")",))
                kind = "for"
            else:
                high, kind = None, "foreach"
            self.expect(")")
            body = [self.statement()]
            return Stmt(kind, first.line, self.text_from(first), var=var, lhs=low,
                        rhs=high, body=body)
        if first.kind == "id" and first.text == "while":
            self.next()
            self.expect("(")
            cond = self.expr((")",))
            self.expect(")")
            body = [self.statement()]
            return Stmt("while", first.line, self.text_from(first), rhs=cond, body=body)
        if first.kind == "id" and first.text == "if":
            self.next()
            self.expect("(")
            cond = self.expr((")",))
            self.expect(")")
            body = [self.statement()]
            orelse = []
            if self.at("else"):
                self.next()
                orelse = [self.statement()]
            return Stmt("if", first.line, self.text_from(first), rhs=cond, body=body,
                        orelse=orelse)
        if first.kind == "id" and first.text == "target" and self.at("+=", 1):
            self.next()
            self.next()
            value = self.expr((";",))
            self.expect(";")
            return Stmt("target", first.line, self.text_from(first), rhs=value)
        if first.kind == "id" and (first.text in _BASE_TYPES or first.text == "array") \
                and self._declaration_ahead():
            return self.declaration()
        if first.kind == "id" and first.text in ("break", "continue", "return"):
            self.expr((";",))
            self.expect(";")
            return Stmt("other", first.line, self.text_from(first))
        lhs = self.expr((";", "~", "=", "+=", "-=", "*=", "/=", ".*=", "./=", "<-"))
        t = self.next()
        if t.text == "~":
            dist = self.next().text
            self.expect("(")
            args = []
            while not self.at(")"):
                args.append(self.expr((",", ")")))
                if self.at(","):
                    self.next()
            self.expect(")")
            truncation = None
            if self.at("T") and self.at("[", 1):
                self.next()
                truncation = self.expr((";",))
            self.expect(";")
            return Stmt("tilde", first.line, self.text_from(first), lhs=lhs, dist=dist,
                        args=args, truncation=truncation)
        if t.text == ";":
            return Stmt("call", first.line, self.text_from(first), lhs=lhs)
        rhs = self.expr((";",))
        self.expect(";")
        return Stmt("assign", first.line, self.text_from(first), lhs=lhs, rhs=rhs, op=t.text)

    def _declaration_ahead(self) -> bool:
        """A type name starts a declaration unless it is called (``vector(...)`` is not Stan)."""
        return not self.at("(", 1) or self.peek().text == "tuple"

    def declaration(self) -> Stmt:
        first = self.peek()
        dims: list[Expr] = []
        if self.at("array"):
            self.next()
            dims = self.bracket_list()
        base = self.next().text
        bounds: dict[str, Expr] = {}
        if self.at("<"):
            self.next()
            while not self.at(">"):
                key = self.next().text
                self.expect("=")
                bounds[key] = self.expr((",", ">"))
                if self.at(","):
                    self.next()
            self.expect(">")
        sizes = self.bracket_list() if self.at("[") else []
        name = self.next()
        if name.kind != "id":
            raise DraftError(f"line {name.line}: expected a variable name, found "
                             f"{name.text!r}")
        init = None
        if self.at("="):
            self.next()
            init = self.expr((";",))
        if self.at(","):
            raise DraftError(f"line {first.line}: declare one variable per statement "
                             f"(`{self.source[first.start:name.end]}, ...`)")
        self.expect(";")
        text = self.text_from(first)
        decl = Decl(base, name.text, bounds, sizes, dims, init, first.line, text)
        return Stmt("decl", first.line, text, decl=decl)

    def bracket_list(self) -> list[Expr]:
        self.expect("[")
        items = []
        while not self.at("]"):
            items.append(self.expr((",", "]")))
            if self.at(","):
                self.next()
        self.expect("]")
        return items


def parse_program(source: str) -> StanProgram:
    """Parse a (valid, stanc-checked) Stan program into blocks and statements."""
    return _Parser(source).program()


def read_sexp(text: str):
    """Nested lists of atoms (strings) from an S-expression printout."""
    stack: list[list] = [[]]
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "(":
            stack.append([])
            i += 1
        elif c == ")":
            done = stack.pop()
            stack[-1].append(done)
            i += 1
        elif c.isspace():
            i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            stack[-1].append(text[i:j + 1])
            i = j + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '()"':
                j += 1
            stack[-1].append(text[i:j])
            i = j
    return stack[0]

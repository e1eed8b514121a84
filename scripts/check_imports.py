"""Check the package's structure: no import circles, no private names across modules,
no module over 600 lines, no function over 80 lines, no type test of a tuned path
outside ``bread_stan/ais``, and one annealing loop.

Reads ``bread_stan/**/*.py`` with :mod:`ast` (nothing is imported or run):

- an *import circle* is a set of modules that import one another, directly or through
  others; every import statement counts, also one inside a function (a deferred import
  hides a circle, it does not remove it), except under ``if TYPE_CHECKING:``;
- a *private name across modules* is ``from M import _x`` or ``M._x`` (``M`` a module
  of the package bound by an import) where ``_x`` starts with one underscore and ``M``
  is another module;
- a module over 600 lines (the C++ bridge is not Python and is not read);
- a function over 80 lines (the argparse builder ``build_parser`` may stay long: it
  reads as a table);
- a *path type test*: ``isinstance``/``issubclass``/``type(...) is`` naming one of the
  tuned paths (:data:`PATH_TYPES`) in a module outside ``bread_stan.ais`` (the rest of
  the toolkit uses the :class:`~bread_stan.ais.path.Path` interface);
- an *annealing loop* outside the engine: a ``for`` or ``while`` loop that reads a
  state's ``log_lik`` and moves chains (a ``.step(...)`` or ``.transitions(...)`` call)
  in any module but ``bread_stan.ais.engine`` (the one loop; SMC is a policy passed to
  it) and the adaptive pilots of :data:`PILOT_LOOPS`.

Known debt, to be paid off rather than added to, is listed in
``scripts/import_debt.txt`` (one finding per line, as this script prints it; ``#``
starts a comment).  The check fails on any finding not listed there, and also on a
listed one that no longer occurs (so the list only shrinks).

    python scripts/check_imports.py            # exit 0 clean, 1 with findings
    python scripts/check_imports.py --all      # print every finding, listed or not
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "bread_stan"
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
LONG_ALLOWED = {"build_parser"}  # the argparse builder: a table
PATH_TYPES = {"TunedKernel", "TunedIMH", "GaussianPath", "WaypointPath", "FixedKernel",
              "OneLeg", "EndKernels"}
LOOP_MODULE = "bread_stan.ais.engine"
PILOT_LOOPS = {"bread_stan.ais.tuning", "bread_stan.ais.imh_tuning"}  # adaptive pilots
DEBT = Path(__file__).resolve().parent / "import_debt.txt"


def module_name(path: Path, root: Path) -> str:
    """Dotted module name of a file under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of a (possibly relative) import's module."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = getattr(test, "id", getattr(test, "attr", None))
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skip.update(id(n) for n in ast.walk(child))
    return skip


def scan(root: Path = ROOT) -> tuple[dict[str, set[str]], list[str]]:
    """The import graph of the package (module -> modules it imports) and the
    findings other than circles."""
    files = {module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    findings: list[str] = []
    for module, path in files.items():
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_LINES:
            findings.append(f"long module: {module} ({lines} lines)")
        tree = ast.parse(text, str(path))
        skip = _type_checking_nodes(tree)
        is_package = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> package module it is bound to
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        target = alias.name if alias.name in files else alias.name.rsplit(".", 1)[0]
                        graph[module].add(target)
                        if alias.asname:
                            bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, is_package, node.level, node.module)
                if source.split(".")[0] != PACKAGE:
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in files:  # a module imported from its package
                        graph[module].add(sub)
                        bound[alias.asname or alias.name] = sub
                        continue
                    if source in files:
                        graph[module].add(source)
                    if _is_private(alias.name) and source != module:
                        findings.append(f"private import: {module} imports {alias.name} "
                                        f"from {source}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and _is_private(node.attr)
                    and bound[node.value.id] != module):
                findings.append(f"private import: {module} uses {node.attr} "
                                f"of {bound[node.value.id]}")
        graph[module].discard(module)
        findings += structure_findings(module, tree)
    return graph, sorted(set(findings))


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def _is_type_test(node: ast.AST) -> ast.AST | None:
    """The type expression of ``isinstance(x, T)``, ``issubclass(x, T)`` or
    ``type(x) is T``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
        return node.args[1]
    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and \
            isinstance(node.left.func, ast.Name) and node.left.func.id == "type":
        return ast.Tuple(elts=node.comparators, ctx=ast.Load())
    return None


def _moves_chains(loop: ast.AST) -> bool:
    reads_loglik = any(isinstance(n, ast.Attribute) and n.attr == "log_lik"
                       for n in ast.walk(loop))
    steps = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("step", "transitions") for n in ast.walk(loop))
    return reads_loglik and steps


def structure_findings(module: str, tree: ast.AST) -> list[str]:
    """Long functions, path type tests outside ``ais`` and annealing loops outside the
    engine, in one module."""
    found = []
    outside_ais = not module.startswith(f"{PACKAGE}.ais")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and node.name not in LONG_ALLOWED:
                found.append(f"long function: {module}.{node.name} ({length} lines)")
        tested = _is_type_test(node)
        if outside_ais and tested is not None and _names(tested) & PATH_TYPES:
            found.append(f"path type test: {module} line {node.lineno} tests "
                         f"{sorted(_names(tested) & PATH_TYPES)}")
        if isinstance(node, (ast.For, ast.While)) and module != LOOP_MODULE and \
                module not in PILOT_LOOPS and _moves_chains(node):
            found.append(f"annealing loop: {module} line {node.lineno} (use "
                         "bread_stan.ais.engine.anneal, with a policy)")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def findings(root: Path = ROOT) -> list[str]:
    """Every finding, one line each."""
    graph, found = scan(root)
    return sorted(found + [f"import circle: {' <-> '.join(c)}" for c in circles(graph)])


def read_debt(path: Path = DEBT) -> set[str]:
    """The listed known findings."""
    if not path.exists():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="print every finding")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--debt", type=Path, default=DEBT)
    args = parser.parse_args(argv)
    found = findings(args.root)
    if args.all:
        print("\n".join(found))
        return 0
    debt = read_debt(args.debt)
    new = [f for f in found if f not in debt]
    paid = sorted(debt - set(found))
    for f in new:
        print(f"NEW  {f}")
    for f in paid:
        print(f"GONE {f}  (remove it from {args.debt.name})")
    if not new and not paid:
        print(f"structure: no import circles, private imports, long modules or functions, "
              f"path type tests or second annealing loops beyond the {len(debt)} listed "
              f"in {args.debt.name}")
    return 1 if new or paid else 0


if __name__ == "__main__":
    raise SystemExit(main())

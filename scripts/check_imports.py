"""Check the package's import structure: no circles, no private names across modules,
no module over 600 lines.

Reads ``bread_stan/**/*.py`` with :mod:`ast` (nothing is imported or run):

- an *import circle* is a set of modules that import one another, directly or through
  others; every import statement counts, also one inside a function (a deferred import
  hides a circle, it does not remove it), except under ``if TYPE_CHECKING:``;
- a *private name across modules* is ``from M import _x`` or ``M._x`` (``M`` a module
  of the package bound by an import) where ``_x`` starts with one underscore and ``M``
  is another module;
- a module over 600 lines (the C++ bridge is not Python and is not read).

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
    return graph, sorted(set(findings))


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
        print(f"imports: no circles, private imports or long modules beyond the "
              f"{len(debt)} listed in {args.debt.name}")
    return 1 if new or paid else 0


if __name__ == "__main__":
    raise SystemExit(main())

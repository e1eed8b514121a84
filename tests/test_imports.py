"""The package's structure (scripts/check_imports.py): no import circle, no private
name imported across modules, no module over 600 lines, no function over 80, no type
test of a tuned path outside ``ais`` and one annealing loop, beyond the debt listed in
scripts/import_debt.txt; no import up the architecture's order of layers.  Exact: reads
the source, runs nothing of it (but for the one test of the root's registry)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from script_module import load_script

ROOT = Path(__file__).resolve().parent.parent


def _checker():
    return load_script("check_imports")


def test_the_package_has_no_new_circle_private_import_or_long_module(capsys):
    assert _checker().main([]) == 0, capsys.readouterr().out


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "bread_stan" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_the_checker_sees_a_circle_through_a_deferred_import_and_a_private_name(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import f\n",
        "b.py": "def f():\n    from .c import _g\n    return _g\n",
        "c.py": "from . import a\n\ndef _g():\n    pass\n",
        "d.py": "from . import c\nx = c._g\n",
        "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import _g\n",
    })
    found = _checker().findings(root)
    assert "import circle: bread_stan.a <-> bread_stan.b <-> bread_stan.c" in found
    assert "private import: bread_stan.b imports _g from bread_stan.c" in found
    assert "private import: bread_stan.d uses _g of bread_stan.c" in found
    assert not any("bread_stan.e" in f for f in found)  # typing-only imports do not count


def test_the_checker_sees_a_long_module(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "big.py": "x = 1\n" * 601})
    assert _checker().findings(root) == ["long module: bread_stan.big (601 lines)"]


def test_the_checker_sees_a_long_function_a_path_type_test_and_a_second_loop(tmp_path):
    """The three rules of issue 41: functions of at most 80 lines (the argparse table
    excepted), no module outside ``ais`` testing which tuned path it holds, and one
    annealing loop (reading log_lik and moving chains) in ``ais/engine.py``."""
    long_body = "def f():\n" + "    x = 1\n" * 80 + "    return x\n"
    root = _tree(tmp_path, {
        "__init__.py": "",
        "long.py": long_body + long_body.replace("def f", "def build_parser"),
        "workflows/__init__.py": "",
        "workflows/run.py": """\
            from ..ais.gaussian_path import GaussianPath
            def f(path):
                return isinstance(path, (GaussianPath, int)) or type(path) is TunedKernel
            """,
        "ais/__init__.py": "",
        "ais/paths.py": "def f(path):\n    return isinstance(path, GaussianPath)\n",
        "ais/smc.py": """\
            def sweep(kernel, state, T):
                for k in range(1, T):
                    w = state.evaluation.log_lik
                    state = kernel.step(state)
            """,
        "ais/engine.py": """\
            def anneal(kernel, state, T):
                for k in range(1, T):
                    w = state.evaluation.log_lik
                    state = tally.transitions(kernel, state)
            """,
        "ais/pilot.py": "def f(kernel, s):\n    for _ in range(3):\n        s = kernel.step(s)\n",
    })
    found = _checker().findings(root)
    assert found == [
        "annealing loop: bread_stan.ais.smc line 2 (use bread_stan.ais.engine.anneal, "
        "with a policy)",
        "long function: bread_stan.long.f (82 lines)",
        "path type test: bread_stan.workflows.run line 3 tests ['GaussianPath']",
        "path type test: bread_stan.workflows.run line 3 tests ['TunedKernel']"], found


def test_ctypes_is_confined_to_the_bridge_wrapper():
    """Only bread_stan/stan/model.py talks to the C bridge through ctypes."""
    import ast
    users = []
    for path in (ROOT / "bread_stan").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "ctypes" for n in names):
                users.append(str(path.relative_to(ROOT)))
    assert sorted(set(users)) == ["bread_stan/stan/model.py"]


# The architecture order (docs/guides/architecture.md): a subpackage imports only its
# own rank or lower ones; the modules at the package's root (errors, rng, store, ...)
# sit below them all.  ``exact`` (known answers for tests) is imported by none of them.
LAYERS = {"stan": 0, "kernels": 1, "ais": 2, "approx": 3, "meta": 3, "parallel": 4,
          "workflows": 5, "reporting": 6, "exact": 6, "cli": 7}
# Known upward imports, to be paid off (never added to).
UPWARD_DEBT = {("bread_stan.stan.native", "bread_stan.kernels.integrator")}


def _rank(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], -1) if len(parts) > 1 else -1


def test_no_module_imports_a_layer_above_its_own():
    """What a lower layer needs from a higher one (a result's figures, drawn by
    ``reporting``) it finds by name through the package root (``bread_stan.late``),
    which imports nothing at import time, so importing the root is no way up."""
    graph, _ = _checker().scan()
    assert graph["bread_stan"] == set()
    upward = {(a, b) for a, targets in graph.items() for b in targets
              if b != "bread_stan" and _rank(b) > _rank(a)}
    assert upward == UPWARD_DEBT, sorted(upward ^ UPWARD_DEBT)


def test_a_result_draws_its_figures_through_the_root(monkeypatch):
    """``BreadResult.plot`` calls ``reporting.plots.plot_all`` without importing it."""
    from bread_stan.ais.results import BreadResult
    from bread_stan.reporting import plots
    drawn = []
    monkeypatch.setattr(plots, "plot_all", lambda result, truth=None: drawn.append(
        (result, truth)) or {"figure": truth})
    result = BreadResult("m", {})
    assert result.plot(truth=1.5) == {"figure": 1.5} and drawn == [(result, 1.5)]

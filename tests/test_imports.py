"""The package's import structure (scripts/check_imports.py): no import circle, no
private name imported across modules and no module over 600 lines beyond the debt
listed in scripts/import_debt.txt.  Exact: reads the source, runs nothing of it."""

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

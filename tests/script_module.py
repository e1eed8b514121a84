"""A script of ``scripts/`` loaded as a module, for tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` (``name`` such as ``"tools/check_imports"``), executed as a
    module named after the file's stem."""
    path = SCRIPTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # as importlib's recipe: dataclasses look it up
    spec.loader.exec_module(module)
    return module

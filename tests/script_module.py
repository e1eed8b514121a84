"""A script of ``scripts/`` loaded as a module, for tests of its functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(stem: str) -> ModuleType:
    """``scripts/<stem>.py``, executed as a module named ``stem``."""
    spec = importlib.util.spec_from_file_location(stem, SCRIPTS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

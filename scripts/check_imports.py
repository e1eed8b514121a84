"""Moved to scripts/tools/check_imports.py: this path still runs it (same arguments)."""
import runpy, sys, pathlib  # noqa: E401
sys.argv[0] = str(pathlib.Path(__file__).resolve().parent / "tools" / "check_imports.py")
runpy.run_path(sys.argv[0], run_name="__main__")

"""Moved to scripts/tools/check_same_numbers.py: this path still runs it (same arguments)."""
import runpy, sys, pathlib  # noqa: E401
sys.argv[0] = str(pathlib.Path(__file__).resolve().parent / "tools" / "check_same_numbers.py")
runpy.run_path(sys.argv[0], run_name="__main__")

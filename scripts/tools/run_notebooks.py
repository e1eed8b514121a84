"""Run the example notebooks and save them with their outputs and figures.

    PYTHONPATH=$PWD python scripts/tools/run_notebooks.py            # full settings, in place
    PYTHONPATH=$PWD python scripts/tools/run_notebooks.py --quick    # CI's small settings

Each notebook runs in a fresh kernel with ``notebooks/`` as working directory and
matplotlib's inline backend, whatever ``MPLBACKEND`` says (CI systems and headless
servers often set ``MPLBACKEND=Agg``, under which a kernel draws figures into no
output); ``--quick`` sets ``BREAD_STAN_NOTEBOOK_QUICK=1`` (the notebooks then use
small settings and save nothing) and writes nothing back.  The test suite runs them
the quick way (tests/test_notebooks.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
NAMES = ("bread_example.ipynb", "protocol_example.ipynb")
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # figures become outputs


def run_notebook(path: Path, quick: bool, timeout: int = 1800):
    """Execute one notebook (in a kernel that imports this checkout); return it."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    # The kernel's environment: ipykernel picks the inline backend only when MPLBACKEND
    # is unset, so it is set here rather than inherited.
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "BREAD_STAN_NOTEBOOK_QUICK": "1" if quick else "0",
           "MPLBACKEND": INLINE_BACKEND}
    NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute(env=env)
    return notebook


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CI's small settings; save nothing")
    p.add_argument("names", nargs="*", default=list(NAMES), help="notebooks in notebooks/")
    args = p.parse_args(argv)
    import nbformat

    for name in args.names:
        start = time.perf_counter()
        notebook = run_notebook(NOTEBOOKS / name, args.quick)
        if not args.quick:
            nbformat.write(notebook, NOTEBOOKS / name)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

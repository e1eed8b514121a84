"""The example notebooks run from top to bottom (with small settings) and are saved run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from script_module import load_script

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _runner():
    return load_script("tools/run_notebooks")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bread_example.ipynb", "protocol_example.ipynb"])
def test_notebook_runs_with_small_settings(name):
    pytest.importorskip("nbclient", reason="nbclient and ipykernel are in the test extra")
    notebook = _runner().run_notebook(NOTEBOOKS / name, quick=True, timeout=900)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # figures were drawn


@pytest.mark.parametrize("backend", [None, "Agg"])
def test_notebook_figures_are_outputs_whatever_mplbackend_says(tmp_path, monkeypatch, backend):
    # MPLBACKEND=Agg (common in CI and on headless servers) once left every figure out of
    # the outputs; a one-cell notebook shows whether the runner's kernel draws inline.
    pytest.importorskip("nbclient", reason="nbclient and ipykernel are in the test extra")
    import nbformat

    if backend is None:
        monkeypatch.delenv("MPLBACKEND", raising=False)
    else:
        monkeypatch.setenv("MPLBACKEND", backend)
    path = tmp_path / "figure.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0]);")]), path)
    notebook = _runner().run_notebook(path, quick=True, timeout=120)
    outputs = notebook.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"]
    assert [o for o in outputs if "image/png" in o.get("data", {})], outputs
    assert os.environ.get("MPLBACKEND") == backend  # the caller's environment is left alone


def test_committed_notebooks_carry_their_outputs_and_figures():
    import nbformat

    for name in ("bread_example.ipynb", "protocol_example.ipynb"):
        notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name} is saved without running it"
        assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), name

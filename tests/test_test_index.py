"""The testing guide's index "module -> test files" (scripts/tools/test_index.py): it
matches the test files' imports, and the imports are read in every form a test uses.
Exact: reads the sources, runs nothing of them."""

from __future__ import annotations

import pytest

from script_module import load_script


@pytest.fixture(scope="module")
def test_index():
    return load_script("tools/test_index")


@pytest.fixture(scope="module")
def fresh(test_index):
    """The index as the test files' imports give it now."""
    return test_index.markdown()


def test_the_guides_index_is_the_one_the_test_files_imports_give(test_index, fresh):
    copy = test_index.guide_copy(test_index.GUIDE.read_text())
    assert copy is not None, "docs/guides/testing.md lost the index's marker lines"
    assert copy == fresh, (
        "the test index in docs/guides/testing.md is stale: run "
        "python scripts/tools/test_index.py --write and commit the result")


def test_every_module_of_the_package_is_a_row(test_index):
    rows = test_index.index()
    modules = {m for m in test_index.package_modules() if m != "bread_stan"}
    assert set(rows) == modules and "bread_stan.ais.engine" in rows
    assert "test_stan_guard.py" in rows["bread_stan.stan.compile"]


def test_a_helper_module_of_the_tests_counts_for_the_test_files_that_import_it(test_index):
    """test_protocol_fitted.py names bread_stan.ais.engine only through
    tests/resume_guard.py (break tried: helpers not followed, the test fails)."""
    rows = test_index.index()
    assert "test_protocol_fitted.py" in rows["bread_stan.ais.engine"]
    assert "test_gaussian_path.py" in rows["bread_stan.exact.conjugate"]
    assert test_index.imported_helpers("import resume_guard\nfrom shifted_regression import "
                                       "LOG_C\nimport numpy\n", {"resume_guard",
                                       "shifted_regression", "script_module"}) == {
        "resume_guard", "shifted_regression"}


def test_each_form_of_import_names_its_module(test_index):
    modules = {"bread_stan.ais", "bread_stan.ais.engine", "bread_stan.ais.tuning",
               "bread_stan.stan.compile", "bread_stan.workflows.bread", "bread_stan.rng"}
    lazy = {"bread": "bread_stan.workflows.bread"}
    source = """
import bread_stan.rng
from bread_stan.ais import engine
from bread_stan.ais.tuning import tune
from bread_stan import bread
def helper():
    from bread_stan.stan.compile import compile_model
from .elsewhere import engine as relative
import numpy
"""
    found = test_index.imported_modules(source, modules, lazy)
    assert found == {"bread_stan.rng", "bread_stan.ais", "bread_stan.ais.engine",
                     "bread_stan.ais.tuning", "bread_stan.workflows.bread",
                     "bread_stan.stan.compile"}


def test_a_stale_index_is_told_apart(test_index, fresh):
    stale = fresh.replace("| `bread_stan.ais.engine` |", "| `bread_stan.ais.engine` | `x.py`,", 1)
    assert stale != fresh
    page = f"intro\n{stale}\nafter\n"
    assert test_index.guide_copy(page) == stale != fresh
    assert test_index.guide_copy("no markers") is None

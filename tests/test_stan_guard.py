"""The guard of tests/conftest.py: a test not marked ``stan`` (or ``cmdstan``) that asks
for a Stan program to be compiled or loaded fails, naming the marker to add, so the fast
tier (``-m "not stan and not cmdstan and not slow"``) needs no Stan.  These tests run in
the fast tier themselves and compile nothing: every request stops at the guard."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import bread_stan
from bread_stan.stan import compile as stan_compile
from bread_stan.stan import model as stan_model
from bread_stan.stan import simulator, tempered, toolchain
from bread_stan.workflows import fit

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = "this is not a Stan program {"  # stanc would refuse it at once, were it reached

REQUESTS = {
    "compile_model": lambda: stan_compile.compile_model(PROGRAM),
    "compile_many": lambda: stan_compile.compile_many([PROGRAM], workers=1),
    "stanc_info": lambda: stan_compile.stanc_info(PROGRAM),
    "build_bridge": lambda: stan_compile.build_bridge(),
    "run_stanc": lambda: stan_compile.run_stanc(stan_compile.Program(PROGRAM, "p"), None,
                                                ["--info"], Path("/nonexistent"), None),
    "find_toolchain": lambda: toolchain.find_toolchain(),
    "load_library": lambda: stan_model.load_library("/nonexistent/model.so"),
    "Library": lambda: stan_model.Library(Path("/nonexistent/model.so")),
    "_cmdstan_model": lambda: fit._cmdstan_model(stan_compile.Program(PROGRAM, "p")),
    # the same entry points, imported by name elsewhere before the guard was installed
    "compile_model, as the simulator imported it": lambda: simulator.compile_model(PROGRAM),
    "stanc_info, as the tempered target imported it": lambda: tempered.stanc_info(PROGRAM),
    "the package's lazy compile_model": lambda: bread_stan.compile_model(PROGRAM),
    "StanModel": lambda: bread_stan.StanModel(PROGRAM),
}


@pytest.mark.parametrize("request_", list(REQUESTS))
def test_a_fast_test_asking_for_stan_fails_naming_the_marker(request_, stan_guard, request):
    with pytest.raises(pytest.fail.Exception) as failed:
        REQUESTS[request_]()
    message = str(failed.value)
    assert request.node.nodeid in message and "not marked `stan`" in message
    assert "@pytest.mark.stan" in message
    assert stan_guard.violations == [message]
    stan_guard.violations.clear()  # this test expected it: do not fail it afterwards


def test_the_guards_failure_is_not_an_exception_code_under_test_catches():
    assert not issubclass(pytest.fail.Exception, Exception)


def test_child_processes_of_a_fast_test_cannot_find_a_toolchain():
    """The CLI or a notebook kernel started by a fast test: any compile or cache lookup
    there fails, naming the fast tier."""
    assert os.environ["BREAD_STAN_TOOLCHAIN"].startswith("none:the-fast-tier-needs-no-stan")
    child = subprocess.run(
        [sys.executable, "-c", "from bread_stan.stan.toolchain import find_toolchain; "
                               "find_toolchain()"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.returncode != 0
    assert "the-fast-tier-needs-no-stan" in child.stderr


INNER_TESTS = '''
import os
import pytest
from bread_stan.stan.toolchain import find_toolchain

def test_swallows_the_guards_failure():
    try:
        find_toolchain()
    except BaseException:
        pass

@pytest.mark.stan
def test_marked_stan_passes_the_guard(stan_guard):
    stan_guard.check("a compile")
    assert not stan_guard.violations
    assert "BREAD_STAN_TOOLCHAIN" not in os.environ

@pytest.mark.cmdstan
def test_marked_cmdstan_passes_the_guard(stan_guard):
    stan_guard.check("a CmdStan model")

def test_unmarked_and_asking_for_nothing_passes(stan_guard):
    assert stan_guard.item is not None and not stan_guard.violations
'''


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_a_test_module_asking_for_stan_when_imported_is_a_collection_error(tmp_path):
    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(
        "from bread_stan.stan.toolchain import find_toolchain\nfind_toolchain()\n\n"
        "def test_nothing():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "BREAD_STAN_TOOLCHAIN"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)})
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "1 error" in out, out
    assert "a test module asked for find_toolchain() when imported" in out, out


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_a_test_that_swallows_the_failure_still_fails_and_marked_tests_pass(tmp_path):
    """In a pytest run of its own, with this conftest: the unmarked test that catches
    the guard's failure is reported failed; the marked tests and the one asking for
    nothing pass."""
    (tmp_path / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "BREAD_STAN_TOOLCHAIN"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)})
    out = run.stdout + run.stderr
    assert "1 failed, 3 passed" in out, out
    assert "FAILED test_inner.py::test_swallows_the_guards_failure" in out, out
    assert "test_swallows_the_guards_failure asked for find_toolchain()" in out, out

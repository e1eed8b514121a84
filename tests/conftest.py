"""Shared fixtures: every test program is compiled once per run (and cached).

All programs are compiled up front, two compiler processes at a time, the
bridge object alongside the first model; a warm cache makes this free.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # test this checkout, whatever copy is installed

# The machine's Dask settings must not reach the tests: "scheduler: distributed" (from
# DASK_SCHEDULER or a ~/.config/dask file) with no Client running fails every xarray NetCDF
# write ("Requested distributed scheduler but no Client active").  "None" is Dask's default;
# the variable outranks config files and is inherited by the CLI and notebook subprocesses.
os.environ["DASK_SCHEDULER"] = "None"
if "dask.config" in sys.modules:  # read again if a plugin imported Dask already
    sys.modules["dask.config"].refresh()

from bread_stan.stan.compile import compile_many  # noqa: E402
MODELS = ROOT / "stan_models"
CMDSTAN_BUILD_SCRIPT = ROOT.parent / "shared" / "cmdstan" / "build-cmdstan.sh"
CMDSTAN_HOME = Path.home() / ".cache" / "bread-stan" / "cmdstan-2.35.0"
TEST_STAN = Path(__file__).resolve().parent / "stan"

PROGRAMS = {
    "linear_regression": MODELS / "linear_regression.stan",
    "logistic_regression": MODELS / "logistic_regression.stan",
    "linear_regression_sim": MODELS / "linear_regression_sim.stan",
    "throws": TEST_STAN / "throws.stan",
    "conjugate_regression": TEST_STAN / "conjugate_regression.stan",
}


@pytest.fixture(scope="session")
def compiled():
    """name -> CompiledModel for every test program."""
    start = time.perf_counter()
    models = compile_many(list(PROGRAMS.values()), workers=2)
    logging.getLogger("bread_stan").info("test programs ready in %.1f s",
                                         time.perf_counter() - start)
    return dict(zip(PROGRAMS, models))


@pytest.fixture(scope="session")
def cmdstan_path() -> Path:
    """A CmdStan 2.35 folder: ``$CMDSTAN`` when set, else built once offline with
    ``../shared/cmdstan/build-cmdstan.sh`` into ``~/.cache/bread-stan/cmdstan-2.35.0``
    (about 2.5 minutes; a built folder is found at once).  Every test that compares
    with CmdStan takes it from here, so none is skipped for running before the build.
    Skipped only when neither is possible (a checkout with no ``../shared`` beside it)."""
    pytest.importorskip("cmdstanpy", reason="cmdstanpy is in the test extra")
    path = os.environ.get("CMDSTAN")
    if path:
        return Path(path)
    if not CMDSTAN_BUILD_SCRIPT.is_file():
        pytest.skip(f"CMDSTAN is not set and {CMDSTAN_BUILD_SCRIPT} (which builds CmdStan "
                    "offline) is not there")
    import importlib.metadata
    httpstan = importlib.metadata.version("httpstan")
    if httpstan != "4.13.0":   # Python 3.12+: httpstan 4.17, Stan 2.39 (issue 43)
        pytest.skip(f"CMDSTAN is not set and the offline CmdStan 2.35 build takes its headers "
                    f"from httpstan 4.13.0; this Python has httpstan {httpstan}")
    done = subprocess.run(["bash", str(CMDSTAN_BUILD_SCRIPT), str(CMDSTAN_HOME)],
                          env={**os.environ, "PYTHON": sys.executable},
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"building CmdStan failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.strip().splitlines()[-1])


def _regression_data(seed: int, n: int, k: int, logistic: bool) -> dict:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, k))
    eta = 0.3 + x @ rng.normal(size=k)
    if logistic:
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.int64)
    else:
        y = eta + 0.7 * rng.normal(size=n)
    return {"N": n, "K": k, "X": x, "y": y}


@pytest.fixture(scope="session")
def linear_data():
    return _regression_data(1, 40, 3, logistic=False)


@pytest.fixture(scope="session")
def logistic_data():
    return _regression_data(2, 30, 3, logistic=True)


# -- test tiers ---------------------------------------------------------------------------
# Markers (registered in pyproject.toml) say what a test needs, so a contributor runs the
# fast tier alone:  python -m pytest -m "not stan and not cmdstan and not slow"
#   stan:    a C++ compiler and Stan programs (compiled once, then cached);
#   cmdstan: a CmdStan build (the cmdstan_path fixture);
#   slow:    long statistical or end-to-end runs (set in the test modules).
# A test is in the stan tier when it compiles, loads or runs a Stan program, or runs stanc
# (the drafter, the split): its module is listed here when most of its tests do (or a
# module fixture does), else the test is marked @pytest.mark.stan where it is defined.
# A test that uses the `compiled` fixture is marked here.  The guard below fails a test
# that needs Stan without the mark.
_STAN_MODULES = {
    "test_aide", "test_approx", "test_cmdstan", "test_compile", "test_dask", "test_datasets",
    "test_draft_brms_copies", "test_draft_replay", "test_draft_simulator",
    "test_draft_zero_inflated", "test_draws", "test_errors", "test_faults",
    "test_gaussian_base", "test_model", "test_native", "test_notebooks", "test_protocol",
    "test_protocol_fitted",
    "test_simulate", "test_simulator_check", "test_smc_workflow", "test_split",
    "test_current_stan",
    "test_stan_ais", "test_stan_programs", "test_stan_target", "test_study_models",
    "test_subjective", "test_subjective_stan", "test_vector_hyper", "test_workflow",
}


# CI's second leg (.ci/py313: Python 3.13, ArviZ 1.x, Stan 2.39) reruns what the Python
# version, its libraries or the Stan version can change (issue 41):
#     -m "not cmdstan and not slow and (not stan or leg2)"
# the whole fast tier (every module's Python on the new Python and libraries), and the stan
# tier of the modules below: the toolchain, the bridge and the model (compiled against the
# other Stan's headers), what reads stanc's output (split, drafter), the Stan programs'
# numbers, the zero-sum and jacobian programs, and one known-answer workflow end to end
# (BREAD, the command line, the results' files).  Left to leg 1: CmdStan (built offline
# from httpstan 4.13's headers only), the slow tier, and the stan tier of the workflows
# above the bridge (protocol, aide, subjective, SMC, Dask, notebooks, studies), whose
# Stan calls are the bridge's, rerun here, and whose Python is in the fast tier.
_LEG2_STAN_MODULES = {
    "test_compile", "test_native", "test_model", "test_errors", "test_faults",
    "test_stan_target", "test_stan_ais", "test_stan_programs", "test_simulate",
    "test_datasets", "test_draws", "test_split", "test_draft_simulator", "test_current_stan",
    "test_workflow",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        if module in _STAN_MODULES or "compiled" in fixtures:
            item.add_marker(pytest.mark.stan)
        if module in _LEG2_STAN_MODULES:
            item.add_marker(pytest.mark.leg2)
        if "cmdstan_path" in fixtures:
            item.add_marker(pytest.mark.cmdstan)


# -- the guard: the fast tier needs no Stan ---------------------------------------------
# A test not marked ``stan`` or ``cmdstan`` fails when it asks for a Stan program to be
# compiled or loaded: the fast tier must run without stanc, a C++ compiler or a model
# library.  A cache hit counts too (it needs the toolchain to compute its key and then
# loads the library), so the guard is on the requests, not on the compiler processes:
#   find_toolchain     locating stanc and the Stan headers (every compile, stanc call and
#                      cache lookup goes through it; CmdStan's toolchain too);
#   compile_model, compile_many, build_bridge, stanc_info, run_stanc
#                      the compile entry points (a Toolchain passed in skips find_toolchain);
#   load_library, Library
#                      loading a model library (ctypes);
#   _cmdstan_model, cmdstanpy.CmdStanModel
#                      a CmdStan executable (FitSettings(sampler="cmdstan"), cmdstanpy).
# Child processes (the CLI, a notebook kernel) get BREAD_STAN_TOOLCHAIN set to a source
# that does not exist, so any compile or cache lookup there fails with that name in the
# message.  The test fails even when the code under test swallows the error.  A test
# module that asks for Stan when imported (collection, in every tier) is an error.
_GUARDED = {
    "bread_stan.stan.toolchain": ("find_toolchain",),
    "bread_stan.stan.compile": ("compile_model", "compile_many", "build_bridge", "stanc_info",
                                "run_stanc"),
    "bread_stan.stan.model": ("load_library",),
}
# Guarded once imported (importing them here would cost seconds a run): checked again
# before each test's setup and call.
_GUARDED_WHEN_IMPORTED = {"bread_stan.workflows.fit": ("_cmdstan_model",)}
NO_STAN_TOOLCHAIN = "none:the-fast-tier-needs-no-stan:mark-the-test-stan"
_STAN_MARKERS = ("stan", "cmdstan")


class StanGuard:
    """Which test runs, whether it may use Stan, and what it asked for when it may not."""

    def __init__(self):
        self.item = None          # the test running (setup, call, teardown), or None
        self.collecting = False   # importing the test modules: every tier does that
        self.violations: list[str] = []
        self.originals: dict[tuple[str, str], object] = {}

    def allowed(self, item) -> bool:
        return any(item.get_closest_marker(m) is not None for m in _STAN_MARKERS)

    def check(self, what: str) -> None:
        item = self.item
        if self.collecting:
            raise RuntimeError(f"a test module asked for {what} when imported: every tier "
                               "imports every test module, so compile in a fixture or a "
                               "test marked `stan`")
        if item is None or self.allowed(item):
            return  # outside a test (collection, session teardown) or a stan test
        message = (f"{item.nodeid} asked for {what}, but is not marked `stan`: the fast "
                   "tier (-m \"not stan and not cmdstan and not slow\") must need no Stan "
                   "compiler or model.  Mark the test @pytest.mark.stan (or add its module "
                   "to _STAN_MODULES in tests/conftest.py when a module fixture compiles)")
        self.violations.append(message)
        pytest.fail(message, pytrace=True)

    def wrap(self, function, what: str):
        guard = self

        @functools.wraps(function)
        def guarded(*args, **kwargs):
            guard.check(what)
            return function(*args, **kwargs)

        if hasattr(function, "cache_clear"):  # find_toolchain, load_library: lru caches
            guarded.cache_clear = function.cache_clear
        guarded.__stan_guard__ = function
        return guarded

    def install(self) -> None:
        """Replace each entry point in its module and wherever it was imported by name
        (the package's modules and this conftest; later imports get the guarded one)."""
        import importlib

        replaced = {}
        for module_name, names in _GUARDED.items():
            module = importlib.import_module(module_name)
            for name in names:
                original = getattr(module, name)
                self.originals[(module_name, name)] = original
                replaced[id(original)] = self.wrap(original, f"{name}()")
        tests = str(Path(__file__).resolve().parent)
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if not (module.__name__.startswith("bread_stan") or path.startswith(tests)):
                continue
            for name, value in list(vars(module).items()):
                if id(value) in replaced and callable(value):
                    setattr(module, name, replaced[id(value)])
        library = importlib.import_module("bread_stan.stan.model").Library
        library.__init__ = self.wrap(library.__init__, "a model library to be loaded")
        self.install_imported()

    def install_imported(self) -> None:
        """The entry points of modules imported since (the CmdStan ones)."""
        for module_name, names in _GUARDED_WHEN_IMPORTED.items():
            module = sys.modules.get(module_name)
            for name in names if module is not None else ():
                function = getattr(module, name, None)
                if function is not None and not hasattr(function, "__stan_guard__"):
                    setattr(module, name, self.wrap(function, f"{name}()"))
        cmdstanpy = sys.modules.get("cmdstanpy")
        if cmdstanpy is None or hasattr(cmdstanpy.CmdStanModel.__init__, "__stan_guard__"):
            return
        cmdstanpy.CmdStanModel.__init__ = self.wrap(cmdstanpy.CmdStanModel.__init__,
                                                    "a CmdStan model (cmdstanpy)")


STAN_GUARD = StanGuard()
STAN_GUARD.install()


@pytest.fixture
def stan_guard() -> StanGuard:
    """The guard, for the tests of the guard itself."""
    return STAN_GUARD


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    STAN_GUARD.collecting = True
    try:
        yield
    finally:
        STAN_GUARD.collecting = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    STAN_GUARD.item, STAN_GUARD.violations = item, []
    saved = os.environ.get("BREAD_STAN_TOOLCHAIN")
    if not STAN_GUARD.allowed(item):
        os.environ["BREAD_STAN_TOOLCHAIN"] = NO_STAN_TOOLCHAIN
    try:
        yield
    finally:
        STAN_GUARD.item = None
        if saved is None:
            os.environ.pop("BREAD_STAN_TOOLCHAIN", None)
        else:
            os.environ["BREAD_STAN_TOOLCHAIN"] = saved


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    STAN_GUARD.install_imported()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    STAN_GUARD.install_imported()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if STAN_GUARD.violations and report.passed and report.when in ("setup", "call"):
        report.outcome = "failed"  # the test caught the guard's failure and went on
        report.longrepr = STAN_GUARD.violations[0]

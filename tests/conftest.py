"""Shared fixtures: every test program is compiled once per run (and cached).

All programs are compiled up front, two compiler processes at a time, the
bridge object alongside the first model; a warm cache makes this free.
"""

from __future__ import annotations

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
# A module is in the stan tier when any of its tests compiles or runs a Stan program.
_STAN_MODULES = {
    "test_aide", "test_approx", "test_cmdstan", "test_compile", "test_dask", "test_datasets",
    "test_draft_simulator", "test_draws", "test_errors", "test_faults", "test_gaussian_base",
    "test_model", "test_native", "test_notebooks", "test_protocol", "test_simulate",
    "test_simulator_check", "test_stan_ais", "test_stan_programs", "test_stan_target",
    "test_study_models", "test_subjective", "test_subjective_stan", "test_vector_hyper",
    "test_workflow",
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

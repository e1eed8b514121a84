"""Every Stan program in stan_models/ passes stanc and follows the README conventions.

Fast: runs stanc only (no C++ compile).  Checks, from ``stanc --info``:
model programs declare ``prior_only``; simulators declare ``hyper_given`` and an
``h_given`` array for each hyperparameter h of the model (the list below is SPEC
section 5's); simulator outputs cover every model parameter with the same
dimensions; the simulator reads only data the model also reads, and generates
the rest of the model's data.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

STAN_MODELS = Path(__file__).resolve().parent.parent / "stan_models"

# model program -> (simulator program, hyperparameters per SPEC section 5)
PAIRS: dict[str, tuple[str, set[str]]] = {
    "linear_regression": ("linear_regression_sim", {"sigma_sq", "scale_sq"}),
    "logistic_regression": ("logistic_regression_sim", {"scale_sq"}),
    "matrix_factorisation": ("matrix_factorisation_sim",
                             {"sigma_sq", "sigma_u_sq", "sigma_v_sq"}),
    "ar1": ("ar1_sim", {"alpha", "beta", "sigma_sq"}),
    "gaussian_mixture": ("gaussian_mixture_sim", {"scale_sq", "sigma_sq"}),
    # Representation study: hyperparameters fixed to 1, one shared simulator.
    "mf_uncollapsed": ("mf_pair_sim", set()),
    "mf_collapsed": ("mf_pair_sim", set()),
    # Issue 15's hard case: vague priors, uncentred predictor; no hyperparameters.
    "vague_regression": ("vague_regression_sim", set()),
}
TOOLKIT_INPUTS = {"prior_only", "hyper_given"}


@pytest.fixture(scope="module")
def stanc() -> Path:
    try:
        from bread_stan.stan.toolchain import find_toolchain
        return Path(find_toolchain().stanc)
    except Exception:  # toolchain module unavailable or broken: fall back to httpstan's
        import httpstan
        path = Path(httpstan.__file__).parent / "stanc"
        if not path.is_file():
            pytest.skip("no stanc found (neither bread_stan.stan.toolchain nor httpstan)")
        return path


_INFO: dict[str, dict] = {}


def info(stanc: Path, name: str) -> dict:
    if name not in _INFO:
        proc = subprocess.run([str(stanc), "--info", str(STAN_MODELS / f"{name}.stan")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        _INFO[name] = json.loads(proc.stdout)
    return _INFO[name]


def all_programs() -> list[str]:
    return sorted(p.stem for p in STAN_MODELS.glob("*.stan"))


def test_every_program_is_listed():
    listed = set(PAIRS) | {sim for sim, _ in PAIRS.values()}
    assert set(all_programs()) == listed, (
        "every program in stan_models/ must appear in PAIRS (as a model or a simulator)")


@pytest.mark.parametrize("name", all_programs())
def test_stanc_accepts(stanc, name, tmp_path):
    proc = subprocess.run([str(stanc), "--O1", str(STAN_MODELS / f"{name}.stan"),
                           f"--o={tmp_path / (name + '.hpp')}"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"stanc --O1 rejected {name}.stan:\n{proc.stderr}"
    assert "Warning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("model", sorted(PAIRS))
def test_model_declares_prior_only(stanc, model):
    inputs = info(stanc, model)["inputs"]
    assert inputs.get("prior_only") == {"type": "int", "dimensions": 0}
    assert info(stanc, model)["parameters"], f"{model} has no parameters"


@pytest.mark.parametrize("model", sorted(PAIRS))
def test_simulator_matches_model(stanc, model):
    sim, hypers = PAIRS[model]
    m, s = info(stanc, model), info(stanc, sim)
    sim_inputs, outputs = s["inputs"], s["generated quantities"]
    assert s["parameters"] == {}, f"{sim} must have no parameters"
    assert sim_inputs.get("hyper_given") == {"type": "int", "dimensions": 0}

    # One h_given array (1-D) per hyperparameter, and no others.
    given = {k[: -len("_given")] for k in sim_inputs if k.endswith("_given")} - {"hyper"}
    assert given == hypers, f"{sim}: _given arrays {given}, hyperparameters {hypers}"
    for h in hypers:
        assert sim_inputs[f"{h}_given"]["dimensions"] == 1, f"{h}_given must be an array"
        assert h in m["parameters"], f"hyperparameter {h} is not a parameter of {model}"

    # Every model parameter is generated, with the same shape.
    for name, decl in m["parameters"].items():
        assert name in outputs, f"{sim} does not generate parameter {name} of {model}"
        assert outputs[name] == decl, f"{name}: {outputs[name]} in {sim}, {decl} in {model}"

    # The simulator reads only the model's data (plus the toolkit's inputs) ...
    model_data = {k: v for k, v in m["inputs"].items() if k not in TOOLKIT_INPUTS}
    for name, decl in sim_inputs.items():
        if name in TOOLKIT_INPUTS or name.endswith("_given"):
            continue
        assert model_data.get(name) == decl, f"{sim} reads {name}, not data of {model}"
    # ... and generates the rest of it, with the same shape.
    for name, decl in model_data.items():
        if name in sim_inputs:
            continue
        assert name in outputs, f"{sim} neither reads nor generates data {name} of {model}"
        assert outputs[name] == decl, f"data {name}: {outputs[name]} in {sim}, {decl} in {model}"

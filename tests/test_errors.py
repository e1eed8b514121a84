"""Every error path: stanc, C++, data, evaluation (single and batched), prior_only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bread_stan.stan.compile import compile_model
from bread_stan.errors import (CompilerError, PriorOnlyMissingError, StanCompileError,
                               StanDataError, StanEvaluationError)
from bread_stan.stan.model import StanModel
from bread_stan.stan.tempered import StanTarget

STAN = Path(__file__).resolve().parent / "stan"


def test_stanc_error_has_message_and_position():
    with pytest.raises(StanCompileError) as info:
        compile_model(STAN / "syntax_error.stan")
    error = info.value
    assert error.line == 7 and error.column is not None
    assert "syntax_error.stan" in str(error)
    # stanc 2.35 quotes the name with '', stanc 2.39 with ""
    with pytest.raises(StanCompileError,
                       match="Identifier ['\"]undefined_thing['\"] not in scope"):
        compile_model("parameters { real x; } model { x ~ normal(undefined_thing, 1); }")


def test_compiler_error_carries_command_and_output():
    program = "parameters { real bread_compiler_error_test; } model { }"
    with pytest.raises(CompilerError) as info:
        compile_model(program, user_header=STAN / "missing_include.hpp")
    error = info.value
    assert "-include" in error.command
    assert "bread_stan_this_header_does_not_exist.hpp" in error.output
    assert "command:" in str(error)


def test_missing_prior_only_explains_the_convention():
    with pytest.raises(PriorOnlyMissingError, match="if \\(!prior_only\\)"):
        StanTarget(STAN / "no_prior_only.stan", {"N": 1, "y": [0.0]})


@pytest.mark.parametrize("change, expected", [
    (lambda d: {k: v for k, v in d.items() if k != "N"}, "variable does not exist"),
    (lambda d: {k: v for k, v in d.items() if k != "X"}, "lack the variable.*'X'"),
    (lambda d: {**d, "X": np.asarray(d["X"])[:, :2]}, "mismatch in dimension"),
    (lambda d: {**d, "N": -1}, "N is -1, but must be greater than or equal to"),
    (lambda d: {**d, "prior_only": 2}, "prior_only is 2"),
])
def test_bad_data_raises_stans_message(compiled, linear_data, change, expected):
    data = change({**linear_data, "prior_only": 0})
    with pytest.raises(StanDataError, match=expected):
        StanModel(compiled["linear_regression"], data)


def test_bad_data_in_target_fails_before_any_evaluation(compiled, linear_data):
    with pytest.raises(StanDataError, match="variable name=X"):
        StanTarget(compiled["linear_regression"], {"N": 3, "K": 1})


def test_non_numeric_data_is_refused(compiled, linear_data):
    with pytest.raises(StanDataError, match="not numeric"):
        StanModel(compiled["linear_regression"], {**linear_data, "X": [["a"]]})


@pytest.fixture(scope="module")
def throws(compiled):
    return StanModel(compiled["throws"], {"prior_only": 0})


def test_reject_in_a_single_call_raises(throws):
    assert np.isfinite(throws.log_density(np.array([0.5])))
    with pytest.raises(StanEvaluationError, match="x is too big: 1.5"):
        throws.log_density(np.array([1.5]))
    with pytest.raises(StanEvaluationError, match="x is too big"):
        throws.log_density_gradient(np.array([1.5]))
    with pytest.raises(StanEvaluationError, match="index"):
        throws.log_density(np.array([-1.5]))


def test_reject_in_a_batch_gives_minus_inf_and_goes_on(throws):
    u = np.array([[0.5], [1.5], [-1.5], [0.0]])
    for threads in (1, 2):
        lp, grad = throws.log_density_gradient_batch(u, threads=threads)
        assert lp[1] == -np.inf            # reject(): a domain error
        assert np.isnan(lp[2])             # index error: not a rejection
        assert np.isnan(grad[1]).all() and np.isnan(grad[2]).all()
        assert lp[0] == throws.log_density(u[0]) and lp[3] == throws.log_density(u[3])
        assert set(throws.last_errors) == {1, 2}
        assert "x is too big: 1.5" in throws.last_errors[1]
        assert "index" in throws.last_errors[2]
    lp = throws.log_density_batch(u)
    assert lp[1] == -np.inf and np.isnan(lp[2]) and np.isfinite(lp[[0, 3]]).all()
    throws.log_density_batch(u[[0, 3]])
    assert throws.last_errors == {}


def test_reject_in_a_split_batch(compiled):
    target = StanTarget(compiled["throws"], {}, threads=2)
    u = np.array([[0.5], [1.5], [4.0], [-1.5]])
    ev = target.evaluate(u)
    assert np.isfinite(ev.log_prior[[0, 1, 3]]).all()
    assert ev.log_lik[1] == -np.inf          # likelihood rejects
    assert ev.log_prior[2] == -np.inf        # prior rejects
    assert np.isnan(ev.log_lik[3])           # index error in the likelihood
    assert ev.log_lik[0] == 0.0
    assert "likelihood: " in target.last_errors[1]
    assert "prior: " in target.last_errors[2] and "far too big" in target.last_errors[2]

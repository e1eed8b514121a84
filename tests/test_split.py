"""The automatic prior/likelihood split (bread_stan.stan.draft.split).

Exact tier: the classification table of small programs written like posteriordb's,
the one-line refusals, and the exactness of the generated program: at prior_only = 0
its log density equals the user's program's, at prior_only = 1 that of a prior
written by hand, at random unconstrained points, Jacobian on and off, to 1e-10
(relative to max(1, |log density|): only floating-point reordering may differ).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bread_stan.stan.compile import Program, compile_many
from bread_stan.stan.draft import SplitError, split_model
from bread_stan.stan.split_check import check_split_exact

HERE = Path(__file__).parent / "stan" / "split"
PROGRAMS = ["brms_regression", "hierarchical", "glm_logistic", "mixed_loop", "linear_predictor"]

ROLES = {
    "brms_regression": [(23, "likelihood"), (24, "prior"), (25, "prior"), (26, "prior"),
                        (26, "prior")],
    "hierarchical": [(13, "prior"), (14, "prior"), (15, "prior"), (16, "likelihood")],
    "glm_logistic": [(13, "prior"), (13, "prior"), (13, "likelihood")],
    "mixed_loop": [(16, "prior"), (18, "prior"), (23, "likelihood"), (25, "likelihood"),
                   (29, "prior")],
    "linear_predictor": [(18, "prior"), (19, "prior"), (20, "prior"), (24, "likelihood"),
                         (25, "likelihood")],
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_table_and_line_numbers(name):
    split = split_model(HERE / f"{name}.stan")
    assert [(r.line, r.role) for r in split.rows] == ROLES[name]
    source = (HERE / f"{name}.stan").read_text()
    for text in (split.program, split.prior_program):
        assert text.count("\n") == source.count("\n")      # every line where it was
    lines = split.program.splitlines()
    for row in split.rows:
        if row.role == "likelihood":
            assert "if (!prior_only)" in lines[row.line - 1]
    assert "int<lower=0, upper=1> prior_only;" in split.program
    assert "prior_only" not in split.prior_program


def _program(data: str, parameters: str, model: str, extra: str = "") -> Program:
    return Program(f"data {{ {data} }}\n{extra}\nparameters {{ {parameters} }}\n"
                   f"model {{\n{model}\n}}\n", "split_case")


DATA = "int N; vector[N] y;"


@pytest.mark.parametrize("program, message", [
    (_program(DATA, "real mu;", "mu ~ normal(mean(y), 1);\ny ~ normal(mu, 1);"),
     "line 5: cannot split `mu ~ normal(mean(y), 1);`: a prior (outcome not data) that "
     "reads the modelled data y"),
    (_program(DATA, "real mu;", "mu ~ normal(0, 1);\ny - mu ~ normal(0, 1);"),
     "line 6: cannot split `y - mu ~ normal(0, 1);`: the outcome reads both the modelled "
     "data y and the parameter(s) mu"),
    # (ly = log(y) alone is promoted to modelled data: tests/test_split_promoted.py)
    (_program(DATA + " vector[N] x;", "real mu;", "mu ~ normal(0, 1);\nly ~ normal(mu * x, 1);",
              "transformed data { vector[N] ly = log(y) - x; }"),
     "`ly ~ normal(mu * x, 1);`: the data x, from which ly is computed, are also read "
     "here"),
    (_program(DATA, "real mu;", "mu ~ normal(0, 1);",),
     "no density statement of the model block has modelled data as its outcome"),
    (_program(DATA, "real mu;", "mu ~ normal(0, 1);\ntarget += -0.5 * dot_self(y - mu);"),
     "line 6 `target += -0.5 * dot_self(y - mu);` is not a sum of densities the "
     "splitter reads, and no density statement of the model block has modelled data"),
    (Program("functions { void f_lp(real x) { target += x; } }\ndata { real y; }\n"
             "parameters { real mu; }\nmodel { mu ~ normal(0, 1);\n f_lp(y - mu); }",
             "split_lp"),
     "line 5: the function f_lp adds to the target itself"),
    (Program("functions { real f_lp(real x) { target += x; return x; } }\n"
             "data { real y; }\nparameters { real mu; }\n"
             "transformed parameters { real m = f_lp(mu); }\n"
             "model { mu ~ normal(0, 1); y ~ normal(m, 1); }", "split_lp_tp"),
     "line 4: the function f_lp adds to the target itself"),
])
def test_refusals_are_one_line(program, message):
    with pytest.raises(SplitError) as caught:
        split_model(program)
    text = str(caught.value)
    assert message in text and "\n" not in text
    if "cannot split `" in text:
        assert "declare prior_only by hand" in text and "--likelihood NAME" in text


def test_likelihood_option_names_transformed_data():
    program = _program(DATA, "real mu;", "mu ~ normal(0, 1);\nly ~ normal(mu, 1);",
                       "transformed data { vector[N] ly = log(y); }")
    split = split_model(program, likelihood=["ly"])
    assert [(r.line, r.role) for r in split.rows] == [(5, "prior"), (6, "likelihood")]
    with pytest.raises(SplitError, match="--likelihood names z, not declared"):
        split_model(program, likelihood=["z"])


def test_likelihood_work_is_skipped_under_prior_only():
    """What only feeds the likelihood (a linear predictor declared with its value, a loop
    filling probabilities from it) is computed only when prior_only is 0, and left out of
    the prior alone; a local the prior reads, or a loop that prints, is computed always.
    (test_split_is_exact checks the densities.)"""
    split = split_model(HERE / "linear_predictor.stan")
    lines = split.program.splitlines()
    assert lines[14].strip() == "vector[N] eta ; if (!prior_only) { eta = a + b * x; }"
    assert lines[16].strip() == "real s = exp(log_s);"
    assert lines[20].strip() == "if (!prior_only) { for (n in 1:N) {"
    assert lines[22].strip() == "} }"
    assert "eta = " not in split.prior_program and "inv_logit" not in split.prior_program
    printing = split_model(_program(DATA, "real mu;", "vector[N] m;\nfor (n in 1:N) "
                                    "{ m[n] = mu; print(n); }\nmu ~ normal(0, 1);\n"
                                    "y ~ normal(m, 1);"))
    assert "if (!prior_only) { for" not in printing.program
    read_by_prior = split_model(_program(DATA, "real mu;", "real m = 2 * mu;\n"
                                         "mu ~ normal(m - mu, 1);\ny ~ normal(m, 1);"))
    assert "real m = 2 * mu;" in read_by_prior.program


def test_own_prior_only_is_kept():
    program = Program("data { real y; int<lower=0, upper=1> prior_only; }\n"
                      "parameters { real mu; }\n"
                      "model { mu ~ normal(0, 1); if (!prior_only) y ~ normal(mu, 1); }",
                      "own_split")
    split = split_model(program)
    assert split.own_split and split.program == program.code


def test_dangling_else_keeps_its_if():
    """A likelihood under ``if (...) ...; else ...;`` is braced, so the else keeps its if."""
    program = _program(DATA + " int c;", "real mu;",
                       "mu ~ normal(0, 1);\nif (c) y ~ normal(mu, 1);\n"
                       "else y ~ normal(mu, 2);")
    split = split_model(program)
    assert "if (c) { if (!prior_only) { y ~ normal(mu, 1); } }" in split.program


@pytest.fixture(scope="module")
def compiled():
    programs = {}
    for name in PROGRAMS:
        split = split_model(HERE / f"{name}.stan")
        programs[name] = (HERE / f"{name}.stan", Program(split.program, f"{name}_split"),
                          HERE / f"{name}_prior.stan")
    flat = compile_many([p for triple in programs.values() for p in triple], workers=2)
    return {name: flat[3 * k:3 * k + 3] for k, name in enumerate(PROGRAMS)}


@pytest.mark.parametrize("name", PROGRAMS)
def test_split_is_exact(compiled, name):
    user, generated, prior = compiled[name]
    check = check_split_exact(user, generated, prior, HERE / f"{name}.json",
                              rng=np.random.default_rng(26), n=25)
    assert check.points >= 20
    assert check.exact(1e-10), check


def test_no_finite_point_proves_nothing():
    from bread_stan.stan.split_check import SplitCheck
    assert SplitCheck(0.0, 0.0, points=3, mismatched=0).exact()
    assert not SplitCheck(0.0, 0.0, points=0, mismatched=0).exact()


@pytest.mark.parametrize("model, message", [
    ("data { int N; vector[N] y; }\nparameters { real mu; }\n"
     "model { mu ~ normal(mean(y), 1);\n y ~ normal(mu, 1); }\n",
     "line 3: cannot split `mu ~ normal(mean(y), 1);`"),
    ("data { int N; vector[N] y; }\nparameters { real mu; real<lower=0> s; }\n"
     "model { mu ~ normal(0, 1);\n y ~ normal(mu, s); }\n",
     "line 2: parameter s has no density statement: its prior is flat (improper)"),
])
def test_cli_refuses_in_one_line(tmp_path, capsys, model, message):
    """Without --simulator the command splits and drafts; what it cannot do is one line
    on stderr, exit 2, before any compile."""
    from bread_stan.cli.main import main

    (tmp_path / "m.stan").write_text(model)
    (tmp_path / "d.json").write_text('{"N": 2, "y": [0.5, 1.5]}')
    code = main(["run", str(tmp_path / "m.stan"), "--data", str(tmp_path / "d.json"),
                 "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("bread-stan run: error: ") and message in err[0]
    assert (tmp_path / "m.stan").read_text() == model          # the user's file untouched


def test_prior_only_in_a_comment_is_not_a_name():
    split = split_model(Path(__file__).parent / "stan" / "no_prior_only.stan")
    assert [(r.line, r.role) for r in split.rows] == [(10, "prior"), (11, "likelihood")]


def test_prepare_programs_saves_what_it_generates(tmp_path):
    """No compile: the split program, the prior part, the drafted simulator and the table
    are written to the directory; a given simulator is used as it is."""
    from bread_stan.stan.prepare import prepare_programs

    model = HERE / "hierarchical.stan"
    p = prepare_programs(model, None, tmp_path / "programs")
    assert p.model == tmp_path / "programs" / "hierarchical.stan" and p.drafted
    assert p.model.read_text() == split_model(model).program
    assert "y = normal_rng(theta, sigma);" in p.simulator.read_text()
    table = p.table.read_text()
    assert "| 16 | likelihood | `y ~ normal(theta, sigma);` |" in table
    assert (tmp_path / "programs" / "hierarchical_prior_part.stan").is_file()
    given = prepare_programs(model, tmp_path / "mine.stan", tmp_path / "other")
    assert given.simulator == tmp_path / "mine.stan" and not given.drafted
    own = prepare_programs(Path(__file__).parent / "stan" / "normal_mean.stan", None,
                           tmp_path / "own")
    assert own.split is None and own.model.name == "normal_mean.stan" and own.drafted


def test_bounds_the_likelihood_crosses_are_dropped_in_the_run_model(tmp_path):
    """``vector<lower=0>[N] y; y ~ normal(mu, 1)``: the drafted simulator draws y on the
    whole line, the run's model declares y without the bound (and the table says so), reads
    the simulated data the user's program refuses, and computes the user's numbers on the
    user's data (split exactness at 1e-10).  Break tried: keeping the bound in the run
    model fails the declaration assertion (and the load of the simulated data)."""
    from bread_stan.errors import StanDataError
    from bread_stan.stan.compile import compile_model
    from bread_stan.stan.model import StanModel
    from bread_stan.stan.prepare import prepare_programs
    from bread_stan.stan.simulator import Simulator

    user = tmp_path / "positive.stan"
    user.write_text("data { int N;\n vector<lower=0>[N] y; }\nparameters { real mu; }\n"
                    "model { mu ~ normal(1, 1);\n y ~ normal(mu, 1); }\n")
    p = prepare_programs(user, None, tmp_path / "programs")
    assert list(p.relaxed_bounds) == ["y"] and "\n vector[N] y; " in p.model.read_text()
    assert "- y: line 5: normal can draw y below y's declared lower=0" in p.table.read_text()
    assert "without their data-block bounds" in p.describe()
    data = {"N": 30, "y": list(np.linspace(0.1, 3.0, 30))}
    draws = Simulator(compile_model(p.simulator), {"N": 30}).simulate(5, seed=3)
    simulated = {"N": 30, "y": draws["y"][int(np.argmin(draws["y"].min(axis=1)))].tolist()}
    assert min(simulated["y"]) < 0
    user_model, run_model = compile_model(user), compile_model(p.model)
    with pytest.raises(StanDataError):
        StanModel(user_model, simulated, threads=1)
    assert np.isfinite(StanModel(run_model, {**simulated, "prior_only": 0}, threads=1)
                       .log_density(np.zeros(1)))
    prior = compile_model(tmp_path / "programs" / "positive_prior_part.stan")
    (tmp_path / "d.json").write_text(json.dumps(data))
    check = check_split_exact(user_model, run_model, prior, tmp_path / "d.json",
                              rng=np.random.default_rng(1), n=10)
    assert check.exact(1e-10), check

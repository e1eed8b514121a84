"""Current Stan (issue 43): Stan 2.36+ programs under Stan 2.39, refused under 2.35.

Python 3.12+ gets httpstan 4.17 (Stan 2.39), Python 3.11 httpstan 4.13 (Stan 2.35), so
CI's two legs see both: under 2.35 each program below is refused in one line naming
the Stan release it needs; under 2.39 they compile, split and run, the drafter draws
the zero-sum types exactly (the projection of an iid normal draw, with the subspace's
normaliser), and the sandwich of a Gaussian-linear zero-sum model and of a program
using ``jacobian +=`` contains its known log p(y).  Tolerances: 3.5 Monte Carlo
standard errors (as tests/test_workflow.py).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

from bread_stan.errors import DraftError, StanVersionError, ToolchainError
from bread_stan.stan.features import needed_features, newer_stan_refusal, stan_version_line
from bread_stan.stan.toolchain import find_toolchain

HERE = Path(__file__).resolve().parent / "stan" / "current"
ZERO_SUM = HERE / "zero_sum_groups.stan"
JACOBIAN = HERE / "jacobian_scale.stan"
JACOBIAN_SIM = HERE / "jacobian_scale_sim.stan"
SCALE_PARAMETER = HERE / "zero_sum_scale_parameter.stan"
STOCHASTIC = HERE / "stochastic.stan"
Z = 3.5

@functools.lru_cache(maxsize=None)
def _stan() -> str:
    """The toolchain's Stan version, asked when a test is set up (never at import: the
    fast tier's guard refuses a module that asks for Stan when imported)."""
    try:
        return find_toolchain().stan_version
    except ToolchainError:       # no compiler: the Stan tests below are skipped
        return "0.0.0"


def _new() -> bool:
    return tuple(int(p) for p in _stan().split(".")[:2]) >= (2, 36)


# string conditions: evaluated at set-up, with this module's names
needs_new = pytest.mark.skipif("not _new()", reason="needs Stan 2.36+ (the toolkit has "
                               "Stan 2.39 on Python 3.12+, Stan 2.35 on Python 3.11)")
needs_old = pytest.mark.skipif("_new() or _stan() == '0.0.0'", reason="checks the refusal "
                               "under Stan < 2.36 (Python 3.11)")


# -- data and closed forms --------------------------------------------------------------

def _zero_sum_data() -> dict:
    n = np.arange(24)
    return {"N": 24, "J": 4, "g": (1 + n % 4).tolist(), "R": 3, "C": 3,
            "rr": (1 + n % 3).tolist(), "cc": (1 + (n // 3) % 3).tolist(),
            "y": [0.0] * 24, "tau": 0.7, "s": 0.5, "sigma": 1.0}


def _centring(k: int) -> np.ndarray:
    return np.eye(k) - 1.0 / k


def _zero_sum_log_ml(data: dict, y: np.ndarray) -> float:
    """y = mu + a[g] + m[rr, cc] + e: a normal with covariance 2^2 11' + tau^2 P_J (on
    the groups) + s^2 P_R x P_C (on the cells) + sigma^2 I."""
    g, r, c = (np.asarray(data[k]) - 1 for k in ("g", "rr", "cc"))
    cov = (4.0 + data["tau"] ** 2 * _centring(data["J"])[np.ix_(g, g)]
           + data["s"] ** 2 * _centring(data["R"])[np.ix_(r, r)]
           * _centring(data["C"])[np.ix_(c, c)] + data["sigma"] ** 2 * np.eye(data["N"]))
    return stats.multivariate_normal(np.zeros(data["N"]), cov).logpdf(y)


def _jacobian_log_ml(y: np.ndarray) -> float:
    """log of the integral over l of normal(l | 0, 1) prod normal(y_i | 0, e^l), on a grid
    fine enough for 1e-8 (the integrand is smooth and negligible outside [-10, 10])."""
    grid = np.linspace(-10, 10, 40001)
    log_f = stats.norm.logpdf(grid) + stats.norm.logpdf(
        y[:, None], 0, np.exp(grid)[None, :]).sum(axis=0)
    return float(special.logsumexp(log_f) + np.log(grid[1] - grid[0]))


def _contains(result, exact: float) -> None:
    for s in result.steps:
        lower, upper = s.forward.log_estimates, s.reverse.log_estimates
        assert lower.mean() <= exact + Z * lower.std(ddof=1) / np.sqrt(lower.size)
        assert upper.mean() >= exact - Z * upper.std(ddof=1) / np.sqrt(upper.size)
    for row in result.summary().itertuples():
        assert row.log_ml_lower <= exact + Z * row.log_ml_lower_se
        assert row.log_ml_upper >= exact - Z * row.log_ml_upper_se
        assert row.consistent


# -- the feature table and the refusal under Stan 2.35 ------------------------------------

def test_newer_features_are_found_in_code_not_in_comments():
    source = ("// a sum_to_zero_vector in a comment\n/* row_stochastic_matrix */\n"
              "parameters {\n  sum_to_zero_matrix[2, 3] m;\n}\ntransformed parameters {\n"
              "  real x = 1;  jacobian  += 0;\n}\n")
    assert needed_features(source) == [("sum_to_zero_matrix", 4, (2, 37)),
                                       ("jacobian +=", 7, (2, 36))]
    assert needed_features("parameters { real jacobian_x; }") == []


def test_the_second_ci_leg_names_test_modules_that_exist():
    """The leg2 marker (CI's Python 3.13 / Stan 2.39 leg) is set by module name: a renamed
    or removed module must not drop out of that leg silently.  Break tried: a misspelt
    name fails here."""
    from conftest import _LEG2_STAN_MODULES

    tests = Path(__file__).resolve().parent
    assert sorted(m for m in _LEG2_STAN_MODULES if not (tests / f"{m}.py").is_file()) == []


@needs_old
@pytest.mark.stan
@pytest.mark.parametrize("program, feature, release, line", [
    (ZERO_SUM, "sum_to_zero_vector", "2.36", 20), (JACOBIAN, "jacobian +=", "2.36", 14),
    (STOCHASTIC, "column_stochastic_matrix", "2.36", 9)])
def test_stan_2_35_refuses_each_newer_program_in_one_line(program, feature, release, line):
    """stanc 2.35's "Syntax error ... parsing error" becomes one line naming the feature,
    the release it needs and what to do, from compile, split and draft alike.  Break
    tried: run_stanc raising stanc's own error fails every case here."""
    from bread_stan.stan.compile import compile_model
    from bread_stan.stan.draft import draft_simulator, split_model

    expected = (f", line {line}: {feature} needs Stan {release} or later (this toolkit has "
                f"Stan {_stan().rsplit('.', 1)[0]} on Python "
                f"{sys.version_info.major}.{sys.version_info.minor}; use Python 3.12+)")
    for call in (compile_model, split_model, draft_simulator):
        with pytest.raises(StanVersionError) as caught:
            call(program)
        # the program's path, or its name when stanc read a copy of the text
        assert str(caught.value) in (f"{program}{expected}", f"{program.stem}{expected}")
        assert "\n" not in str(caught.value) and caught.value.line == line
    assert newer_stan_refusal("parameters { real x; }", find_toolchain()) is None
    assert stan_version_line(find_toolchain()).startswith(f"Stan {_stan()} (stanc3 v{_stan()}")


# -- under Stan 2.36+ -------------------------------------------------------------------

@needs_new
def test_newer_programs_split_and_the_drafter_draws_or_refuses_in_one_line(tmp_path):
    """No compile (stanc only): the split tables; the drafted zero-sum draws and their
    normaliser lines; one-line refusals of what the drafter cannot draw exactly."""
    from bread_stan.stan.draft import draft_simulator, split_model
    from bread_stan.stan.prepare import prepare_programs

    split = split_model(ZERO_SUM)
    assert [(r.line, r.role) for r in split.rows] == [
        (24, "prior"), (25, "prior"), (26, "prior"), (28, "likelihood")]
    sim = draft_simulator(split.program)
    assert "a = to_vector(normal_rng(rep_vector(0, num_elements(a)), tau)); a = a - mean(a);" \
        in sim
    assert "bread_log_c_exact_ -= 1 * (0.5 * log(2 * pi()) + log(tau));" in sim
    assert "bread_log_c_exact_ -= (rows(m) + cols(m) - 1) * (0.5 * log(2 * pi()) + log(s));" \
        in sim
    jacobian = split_model(JACOBIAN)
    assert [(r.line, r.role) for r in jacobian.rows] == [(17, "prior"), (18, "likelihood")]
    assert "jacobian += log_sigma;" in jacobian.prior_program     # the prior keeps it
    stochastic = split_model(STOCHASTIC)
    assert [r.role for r in stochastic.rows] == ["prior", "likelihood", "prior", "likelihood"]
    refusals = {
        JACOBIAN: "line 14 `jacobian += log_sigma;`: jacobian += (Stan 2.36+) makes the "
                  "prior a density of transformed parameters",
        SCALE_PARAMETER: "line 18 `a ~ normal(0, tau);`: the scale of the sum_to_zero_vector "
                         "a reads tau, not data",
        STOCHASTIC: "parameters of type column_stochastic_matrix are not translated"}
    for program, message in refusals.items():
        with pytest.raises(DraftError) as caught:
            prepare_programs(program, None, tmp_path / program.stem)
        assert message in str(caught.value) and "\n" not in str(caught.value)


@needs_new
@pytest.mark.stan
def test_zero_sum_draws_are_the_projected_normal_and_c_is_exact(tmp_path):
    """Stan's zero-sum coordinates are isometric (V'V = I, 1'V = 0), so the prior density
    in them is Gaussian and its integral is closed form: the drafted simulator's log c
    equals it (1e-9), and its draws have the projected covariances tau^2 P_J and
    s^2 P_R x P_C (20,000 draws, 3.5 standard errors).  Breaks tried: the count of
    missing dimensions N instead of 1 (log c off by 3 log(2 pi tau^2) / 2) and drawing
    without the projection (a draw that does not sum to zero: Stan refuses it) each fail
    here."""
    from bread_stan.stan.compile import compile_many
    from bread_stan.stan.model import StanModel
    from bread_stan.stan.prepare import prepare_programs
    from bread_stan.stan.simulator import Simulator

    p = prepare_programs(ZERO_SUM, None, tmp_path)
    prior, sim = compile_many([tmp_path / "zero_sum_groups_prior_part.stan", p.simulator])
    data = _zero_sum_data()
    model = StanModel(prior, data, threads=1)
    d = model.param_unc_num()
    assert d == 1 + 3 + 2 * 2
    basis = np.array([model.param_constrain(e)[1:] for e in np.eye(d)[1:]]).T  # a, m
    assert np.allclose(basis.T @ basis, np.eye(d - 1), atol=1e-12)
    assert np.allclose(basis[:4].sum(axis=0), 0, atol=1e-12)
    _, _, hessian = model.log_density_hessian(np.zeros(d), jacobian=True)
    log_c = (model.log_density(np.zeros(d), jacobian=True) + 0.5 * d * np.log(2 * np.pi)
             - 0.5 * np.linalg.slogdet(-hessian)[1])
    draws = Simulator(sim, {k: v for k, v in data.items() if k != "y"}).simulate(20_000, seed=1)
    assert np.ptp(draws["bread_log_c_exact_"]) == 0
    assert abs(draws["bread_log_c_exact_"][0] - log_c) < 1e-9
    a, m = draws["a"], draws["m"].reshape(-1, 9)
    assert np.abs(a.sum(axis=1)).max() < 1e-12
    assert np.abs(draws["m"].sum(axis=1)).max() < 1e-12
    assert np.abs(draws["m"].sum(axis=2)).max() < 1e-12
    for x, cov in ((a, data["tau"] ** 2 * _centring(4)),
                   (m, data["s"] ** 2 * np.kron(_centring(3), _centring(3)))):
        se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / x.shape[0])
        assert np.all(np.abs(np.cov(x.T) - cov) < Z * se + 1e-12)


@needs_new
@pytest.mark.stan
@pytest.mark.parametrize("path, steps", [("prior", 30), ("gaussian", 300)])
def test_zero_sum_model_end_to_end_contains_the_known_log_ml(tmp_path, path, steps):
    """Split, drafted and run as the command line does: the sandwich contains the closed
    form log p(y) of the simulated data, on the prior path and on the Gaussian path, where
    the drafted log c (-1.69) is subtracted from every estimate: a wrong c moves the
    sandwich by the error.  (The Gaussian path runs 300 steps: its reverse chains all start
    from the one exact draw, and at 30 steps their spread around it understates how far
    the upper end moves with that draw: 0.4 nats at seed 1.)  Break tried: one missing
    dimension for the matrix (rows + cols - 2) moves log c by 0.23 and fails the Gaussian
    path."""
    from bread_stan.stan.prepare import prepare_programs
    from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

    p = prepare_programs(ZERO_SUM, None, tmp_path)
    data = _zero_sum_data()
    result = bread(p.model, p.simulator, data,
                   sampler=SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16,
                                           pilot_grid=6, pilot_steps=20),
                   run=RunSettings(steps=(steps,), chains=100, seed=1, progress=False,
                                   path=path))
    exact = _zero_sum_log_ml(data, np.asarray(result.extra["simulated_data"]["y"]))
    _contains(result, exact)


@needs_new
@pytest.mark.stan
def test_jacobian_program_end_to_end_contains_the_known_log_ml(tmp_path):
    """The split keeps jacobian += in the prior (it is not a density statement of the
    model block, and cancels in the likelihood): the prior is normal(0, 1) in log_sigma,
    the likelihood the normals of y (exactly, 1e-10), and the sandwich contains log p(y)
    computed by quadrature.  Break tried: deleting jacobian += from the program (the prior
    then is lognormal(0, 1) without its Jacobian, normal(0, 1) times e^(-log_sigma)) fails
    the exact check; the sandwich at seed 2 does not see it (its data put log p(y) about
    where the two priors' predictions agree)."""
    from bread_stan.stan.compile import compile_model
    from bread_stan.stan.model import StanModel
    from bread_stan.stan.prepare import prepare_programs
    from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

    p = prepare_programs(JACOBIAN, JACOBIAN_SIM, tmp_path)
    assert p.split is not None and not p.drafted
    y = np.linspace(-2, 2, 10)
    compiled = compile_model(p.model)
    prior = StanModel(compiled, {"N": 10, "y": y, "prior_only": 1}, threads=1)
    full = StanModel(compiled, {"N": 10, "y": y, "prior_only": 0}, threads=1)
    for u in (-1.5, 0.0, 0.7):
        point = np.array([u])
        assert abs(prior.log_density(point) - stats.norm.logpdf(u)) < 1e-10
        assert abs(full.log_density(point) - prior.log_density(point)
                   - stats.norm.logpdf(y, 0, np.exp(u)).sum()) < 1e-10
    result = bread(p.model, p.simulator, {"N": 10, "y": [0.0] * 10},
                   sampler=SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16,
                                           pilot_grid=6, pilot_steps=20),
                   run=RunSettings(steps=(30,), chains=100, seed=2, progress=False,
                                   path="prior"))
    _contains(result, _jacobian_log_ml(np.asarray(result.extra["simulated_data"]["y"])))


@needs_new
@pytest.mark.stan
def test_stochastic_matrices_compile_split_and_run(tmp_path):
    """The split program compiles; its constrained draws are stochastic by column and by
    row; the log likelihood (joint minus prior) is the multinomials' at those draws."""
    from bread_stan.stan.compile import compile_model
    from bread_stan.stan.draft import split_model
    from bread_stan.stan.model import StanModel

    source = tmp_path / "stochastic.stan"
    source.write_text(split_model(STOCHASTIC).program)
    compiled = compile_model(source)
    data = {"K": 3, "y": [[3, 1, 0], [2, 2, 2], [0, 1, 5]], "z": [1, 4, 2]}
    full = StanModel(compiled, {**data, "prior_only": 0}, threads=1)
    prior = StanModel(compiled, {**data, "prior_only": 1}, threads=1)
    u = np.random.default_rng(3).normal(size=full.param_unc_num())
    assert full.param_unc_num() == 3 * 2 + 2 * 2
    theta = full.param_constrain(u)
    P, Q = theta[:9].reshape(3, 3, order="F"), theta[9:].reshape(2, 3, order="F")
    assert np.allclose(P.sum(axis=0), 1) and np.allclose(Q.sum(axis=1), 1)
    log_lik = sum(stats.multinomial(sum(data["y"][k]), P[:, k]).logpmf(data["y"][k])
                  for k in range(3)) + stats.multinomial(7, Q[0]).logpmf(data["z"])
    assert np.isclose(full.log_density(u) - prior.log_density(u), log_lik, atol=1e-9)

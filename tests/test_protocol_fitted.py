"""The real-data protocol on a program as it is: parameters fixed at fitted values
(``bread_stan/workflows/protocol_fitted.py``, issue 45).

Known answer: ``tests/stan/flat_regression.stan``, y = X b + e, e ~ normal(0, sigma)
with sigma given as data and b flat.  Given any data y, the posterior of b is
normal(b_ols, sigma^2 (X'X)^-1) and the normaliser of the flat-prior model is

    log Z = log int p(y | b) db
          = -(N - K)/2 log(2 pi sigma^2) - 1/2 log|X'X| - RSS / (2 sigma^2),

so the protocol's fitted value (the posterior median of b on the real data = b_ols
there), its reverse starts (after S transitions they must be posterior draws given the
simulated data), its forward AIS estimates of log Z and its bound are all checked
against exact values, with tolerances of 4 Monte Carlo standard errors (chains are
independent; the per-chain estimates' sd over sqrt(chains)).

Breaks tried (each made a test here fail): the simulated data set's model built on the
real data instead of the simulated data (``_dataset`` with ``data`` for ``values``): the
forward estimates miss log Z of D_sim by about 3 nats and the reverse starts' means are
off by 8 to 10 se; forward chains started 1 off q's exact draws (``_inputs``): the mean
forward estimate falls 0.47 nats below log Z (tolerance 0.3 + 4 se = 0.46); every
reverse start left at (eta_hat, theta) (``reverse_starts`` snapshotting the start): the
means are 8 to 10 se from the posterior's.  (A Python-only change of log q in
``GaussianBase.log_density`` changes nothing: the native kernels evaluate q themselves.)
No escalation (refusing at the first failed simulation): the flat Poisson-log test is
refused with "simulation fails with mu fixed at their fitted values".
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logsumexp

from bread_stan.cli import main as cli
from bread_stan.errors import ImproperPriorError
from bread_stan.stan.draft import draft_program
from bread_stan.store import load_unit
from bread_stan.workflows.fit import FitSettings
from bread_stan.workflows.common import ResumeMismatchError
from bread_stan.workflows.protocol import ProtocolSettings, protocol
from bread_stan.workflows.protocol_fitted import HEURISTIC
from bread_stan.workflows.settings import RunSettings, SamplerSettings

from resume_guard import forbid_recomputing

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = Path(__file__).resolve().parent / "stan"
FLAT = TEST_STAN / "flat_regression.stan"
FLAT_SCALE = TEST_STAN / "flat_regression_scale.stan"

N, K, SIGMA = 30, 2, 1.0
SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                          pilot_steps=20)
CHAINS = 100


def _data(seed: int = 1) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, K))
    y = X @ np.array([1.0, -0.5]) + SIGMA * rng.normal(size=N)
    return {"N": N, "K": K, "X": X.tolist(), "sigma": SIGMA, "y": y.tolist()}, X


def _exact(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Posterior mean and covariance of b, and log Z, of the flat-prior regression."""
    xtx = X.T @ X
    mean = np.linalg.solve(xtx, X.T @ y)
    rss = float(np.sum((y - X @ mean) ** 2))
    log_z = (-(N - K) / 2 * np.log(2 * np.pi * SIGMA ** 2)
             - 0.5 * np.linalg.slogdet(xtx)[1] - rss / (2 * SIGMA ** 2))
    return mean, SIGMA ** 2 * np.linalg.inv(xtx), log_z


RUN = RunSettings(steps=(10, 50), chains=CHAINS, seed=3, progress=False)
SETTINGS = ProtocolSettings(s_sweep=(0, 20, 100), replicates=2,
                            fit=FitSettings(chains=4, warmup=200, draws=250))


@pytest.fixture(scope="module")
def flat_run(tmp_path_factory):
    data, X = _data()
    out = tmp_path_factory.mktemp("flat") / "run"
    result = protocol(FLAT, None, data, sampler=SAMPLER, run=RUN, settings=SETTINGS,
                      out_dir=out)
    return result, data, X, out


def test_the_route_fixes_the_flat_coefficients_at_their_fitted_values(flat_run):
    result, data, X, _ = flat_run
    route = result.extra["route"]
    assert route["fixed"] == ["b"] and route["why"] == {"b": "no proper prior"}
    assert route["description"] == "protocol, hyperparameters fixed at fitted values: b"
    assert route["heuristic"] == HEURISTIC and "not a rigorous bound" in HEURISTIC
    # eta_hat: the posterior median of b on the real data, whose exact value is b_ols
    # there; tolerance 4 Monte Carlo se of a median (1.25 sd / sqrt(ESS), ESS >= 200).
    mean, cov, _ = _exact(X, np.asarray(data["y"]))
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(np.asarray(result.hyper["b"]) - mean) < 4 * 1.25 * sd / np.sqrt(200))
    # The simulated truth carries the fitted values: theta is empty, b = eta_hat.
    np.testing.assert_allclose(result.extra["truth"]["b"], result.hyper["b"])


def test_reverse_starts_are_posterior_draws_of_the_simulated_data(flat_run):
    result, _, X, out = flat_run
    y_sim = np.asarray(result.extra["simulated_data"]["y"])
    mean, cov, _ = _exact(X, y_sim)
    sd = np.sqrt(np.diag(cov))
    snaps = load_unit(out / "reverse_starts.npz")[0]
    # S = 0: every chain sits at (eta_hat, theta), the approximate start.
    assert np.ptp(snaps["S0"], axis=0).max() == 0
    draws = snaps["S100"]  # b is unconstrained as it is
    assert draws.shape == (CHAINS, K)
    z = (draws.mean(axis=0) - mean) / (sd / np.sqrt(CHAINS))
    assert np.all(np.abs(z) < 4), z
    # log of the sample sd against the exact sd: se about 1 / sqrt(2 (n - 1)).
    log_ratio = np.log(draws.std(axis=0, ddof=1) / sd)
    assert np.all(np.abs(log_ratio) < 4 / np.sqrt(2 * (CHAINS - 1))), log_ratio


def test_forward_estimates_and_bound_agree_with_the_exact_normaliser(flat_run):
    result, _, X, _ = flat_run
    _, _, log_z = _exact(X, np.asarray(result.extra["simulated_data"]["y"]))
    step = result.sim.step(50)
    lower = np.asarray(step.forward.log_estimates)
    upper = np.asarray(step.reverse.log_estimates)
    se_l = lower.std(ddof=1) / np.sqrt(lower.size)
    se_u = upper.std(ddof=1) / np.sqrt(upper.size)
    # E[L] <= log Z <= E[U] (stochastic bounds), and at 50 distributions of a Gaussian
    # posterior both are within a few tenths of a nat of it.
    assert lower.mean() <= log_z + 4 * se_l
    assert upper.mean() >= log_z - 4 * se_u
    assert log_z - lower.mean() < 0.3 + 4 * se_l
    assert upper.mean() - log_z < 0.3 + 4 * se_u
    # log-mean-exp of the forward weights estimates Z itself (the importance estimate).
    lme = float(logsumexp(lower) - np.log(lower.size))
    assert abs(lme - log_z) < 4 * se_l + 0.05
    # The bound is the sum of the two non-negative gaps, so it is small and not
    # significantly negative; the S-sweep and the agreement score pass.
    bound = step.bound()
    assert bound.estimate == pytest.approx(upper.mean() - lower.mean())
    assert -4 * np.hypot(se_l, se_u) < bound.estimate < 0.6
    assert result.sweep_test().passed and result.has_agreement
    assert result.ok


def test_a_rerun_reads_the_fit_and_the_runs_back_and_other_settings_are_refused(
        flat_run, monkeypatch):
    result, data, _, out = flat_run

    forbid_recomputing(monkeypatch)
    again = protocol(FLAT, None, data, sampler=SAMPLER, run=RUN, settings=SETTINGS,
                     out_dir=out)
    for T in (10, 50):
        np.testing.assert_array_equal(again.sim.step(T).forward.log_estimates,
                                      result.sim.step(T).forward.log_estimates)
        np.testing.assert_array_equal(again.real_forward[T].log_estimates,
                                      result.real_forward[T].log_estimates)
    assert again.hyper == result.hyper
    route, before = again.extra["route"], result.extra["route"]
    assert route["why"] == before["why"]
    assert route["q"]["log_joint_at_mode"] == before["q"]["log_joint_at_mode"]
    with pytest.raises(ResumeMismatchError):
        protocol(FLAT, None, data, sampler=SAMPLER, run=replace(RUN, seed=4),
                 settings=SETTINGS, out_dir=out)


def test_drafter_names_every_flat_parameter_and_can_take_them_as_given(tmp_path):
    from bread_stan.stan.draft import split_model

    split = split_model(FLAT_SCALE)
    program = tmp_path / "flat_regression_scale.stan"
    program.write_text(split.program)
    with pytest.raises(ImproperPriorError) as refused:
        draft_program(program)
    assert refused.value.parameters == ["a", "b"]
    assert "parameter a has no density statement: its prior is flat" in str(refused.value)
    text = draft_program(program, ["a", "b"], given=["a", "b"]).text
    assert "array[hyper_given] vector[K] b_given;" in text and "reject(" in text
    # hyper=None: the automatic choice (sigma, a top-level scalar) and the given ones.
    auto = draft_program(program, None, given=["a", "b"]).text
    assert "Hyperparameters: a, b, sigma." in auto


def _cli(capsys, *args: str):
    """``bread-stan protocol ARGS`` in this process: exit status, stdout, stderr."""
    code = cli.main(["protocol", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_runs_a_flat_prior_program_to_a_verdict_with_the_heuristic_sentence(tmp_path,
                                                                                 capsys):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    y = 0.3 + X @ np.array([0.5, -1.0]) + 0.7 * rng.normal(size=40)
    data = tmp_path / "real.json"
    data.write_text(json.dumps({"N": 40, "K": 2, "X": X.tolist(), "y": y.tolist()}))
    common = ["--data", str(data), "--steps", "2,5", "--chains", "20", "--sweep", "0,10,50",
              "--replicates", "2", "--fit-warmup", "150", "--fit-draws", "150",
              "--kernel", "hmc", "--leapfrog", "5", "--pilot-chains", "12", "--quiet",
              "--converged-nats", "0.02"]
    code, out, err = _cli(capsys, str(FLAT_SCALE), *common, "--out", str(tmp_path / "out"))
    assert code in (0, 3), err[-2000:]
    assert ("Route: protocol, hyperparameters fixed at fitted values: a, b "
            "(a: no proper prior; b: no proper prior)") in out
    assert HEURISTIC in out
    assert "On the simulated data, with 5 distributions, AIS is" in out
    assert (tmp_path / "out" / "report.html").is_file()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["extra"]["route"]["fixed"] == ["a", "b"]
    # not converged on the simulated data at --converged-nats 0.02: the line names the T
    # the bounds predict
    assert not any(r["converged"] for r in summary["summary"])
    predicted = summary["predicted"]
    assert predicted["steps"] > 5 and predicted["level"] == 0.02
    assert f"about T = {predicted['steps']} for 0.02 nat" in out
    assert f"--steps 2,5,{predicted['steps']} with the same --out" in out
    # One-line refusals: an unknown name, and --hyper with a given simulator.
    code, _, err = _cli(capsys, str(FLAT_SCALE), *common, "--hyper", "nope", "--out",
                        str(tmp_path / "bad"))
    lines = [line for line in err.splitlines() if " INFO " not in line]
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("bread-stan protocol: error: cannot draft a simulator")
    assert "'nope' is not a parameter" in lines[0]
    code, _, err = _cli(capsys, str(FLAT_SCALE), *common, "--hyper", "sigma", "--simulator",
                        str(TEST_STAN / "normal_mean_sim.stan"), "--out",
                        str(tmp_path / "both"))
    assert code == 2 and "given simulator" in err


def test_a_parameter_whose_prior_draws_break_the_simulation_is_fixed_too():
    # mu is flat; given mu, log_lambda ~ normal(mu, 100) passes poisson_log_rng's limit
    # (20.79) about 4 times in 10, where the model's poisson_log_lpmf does not fail: no
    # redraw applies, so log_lambda is fixed at its fitted value as well.
    y = np.random.default_rng(2).poisson(5.0, size=20)
    result = protocol(TEST_STAN / "flat_poisson_log.stan", None, {"N": 20, "y": y.tolist()},
                      sampler=replace(SAMPLER, pilot_chains=12),
                      run=RunSettings(steps=(5, 20), chains=20, seed=1, progress=False),
                      settings=ProtocolSettings(s_sweep=(0, 10), replicates=1,
                                                fit=FitSettings(chains=4, warmup=150,
                                                                draws=150)))
    assert result.extra["route"]["why"] == {
        "log_lambda": "its prior draws break the simulation", "mu": "no proper prior"}
    # The data are simulated at the fitted log rate (exp(1.5) ~ 4.5, y's mean 5).
    assert abs(result.hyper["log_lambda"] - np.log(y.mean())) < 0.3
    np.testing.assert_allclose(result.extra["truth"]["log_lambda"], result.hyper["log_lambda"])
    assert result.sim.consistent


def test_which_programs_take_the_route():
    from bread_stan.workflows.protocol_fitted import why_fixed_route

    # A proper prior that simulates: the protocol's own route (a drafted simulator).
    y = {"N": 3, "y": [0.1, -0.4, 0.3]}
    assert why_fixed_route(TEST_STAN / "no_prior_only.stan", y) is None
    assert why_fixed_route(FLAT, _data()[0]) == "no proper prior for b"
    assert why_fixed_route(FLAT_SCALE, {k: v for k, v in _data()[0].items()
                                        if k != "sigma"}) == "no proper prior for a, b"


def test_run_refusing_a_flat_or_too_vague_prior_names_the_protocol_command(tmp_path, capsys):
    """``run`` refuses, in one line, a prior nothing can be simulated from, and names the
    command that serves the program on real data: a flat prior (the drafter's refusal,
    before any C++), and a gamma(0.001, 0.001) precision whose draws underflow to 0, so
    that ``normal_rng`` gets an infinite scale in the simulator's parameter draws."""
    data = tmp_path / "real.json"
    rng = np.random.default_rng(5)
    X = rng.normal(size=(10, 2))
    data.write_text(json.dumps({"N": 10, "K": 2, "X": X.tolist(),
                                "y": rng.normal(size=10).tolist(), "sigma": 1.0}))
    vague = tmp_path / "vague.json"
    vague.write_text(json.dumps({"N": 5, "y": [0.1, -0.4, 1.2, 0.3, 0.8]}))
    for program, given in ((FLAT_SCALE, data), (TEST_STAN / "vague_scale.stan", vague)):
        code = cli.main(["run", str(program), "--data", str(given), "--steps", "10",
                         "--chains", "8", "--out", str(tmp_path / program.stem)])
        lines = [line for line in capsys.readouterr().err.splitlines()
                 if " INFO " not in line and " WARNING " not in line]
        assert code == 2 and len(lines) == 1, lines
        assert lines[0].startswith("bread-stan run: error: ")
        assert (f"on real data, `bread-stan protocol {program} --data REAL.json` runs the "
                "BREAD paper's real-data protocol") in lines[0]
    assert "Scale parameter is inf" in lines[0]


def test_prior_draws_that_overflow_send_the_protocol_down_the_fixed_route(tmp_path):
    """A drawn value that overflows to inf breaks the simulation as an ``_rng`` refusal
    does (the run refuses it), so the protocol fixes parameters at fitted values."""
    from bread_stan.workflows.protocol_fitted import why_fixed_route

    why = why_fixed_route(TEST_STAN / "overflowing_lognormal.stan",
                          {"N": 3, "y": [0.5, 1.0, 0.2]})
    assert why is not None and why.startswith("prior draws break the simulation (the "
                                              "simulator produced non-finite values: a[")

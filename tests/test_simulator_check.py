"""The simulator check: the paired signed-rank test is exact under the null, right
simulators pass, each kind of planted bug is caught and named, conventions are
refused by stanc before any C++ compile, and the CLI's exit codes.

The planted bugs are the simulators ``tests/stan/*_sim_scaled.stan`` with their
``factor`` data variable away from 1 (prior scale 1.2x, hyperprior scale 2x, data
noise 1.25x, Poisson rate 2x); ``scripts/studies/simulator_check_power.py`` measures their
detection rates over seeds, with HMC and with NUTS.  Here each runs once at a fixed
seed with the default sizes and the default kernel (NUTS): over seeds 0-4 each planted
bug was flagged with p below 3e-9 and named as below, and the right simulators had p
above 0.03, so the thresholds (1e-4 and 0.01) hold by a wide margin, not by luck.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bread_stan.errors import PriorOnlyMissingError, StanDataError
from bread_stan.cli import main as cli
from bread_stan.stan import compile as compile_module
from bread_stan.stan.compile import compile_many
from bread_stan.rng import Purpose, derived_seed
from bread_stan.stan.simulator import Simulator, compile_with_simulator
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread
from bread_stan.workflows.simulator_check import (CheckSettings, _signed_rank, _stage_tests,
                                                  _Snapshot, check_simulator)

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = ROOT / "tests" / "stan"
MODELS = ROOT / "stan_models"

NORMAL_MEAN = TEST_STAN / "normal_mean.stan"
NORMAL_MEAN_SIM = TEST_STAN / "normal_mean_sim_scaled.stan"
NOISE_SCALE = TEST_STAN / "noise_scale.stan"
NOISE_SCALE_SIM = TEST_STAN / "noise_scale_sim_scaled.stan"
REGRESSION = MODELS / "linear_regression.stan"
REGRESSION_SIM = TEST_STAN / "linear_regression_sim_scaled.stan"
POISSON = TEST_STAN / "poisson_regression.stan"
POISSON_SIM = TEST_STAN / "poisson_regression_sim_scaled.stan"

_X = np.random.default_rng(0).normal(size=(50, 3))
CASES = {
    "prior scale": (NORMAL_MEAN, NORMAL_MEAN_SIM, {"N": 20, "sigma": 1.0, "tau": 2.0}, 1.2),
    "hyperprior scale": (NOISE_SCALE, NOISE_SCALE_SIM, {"N": 20}, 2.0),
    "likelihood noise": (REGRESSION, REGRESSION_SIM, {"N": 50, "K": 3, "X": _X}, 1.25),
    "poisson rate": (POISSON, POISSON_SIM, {"N": 30, "K": 2, "X": _X[:30, :2]}, 2.0),
}
# What the message must say for each planted bug: the quantity and the way it moved.
EXPECTED = {"prior scale": "mu drifts inward after 10 prior transitions",
            "hyperprior scale": "tau_sq drifts",
            "likelihood noise": "sigma_sq drifts up after 10 posterior transitions",
            "poisson rate": "alpha drifts up after 10 posterior transitions"}
SAMPLER = SamplerSettings(pilot_chains=16, pilot_grid=6, pilot_steps=20)


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    compile_many([NORMAL_MEAN, NORMAL_MEAN_SIM, NOISE_SCALE, NOISE_SCALE_SIM, REGRESSION,
                  REGRESSION_SIM, POISSON, POISSON_SIM], workers=2)


def _check(case: str, factor: float, seed: int = 0):
    model, simulator, data, _ = CASES[case]
    return check_simulator(model, simulator, {**data, "factor": factor}, sampler=SAMPLER,
                           settings=CheckSettings(seed=seed))


# The test itself, on exchangeable pairs with a known answer.

def _reversible_pairs(rng, n: int, start_sd: float, rho: float = 0.6):
    """(start, end) of one step of a Gaussian AR(1) kernel, reversible w.r.t. N(0, 1)."""
    x0 = start_sd * rng.normal(size=n)
    x1 = rho * x0 + np.sqrt(1 - rho ** 2) * rng.normal(size=n)
    snap = lambda x: _Snapshot(x[:, None], -0.5 * x ** 2, np.zeros(n))  # noqa: E731
    return snap(x0), snap(x1)


def test_signed_rank_on_reversible_pairs_is_exact_under_the_null_and_has_power():
    # Start at the invariant distribution: (start, end) is exchangeable, so every test
    # rejects at level 0.05 with probability 0.05.  Over 400 replicates x 4 tests the
    # rejection count is Binomial(1600, 0.05) (not independent across the 4 tests of a
    # replicate, so widen the 4-sigma band by 2): mean 80, band 80 +- 2 * 4 * 8.7.
    rng = np.random.default_rng(1)
    rejections = 0
    for _ in range(400):
        before, after = _reversible_pairs(rng, 200, 1.0)
        rows = _stage_tests("prior", ["x"], before, after, np.zeros(1))
        rejections += sum(r["p_raw"] < 0.05 for r in rows)
    assert abs(rejections - 80) < 2 * 4 * np.sqrt(1600 * 0.05 * 0.95)
    # Start 1.2 times too wide: the chains move inward and the log density rises.
    before, after = _reversible_pairs(rng, 2000, 1.2)
    rows = {r["kind"]: r for r in _stage_tests("prior", ["x"], before, after, np.zeros(1))}
    assert rows["spread"]["p_raw"] < 1e-4 and rows["spread"]["direction"] == -1
    assert rows["log_prior"]["p_raw"] < 1e-4 and rows["log_prior"]["direction"] == 1


def test_signed_rank_ignores_chains_that_did_not_move():
    diff = np.r_[np.zeros(500), np.linspace(0.1, 1.0, 50)]
    p, direction, moved = _signed_rank(diff)
    assert direction == 1 and p < 1e-8 and moved == pytest.approx(50 / 550)
    assert _signed_rank(np.zeros(100)) == (1.0, 0, 0.0)


# Right and wrong simulators.

@pytest.mark.parametrize("case", list(CASES))
def test_right_simulator_passes(case):
    result = _check(case, 1.0)
    assert result.ran and result.passed, result.message
    assert result.min_p > 0.01
    assert {t["stage"] for t in result.tests} == {"prior", "joint"}
    assert min(t["moved"] for t in result.tests) > 0.5  # the kernels did move
    # The message says which kernel moved the chains and how far.
    assert "10 frozen NUTS transitions (tree depth <= 8, 10% rescue)" in result.message


@pytest.mark.parametrize("case", list(CASES))
def test_wrong_simulator_is_flagged_and_named(case):
    result = _check(case, CASES[case][3])
    assert result.ran and not result.passed
    assert result.min_p < 1e-4
    assert result.message.startswith("flagged: " + EXPECTED[case]), result.message
    assert "[10 frozen NUTS transitions" in result.message


def test_result_is_plain_json():
    record = _check("prior scale", 1.2).to_dict()
    back = json.loads(json.dumps(record))
    assert back["ran"] is True and back["passed"] is False
    assert back["p_values"]["prior:mu:spread"] < 0.01
    assert back["n_grad"] > 0 and back["seconds"] > 0


# Conventions are refused by stanc alone, before any C++ compile.

def test_conventions_refused_before_compiling(monkeypatch):
    def no_compile(*args, **kwargs):
        raise AssertionError("a C++ compile started before the conventions were checked")

    monkeypatch.setattr(compile_module, "compile_model", no_compile)
    monkeypatch.setattr("bread_stan.stan.simulator.compile_many", no_compile)
    with pytest.raises(PriorOnlyMissingError):
        compile_with_simulator([TEST_STAN / "no_prior_only.stan"], NORMAL_MEAN_SIM)
    with pytest.raises(StanDataError, match="has a parameters block"):
        compile_with_simulator([NORMAL_MEAN], NOISE_SCALE)
    with pytest.raises(StanDataError, match=r"does not generate the parameters \['tau_sq', "
                                            r"'sigma'\]"):
        compile_with_simulator([NOISE_SCALE], NORMAL_MEAN_SIM)
    with pytest.raises(StanDataError, match="hyper_given"):
        compile_with_simulator([NORMAL_MEAN], NORMAL_MEAN_SIM, hyper={"tau": 1.0})


# bread runs the check first; the CLI.

def test_bread_records_the_check_and_can_skip_it():
    data = {"N": 20, "sigma": 1.0, "tau": 2.0, "factor": 1.2}
    run = RunSettings(steps=(3,), chains=20, seed=1, progress=False)
    checked = bread(NORMAL_MEAN, NORMAL_MEAN_SIM, data, sampler=SAMPLER, run=run)
    record = checked.extra["simulator_check"]
    assert record["ran"] and not record["passed"] and "mu drifts inward" in record["message"]
    skipped = bread(NORMAL_MEAN, NORMAL_MEAN_SIM, data, sampler=SAMPLER,
                    run=RunSettings(steps=(3,), chains=20, seed=1, progress=False,
                                    check_simulator=False))
    assert skipped.extra["simulator_check"]["ran"] is False
    # The check does not touch the bounds' random streams.
    np.testing.assert_array_equal(checked.step(3).forward.log_estimates,
                                  skipped.step(3).forward.log_estimates)


def _write(tmp_path, name, data) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    return str(path)


def test_cli_check_exit_codes(tmp_path, capsys):
    model, simulator, data, factor = CASES["poisson rate"]
    right = _write(tmp_path, "right.json", {**data, "factor": 1.0})
    wrong = _write(tmp_path, "wrong.json", {**data, "factor": factor})
    base = ["check", str(model), "--simulator", str(simulator), "--prior-draws", "500",
            "--datasets", "50"]
    assert cli.main(base + ["--data", right]) == 0
    assert "passed" in capsys.readouterr().out
    assert cli.main(base + ["--data", wrong]) == 3
    assert "flagged: alpha drifts up" in capsys.readouterr().out
    # A program without prior_only is split automatically (issue 26); a bad --likelihood
    # is refused before anything is compiled.
    assert cli.main(["check", str(TEST_STAN / "no_prior_only.stan"), "--simulator",
                     str(simulator), "--data", right, "--likelihood", "z"]) == 2
    assert "--likelihood names z, not declared" in capsys.readouterr().err
    assert cli.main(base + ["--data", right, "--datasets", "5"]) == 2
    assert "at least 20" in capsys.readouterr().err


def test_cli_run_no_check(tmp_path, capsys):
    data = _write(tmp_path, "d.json", {"N": 20, "sigma": 1.0, "tau": 2.0, "factor": 1.2})
    args = ["run", str(NORMAL_MEAN), "--simulator", str(NORMAL_MEAN_SIM), "--data", data,
            "--steps", "3", "--chains", "20", "--path", "prior", "--quiet"]
    # The bounds are consistent (T = 3 cannot see a 1.2x prior scale); the check can.
    assert cli.main(args + ["--out", str(tmp_path / "a")]) == 3
    assert "simulator check: flagged: mu drifts inward" in capsys.readouterr().out
    # Without the check the run passes its checks (exit 4: it ran, not converged at T = 3)
    # and its headline says that the simulator was not checked.
    assert cli.main(args + ["--out", str(tmp_path / "b"), "--no-check"]) == 4
    printed = capsys.readouterr().out
    assert "simulator check was skipped" in printed and "simulator was not checked" in printed


def test_joint_stage_shares_the_prior_instance_only_when_the_prior_ignores_the_data(
        monkeypatch):
    # Sharing data set 0's prior_only = 1 instance across the data sets (it saves half
    # the model instances) leaves every test of the check bit-identical ...
    from bread_stan.stan.compile import compile_model
    from bread_stan.stan.tempered import StanTarget
    from bread_stan.workflows import simulator_check

    shared = _check("prior scale", 1.0)
    monkeypatch.setattr(simulator_check, "_share_prior",
                        lambda t, x, c, v: (StanTarget(c, v, threads=1), None))
    fresh = _check("prior scale", 1.0)
    assert [r["p_raw"] for r in shared.tests] == [r["p_raw"] for r in fresh.tests]
    monkeypatch.undo()
    # ... and is refused when the prior reads data that differ between data sets.
    compiled = compile_model(NORMAL_MEAN)
    values = {"N": 3, "y": [0.0, 1.0, 2.0], "sigma": 1.0, "tau": 2.0}
    target = StanTarget(compiled, values, threads=1)
    x = np.array([[0.5]])
    kept, prior = simulator_check._share_prior(target, x, compiled,
                                               {**values, "y": [5.0, 6.0, 7.0]})
    assert kept is target and prior is target.prior_model
    other, prior = simulator_check._share_prior(target, x, compiled, {**values, "tau": 3.0})
    assert prior is None and other is not target
    assert other.evaluate(x, gradient=False).log_prior != \
        target.evaluate(x, gradient=False).log_prior


def test_a_simulator_failing_on_a_check_draw_stops_before_the_pilot(monkeypatch):
    # One draw in 200 rejects: the run's own exact draw (seed 3) passes, and among the
    # 2,300 draws of the check some fail (all pass with probability 0.995^2300 = 1e-5).
    # The run must stop on them before it spends any time on the pilot.
    rare = NORMAL_MEAN_SIM.read_text().replace(
        "generated quantities {",
        "generated quantities {\n  if (uniform_rng(0, 1) < 0.005) reject(\"rare failure\");")
    assert "rare failure" in rare

    def no_pilot(*args, **kwargs):
        raise AssertionError("the pilot ran before the failing simulator was found")

    monkeypatch.setattr("bread_stan.workflows.auto_path.resolve_path", no_pilot)
    monkeypatch.setattr("bread_stan.workflows.saved_choice.resolve_path", no_pilot)
    monkeypatch.setattr("bread_stan.ais.path_kinds.tune_prior", no_pilot)
    data = {"N": 20, "sigma": 1.0, "tau": 2.0, "factor": 1.0}
    with pytest.raises(StanDataError, match="simulation failed .*rare failure"):
        bread(NORMAL_MEAN, rare, data, sampler=SAMPLER,
              run=RunSettings(steps=(3,), chains=4, seed=3, progress=False))


def test_bread_simulates_the_checks_and_the_pilots_draws_once(monkeypatch):
    # Every batch of simulator draws (n, seed) of a run is simulated once: the check's
    # three batches (centre, prior stage, joint stage) are drawn before the pilot so a
    # failing simulator stops early, then handed to the check; the pilot's draws serve
    # the path's fit and the check's kernel tuned at the prior (the Gaussian path).
    calls = []

    depth = [0]  # simulate_prior may call simulate: count the outermost call only

    def counting(method):
        def counted(self, n, seed, **kwargs):
            if depth[0] == 0:
                calls.append((n, seed))
            depth[0] += 1
            try:
                return method(self, n, seed, **kwargs)
            finally:
                depth[0] -= 1
        return counted

    # the prior's own draws (simulate_prior) and the joint's (simulate) alike
    monkeypatch.setattr(Simulator, "simulate", counting(Simulator.simulate))
    monkeypatch.setattr(Simulator, "simulate_prior", counting(Simulator.simulate_prior))
    run = RunSettings(steps=(3,), chains=20, seed=1, progress=False, path="gaussian")
    result = bread(NORMAL_MEAN, NORMAL_MEAN_SIM, {"N": 20, "sigma": 1.0, "tau": 2.0,
                                                  "factor": 1.0}, sampler=SAMPLER, run=run)
    assert result.extra["simulator_check"]["ran"]
    check = derived_seed(derived_seed(run.seed, Purpose.CHECK), Purpose.CHECK_PRIOR_DRAWS)
    pilot = derived_seed(run.seed, Purpose.PILOT)
    assert (CheckSettings().prior_draws, check) in calls
    assert (SAMPLER.pilot_chains, pilot) in calls
    repeated = {call: calls.count(call) for call in calls if calls.count(call) > 1}
    assert not repeated, f"simulated more than once: {repeated}"
    # The gradients before the first scored transition, beside the scored ones.
    setup = result.extra["setup_gradients"]
    assert setup["check"] == result.extra["simulator_check"]["n_grad"] > 0
    assert setup["pilots"] > 0
    assert setup["scored"] == sum(s.forward.n_grad + s.reverse.n_grad for s in result.steps)
    total = setup["pilots"] + setup["check"] + setup["scored"]
    assert setup["share"] == pytest.approx((setup["pilots"] + setup["check"]) / total)


def test_prior_max_depth_caps_the_prior_stages_trees_and_says_so():
    # A fixed cap on NUTS's depth at beta = 0 keeps the kernel reversible (the test
    # stays exact): a right simulator still passes, the check costs fewer gradients,
    # its prior stage moves differently, the joint stage not at all, and the message
    # names the cap.
    own, capped = (_check_capped(depth) for depth in (None, 1))
    assert own.passed and capped.passed
    assert capped.n_grad < own.n_grad
    assert "tree depth <= 1 at beta = 0" in capped.message
    assert capped.settings["prior_max_depth"] == 1
    stage = lambda check, name: [r["p_raw"] for r in check.tests if r["stage"] == name]  # noqa
    assert stage(own, "prior") != stage(capped, "prior")
    assert stage(own, "joint") == stage(capped, "joint")
    with pytest.raises(Exception, match="prior_max_depth"):
        CheckSettings(prior_max_depth=0)


def _check_capped(depth):
    model, simulator, data, _ = CASES["prior scale"]
    return check_simulator(model, simulator, {**data, "factor": 1.0}, sampler=SAMPLER,
                           settings=CheckSettings(prior_max_depth=depth))

"""The real-data protocol's budget (``protocol --budget M``, ``ProtocolSettings.budget_minutes``).

posteriordb's ``sir`` (an ODE model) reached the sweep's protocol through the fixed-values
route and timed out twice, at 19 and at 40 minutes: its pilot alone took 20.5 minutes and
its reverse starts 8.5 more, and the protocol had no budget that could stop either, so
the user learnt nothing from 59 minutes.  Here every set-up loop keeps pace with the
protocol's deadline, the step counts start only where the pilot's pace predicts they end
in time, and neither changes a number.  Models: the protocol tests' regression on NHEFS
rows (``tests/test_protocol.py``) and the flat-prior regression of the fixed route.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from bread_stan.cli import main as cli
from bread_stan.deadline import OverBudget, set_up_by
from bread_stan.errors import InputError
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.stan.compile import compile_many
from bread_stan.stan.tempered import StanTarget
from bread_stan.workflows import protocol_stages
from bread_stan.workflows.fit import FitSettings, fit
from bread_stan.workflows.protocol import ProtocolSettings, protocol
from bread_stan.workflows.protocol_budget import not_started_sentence, steps_to_start
from bread_stan.workflows.settings import RunSettings, SamplerSettings

from resume_guard import forbid_recomputing

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = Path(__file__).resolve().parent / "stan"
LINREG = ROOT / "stan_models" / "linear_regression.stan"
LINREG_SIM = ROOT / "stan_models" / "linear_regression_sim.stan"
NORMAL_MEAN = TEST_STAN / "normal_mean.stan"
FLAT_SCALE = TEST_STAN / "flat_regression_scale.stan"
SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                          pilot_steps=20)
SETTINGS = ProtocolSettings(s_sweep=(0, 10, 50), replicates=2,
                            fit=FitSettings(chains=3, warmup=150, draws=100))


@pytest.fixture(scope="module")
def compiled():
    compile_many([LINREG, LINREG_SIM, NORMAL_MEAN], workers=2)


def _linreg_data(n: int = 60) -> dict:
    from bread_stan.stan import datasets
    d = datasets.load("nhefs")
    return {"N": n, "K": d["K"], "X": d["X"][:n], "y": d["y"][:n]}


def test_step_counts_start_while_their_predicted_seconds_fit_in_the_time_left():
    """Exact arithmetic: a T costs (T - 1) x runs missing x seconds a transition.  With
    100 s left and 2 runs at 0.05 s, T = 10 and 100 predict 0.9 and 9.9 s, T = 1000 99.9 s
    more: it is left out and recorded.  A T with nothing missing costs nothing; without a
    budget every T runs and a stale record is removed; when not even the first fits, the
    protocol stops as a set-up that would overrun does (exit 4), naming the budget it
    needs.  Breaks tried: each T judged alone instead of the running sum (99.9 s fits in
    100, 99.9 + 10.8 does not), the stale record kept: the test fails on each."""
    extra = {"budget": {"not_started": [5]}}
    assert steps_to_start((10, 100), lambda T: 2, 0.05, extra, "m", None) == [10, 100]
    assert "budget" not in extra     # no budget: no record, not a stale one
    with set_up_by(time.monotonic() + 100.0, 600.0):
        kept = steps_to_start((10, 100, 1000), lambda T: 2, 0.05, extra, "m", 10.0)
        assert kept == [10, 100]
        record = extra["budget"]
        assert record["not_started"] == [1000] and record["minutes"] == 10.0
        assert record["predicted_seconds"]["1000"] == pytest.approx(99.9)
        assert 99.0 < record["seconds_left"] <= 100.0
        # T = 1000 already finished (nothing missing): it costs nothing and is kept
        assert steps_to_start((10, 100, 1000), lambda T: 0 if T == 1000 else 2, 0.05,
                              extra, "m", 10.0) == [10, 100, 1000]
        assert extra["budget"]["not_started"] == []
        with pytest.raises(OverBudget, match=r"10 distributions alone would take about "
                           r"3 minutes .* the protocol needs a budget above .*or no "
                           r"--budget"):
            steps_to_start((10, 100), lambda T: 2, 10.0, extra, "m", 10.0)
    sentence = not_started_sentence(record, finished=2)
    assert sentence.startswith("Within the budget of 10 minutes, step count 1000 was not "
                               "started (1000 distributions: about")
    assert "S-sweep" not in sentence and "S-sweep" in not_started_sentence(record, 1)
    assert not_started_sentence(None, 2) is None


@pytest.mark.stan
def test_the_fit_and_the_reverse_starts_keep_pace_with_the_deadline(compiled):
    """Two set-up loops of the protocol that had no stop: the fit on the real data stops
    once the budget is spent (not on its pace: sir's warmup made 3 of 1,000 iterations in
    40 s, a pace of 3.7 hours, and the fit ended in 189 s), and the reverse starts' sweep
    (8.5 minutes on sir) once its pace would overrun; 50 ms are left of a 1 s budget here
    and each loop takes far longer.
    Breaks tried: keep_pace removed from the fit's warmup and draws loops, from the
    sweep's loop; the stop once the budget is spent removed: the test fails on each."""
    from bread_stan.stan.compile import compile_model
    target = StanTarget(compile_model(NORMAL_MEAN), {"N": 20, "y": np.linspace(-1, 1, 20),
                                                   "sigma": 1.0, "tau": 2.0})
    inits = np.zeros((2, target.dim))
    settings = FitSettings(chains=2, warmup=400, draws=400)
    with set_up_by(time.monotonic() + 0.05, 1.0), pytest.raises(
            OverBudget, match=r"the fit on the real data had not ended when it was spent "
            r"\(\d+ of 800 after .*needs a budget above 1 s, or fixed step"):
        fit(target, inits, settings=settings, seed=1)
    kernel, params = HMC(), HMCParams(step_size=0.1, n_leapfrog=5)
    with set_up_by(time.monotonic() + 0.05, 1.0, "no --budget"), pytest.raises(
            OverBudget, match=r"the reverse starts' sweep alone would take .*or no --budget"):
        protocol_stages.reverse_starts(target, kernel, params, np.zeros(target.dim), 4,
                                       (10, 10 ** 6), seed=1)


@pytest.mark.stan
def test_a_budget_leaves_out_the_step_counts_that_cannot_end_in_it_and_changes_no_number(
        compiled, tmp_path, monkeypatch):
    """With 2 minutes the set-up and T = 5, 20 run; T = 10^6, predicted at hours by the
    pilot's pace, is not started, and the report says so.  T = 5 and 20 give the numbers
    of the same run without a budget; rerun without a budget and only (5, 20), the same
    folder reruns nothing and the record of what the budget left out is gone.  Break
    tried: load_or_tune's file name ignored again (the real data's estimates differ)."""
    data = _linreg_data()
    run = RunSettings(steps=(5, 20), chains=24, seed=4, progress=False)
    free = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER, run=run, settings=SETTINGS)
    out = tmp_path / "budget"
    budgeted = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER,
                        run=RunSettings(steps=(5, 20, 10 ** 6), chains=24, seed=4,
                                        progress=False),
                        settings=ProtocolSettings(**{**SETTINGS.__dict__,
                                                     "budget_minutes": 2.0}),
                        out_dir=out)
    assert budgeted.steps == [5, 20]
    # Each data set's kernel in its own file.  Before, every name in a folder went to its
    # tuning.json: the real data's forward runs took the simulated data's kernel, and
    # every replicate the first one's, whenever the protocol had an out_dir (always, from
    # the command line), so its numbers differed from the same run without one.
    assert {p.name for p in out.glob("tuning*.json")} >= {"tuning_sim.json",
                                                          "tuning_real.json"}
    assert {p.name for p in (out / "replicates").glob("tuning*.json")} == {
        "tuning_r1.json", "tuning_r2.json"}
    assert budgeted.extra["budget"]["not_started"] == [10 ** 6]
    for T in (5, 20):
        np.testing.assert_array_equal(budgeted.sim.step(T).forward.log_estimates,
                                      free.sim.step(T).forward.log_estimates)
        np.testing.assert_array_equal(budgeted.real_forward[T].log_estimates,
                                      free.real_forward[T].log_estimates)
        np.testing.assert_array_equal(budgeted.replicate_forward[2][T].log_estimates,
                                      free.replicate_forward[2][T].log_estimates)
    report = json.loads((out / "summary.json").read_text())
    assert report["extra"]["budget"]["not_started"] == [10 ** 6]

    forbid_recomputing(monkeypatch)
    again = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER, run=run, settings=SETTINGS,
                     out_dir=out)
    assert again.steps == [5, 20] and "budget" not in again.extra


@pytest.mark.stan
def test_the_cli_stops_a_set_up_past_the_budget_in_one_line_and_refuses_a_bad_one(
        compiled, tmp_path, capsys):
    """A budget of 0.001 minutes: the first set-up loop (the simulator check) stops, exit 4,
    one line naming the budget the set-up needs and the other way out; no traceback.
    A budget that leaves one step count: not ok, exit 4 (below).
    A budget that is no positive number is argparse's one-line error; the protocol's
    --budget never reaches RunSettings (where it would need --steps auto)."""
    data = tmp_path / "real.json"
    d = _linreg_data(40)
    data.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in d.items()}))
    args = ["protocol", str(LINREG), "--simulator", str(LINREG_SIM), "--data", str(data),
            "--steps", "5,15", "--chains", "16", "--sweep", "0,10", "--fit-warmup", "100",
            "--fit-draws", "50", "--leapfrog", "5", "--replicates", "2", "--quiet",
            "--out", str(tmp_path / "out")]
    code = cli.main([*args, "--budget", "0.001"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("bread-stan")]
    assert code == 4 and len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("bread-stan protocol: not converged within the budget of")
    assert "the set-up needs a budget above" in lines[0] and lines[0].endswith("no --budget")
    # Only T = 5 fits (10^6 would take hours at the pilot's pace): one step count cannot
    # judge the curves or the S-sweep, so the protocol is not ok and exits 4 as a run
    # stopped by its budget does, saying why (break tried: `unjudged` always empty).
    code = cli.main([*args[:7], "5,1000000", *args[8:-1], str(tmp_path / "one"),
                     "--budget", "2"])
    captured = capsys.readouterr()
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert code == 4 and not summary["ok"]
    assert [r["steps"] for r in summary["summary"]] == [5]
    assert "!! the budget left out step count(s) 1000000: with fewer than two finished, the " \
        "agreement score and the S-sweep test did not run" in captured.out
    with pytest.raises(SystemExit) as bad:
        cli.main([*args, "--budget", "-3"])
    assert bad.value.code == 2
    with pytest.raises(InputError, match="budget_minutes must be a positive number"):
        ProtocolSettings(budget_minutes=0)
    with pytest.raises(InputError, match="budget_minutes must be a positive number"):
        ProtocolSettings(budget_minutes=True)


@pytest.mark.stan
def test_the_fixed_route_leaves_out_what_the_budget_cannot_hold(compiled, tmp_path, capsys):
    """The route sir took (parameters fixed at fitted values): the same gating, and the
    report's sentence in the printed verdict."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2))
    y = 0.3 + X @ np.array([0.5, -1.0]) + 0.7 * rng.normal(size=40)
    data = tmp_path / "real.json"
    data.write_text(json.dumps({"N": 40, "K": 2, "X": X.tolist(), "y": y.tolist()}))
    code = cli.main(["protocol", str(FLAT_SCALE), "--data", str(data), "--steps",
                     "2,5,1000000", "--chains", "20", "--sweep", "0,10,50", "--replicates",
                     "2", "--fit-warmup", "150", "--fit-draws", "150", "--kernel", "hmc",
                     "--leapfrog", "5", "--pilot-chains", "12", "--quiet", "--budget", "3",
                     "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code in (0, 3)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["extra"]["budget"]["not_started"] == [1000000]
    assert [r["steps"] for r in summary["summary"]] == [2, 5]
    assert "Within the budget of 3 minutes, step count 1000000 was not started" in out

"""The BREAD workflow end to end on a conjugate Stan model with a closed-form log p(y).

Model: y_i ~ normal(mu, sigma), mu ~ normal(0, tau), sigma and tau known, so
y ~ MVN(0, sigma^2 I + tau^2 11') exactly.  Tolerances are 3.5 Monte Carlo
standard errors (two-sided miss probability about 5e-4 per comparison).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bread_stan.cli import main as cli
from bread_stan.cli.arguments import build_parser
from bread_stan.workflows import bread as workflow
from bread_stan.stan.compile import compile_many
from bread_stan.ais.results import BreadResult
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread, compare

TEST_STAN = Path(__file__).resolve().parent / "stan"
MODEL = TEST_STAN / "normal_mean.stan"
SIMULATOR = TEST_STAN / "normal_mean_sim.stan"
WRONG_SIMULATOR = TEST_STAN / "normal_mean_sim_wrong.stan"
DATA = {"N": 20, "sigma": 1.0, "tau": 2.0}
Z = 3.5

SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                          pilot_steps=20)
RUN = RunSettings(steps=(3, 30, 300), chains=200, seed=1, progress=False, path="prior")


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    compile_many([MODEL, SIMULATOR, WRONG_SIMULATOR], workers=2)


def _exact_log_ml(y: np.ndarray) -> float:
    n = y.size
    cov = DATA["sigma"] ** 2 * np.eye(n) + DATA["tau"] ** 2 * np.ones((n, n))
    return stats.multivariate_normal(np.zeros(n), cov).logpdf(y)


@pytest.fixture(scope="module")
def result():
    return bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RUN)


def test_sandwich_contains_the_exact_log_ml_and_the_bound_shrinks(result):
    exact = _exact_log_ml(np.asarray(result.extra["simulated_data"]["y"]))
    table = result.summary().set_index("steps")
    for s in result.steps:
        L, U = s.forward.log_estimates, s.reverse.log_estimates
        n = L.size
        # E[L] <= log p(y) <= E[U]: the sample means, up to their standard errors.
        assert L.mean() <= exact + Z * L.std(ddof=1) / np.sqrt(n)
        assert U.mean() >= exact - Z * U.std(ddof=1) / np.sqrt(n)
        row = table.loc[s.n_steps]
        assert row.log_ml_lower <= exact + Z * row.log_ml_lower_se
        assert row.log_ml_upper >= exact - Z * row.log_ml_upper_se
        assert row.consistent
        # The bound is a divergence: non-negative up to its own interval.
        assert row.bound_ci_high >= 0
    assert table.bound.is_monotonic_decreasing
    assert table.bound[300] < 0.05 * table.bound[3]
    # With 300 distributions the sandwich is narrow on this easy target (about 0.2 nats
    # at seed 1; the bound, about 1 nat, is mean-based and wider).
    assert table.log_ml_upper[300] - table.log_ml_lower[300] < 0.5


def test_result_records_settings_truth_and_draws(result):
    assert result.settings["sampler"]["kernel"] == "hmc"
    assert set(result.extra["truth"]) == {"mu"}
    assert "tuning" in result.extra
    s = result.step(300)
    assert s.draws["mu"].shape == (RUN.chains,)
    # Forward draws at T = 300 are close to exact posterior draws: compare moments.
    y = np.asarray(result.extra["simulated_data"]["y"])
    precision = y.size / DATA["sigma"] ** 2 + 1 / DATA["tau"] ** 2
    mean, sd = y.sum() / DATA["sigma"] ** 2 / precision, precision ** -0.5
    assert abs(s.draws["mu"].mean() - mean) < Z * sd / np.sqrt(RUN.chains)


def test_same_seed_same_numbers_and_seed_matters(result):
    again = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER,
                  run=RunSettings(steps=(3,), chains=200, seed=1, progress=False,
                                  path="prior"))
    np.testing.assert_array_equal(again.step(3).forward.log_estimates,
                                  result.step(3).forward.log_estimates)
    np.testing.assert_array_equal(again.step(3).reverse.log_estimates,
                                  result.step(3).reverse.log_estimates)
    other = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER,
                  run=RunSettings(steps=(3,), chains=200, seed=2, progress=False,
                                  path="prior"))
    assert not np.array_equal(other.step(3).forward.log_estimates,
                              result.step(3).forward.log_estimates)


def test_mismatched_simulator_is_flagged_and_no_bound_is_reported():
    # The wrong simulator's "truth" is a prior draw unrelated to the data; with few
    # distributions the forward chains still sit near the prior, so reverse chains
    # started from it score far below them (p about 1e-23 at seed 1).  The right
    # simulator passes the same check at every step count (test above).
    wrong = bread(MODEL, WRONG_SIMULATOR, DATA, sampler=SAMPLER,
                  run=RunSettings(steps=(3,), chains=100, seed=1, progress=False))
    assert not wrong.consistent
    row = wrong.summary().iloc[0]
    assert not row.consistent and row.tail_p < 1e-6 and row.sign_p < 1e-6
    assert np.isnan(row.bound) and row.mean_upper < row.mean_lower
    assert "simulator" in wrong.problems()[0]
    # The simulator check, run by default, flags it as well.
    assert not wrong.extra["simulator_check"]["passed"]
    assert wrong.problems()[-1].startswith("simulator check:") and cli._exit_code(wrong) == 3


def test_multi_draw_run_splits_chains_over_problems_each_on_its_own_data(tmp_path):
    run = RunSettings(steps=(3, 30), chains=90, seed=2, exact_draws=3, progress=False)
    multi = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run, out_dir=tmp_path)
    step = multi.step(30)
    assert step.exact_draws == 3 and step.bound().method == "problems"
    problems = multi.extra["problems"]
    assert len({json.dumps(p["truth"]) for p in problems}) == 3
    # Each problem's chains ran on its own simulated data: its estimates bracket its
    # own exact log p(y*_k) (Z standard errors), and not the others'.
    for k, p in enumerate(problems):
        exact = _exact_log_ml(np.asarray(p["simulated_data"]["y"]))
        L = step.forward.log_estimates[step.forward.problems == k]
        U = step.reverse.log_estimates[step.reverse.problems == k]
        assert L.size == U.size == 30
        assert L.mean() <= exact + Z * L.std(ddof=1) / np.sqrt(L.size)
        assert U.mean() >= exact - Z * U.std(ddof=1) / np.sqrt(U.size)
    # Problem 1 is the single-draw run's problem; the rest are new draws.
    assert problems[0]["truth"] == bread(
        MODEL, SIMULATOR, DATA, sampler=SAMPLER,
        run=RunSettings(steps=(3,), chains=4, seed=2, progress=False)).extra["truth"]
    back = BreadResult.load(tmp_path)
    np.testing.assert_array_equal(back.step(30).forward.problems, step.forward.problems)
    assert back.summary().equals(multi.summary())
    assert not back.verdicts()[-1].conditional
    with pytest.raises(ValueError, match="exact_draws"):
        RunSettings(chains=10, exact_draws=11)


def test_export_round_trips(result, tmp_path):
    result.save(tmp_path)
    back = BreadResult.load(tmp_path)
    for a, b in zip(result.steps, back.steps):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
        np.testing.assert_array_equal(a.draws["mu"], b.draws["mu"])
    assert back.summary().equals(result.summary())

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [row["steps"] for row in summary["summary"]] == [3, 30, 300]
    assert summary["consistent"] is True

    import xarray as xr
    idata = result.to_inference_data()  # InferenceData (ArviZ 0.x) or DataTree (1.x)
    idata.to_netcdf(tmp_path / "draws.nc")
    loaded = xr.open_datatree(tmp_path / "draws.nc")  # how ArviZ 1.x reads; 0.x files too
    np.testing.assert_array_equal(loaded.posterior["mu"].values[0], result.step(300).draws["mu"])
    assert loaded.posterior.attrs["n_steps"] == 300
    np.testing.assert_allclose(loaded.posterior.attrs["jeffreys_bound"],
                               result.step(300).bound().estimate)

    frame = result.to_dataframe()
    assert len(frame) == 2 * RUN.chains * len(RUN.steps)
    figures = result.plot()
    assert set(figures) == {"estimates", "bound", "gap_by_temperature"}


def test_compare_shares_one_simulated_data_set_and_truth(tmp_path):
    run = RunSettings(steps=(3,), chains=20, seed=4, progress=False)
    results = compare({"a": MODEL, "b": str(MODEL)}, SIMULATOR, DATA, sampler=SAMPLER,
                      run=run, out_dir=tmp_path)
    a, b = results["a"], results["b"]
    assert a.extra["truth"] == b.extra["truth"]
    assert a.extra["simulated_data"] == b.extra["simulated_data"]
    np.testing.assert_array_equal(a.step(3).forward.log_estimates,
                                  b.step(3).forward.log_estimates)
    assert (tmp_path / "a" / "run.json").exists() and (tmp_path / "b" / "run.json").exists()


def test_compare_runs_each_program_on_the_pilot_that_chose_its_path(tmp_path):
    """path="auto" settles every program's path with its pilots before the tasks run; an
    in-process task then runs on that pilot (no tuning time recorded, as ``bread`` hands
    it on) and gives bit for bit what ``bread`` gives with the same settings."""
    run = RunSettings(steps=(3,), chains=20, seed=4, progress=False, path="auto")
    results = compare({"a": MODEL}, SIMULATOR, DATA, sampler=SAMPLER, run=run,
                      out_dir=tmp_path / "compare")
    alone = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run, out_dir=tmp_path / "one")
    a = results["a"]
    assert a.extra["path_choice"]["path"] == alone.extra["path_choice"]["path"] == "gaussian"
    assert "tuning_seconds" not in a.extra and "tuning_seconds" not in alone.extra
    np.testing.assert_array_equal(a.step(3).forward.log_estimates,
                                  alone.step(3).forward.log_estimates)
    np.testing.assert_array_equal(a.step(3).reverse.log_estimates,
                                  alone.step(3).reverse.log_estimates)


# These runs are short: they finish and pass their checks, but do not converge.
NOT_CONVERGED = 4


def _cli_args(out: Path, steps: str, path: str = "prior") -> list[str]:
    data = out.parent / "data.json"
    data.write_text(json.dumps(DATA))
    return ["run", str(MODEL), "--simulator", str(SIMULATOR), "--data", str(data),
            "--steps", steps, "--chains", "30", "--seed", "3", "--leapfrog", "5",
            "--path", path, "--out", str(out), "--quiet"]


@pytest.mark.parametrize("path", ["prior", "auto"])
def test_cli_interrupt_and_resume_give_the_uninterrupted_results(tmp_path, monkeypatch, path):
    """On the prior path (not converged at T = 30) and on the path "auto" takes here, the
    Gaussian one (converged), whose pilots run again on the resume."""
    whole = tmp_path / "whole"
    code = cli.main(_cli_args(whole, "3,30", path))
    assert code == (NOT_CONVERGED if path == "prior" else 0)
    assert (whole / "report.html").exists() and (whole / "summary.csv").exists()
    taken = BreadResult.load(whole).extra["path_choice"]["path"]
    assert taken == ("prior" if path == "prior" else "gaussian")

    # Each step count runs as one batch of both directions (engine.forward_and_reverse).
    real_run, calls = workflow.engine.forward_and_reverse, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(*args, **kwargs)

    parts = tmp_path / "parts"
    monkeypatch.setattr(workflow.engine, "forward_and_reverse", interrupted)
    assert cli.main(_cli_args(parts, "3,30", path)) == 130
    assert [s.n_steps for s in BreadResult.load(parts).steps] == [3]
    monkeypatch.setattr(workflow.engine, "forward_and_reverse", real_run)
    assert cli.main(_cli_args(parts, "3,30", path)) == code

    for a, b in zip(BreadResult.load(whole).steps, BreadResult.load(parts).steps, strict=True):
        assert a.n_steps == b.n_steps
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)


def test_cli_refuses_to_mix_runs_with_different_settings(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(_cli_args(out, "3")) == NOT_CONVERGED
    args = _cli_args(out, "3")
    args[args.index("--seed") + 1] = "4"
    assert cli.main(args) == 2
    assert "different settings" in capsys.readouterr().err


def test_cli_report_regenerates_from_saved_results(tmp_path):
    out = tmp_path / "run"
    assert cli.main(_cli_args(out, "3")) == NOT_CONVERGED
    (out / "report.html").unlink()
    assert cli.main(["report", str(out)]) == NOT_CONVERGED
    assert (out / "report.html").exists()


def test_a_model_without_prior_only_is_split_as_the_command_line_splits_it():
    """From Python as from the command line, a program without the prior_only flag is
    split into prior and likelihood (it used to be refused); the split is recorded."""
    res = bread(TEST_STAN / "no_prior_only.stan", SIMULATOR, DATA, sampler=SAMPLER, run=RUN)
    record = res.extra["programs"]
    assert record["split"] == "automatic" and record["modelled_data"] == ["y"], record


def test_adaptive_schedule_and_dense_metric_in_the_workflow():
    """``bread`` with the adaptive schedule and a dense metric: the betas of each step
    are the pilot's (rebuilt from the saved tuning record) and the sandwich still
    contains the exact log p(y)."""
    from bread_stan.ais.betas import ScheduleSpec
    from bread_stan.ais.tuning import TunedKernel

    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                              pilot_steps=20, metric="dense")
    run = RunSettings(steps=(30,), chains=100, seed=2, progress=False,
                      schedule=ScheduleSpec("adaptive"), path="prior")
    res = bread(MODEL, SIMULATOR, DATA, sampler=sampler, run=run)
    tuned = TunedKernel.from_dict(res.extra["tuning"])
    assert tuned.dense
    step = res.step(30)
    np.testing.assert_array_equal(step.betas, ScheduleSpec("adaptive").betas(30, tuned))
    exact = _exact_log_ml(np.asarray(res.extra["simulated_data"]["y"]))
    row = res.summary().set_index("steps").loc[30]
    assert row.log_ml_lower <= exact + Z * row.log_ml_lower_se
    assert row.log_ml_upper >= exact - Z * row.log_ml_upper_se
    from bread_stan.reporting.report import _sections
    schedule = dict(_sections(res))["Schedule and kernel"]
    assert "**adaptive**" in schedule and "**dense**" in schedule
    args = build_parser().parse_args(["run", str(MODEL), "--simulator", str(SIMULATOR), "--schedule",
                                     "adaptive", "--metric", "auto"])
    sampler, run = cli._settings(args)
    assert run.schedule.kind == "adaptive" and sampler.metric == "auto"

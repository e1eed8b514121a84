"""BreadResult: summaries, persistence round trips, exports and the report files."""

import json

import numpy as np
import pytest

from bread_stan.reporting.report import write_report
from bread_stan.ais.results import BreadResult, DirectionResult, StepResult, SubjectiveResult


def _step(n_steps, rng, gap, shift=0.0, n=30):
    L = -10.0 - gap / 2 + 0.3 * rng.standard_normal(n)
    U = -10.0 + gap / 2 - shift + 0.3 * rng.standard_normal(n)
    at = np.array([n_steps // 2, n_steps - 1])
    cum_f = np.stack([L / 2, L], axis=1)
    cum_r = np.stack([U / 3, U], axis=1)
    betas = np.linspace(0, 1, n_steps)
    return StepResult(
        n_steps,
        DirectionResult(L, 1.0 * n_steps / 10, 100 * n_steps, {"accept": 0.8}, cum_f, at),
        DirectionResult(U, 1.1 * n_steps / 10, 110 * n_steps, {"accept": 0.7}, cum_r, at),
        betas, {"mu": rng.standard_normal((n, 2)), "sigma": np.exp(rng.standard_normal(n))})


@pytest.fixture
def result():
    rng = np.random.default_rng(0)
    steps = [_step(10, rng, 4.0), _step(100, rng, 1.0), _step(1000, rng, 0.2)]
    return BreadResult("toy", {"seed": 1, "steps": [10, 100, 1000]}, steps,
                       {"known_log_ml_bounds": {"upper": -9.9}})


def test_summary_rows_and_bound(result):
    table = result.summary()
    assert list(table["steps"]) == [10, 100, 1000]
    s = result.step(100)
    assert table.loc[1, "bound"] == pytest.approx(
        s.reverse.log_estimates.mean() - s.forward.log_estimates.mean())
    assert table["consistent"].all()
    assert "kl_q_p" in table.columns and "kl_p_q" not in table.columns


def test_a_contradicted_known_bound_is_a_problem_not_a_negative_kl():
    """Forward means near -10.1 at 1000 steps: an 'upper bound' of -11 on log p(y) is
    no bound there; a lower bound of -20 is fine everywhere."""
    rng = np.random.default_rng(0)
    steps = [_step(10, rng, 4.0), _step(1000, rng, 0.2)]
    result = BreadResult("toy", {}, steps, {"known_log_ml_bounds": {"upper": -11.0,
                                                                     "lower": -20.0}})
    table = result.summary()
    assert table.loc[0, "kl_q_p"] == pytest.approx(-11.0 - table.loc[0, "mean_lower"])
    assert np.isnan(table.loc[1, "kl_q_p"]) and (table["kl_p_q"] > 0).all()
    [problem] = result.problems()
    assert problem.startswith("1000 steps: the given upper bound -11 on log p(y*)")
    assert "no KL(q||p) bound is reported" in problem


def test_gap_by_temperature_adds_up_to_the_bound(result):
    s = result.step(1000)
    gaps = s.gap_by_temperature()
    assert gaps["gap"].sum() == pytest.approx(s.bound().estimate)


def test_inconsistent_step_is_flagged_and_not_reported_as_divergence():
    rng = np.random.default_rng(1)
    bad = BreadResult("bad", {}, [_step(10, rng, 0.0, shift=40.0)])
    assert not bad.consistent
    assert np.isnan(bad.summary().loc[0, "bound"])
    assert "LIKELY BUG" in bad.problems()[0]


def test_save_load_round_trip(result, tmp_path):
    result.save(tmp_path)
    back = BreadResult.load(tmp_path)
    assert [s.n_steps for s in back.steps] == [10, 100, 1000]
    for a, b in zip(result.steps, back.steps):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.cumulative, b.reverse.cumulative)
        np.testing.assert_array_equal(a.draws["mu"], b.draws["mu"])
        assert a.forward.n_grad == b.forward.n_grad
    assert back.summary().equals(result.summary())
    assert json.loads((tmp_path / "summary.json").read_text())["consistent"] is True


def test_a_subjective_result_reloads_as_one_and_a_bread_result_does_not(result, tmp_path):
    """The result's type, not a key of ``extra``, tells a subjective run apart."""
    info = {"suspect": True, "meaning": "the reference is suspect", "base": {"kind": "prior"}}
    subjective = SubjectiveResult("toy", result.settings, result.steps,
                                  {**result.extra, "subjective": info})
    subjective.save(tmp_path / "s")
    result.save(tmp_path / "b")
    back = BreadResult.load(tmp_path / "s")
    assert type(back) is SubjectiveResult and back.suspect and back.base_kind == "prior"
    assert back.meaning in back.headline()
    assert type(BreadResult.load(tmp_path / "b")) is BreadResult
    assert back.summary().equals(result.summary())


def test_tidy_frame_and_inference_data(result, tmp_path):
    frame = result.to_dataframe()
    assert len(frame) == 3 * 60 and set(frame["direction"]) == {"forward", "reverse"}
    idata = result.to_inference_data()
    assert idata.posterior["mu"].shape == (1, 30, 2)
    assert idata.posterior.attrs["n_steps"] == 1000
    idata.to_netcdf(str(tmp_path / "draws.nc"))
    assert (tmp_path / "draws.nc").stat().st_size > 0


def test_report_writes_figures_and_self_contained_html(result, tmp_path):
    html_path = write_report(result, tmp_path, truth=-10.0)
    for name in ("estimates.png", "bound.png", "gap_by_temperature.png", "report.md",
                 "summary.csv"):
        assert (tmp_path / name).stat().st_size > 0
    page = html_path.read_text()
    assert page.count("data:image/png;base64,") == 3
    assert "Jeffreys" in (tmp_path / "report.md").read_text()

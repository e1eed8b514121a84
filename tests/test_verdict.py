"""The verdict layer: no negative or absurd bound passes as a result, intervals say what
they cover, and the words of the verdict are true.

Known answers come from numpy conjugate regressions (exact prior and posterior draws,
closed-form log p(y)) run through the real AIS engine, and from synthetic per-chain
estimates whose verdict is known by construction.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bread_stan.ais import engine
from bread_stan.ais import runs
from bread_stan.ais.estimators import jeffreys_bound, sign_test
from bread_stan.ais.results import BreadResult, DirectionResult, StepResult
from bread_stan.ais.verdict import VerdictSettings
from bread_stan.cli import main as cli
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.exact.coverage import multi_draw_coverage, single_draw_coverage
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.reporting import plots
from bread_stan.reporting.report import write_report

# The conjugate regression: HMC(step 0.15, L = 10); and the default kernel,
# NUTS, as scripts/studies/verdict_calibration.py runs it.
PARAMS = HMCParams(step_size=0.15, n_leapfrog=10)
KERNELS = {"hmc": (HMC(), PARAMS),
           "nuts": (NUTS(), NUTSParams(step_size=0.15, max_depth=8, rescue_prob=0.1))}


def _conjugate_step(steps: int, seed: int, chains: int = 100,
                    kernel: str = "hmc") -> StepResult:
    """Forward and reverse AIS on a small conjugate regression (bound about 1 nat)."""
    model, w = simulate_regression(20, 2, noise_sd=0.5, seed=seed)
    rng = np.random.default_rng(seed)
    sampler, params = KERNELS[kernel]
    return runs.run(model, sampler, model.sample_prior(rng, chains), w, seed=seed,
                      path=params, config=engine.RunConfig(steps=(steps,))).steps[0]


def _shifted(step: StepResult, shift: float) -> StepResult:
    r = step.reverse
    return StepResult(step.n_steps, step.forward,
                      DirectionResult(r.log_estimates - shift, r.wall_time, r.n_grad),
                      step.betas)


def _synthetic(L, U, n_steps=100) -> StepResult:
    return StepResult(n_steps, DirectionResult(np.asarray(L, float), 1.0, 10),
                      DirectionResult(np.asarray(U, float), 1.0, 10))


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("shift", [  # the larger shifts in the slow tier (the fast tier's minute)
    3.0, pytest.param(8.0, marks=pytest.mark.slow), pytest.param(15.0, marks=pytest.mark.slow)])
def test_negative_bounds_are_flagged_as_likely_bugs(shift, kernel):
    # The review's finding: with the reverse estimates shifted 3, 8 or 15 nats below
    # the forward ones the summary printed B = -1.9, -7.0, -14.1 as consistent.
    step = _shifted(_conjugate_step(100, seed=3, kernel=kernel), shift)
    result = BreadResult("shifted", {}, [step])
    verdict = result.verdicts()[0]
    assert verdict.bound.estimate < 0
    assert verdict.status == "inconsistent" and verdict.sign.negative
    assert "LIKELY BUG" in verdict.message and "sign test" in verdict.message
    if shift < 15:
        # The assumption-free test cannot see these; the sign test is what catches them.
        assert verdict.tail.passed
    row = result.summary().iloc[0]
    assert np.isnan(row["bound"]) and row["raw_bound"] < 0 and not row["consistent"]
    assert result.status == "inconsistent" and cli._exit_code(result) == 3
    assert result.headline().startswith("CHECK FAILED")


@pytest.mark.slow
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_the_same_runs_unshifted_are_consistent(kernel):
    for seed in range(3, 8):
        step = _conjugate_step(100, seed=seed, kernel=kernel)
        verdict = BreadResult("ok", {}, [step]).verdicts()[0]
        assert verdict.consistent, verdict.message


@pytest.mark.slow
def test_sign_test_false_alarms_on_correct_runs_stay_near_alpha():
    # 200 correct single-draw runs (each its own x*) near convergence (T = 300, bound
    # about 0.3 nat): the sign test at alpha = 0.05 may fire through chance and through
    # an unlucky x* (it is conditional on x*).  Under H0 the count is at most
    # Binomial(200, 0.05): mean 10, sd 3.1; allow mean + 3 sd = 19.4.
    model, _ = simulate_regression(20, 2, noise_sd=0.5, seed=11)
    rng = np.random.default_rng(11)
    reps, chains = 200, 30
    x_star = np.repeat(model.sample_posterior(rng, reps), chains, axis=0)
    run = runs.run(model, HMC(), model.sample_prior(rng, reps * chains), x_star, seed=5,
                     path=PARAMS, config=engine.RunConfig(steps=(300,),
                                                           increment_blocks=None)).steps[0]
    L = run.forward.log_estimates.reshape(reps, chains)
    U = run.reverse.log_estimates.reshape(reps, chains)
    fired = sum(sign_test(jeffreys_bound(L[r], U[r]), alpha=0.05).negative
                for r in range(reps))
    assert fired <= 19


@pytest.mark.slow
def test_multi_draw_interval_covers_where_the_single_draw_interval_does_not():
    # N = 100, d = 5, HMC(0.15, 10), T = 100: reverse chains remember their shared x*,
    # so the single-draw interval (chain-to-chain spread) is too narrow for what it
    # claims.  200 replications: coverage standard error about 0.02-0.03.  (NUTS,
    # whose reverse chains forget x* faster, covered 0.88 and 0.96 in
    # scripts/studies/verdict_calibration.py: HMC is the case that shows the difference.)
    model, _ = simulate_regression(100, 5, noise_sd=0.5, seed=1)
    single = single_draw_coverage(model, HMC(), PARAMS, steps=100, chains=50,
                                  replications=200, level=0.9, seed=0)
    # Measured 0.735 with the normal interval, 0.73 with the studentised bootstrap that
    # replaced it (issue 29): what the interval claims is the bound given x*, which it
    # covers (tests/test_intervals.py on the grid oracle), not this average over x*.
    assert single.coverage <= 0.80, single
    # K = 5 problems of 40 + 40 chains, Student-t interval; 100 replications
    # (standard error 0.03 at 0.9): at least 0.85 asks for no worse than 1.7 se below
    # 0.9, and at most 0.97 (2.3 se above) catches an interval made needlessly wide.
    # An interval from the chains' spread within problems (ignoring the spread between
    # draws) covered 0.70 here; one from the pooled chains, 1.0.
    multi = multi_draw_coverage(100, 5, HMC(), PARAMS, steps=100, chains=200, problems=5,
                                replications=100, noise_sd=0.5, level=0.9, seed=0)
    assert 0.85 <= multi.coverage <= 0.97, multi  # measured 0.88


def test_every_chain_failing_is_not_called_a_few_stranded_chains():
    # The review's vague-prior regression: bounds of 1e9 nats, a median forward estimate
    # of -6.25e6, and a note that blamed "7 of 50 stranded chains".
    rng = np.random.default_rng(0)
    L = -6.25e6 * np.exp(rng.normal(0, 1.0, 50))
    L[:7] *= 100  # seven chains even further out
    U = -500 + rng.normal(0, 1, 50)
    verdict = BreadResult("vague", {}, [_synthetic(L, U)]).verdicts()[0]
    assert verdict.status == "not converged"
    assert "stranded" not in verdict.message
    assert "as a whole lag" in verdict.message


def test_a_few_stranded_chains_are_named_when_the_others_agree():
    rng = np.random.default_rng(1)
    L = -100 + 0.1 * rng.normal(size=50)
    L[:3] = -1e4
    U = -100 + 0.1 * rng.normal(size=50)
    verdict = BreadResult("stranded", {}, [_synthetic(L, U)]).verdicts()[0]
    assert verdict.status == "not converged" and verdict.stranded == 3
    assert "3 of 50 forward chains are stranded" in verdict.message
    assert verdict.rest_bound == pytest.approx(np.mean(U) - np.mean(L[3:]))


def test_converged_and_exit_codes():
    rng = np.random.default_rng(2)
    near = _synthetic(-10 - 0.05 + 0.1 * rng.normal(size=100), -10 + 0.1 * rng.normal(size=100))
    far = _synthetic(-20 + rng.normal(size=100), -10 + rng.normal(size=100), n_steps=10)
    both = BreadResult("m", {}, [far, near])
    assert [v.status for v in both.verdicts()] == ["not converged", "converged"]
    assert both.status == "converged" and cli._exit_code(both) == 0
    assert cli._exit_code(BreadResult("m", {}, [far])) == 4
    assert "converged" in both.headline() and "not checked" in both.headline()
    checked = BreadResult("m", {}, [far, near],
                          {"simulator_check": {"ran": True, "passed": False, "message": "tau"}})
    assert checked.status == "inconsistent" and cli._exit_code(checked) == 3


def test_a_not_converged_verdict_names_the_command_to_run_next():
    rng = np.random.default_rng(2)
    far = _synthetic(-20 + rng.normal(size=100), -10 + rng.normal(size=100), n_steps=300)
    near = _synthetic(-10 - 0.05 + 0.1 * rng.normal(size=100), -10 + 0.1 * rng.normal(size=100))
    verdicts = {v.n_steps: v for v in BreadResult("m", {}, [far, near]).verdicts()}
    stuck, done = verdicts[300], verdicts[near.n_steps]
    assert stuck.status == "not converged" and done.status == "converged"
    # ten times the step count, resumed in the same output directory
    assert "--steps ...,3000 and the same --out resumes" in stuck.message
    assert "--steps" not in done.message
    # an estimate below the line whose interval crosses it: more chains, not more steps
    z = rng.normal(size=(2, 20))
    z = (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)
    wide = _synthetic(-10.5 + 2 * z[0], -10 + 2 * z[1])   # the bound is 0.5, sd 0.65
    unsure = wide.verdict()
    assert unsure.status == "not converged" and unsure.bound.estimate < 1 < unsure.bound.ci_high
    assert "Next: --chains 80 halves the interval (a new --out" in unsure.message
    assert "--steps ...," not in unsure.message
    # the docs page the message names exists under that title
    page = (Path(__file__).resolve().parent.parent / "docs" / "guides" / "not_converged.md")
    assert "'Not converged?'" in stuck.message
    assert page.read_text().startswith("# Not converged?\n")


def test_scale_of_convergence_is_a_setting():
    rng = np.random.default_rng(3)
    step = _synthetic(-12 + 0.1 * rng.normal(size=100), -10 + 0.1 * rng.normal(size=100))
    assert step.verdict().status == "not converged"
    assert step.verdict(VerdictSettings(converged_nats=5.0)).status == "converged"
    with pytest.raises(ValueError, match="converged_nats"):
        VerdictSettings(converged_nats=0)


def test_multi_draw_step_uses_the_spread_between_problems():
    rng = np.random.default_rng(4)
    offsets = np.array([0.0, 2.0, 4.0, 6.0])  # per-problem bounds 1, 3, 5, 7
    groups = np.repeat(np.arange(4), 25)
    L = -10 - offsets[groups] + 0.01 * rng.normal(size=100)
    U = -9 + 0.01 * rng.normal(size=100)
    step = StepResult(100, DirectionResult(L, 1.0, 1, problems=groups),
                      DirectionResult(U, 1.0, 1, problems=groups))
    b = step.bound(level=0.9)
    assert step.exact_draws == 4 and b.method == "problems"
    assert b.estimate == pytest.approx(4.0, abs=0.01)
    assert b.std_error == pytest.approx(np.std([1, 3, 5, 7], ddof=1) / 2, rel=0.01)
    assert np.isnan(step.sandwich().lower)
    assert list(step.problem_bounds()["bound"].round(1)) == [1.0, 3.0, 5.0, 7.0]


@pytest.mark.slow  # over 1 s: kept out of the fast tier (CI's slow tier runs it)
def test_report_survives_a_negative_bound_and_a_failing_figure(tmp_path, monkeypatch):
    # Issue 12, item 1: a converged run whose bound estimate is <= 0 passed negative
    # error bars to matplotlib and lost its report.
    step = _shifted(_conjugate_step(300, seed=4), 0.6)  # bound about 0.04 +- 0.15 nats
    result = BreadResult("near zero", {}, [_conjugate_step(30, seed=4), step])
    assert result.summary()["raw_ci_low"].min() < 0 and result.consistent
    write_report(result, tmp_path / "a")
    assert (tmp_path / "a" / "bound.png").exists() and (tmp_path / "a" / "report.html").exists()

    def broken(*args, **kwargs):
        raise RuntimeError("no figure today")

    monkeypatch.setattr(plots, "plot_bound", broken)
    write_report(result, tmp_path / "b")
    md = (tmp_path / "b" / "report.md").read_text()
    assert "figure bound could not be drawn" in md
    assert (tmp_path / "b" / "report.html").exists() and (tmp_path / "b" / "estimates.png").exists()


def test_report_explains_its_columns_and_shows_the_truth(tmp_path):
    rng = np.random.default_rng(5)
    step = _synthetic(-12 + 0.2 * rng.normal(size=40), -10 + 0.2 * rng.normal(size=40))
    result = BreadResult("m", {}, [step], {"truth": {"mu": 0.3, "beta": [1.0, 2.0]},
                                           "simulated_data": {"y": list(range(30))}})
    write_report(result, tmp_path)
    md = (tmp_path / "report.md").read_text()
    for column in ("**bound**", "**interval**", "**raw interval**", "**log p(y) >=**",
                   "**sign p**", "**tail p**"):
        assert column in md
    # Each end of the sandwich is printed with its one-sided confidence limit, not +- se.
    assert "(95%: >= " in md and "(95%: <= " in md and "+- " not in md.split("|", 1)[1]
    assert "Simulated truth and data" in md and "| y | 30 |" in md
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "not converged"
    assert summary["verdicts"][0]["conditional"] is True


def test_a_set_up_problem_fails_the_run_loudly():
    # Issue 12: an improper prior gave tuned step sizes of 6e-26 to 8.6e13 and a
    # "consistent" bound of 0.89 nats; the tuning's warning now fails the run.
    rng = np.random.default_rng(6)
    near = _synthetic(-10 - 0.05 + 0.1 * rng.normal(size=100), -10 + 0.1 * rng.normal(size=100))
    result = BreadResult("m", {}, [near], {"setup_warnings": ["tuned step sizes range from "
                                                               "6e-26 to 8.6e+13 along beta"]})
    assert result.verdicts()[0].converged
    assert result.status == "inconsistent" and cli._exit_code(result) == 3
    assert "SET-UP PROBLEM" in result.headline()
    assert any(p.startswith("set-up:") for p in result.problems())

"""``--steps auto --budget M``: the step counts chosen within a budget.

Fast tests run the choice (:func:`bread_stan.ais.budget.run_within_budget`) on steps whose
bound is known by construction (B(T) = c / T, chains spread 0.05 nats, a clock that
advances by a known time a transition) and on the conjugate regression through the real
AIS engine; one end-to-end test runs ``bread`` on ``tests/stan/normal_mean.stan`` and
checks that ``--steps`` with the chosen step counts gives the same numbers bit for bit,
and that an interrupted auto run resumes without rerunning a finished T.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bread_stan.ais import engine, runs
from bread_stan.ais.budget import (GROWTH, MIN_STEPS, DecayFit, fit_decay, fit_upper_limit,
                                   first_steps, next_steps, run_within_budget)
from bread_stan.ais.results import BreadResult, DirectionResult, StepResult
from bread_stan.ais.verdict import VerdictSettings
from bread_stan.cli.arguments import build_parser
from bread_stan.errors import InputError
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.reporting import plots
from bread_stan.workflows.settings import RunSettings

SETTINGS = VerdictSettings()


def judge(step):
    return step.verdict(SETTINGS)


class Clock:
    """A clock that moves only when a step runs (``rate`` seconds a transition)."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def power_law_step(T: int, c: float, rate: float = 0.0, chains: int = 100) -> StepResult:
    """A step whose bound is exactly c / T (chains spread 0.05 nats around it), taking
    ``rate`` seconds a transition, both directions together."""
    noise = np.random.default_rng(0).normal(0, 0.05, chains)
    noise -= noise.mean()
    seconds = rate * (T - 1) / 2
    return StepResult(T, DirectionResult(-c / (2 * T) + noise, seconds, 10),
                      DirectionResult(c / (2 * T) + noise, seconds, 10))


def runner(c: float, rate: float, clock: Clock, calls: list):
    def run_one(T: int) -> StepResult:
        calls.append(T)
        clock.now += rate * (T - 1)
        return power_law_step(T, c, rate)
    return run_one


@pytest.mark.parametrize("c,b", [(50.0, 1.0), (7.0, 0.5), (300.0, 1.7)])
def test_the_fit_recovers_an_exact_power_law(c, b):
    T = np.array([10, 30, 100, 400])
    fit = fit_decay(T, c * T ** -b)
    assert fit.slope == pytest.approx(b, abs=1e-12)
    assert math.exp(fit.intercept) == pytest.approx(c, rel=1e-12)
    assert fit.steps_for(1.0) == pytest.approx(c ** (1 / b), rel=1e-10)
    assert not fit.slope_fixed and fit.points == 4


def test_the_upper_limit_s_fit_recovers_its_two_terms_and_solves_for_the_level():
    # estimate 50 / T, margin 0.3 / sqrt(T), exactly
    T = np.array([10.0, 40.0, 160.0, 640.0])
    fit = fit_upper_limit(T, 50 / T, 50 / T + 0.3 / np.sqrt(T))
    assert fit.slope == pytest.approx(1.0, abs=1e-9)
    assert fit.margin_slope == pytest.approx(0.5, abs=1e-9)
    for level in (1.0, 0.05, 0.01):
        wanted = fit.steps_for(level)
        assert 50 / wanted + 0.3 / math.sqrt(wanted) == pytest.approx(level, rel=1e-9)
    # near a small level the margin rules: one power law through the upper limits at
    # the two smallest T promises too small a T (5,540 for 7,620)
    one = fit_decay(T[:2], (50 / T + 0.3 / np.sqrt(T))[:2]).steps_for(0.01)
    assert one < 0.75 * fit.steps_for(0.01)
    # one step count: slopes 1 and 1/2; no positive estimate: the margin alone
    single = fit_upper_limit([100], [0.5], [0.8])
    assert single.slope_fixed and single.margin_fixed and single.margin_slope == 0.5
    assert single.bound_at(400) == pytest.approx(0.5 / 4 + 0.3 / 2)
    alone = fit_upper_limit([100], [-0.2], [0.4])
    assert alone.intercept is None and alone.bound_at(400) == pytest.approx(0.2)
    assert fit_upper_limit([100], [-0.2], [-0.1]) is None


def test_beyond_the_largest_T_the_fit_falls_at_most_at_the_asymptotic_rates():
    # the estimate falls as T^-3 from T = 10 to 40 (chains leaving a stranded start) and
    # the margin as T^-2: beyond T = 40 the prediction takes 1/T and 1/sqrt(T)
    T = np.array([10.0, 40.0])
    estimates, margins = 100 * (T / 10) ** -3.0, 0.2 * (T / 10) ** -2.0
    fit = fit_upper_limit(T, estimates, estimates + margins)
    assert fit.slope == pytest.approx(3.0) and fit.margin_slope == pytest.approx(2.0)
    assert fit.bound_at(40) == pytest.approx(estimates[1] + margins[1])
    assert fit.bound_at(160) == pytest.approx(estimates[1] / 4 + margins[1] / 2)
    wanted = fit.steps_for(0.1)
    x = math.sqrt(40 / wanted)
    assert estimates[1] * x ** 2 + margins[1] * x == pytest.approx(0.1)
    assert wanted > 5 * 10 * (100 / 0.1) ** (1 / 3)   # the T^-3 law would say 100
    assert "beyond T = 40 at most 1/T and 1/sqrt(T)" in fit.describe()


def test_one_step_count_takes_the_slope_of_the_L2_over_2T_law():
    fit = fit_decay([20], [5.0])
    assert fit.slope_fixed and fit.slope == 1.0
    assert fit.bound_at(100) == pytest.approx(1.0) and fit.steps_for(1.0) == pytest.approx(100)
    # a bound at or below 0 cannot be logged: left out, and with none left there is no fit
    assert fit_decay([10, 30], [-1.0, 2.0]).points == 1
    assert fit_decay([10], [0.0]) is None
    # a bound that does not fall predicts no T
    assert fit_decay([10, 40], [3.0, 3.0]).steps_for(1.0) == math.inf


def test_first_and_next_step_counts():
    assert first_steps(20.0, 1.0)[0] == 200  # L^2 / (2T) = 1 at T = 200
    assert first_steps(1.0, 1.0)[0] == MIN_STEPS
    assert first_steps(None, 1.0)[0] == MIN_STEPS
    # the budget caps it: 30 s left at 0.5 s a transition allows T = 61
    T, why = first_steps(20.0, 1.0, seconds_per_step=0.5, remaining=30.0)
    assert T == 61 and "budget allows" in why
    for T, wanted in [(50, 51.0), (50, 180.0), (50, 1e6), (50, math.inf)]:
        fit = fit_decay([T], [wanted / T])  # slope 1: predicts `wanted`
        grown = next_steps(T, fit, 1.0)
        assert GROWTH[0] * T * 0.95 <= grown <= GROWTH[1] * T * 1.05


def test_T_grows_and_stops_at_convergence():
    clock, calls = Clock(), []
    record = run_within_budget(runner(200.0, 0.001, clock, calls), [], judge,
                               budget_minutes=60, level=1.0, length=10.0, clock=clock,
                               started=0.0)
    # L = 10 predicts T = 50 (bound 4); the fit then predicts 200 (4x); its bound, 1 nat,
    # has an upper limit above 1, so T grows 3x to 600, where the bound is 1/3
    assert record.chosen == calls == [50, 200, 600]
    assert record.stopped == "converged"
    verdicts = [judge(power_law_step(T, 200.0)) for T in record.chosen]
    assert verdicts[-1].converged and not any(v.converged for v in verdicts[:-1])
    assert verdicts[-2].bound.ci_high > 1.0 >= verdicts[-1].bound.ci_high
    # the fit is of the upper limits (the verdict's criterion) as two terms: the
    # estimate, exactly c / T here, and the margin, constant here (the chains' spread
    # does not shrink with T in these synthetic steps)
    assert record.fit["slope"] == pytest.approx(1.0, abs=1e-9)
    assert record.fit["margin_slope"] == pytest.approx(0.0, abs=1e-6)


def test_a_tiny_budget_stops_not_converged_and_names_the_predicted_T():
    clock, calls = Clock(50.0), []  # 50 s of pilots and check before the first T
    record = run_within_budget(runner(200.0, 0.05, clock, calls), [], judge,
                               budget_minutes=1, level=1.0, length=10.0, clock=clock,
                               started=0.0)
    # T = 50 takes 2.45 s; T = 200 would take 9.95 s more: 62.4 s > 60 s
    assert record.chosen == [50] and record.stopped == "budget"
    assert record.predicted_steps == 200  # 4 nats at T = 50, slope 1
    # the unrounded prediction: 200 / T + 0.0137 sqrt(50 / T) = 1 (the estimate's 1/T
    # and the margin's 1/sqrt(T), each through its value at T = 50)
    wanted = DecayFit(**record.fit).steps_for(1.0)
    margin = judge(power_law_step(50, 200.0)).bound.ci_high - 4.0
    assert 200 / wanted + margin * math.sqrt(50 / wanted) == pytest.approx(1.0, rel=1e-9)
    assert record.predicted_minutes == pytest.approx(0.05 * (wanted - 1) / 60, rel=1e-9)
    result = BreadResult("m", {}, [power_law_step(50, 200.0, 0.05)],
                         {"auto_steps": record.to_dict()})
    headline = result.headline()
    assert headline.startswith("Not converged within the budget of 1 minute: largest "
                               "T = 50, bound 4 nats")
    assert ("(upper limit about 200 T^-1.00 + 0.0971 T^-0.50, the estimate and its Monte "
            "Carlo margin (one step count: slopes 1, the L^2/(2T) law, and 1/2)), about T = 200 "
            "for 1 nat (about 0.167 minutes on this machine)") in headline
    fig = plots.plot_bound(result)
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert "fit of the upper limits (one step count)" in labels
    assert "predicted T = 200" in labels


def test_where_the_next_T_would_overrun_the_predicted_T_with_a_margin_is_tried():
    """Issue 42: posteriordb's Mh_model stopped at T = 1,300 (upper limit 1.2 nats) with
    T = 1,700 predicted in 3.6 minutes and 4.5 of its 10 minutes left, because the next
    T, 3 to 4 times the last, would not fit.  Now the predicted T, times
    LAST_TRY_MARGIN, is tried where it fits.  Here 50 s of set-up, then T = 50 (bound
    1.2, 2.45 s) predicts T = 60.8 for 1 nat: the next 3x T, 150, needs 7.45 s and does
    not fit in 57 s; nice(1.25 x 60.8) = 76 needs 3.75 s and does (56.2 s), and
    converges (bound 0.79).  In 56 s it does not fit: the run stops and names T = 61.
    Break tried: no last try (the 57 s run stops at T = 50: the test fails)."""
    from bread_stan.ais.budget import LAST_TRY_MARGIN, last_try

    clock, calls = Clock(50.0), []
    record = run_within_budget(runner(60.0, 0.05, clock, calls), [], judge,
                               budget_minutes=57 / 60, level=1.0, length=10.0, clock=clock,
                               started=0.0)
    assert record.chosen == calls == [50, 76] and record.stopped == "converged"
    assert clock.now == pytest.approx(56.2)
    clock, calls = Clock(50.0), []
    record = run_within_budget(runner(60.0, 0.05, clock, calls), [], judge,
                               budget_minutes=56 / 60, level=1.0, length=10.0, clock=clock,
                               started=0.0)
    assert record.chosen == [50] and record.stopped == "budget"
    assert record.predicted_steps == 61
    fit = fit_decay([50], [1.2])   # slope 1: predicts T = 60
    assert last_try(50, fit, 1.0) == int(float(f"{LAST_TRY_MARGIN * 60:.2g}")) == 75
    assert last_try(60, fit, 1.0) is None                 # predicted at or below T
    assert last_try(20, fit, 1.0) is None                 # beyond 3 T: the growth's own T
    assert last_try(50, fit_decay([10, 40], [3.0, 3.0]), 1.0) is None   # no decay


def test_a_resumed_choice_never_reruns_a_finished_T():
    clock, calls = Clock(), []
    done = [power_law_step(50, 200.0, 0.001)]  # saved by an interrupted run
    record = run_within_budget(runner(200.0, 0.001, clock, calls), done, judge,
                               budget_minutes=60, level=1.0, length=10.0, clock=clock,
                               started=0.0)
    assert calls == [200, 600] and record.chosen == [50, 200, 600]


def test_a_rerun_counts_the_setup_of_earlier_sessions_and_stops_where_it_stopped():
    clock, calls, started = Clock(50.0), [], []
    first = run_within_budget(runner(200.0, 0.05, clock, calls), [], judge,
                              budget_minutes=1, level=1.0, length=10.0, clock=clock,
                              started=0.0, on_start=lambda r: started.append(r.setup_seconds))
    assert started == [50.0] and first.setup_seconds == 50.0 and calls == [50]
    # the same command again: T = 50 loaded, its pilot and check read back in 1 s
    rerun = run_within_budget(runner(200.0, 0.05, Clock(1.0), calls),
                              [power_law_step(50, 200.0, 0.05)], judge, budget_minutes=1,
                              level=1.0, length=10.0, clock=Clock(1.0), started=0.0,
                              setup_before=first.setup_seconds)
    assert calls == [50] and rerun.stopped == "budget" and rerun.setup_seconds == 51.0
    # without the earlier session's 50 s it would have gone on from T = 50
    clock = Clock(1.0)
    assert run_within_budget(runner(200.0, 0.05, clock, calls),
                             [power_law_step(50, 200.0, 0.05)], judge, budget_minutes=1,
                             level=1.0, length=10.0, clock=clock,
                             started=0.0).chosen[:2] == [50, 200]


def test_on_the_conjugate_regression_T_grows_until_converged():
    model, w = simulate_regression(20, 2, noise_sd=0.5, seed=3)

    def run_one(T: int) -> StepResult:
        rng = np.random.default_rng(T)
        return runs.run(model, HMC(), model.sample_prior(rng, 100), w, seed=T,
                        path=HMCParams(step_size=0.15, n_leapfrog=10),
                        config=engine.RunConfig(steps=(T,))).steps[0]

    record = run_within_budget(run_one, [], judge, budget_minutes=10, level=1.0,
                               length=None)
    assert record.stopped == "converged" and record.chosen[0] == MIN_STEPS
    assert all(GROWTH[0] * 0.95 <= b / a <= GROWTH[1] * 1.05
               for a, b in zip(record.chosen, record.chosen[1:]))
    assert len(record.chosen) >= 2  # 10 distributions do not converge here


def gradient_step(T: int, c: float, per_step: int, chains: int = 100) -> StepResult:
    """:func:`power_law_step` whose directions cost ``per_step`` gradients for each of
    T - 1 steps together (a step's gradients are linear in T)."""
    step = power_law_step(T, c, chains=chains)
    step.forward.n_grad = step.reverse.n_grad = per_step * (T - 1) // 2
    return step


@pytest.mark.parametrize("spare", [0, -1])
def test_a_gradient_budget_stops_where_the_next_T_would_exceed_it(spare):
    # L = 10 predicts T = 50 (bound 4), then T = 200 at 1,000 gradients a step: with
    # 300,000 gradients of pilots and check, T = 200 fits exactly when the budget is
    # 300,000 + 49,000 + 199,000, and one gradient less stops after T = 50
    calls, clock = [], Clock()
    budget = 300_000 + 1000 * (49 + 199) + spare

    def run_one(T):
        calls.append(T)
        clock.now += 1e6  # an hour a step: seconds do not count in a gradient budget
        return gradient_step(T, 200.0, 1000)

    record = run_within_budget(run_one, [], judge, budget_minutes=None, level=1.0,
                               length=10.0, clock=clock, started=0.0,
                               budget_gradients=budget, setup_gradients=300_000,
                               pilot_gradients_per_step=1000.0)
    assert record.stopped == "budget"
    assert calls == ([50, 200] if spare == 0 else [50])
    assert record.spent_gradients == 300_000 + 1000 * sum(T - 1 for T in calls)
    assert record.gradients_per_step == pytest.approx(1000.0)
    assert record.budget_minutes is None and record.seconds_per_step is None
    if spare:  # 4 nats at T = 50 falling as 1/T, a 0.0137 margin as 1/sqrt(T): T = 203
        assert record.predicted_steps == 200
        wanted = DecayFit(**record.fit).steps_for(1.0)
        assert 200 < wanted < 205
        assert record.predicted_gradients == pytest.approx(1000 * (wanted - 1), rel=1e-9)
        headline = BreadResult("m", {}, [gradient_step(50, 200.0, 1000)],
                               {"auto_steps": record.to_dict()}).headline()
        assert headline.startswith("Not converged within the budget of 5.48e+05 gradients")
        assert "(about 2e+05 gradients)" in headline


def test_the_pilot_s_gradients_cap_the_first_T_and_a_resumed_run_counts_its_steps():
    # 20,000 gradients left at 500 a step allow T = 41 < 200 (L = 20)
    calls = []
    record = run_within_budget(lambda T: calls.append(T) or gradient_step(T, 200.0, 500),
                               [], judge, budget_minutes=None, level=1.0, length=20.0,
                               budget_gradients=30_000, setup_gradients=10_000,
                               pilot_gradients_per_step=500.0)
    assert calls[0] == 41 and "gradients a transition" in record.first_reason
    # a finished T = 50 at 1,000 a step (49,000) leaves 1,000 of 50,000: nothing more runs
    calls = []
    record = run_within_budget(lambda T: calls.append(T), [gradient_step(50, 200.0, 1000)],
                               judge, budget_minutes=None, level=1.0, length=10.0,
                               budget_gradients=50_000, setup_gradients=0.0)
    assert calls == [] and record.chosen == [50] and record.stopped == "budget"
    with pytest.raises(ValueError):
        run_within_budget(lambda T: None, [], judge, budget_minutes=None, level=1.0,
                          length=10.0)


def test_settings_and_command_line():
    run = RunSettings(steps="auto", budget_minutes=5)
    assert run.auto_steps and run.steps == "auto"
    # the budget and "auto" choose step counts only: the fingerprint is --steps's
    assert run.scored() == RunSettings(steps=(10, 30)).scored()
    for bad in ({"steps": "auto"}, {"budget_minutes": 5},
                {"steps": "auto", "budget_minutes": 0},
                {"steps": "auto", "budget_minutes": 5, "algorithm": "smc"}):
        with pytest.raises(InputError):
            RunSettings(**bad)
    args = build_parser().parse_args(["run", "m.stan", "--simulator", "s.stan",
                                      "--steps", "auto", "--budget", "2.5"])
    assert args.steps == "auto" and args.budget == 2.5
    # a budget in gradients: instead of minutes or beside them, never in the fingerprint
    gradients = RunSettings(steps="auto", budget_gradients=1e6)
    assert gradients.auto_steps and gradients.budget_minutes is None
    assert gradients.scored() == run.scored()
    RunSettings(steps="auto", budget_minutes=5, budget_gradients=1e6)
    for bad in ({"budget_gradients": 1e6}, {"steps": "auto", "budget_gradients": 0},
                {"steps": "auto", "budget_gradients": float("inf")}):
        with pytest.raises(InputError):
            RunSettings(**bad)
    args = build_parser().parse_args(["run", "m.stan", "--steps", "auto",
                                      "--budget-gradients", "2e6"])
    assert args.budget_gradients == 2e6 and args.budget is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "m.stan", "--budget-gradients", "-5"])


def normal_mean_programs():
    """tests/stan/normal_mean.stan, its simulator (both compiled) and small data: the
    end-to-end budget tests' model (also test_deadline's)."""
    from bread_stan.stan.compile import compile_many

    stan = Path(__file__).resolve().parent / "stan"
    model, simulator = stan / "normal_mean.stan", stan / "normal_mean_sim.stan"
    compile_many([model, simulator], workers=2)
    return model, simulator, {"N": 20, "sigma": 1.0, "tau": 2.0}


@pytest.mark.stan
def test_auto_steps_equal_explicit_steps_bit_for_bit_and_resume(tmp_path: Path):
    from bread_stan.workflows.bread import bread
    from bread_stan.workflows.settings import SamplerSettings
    from test_dask import assert_same_numbers

    model, simulator, data = normal_mean_programs()
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                              pilot_steps=20)
    common = dict(chains=20, seed=1, progress=False, path="prior")
    auto = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "auto",
                 run=RunSettings(steps="auto", budget_minutes=10, **common))
    record = auto.extra["auto_steps"]
    assert record["stopped"] == "converged" and auto.status == "converged"
    assert [s.n_steps for s in auto.steps] == sorted(record["chosen"])
    assert auto.headline().startswith(f"Converged at T = {record['chosen'][-1]}")
    explicit = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "explicit",
                     run=RunSettings(steps=tuple(record["chosen"]), **common))
    assert_same_numbers(auto, explicit)
    # interrupted after its first T: the same command loads it and runs the rest
    first = min(record["chosen"])
    for step in (tmp_path / "auto").glob("steps_*.npz"):
        if step.name != f"steps_{first}.npz":
            step.unlink()
    resumed = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "auto",
                    run=RunSettings(steps="auto", budget_minutes=10, **common))
    assert resumed.extra["auto_steps"]["chosen"] == record["chosen"]
    assert_same_numbers(auto, resumed)


@pytest.mark.stan
def test_a_gradient_budget_is_reproducible_and_equals_explicit_steps_bit_for_bit(tmp_path):
    from bread_stan.workflows.bread import bread
    from bread_stan.workflows.settings import SamplerSettings
    from test_dask import assert_same_numbers

    model, simulator, data = normal_mean_programs()
    sampler = SamplerSettings(pilot_chains=16, pilot_grid=6, pilot_steps=20)  # NUTS
    common = dict(chains=20, seed=1, progress=False, path="prior")

    def auto(name: str, budget: float):
        return bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / name,
                     run=RunSettings(steps="auto", budget_gradients=budget, **common))

    roomy = auto("roomy", 1e9)
    record = roomy.extra["auto_steps"]
    assert record["stopped"] == "converged" and len(record["chosen"]) >= 2
    setup = roomy.extra["setup_gradients"]
    assert record["setup_gradients"] == setup["pilots"] + setup["check"] > 0
    assert record["spent_gradients"] == record["setup_gradients"] + setup["scored"]
    # a budget one gradient short of the second T's prediction stops after the first
    first = roomy.step(record["chosen"][0])
    spent = record["setup_gradients"] + first.forward.n_grad + first.reverse.n_grad
    rate = (first.forward.n_grad + first.reverse.n_grad) / (first.n_steps - 1)
    budget = spent + rate * (record["chosen"][1] - 1) - 1
    tight = auto("tight", budget)
    assert tight.extra["auto_steps"]["chosen"] == record["chosen"][:1]
    assert tight.extra["auto_steps"]["stopped"] == "budget"
    assert tight.extra["auto_steps"]["spent_gradients"] == spent
    # the same command again (a fresh directory) chooses the same and gives the same numbers
    again = auto("again", budget)
    assert again.extra["auto_steps"]["chosen"] == record["chosen"][:1]
    assert_same_numbers(tight, again)
    explicit = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "explicit",
                     run=RunSettings(steps=tuple(record["chosen"][:1]), **common))
    assert_same_numbers(tight, explicit)
    assert_same_numbers(roomy, bread(model, simulator, data, sampler=sampler,
                                     run=RunSettings(steps=tuple(record["chosen"]), **common)))
    # a budget that leaves the first T fewer gradients than it wants caps it, at the
    # pilot's gradients a transition (2 directions x chains x steps per temperature)
    # (a level of 0.05 nat wants T = L^2 / 0.1, about 155, where 1 nat wants 10)
    capped = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "capped",
                   verdict=VerdictSettings(converged_nats=0.05),
                   run=RunSettings(steps="auto", budget_gradients=record["setup_gradients"]
                                   + rate * 50, **common)).extra["auto_steps"]
    assert "gradients a transition" in capped["first_reason"]
    assert 25 <= capped["chosen"][0] <= 100 and capped["stopped"] == "budget"


def test_fixed_step_counts_not_converged_name_the_T_their_bounds_predict():
    """A run with fixed --steps that ends not converged says how many steps, not only
    "ten times more": the same two-term fit as --steps auto, through bounds exactly
    c / T.  Exact: the prediction is the root of the fit, rounded to two digits."""
    steps = [power_law_step(T, 500.0, 0.02) for T in (10, 100)]
    result = BreadResult("m", {}, steps, {})
    predicted = result.prediction()
    fit = fit_upper_limit([10, 100], [judge(s).bound.estimate for s in steps],
                          [judge(s).bound.ci_high for s in steps])
    wanted = fit.steps_for(1.0)
    assert fit.slope == pytest.approx(1.0, abs=1e-9) and 500 < wanted < 600
    assert predicted.steps == int(float(f"{math.ceil(wanted):.2g}"))
    assert predicted.minutes == pytest.approx(0.02 * (predicted.steps - 1) / 60)
    headline = result.headline()
    assert f"about T = {predicted.steps} for 1 nat" in headline
    assert f"--steps 10,100,{predicted.steps} with the same --out" in headline
    assert "--steps ...,1000" not in headline   # the vaguer advice is replaced
    assert result.summary_json()["predicted"]["steps"] == predicted.steps
    # none where a step count converged, or where the bounds do not fall
    done = BreadResult("m", {}, steps + [power_law_step(1000, 500.0, 0.02)], {})
    assert done.prediction() is None and done.summary_json()["predicted"] is None
    flat = BreadResult("m", {}, [power_law_step(10, 50.0), power_law_step(100, 500.0)], {})
    assert flat.prediction() is None and "--steps ...,1000" in flat.headline()

"""path="auto" (bread_stan.ais.path_choice, bread_stan.workflows.auto_path).

Exact: the spread rule is the sd of the log likelihood at the pilot's prior draws
against 1 / floor_min = 1e12 nats, non-finite values ignored; a path's cost is its
gradients a transition times its thermodynamic length squared; the prior path's pilot
is abandoned exactly when the length it has measured so far already costs more than the
Gaussian path (length_so_far of a whole grid is the schedule's thermodynamic_length, and
grows with the grid).  On Stan models: a small regression with an uncentred predictor
(x in 5,000-20,000) and a half-Cauchy scale (``tests/stan/uncentred_halfcauchy.stan``,
spread about 1e14 nats at run seed 4) takes the Gaussian path without a prior pilot, and
the waypoint where the Gaussian path cannot run for want of a trustworthy normaliser;
where neither runs (SMC, two exact draws, IMH, neither a posterior mode nor a Pathfinder
fit, separate modes) it falls back to the prior path with the reasons recorded; without
a posterior mode q is Pathfinder's.  The conjugate normal mean (prior path length about
0.9 against 0.5) takes the Gaussian path, the prior path's pilot abandoned at its second
grid beta; eight schools, non-centred (length about 1.25 against 3.1) takes the prior path
and gives, bit for bit, the numbers and the fingerprint of ``path="prior"`` with Stan's
ridge, and resumes results saved under it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bread_stan.ais import gaussian_path, waypoint
from bread_stan.ais.betas import length_so_far, thermodynamic_length
from bread_stan.ais.path_choice import (BUDGET_RATIO, CAPPED_GAP, GRADIENT_RATIO, SPREAD_LIMIT,
                                        PathChoice, PathCost, abandon_when_costlier, cheaper,
                                        choose)
from bread_stan.ais.tuning import TuningConfig
from bread_stan.approx import ApproximationError, pathfinder
from bread_stan.stan.draft import draft_simulator
from bread_stan.stan.compile import compile_many
from bread_stan.stan.simulator import Simulator, compile_with_simulator
from bread_stan.store import CorruptFileError, jsonable
from bread_stan.workflows import base_fit
from bread_stan.workflows.auto_path import resolve_path
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread
from bread_stan.workflows.problem import simulate_problem

TEST_STAN = Path(__file__).resolve().parent / "stan"
HARD = TEST_STAN / "uncentred_halfcauchy.stan", TEST_STAN / "uncentred_halfcauchy_sim.stan"
EASY = TEST_STAN / "normal_mean.stan", TEST_STAN / "normal_mean_sim.stan"
EIGHT = TEST_STAN / "draft" / "eight_schools_noncentred.stan"
EIGHT_DATA = {"J": 8, "sigma": [15, 10, 16, 11, 9, 11, 10, 18]}
HARD_SEED = 4
SMALL_PILOT = SamplerSettings(pilot_chains=16, pilot_grid=4, pilot_steps=4)


def hard_data() -> dict:
    x = np.round(np.random.default_rng(3).uniform(5000, 20000, 12), 1)
    return {"N": 12, "x": x.tolist()}


def test_the_rule_is_the_spread_of_the_log_likelihood_against_the_pilots_floor():
    assert SPREAD_LIMIT == 1.0 / TuningConfig().floor_min == 1e12
    rng = np.random.default_rng(0)
    calm = -50.0 + 100.0 * rng.standard_normal(32)
    choice = choose(calm)
    assert choice.path == "prior" and choice.requested == "auto"
    assert choice.loglik_sd == pytest.approx(np.std(calm, ddof=1), rel=1e-12)
    assert choice.n_draws == 32 and not choice.tempering_strands
    wild = np.concatenate([-1e14 * rng.random(30), [-np.inf, np.nan]])
    choice = choose(wild)
    assert choice.path == "waypoint" and choice.n_draws == 30 and choice.tempering_strands
    assert choice.loglik_sd == pytest.approx(np.std(wild[:30], ddof=1), rel=1e-12)
    assert "waypoint" in choice.message and f"{choice.loglik_sd:.3g}" in choice.reason
    edge = np.array([-1.0, 1.0]) * SPREAD_LIMIT / np.sqrt(2)  # sd exactly at the limit
    assert choose(edge).path == "prior" and choose(1.01 * edge).path == "waypoint"
    assert choose(wild, limit=1e20).path == "prior"


def test_cost_and_the_rule_that_abandons_the_prior_pilot():
    rival = PathCost(0.5, 4.0)
    assert rival.cost == pytest.approx(4.0 * 0.25, rel=1e-15)
    grid = np.array([0.0, 1e-3, 1e-2, 1e-1, 1.0])
    sd = np.array([50.0, 20.0, 8.0, 3.0, 1.0])
    assert length_so_far(grid, sd) == pytest.approx(thermodynamic_length(grid, sd), rel=1e-12)
    prefix = [length_so_far(grid[:k], sd[:k]) for k in range(2, grid.size + 1)]
    assert np.all(np.diff(prefix) > 0)  # the rest of the path only adds length
    give_up = abandon_when_costlier(rival)
    for k in range(2, grid.size + 1):
        for gradients in (1.0, 4.0, 16.0, 32.0, 33.0):
            reason = give_up(grid[:k], sd[:k], gradients)
            costlier = gradients * prefix[k - 2] ** 2 > rival.cost
            assert (reason is not None) == (costlier or gradients > GRADIENT_RATIO * 4.0)
            assert give_up.partial == PathCost(prefix[k - 2], gradients, complete=False,
                                               pilot_gradients=0.0)
    assert "already costs more" in give_up(grid, sd, 16.0)
    # the cap on the choice's own cost: from the first grid beta, length or not
    assert GRADIENT_RATIO == 8.0 and give_up(grid[:1], sd[:1], 32.0) is None
    assert "more than 8 times" in give_up(grid[:1], sd[:1], 33.0)
    # the cap in total: more than BUDGET_RATIO times the rival pilot's gradients spent
    budgeted = abandon_when_costlier(PathCost(0.5, 4.0, pilot_gradients=1000.0))
    assert BUDGET_RATIO == 2.0 and budgeted(grid[:2], sd[:2], 1.0, 2000) is None
    assert "whole pilot" in budgeted(grid[:2], sd[:2], 1.0, 2001)
    assert budgeted.partial.pilot_gradients == 2001
    assert give_up(grid[:2], sd[:2], 1.0, 10 ** 9) is None  # no budget: the rival's unknown
    # the caps apply only where the rival converges anyway: L^2 / (2 T) <= CAPPED_GAP
    long_rival = PathCost(50.0, 4.0, pilot_gradients=1000.0)  # gap 1.25 at T = 1000
    assert CAPPED_GAP == 1.0 and abandon_when_costlier(long_rival, steps=1250).capped
    uncapped = abandon_when_costlier(long_rival, steps=1000)
    assert not uncapped.capped
    assert uncapped(grid[:2], sd[:2], 1000.0, 10 ** 9) is None  # neither cap fires
    assert "already costs more" in uncapped(grid, sd, 1e6, 10 ** 9)  # the sure rule does
    capped = abandon_when_costlier(long_rival, steps=1250)
    assert "whole pilot" in capped(grid[:2], sd[:2], 1.0, 2001)
    assert "more than 8 times" in capped(grid[:2], sd[:2], 33.0)
    spread = PathChoice("auto", "prior", "spread", 10.0, 32, SPREAD_LIMIT)
    dear, cheap = PathCost(2.0, 10.0), PathCost(1.0, 10.0)
    assert cheaper(cheap, dear, spread).path == "gaussian"
    assert cheaper(dear, cheap, spread).path == "prior"
    assert cheaper(cheap, cheap, spread).path == "prior"  # a tie: no normaliser needed
    chosen = cheaper(dear, cheap, spread, abandoned="by beta = 0.01 it costs more")
    assert chosen.path == "gaussian" and chosen.reason.startswith("by beta = 0.01")
    assert chosen.costs == {"gaussian": {"length": 2.0, "gradients": 10.0, "complete": True,
                                         "pilot_gradients": None},
                            "prior": {"length": 1.0, "gradients": 10.0, "complete": True,
                                      "pilot_gradients": None}}
    assert chosen.loglik_sd == 10.0 and chosen.n_draws == 32


@pytest.fixture(scope="module")
def hard_problem():
    compile_many(list(HARD), workers=2)
    data = hard_data()
    (compiled,), sim_compiled = compile_with_simulator([HARD[0]], HARD[1])
    sim = Simulator(sim_compiled, data)
    return simulate_problem("hard", compiled, sim, data, HARD_SEED, None), sim


@pytest.mark.stan
def test_auto_takes_the_gaussian_path_on_an_uncentred_half_cauchy_regression(hard_problem):
    problem, sim = hard_problem
    settled = resolve_path([problem], sim, SMALL_PILOT, RunSettings(seed=HARD_SEED), "hard")
    assert settled.choice.path == "gaussian" and settled.choice.requested == "auto"
    assert settled.choice.loglik_sd > 100 * SPREAD_LIMIT  # about 1e14: far from the edge
    assert "strand" in settled.choice.reason and set(settled.choice.costs) == {"gaussian"}
    assert settled.run.path == "gaussian" and settled.sampler.metric_ridge == "relative"
    assert isinstance(settled.tuned, gaussian_path.GaussianPath)  # handed to the run
    assert settled.tuned.normaliser.trustworthy


@pytest.mark.stan
def test_auto_takes_the_waypoint_where_the_normaliser_cannot_be_trusted(hard_problem,
                                                                        monkeypatch):
    problem, sim = hard_problem
    real = gaussian_path.fit_gaussian_path

    def untrusted(*args, **kwargs):
        path = real(*args, **kwargs)
        return replace(path, normaliser=replace(path.normaliser, pareto_k=1.5))

    monkeypatch.setattr(gaussian_path, "fit_gaussian_path", untrusted)
    settled = resolve_path([problem], sim, SMALL_PILOT, RunSettings(seed=HARD_SEED), "hard")
    assert settled.choice.path == "waypoint" and "Pareto k 1.50" in settled.choice.reason
    assert settled.fitted is not None  # the Laplace fit, done before the fingerprint
    legs = waypoint.leg_targets(problem.target, settled.fitted[0])
    assert all(leg.native is not None for leg in legs)  # both legs run in the library


@pytest.mark.stan
def test_auto_falls_back_to_the_prior_path_with_its_reason(hard_problem, monkeypatch, caplog):
    problem, sim = hard_problem
    cases = {"SMC": RunSettings(seed=HARD_SEED, algorithm="smc"),
             "2 exact draws": RunSettings(seed=HARD_SEED, exact_draws=2)}
    for why, run in cases.items():
        with caplog.at_level(logging.WARNING):
            settled = resolve_path([problem], sim, SMALL_PILOT, run, "hard")
        assert settled.choice.path == "prior" and settled.run.path == "prior"
        assert settled.sampler.metric_ridge == "stan" and settled.fitted is None
        assert settled.choice.loglik_sd > SPREAD_LIMIT  # the number is kept
        assert why in settled.choice.reason and "strand" in caplog.text
        assert "Gaussian-base path is not a candidate" in settled.choice.reason
    imh = resolve_path([problem], sim, replace(SMALL_PILOT, kernel="imh"),
                       RunSettings(seed=HARD_SEED), "hard")
    assert imh.choice.path == "prior" and "this run is IMH" in imh.choice.reason

    def no_mode(*args, **kwargs):
        raise waypoint.WaypointError("no mode found: L-BFGS ran off")

    monkeypatch.setattr(waypoint, "fit_base", no_mode)
    monkeypatch.setattr(gaussian_path, "fit_base", no_mode)
    # no Laplace fit: q is Pathfinder's, and the Gaussian path runs from it
    settled = resolve_path([problem], sim, SMALL_PILOT, RunSettings(seed=HARD_SEED), "hard")
    assert settled.choice.path == "gaussian" and settled.tuned.fit["fit"] == "pathfinder"
    assert "no mode found" in settled.tuned.fit["no_laplace"]

    def no_pathfinder(*args, **kwargs):
        raise ApproximationError("pathfinder: no iterate gave a finite ELBO")

    monkeypatch.setattr(base_fit, "pathfinder", no_pathfinder)
    settled = resolve_path([problem], sim, SMALL_PILOT, RunSettings(seed=HARD_SEED), "hard")
    assert settled.choice.path == "prior" and "no Gaussian waypoint" in settled.choice.reason
    assert "no Gaussian q" in settled.choice.reason  # nor a Gaussian path
    assert "nor a Pathfinder fit (pathfinder: no iterate" in settled.choice.reason

    def separate(*args, **kwargs):
        raise waypoint.SeparateModesError("separate modes 12 sds apart")

    monkeypatch.setattr(waypoint, "fit_base", separate)
    monkeypatch.setattr(base_fit, "pathfinder", pathfinder)  # Pathfinder would fit
    settled = resolve_path([problem], sim, SMALL_PILOT, RunSettings(seed=HARD_SEED), "hard")
    assert settled.choice.path == "prior" and "separate modes" in settled.choice.reason
    assert "Pathfinder" not in settled.choice.reason  # one Gaussian is refused outright
    explicit = resolve_path([problem], sim, SMALL_PILOT, RunSettings(path="prior"), "hard")
    assert explicit.choice.requested == "prior" and explicit.choice.loglik_sd is None


@pytest.mark.stan
def test_bread_records_the_choice_and_runs_the_gaussian_path(hard_problem):
    run = RunSettings(steps=(4,), chains=4, seed=HARD_SEED, progress=False,
                      check_simulator=False)
    result = bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=run)
    choice = result.extra["path_choice"]
    assert choice["path"] == "gaussian" and choice["loglik_sd"] > 100 * SPREAD_LIMIT
    assert "strand" in choice["reason"] and "Laplace Gaussian" in choice["reason"]
    assert result.settings["run"]["path"] == "gaussian"
    assert result.settings["sampler"]["metric_ridge"] == "relative"
    assert result.extra["tuning"]["path"] == "gaussian"
    assert "tuning_seconds" not in result.extra  # the choice's pilot, not a second one
    assert np.all(np.isfinite(result.steps[0].forward.log_estimates))


def _same_path(a: gaussian_path.GaussianPath, b: gaussian_path.GaussianPath) -> None:
    """Bit for bit: q, the leg's tuning, log c and the fit's record."""
    np.testing.assert_array_equal(a.base.mean, b.base.mean)
    np.testing.assert_array_equal(a.base.cov, b.base.cov)
    assert a.base.widen == b.base.widen
    for name in ("grid_betas", "step_size", "inv_metric", "accept", "loglik_sd"):
        np.testing.assert_array_equal(getattr(a.leg, name), getattr(b.leg, name))
    assert a.leg.kind == b.leg.kind and a.leg.fixed == b.leg.fixed
    assert repr(a.normaliser) == repr(b.normaliser) and a.fit == b.fit  # NaN != NaN


@pytest.mark.stan
def test_a_resumed_run_reads_its_path_and_pilots_nothing(hard_problem, tmp_path,
                                                          monkeypatch, caplog):
    """A run interrupted after its first step count resumes from the saved choice and
    Gaussian path (no fit of q, no pilot) and gives the numbers of an uninterrupted run.
    Break tried: bread() calling resolve_path again instead of settle fails it (the
    patched fit of q raises)."""
    run = RunSettings(steps=(4, 6), chains=4, seed=HARD_SEED, progress=False,
                      check_simulator=False)
    whole = bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=run)
    out = tmp_path / "run"
    bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=replace(run, steps=(4,)), out_dir=out)
    first = gaussian_path.GaussianPath.load(out / "gaussian_path.json")
    assert (out / "path_choice.json").is_file() and first.fit["fit"] == "laplace"

    def no_pilot(*args, **kwargs):
        raise AssertionError("a resumed run piloted again")
    for pilot in ("auto_path.fit_q", "auto_path.tune", "auto_path.fit_gaussian"):
        monkeypatch.setattr(f"bread_stan.workflows.{pilot}", no_pilot)
    monkeypatch.setattr(gaussian_path, "fit_gaussian_path", no_pilot)
    with caplog.at_level(logging.INFO, logger="bread_stan"):
        resumed = bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=run, out_dir=out)
    assert "the path choice saved in" in caplog.text
    assert "the path saved in" in caplog.text and "gaussian_path.json" in caplog.text
    assert resumed.extra["path_choice"] == whole.extra["path_choice"]
    assert resumed.settings["fingerprint"] == whole.settings["fingerprint"]
    for a, b in zip(whole.steps, resumed.steps):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    _same_path(first, gaussian_path.GaussianPath.from_dict(resumed.extra["tuning"]))
    # saved for other settings, neither file is read: the choice is made again
    assert gaussian_path.GaussianPath.load(out / "gaussian_path.json", "other") is None
    monkeypatch.undo()
    other = bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=replace(run, seed=5, steps=(4,)),
                  out_dir=tmp_path / "other")
    (tmp_path / "other" / "path_choice.json").write_bytes((out / "path_choice.json").read_bytes())
    monkeypatch.setattr("bread_stan.workflows.auto_path.fit_q", no_pilot)
    with pytest.raises(AssertionError, match="piloted again"):
        bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=replace(run, seed=5),
              out_dir=tmp_path / "other")
    assert other.extra["path_choice"]["path"] == "gaussian"


@pytest.mark.stan
def test_a_resumed_waypoint_run_reads_its_path(hard_problem, tmp_path, monkeypatch):
    """The waypoint path (q and both legs' tuning) is kept as the Gaussian path is: a
    resumed run neither fits q nor tunes a leg, and gives an uninterrupted run's
    numbers.  Break tried: not saving waypoint_path.json fails it (the patched
    fit_waypoint raises)."""
    run = RunSettings(steps=(4, 6), chains=4, seed=HARD_SEED, progress=False,
                      check_simulator=False, path="waypoint")
    whole = bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=run)
    out = tmp_path / "run"
    bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=replace(run, steps=(4,)), out_dir=out)

    def no_pilot(*args, **kwargs):
        raise AssertionError("a resumed run piloted again")
    monkeypatch.setattr(waypoint, "fit_waypoint", no_pilot)
    monkeypatch.setattr("bread_stan.workflows.auto_path.fit_q", no_pilot)
    resumed = bread(*HARD, hard_data(), sampler=SMALL_PILOT, run=run, out_dir=out)
    for a, b in zip(whole.steps, resumed.steps):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    saved = waypoint.WaypointPath.load(out / "waypoint_path.json")
    as_json = lambda record: json.dumps(jsonable(record), sort_keys=True)  # noqa: E731
    assert as_json(saved.to_dict()) == as_json(resumed.extra["tuning"])  # timings too


def test_the_base_metric_leg_and_a_pathfinder_path_survive_a_save(tmp_path):
    """GaussianPath.save/load and leg_record/leg_from_record are exact, including a leg
    whose metric is q's covariance (written as a name, read back as the matrix).
    Break tried: leg_from_record leaving the metric None fails it."""
    from bread_stan.ais.gaussian_base import GaussianBase
    from bread_stan.ais.prior_normaliser import NormaliserEstimate
    from bread_stan.ais.tuning import TunedKernel
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    base = GaussianBase(rng.standard_normal(5) / 3, a @ a.T / 5 + np.eye(5), 1.5)
    leg = TunedKernel("nuts", np.array([0.0, 0.3, 1.0]), np.array([0.41, 0.3, 0.1 / 3]),
                      base.cov[None].copy(), {"max_depth": 8}, 1e-3,
                      np.array([0.8, 0.79, 0.81]), 1e-5, np.array([0.0, 1.5, 2.0 / 3]),
                      np.array([0.0, 0.1, 0.2]), 12.5, 3000.0)
    assert waypoint.leg_record(leg, base)["inv_metric"] == waypoint.BASE_METRIC
    normaliser = NormaliserEstimate(-0.6931471805599453, 0.0, 100, 100, 0.0, float("nan"),
                                    0.01, method="exact")
    path = gaussian_path.GaussianPath(base, leg, normaliser,
                                      {"fit": "pathfinder", "elbo": -3.25, "seconds": 1.0,
                                       "widen": 1.5})
    path.save(tmp_path / "g.json", "abc")
    back = gaussian_path.GaussianPath.load(tmp_path / "g.json", "abc")
    _same_path(path, back)
    assert back.leg.inv_metric.shape == (1, 5, 5) and np.isnan(back.normaliser.pareto_k)
    # the leg's cost a transition, as the budget in gradients predicts a step from it
    assert back.gradients_per_transition == leg.gradients_per_transition == 12.5
    assert gaussian_path.GaussianPath.load(tmp_path / "g.json", "xyz") is None
    for damaged in ("[1, 2]", '{"base": {}}'):  # not an object; an object without q
        (tmp_path / "g.json").write_text(damaged)
        with pytest.raises(CorruptFileError, match="not a Gaussian path"):
            gaussian_path.GaussianPath.load(tmp_path / "g.json")


@pytest.mark.stan
def test_auto_takes_the_gaussian_path_on_the_conjugate_normal_mean():
    compile_many(list(EASY), workers=2)
    data = {"N": 20, "sigma": 1.0, "tau": 2.0}
    (compiled,), sim_compiled = compile_with_simulator([EASY[0]], EASY[1])
    sim = Simulator(sim_compiled, data)
    problem = simulate_problem("easy", compiled, sim, data, 0, None)
    sampler = SamplerSettings(pilot_chains=16, pilot_grid=6)
    settled = resolve_path([problem], sim, sampler, RunSettings(seed=0), "easy")
    costs = settled.choice.costs
    assert settled.choice.path == "gaussian" and "already costs more" in settled.choice.reason
    assert not costs["prior"]["complete"] and costs["gaussian"]["complete"]
    assert (costs["prior"]["gradients"] * costs["prior"]["length"] ** 2
            > costs["gaussian"]["gradients"] * costs["gaussian"]["length"] ** 2)
    again = resolve_path([problem], sim, sampler, RunSettings(seed=0), "easy")
    assert again.choice == settled.choice  # seeded pilots, costs in gradients


@pytest.mark.stan
def test_auto_on_the_prior_path_is_the_old_default_bit_for_bit(tmp_path, monkeypatch):
    simulator = draft_simulator(EIGHT)
    compile_many([EIGHT], workers=1)
    steps = dict(steps=(3, 20), chains=12, seed=2, progress=False)
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6)
    old = bread(EIGHT, simulator, EIGHT_DATA, sampler=replace(sampler, metric_ridge="stan"),
                run=RunSettings(**steps, path="prior"), out_dir=tmp_path / "old")
    new = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, run=RunSettings(**steps),
                out_dir=tmp_path / "new")
    choice = new.extra["path_choice"]
    assert choice["requested"] == "auto" and choice["path"] == "prior"
    assert choice["costs"]["prior"]["complete"]
    assert 0 < choice["loglik_sd"] < SPREAD_LIMIT
    assert old.extra["path_choice"]["requested"] == "prior"
    assert new.settings["fingerprint"] == old.settings["fingerprint"]
    timing = "seconds_per_transition"
    assert ({k: v for k, v in new.extra["tuning"].items() if k != timing}
            == {k: v for k, v in old.extra["tuning"].items() if k != timing})
    for a, b in zip(old.steps, new.steps):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    again = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, run=RunSettings(**steps),
                  out_dir=tmp_path / "old")  # auto resumes what path="prior" saved
    for a, b in zip(old.steps, again.steps):
        assert a.forward.wall_time == b.forward.wall_time  # loaded, not rerun
    # the choice and the prior path's tuning are read back: no pilot runs again
    for pilot in ("auto_path.fit_q", "auto_path.tune", "common.tune_kernel"):
        monkeypatch.setattr(f"bread_stan.workflows.{pilot}", None)
    monkeypatch.setattr("bread_stan.ais.path_kinds.tune_prior", None)
    resumed = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler,
                    run=RunSettings(**{**steps, "steps": (3, 20, 30)}), out_dir=tmp_path / "new")
    assert resumed.extra["path_choice"] == new.extra["path_choice"]
    assert [s.n_steps for s in resumed.steps] == [3, 20, 30]


@pytest.mark.stan
def test_a_path_chosen_within_a_budget_is_named_by_the_command_that_reproduces_it(
        tmp_path, monkeypatch):
    """Within a budget in minutes, a prior-path pilot that would overrun it is dropped for
    the Gaussian path, where an unbudgeted run on eight schools takes the prior path (the
    test above); so the verdict's reproduction names the path, and that command, in a
    fresh directory, gives the same numbers bit for bit."""
    from bread_stan.ais.verdict import VerdictSettings
    from bread_stan.deadline import OverBudget

    simulator = draft_simulator(EIGHT)
    compile_many([EIGHT], workers=1)
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6)
    common = dict(chains=12, seed=2, progress=False)
    lenient = VerdictSettings(converged_nats=1e3)   # converged at the first T

    def overrun(*args, **kwargs):
        raise OverBudget("not converged within the budget of 10 minutes: the pilot alone "
                         "would take about 11 minutes", "the pilot", 660.0)

    monkeypatch.setattr("bread_stan.workflows.auto_path.tune", overrun)
    budgeted = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, verdict=lenient,
                     run=RunSettings(steps="auto", budget_minutes=10, **common),
                     out_dir=tmp_path / "budgeted")
    choice, chosen = budgeted.extra["path_choice"], budgeted.extra["auto_steps"]["chosen"]
    assert choice["path"] == "gaussian" and "past the budget" in choice["reason"]
    steps = ",".join(map(str, chosen))
    assert f"--steps {steps} --path gaussian gives the same numbers" in budgeted.headline()
    monkeypatch.undo()
    again = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, verdict=lenient,
                  run=RunSettings(steps=tuple(chosen), path="gaussian", **common),
                  out_dir=tmp_path / "again")
    for a, b in zip(budgeted.steps, again.steps, strict=True):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    # the choice the budget decided holds for a rerun within that budget (no pilot runs),
    # and for a larger budget where results on it are saved (they are kept)
    monkeypatch.setattr("bread_stan.workflows.auto_path.tune", None)
    for minutes in (10, 20):
        same = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, verdict=lenient,
                     run=RunSettings(steps="auto", budget_minutes=minutes, **common),
                     out_dir=tmp_path / "budgeted")
        assert same.extra["path_choice"] == choice
    # a run stopped in its set-up (here its check) saves the choice and no results: a
    # larger budget chooses again, as an unbudgeted run does (the prior path here)
    from bread_stan.workflows import bread as bread_module

    monkeypatch.setattr("bread_stan.workflows.auto_path.tune", overrun)
    monkeypatch.setattr(bread_module, "check_simulator", overrun)
    with pytest.raises(OverBudget):
        bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, verdict=lenient,
              run=RunSettings(steps="auto", budget_minutes=10, **common),
              out_dir=tmp_path / "stopped")
    monkeypatch.undo()
    # ... without fitting q or tuning the Gaussian path again: the stopped run saved them
    # (the same seeds would give the same ones), so the numbers are a fresh run's
    def refit(*args, **kwargs):
        raise AssertionError("the Gaussian path was fitted again")

    monkeypatch.setattr("bread_stan.workflows.auto_path.fit_gaussian", refit)
    monkeypatch.setattr("bread_stan.workflows.auto_path.fit_q", refit)
    larger = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, verdict=lenient,
                   run=RunSettings(steps="auto", budget_minutes=20, **common),
                   out_dir=tmp_path / "stopped")
    monkeypatch.undo()
    assert larger.extra["path_choice"]["path"] == "prior"
    assert larger.extra["path_choice"]["budget_minutes"] is None
    fresh = bread(EIGHT, simulator, EIGHT_DATA, sampler=sampler, verdict=lenient,
                  run=RunSettings(steps="auto", budget_minutes=20, **common),
                  out_dir=tmp_path / "fresh")
    assert larger.extra["path_choice"] == fresh.extra["path_choice"]
    for a, b in zip(larger.steps, fresh.steps, strict=True):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)


@pytest.mark.stan
def test_a_gaussian_q_that_cannot_be_fitted_in_the_time_left_is_not_started(monkeypatch):
    """A Laplace fit cannot stop midway, so within a budget it starts only where its
    least cost (per mode search, the d x d Hessian's 2 d gradients and dense algebra)
    fits in the time left; else the run tempers from the prior, saying why."""
    import time

    from bread_stan.ais.waypoint import fit_seconds_at_least
    from bread_stan.deadline import set_up_by

    program = TEST_STAN / "many_means.stan"
    simulator = draft_simulator(program)
    (compiled,), sim_compiled = compile_with_simulator([program], simulator)
    data = {"N": 3, "y": [0.2, -0.1, 0.4]}
    problem = simulate_problem("many", compiled, Simulator(sim_compiled, data), data, 0, None)
    pilot = np.random.default_rng(1).normal(size=(16, 250))
    assert fit_seconds_at_least(problem.target, pilot) > 0
    monkeypatch.setattr("bread_stan.workflows.auto_path.fit_q", None)   # never called
    sampler = SamplerSettings(pilot_chains=16, pilot_grid=4, pilot_steps=4)
    with set_up_by(time.monotonic() + 1e-3, 60.0):
        settled = resolve_path([problem], Simulator(sim_compiled, data), sampler,
                               RunSettings(seed=0), "many")
    assert settled.choice.path == "prior"
    assert "fitting a Gaussian q to 250 parameters would take at least" in \
        settled.choice.reason

"""A run's set-up within its budget: pilots and checks that would overrun it stop.

Fast tests of :mod:`bread_stan.deadline` (the pace rule, with the clock's own time),
of the pilot stopping inside the deadline's context and only there (a conjugate
regression, the Python kernels), and of the command line's exit status; one Stan test
runs ``bread`` with a budget its check cannot fit in.
Breaks tried: ``keep_pace`` comparing ``now`` instead of the predicted end with the
deadline (the first test fails: the loop that would end in 1,000 s passes), the
pilot's call removed (the pilot test fails), the CLI mapping removed (exit 2, not 4).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bread_stan.ais.tuning import TuningConfig, tune
from bread_stan.cli.main import EXIT_NOT_CONVERGED, _exit_status
from bread_stan.deadline import OverBudget, keep_pace, set_up_by
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams


def test_a_loop_stops_when_its_pace_would_end_past_the_deadline_and_only_then():
    now = time.monotonic()
    keep_pace("a loop", 1, 100, now - 10.0)   # no deadline: never stops
    with set_up_by(now + 60.0, 120.0):
        # 1 of 100 items after 10 s: 1,000 s in all, past the deadline 60 s from now
        with pytest.raises(OverBudget) as stopped:
            keep_pace("the pilot", 1, 100, now - 10.0)
        assert stopped.value.what == "the pilot"
        assert stopped.value.needed == pytest.approx(1000.0, rel=0.01)
        text = str(stopped.value)
        assert text.startswith("not converged within the budget of 2 minutes: the pilot "
                               "alone would take about 16.7 minutes")
        # the budget began 60 s before now, the loop 10 s before now: 50 s of set-up
        # before the loop, plus its 1,000 s
        assert "the set-up needs a budget above 17.5 minutes" in text
        keep_pace("the pilot", 99, 100, now - 10.0)   # 10.1 s in all: it fits
        # 1 of 100 after 5 s (500 s in all) is not judged: the loop has run for less than
        # SETTLE (5%) of the 120 s budget, 6 s
        keep_pace("the pilot", 1, 100, now - 5.0)
        keep_pace("the pilot", 100, 100, now - 10.0)  # finished: nothing to predict
    keep_pace("a loop", 1, 100, now - 10.0)   # the context is left: no deadline again


def test_the_pilot_stops_inside_a_deadline_it_cannot_meet_and_runs_without_one():
    model, _ = simulate_regression(40, 3, noise_sd=0.5, seed=1)
    config = TuningConfig(pilot_grid=8, pilot_steps=20, pilot_floor=1e-3, metric="diag")
    starts = model.sample_prior(np.random.default_rng(0), 16)
    with set_up_by(time.monotonic() + 1e-3, 1e-3), pytest.raises(OverBudget) as stopped:
        tune(model, HMC(), HMCParams(1.0, 8), starts, seed=3, config=config)
    assert stopped.value.what == "the pilot tuning hmc along beta"
    tuned = tune(model, HMC(), HMCParams(1.0, 8), starts, seed=3, config=config)
    assert len(tuned.step_size) == 8


def test_the_pilot_stops_inside_its_first_beta():
    """Reproduction (issue 42): logistic_regression_rhs spent its whole 480 s time-out in
    the pilot's first beta, because the pace was read only between betas.  Here the first
    beta alone is 200 transitions, and the pilot stops inside it: the pace counts transitions (405: 2 betas x 205 less the first beta's 5
    burn-in), and it is read from the third on, once the loop has run for SETTLE of the
    budget (here 5% of 1 ms)."""
    model, _ = simulate_regression(40, 3, noise_sd=0.5, seed=1)
    config = TuningConfig(pilot_grid=2, pilot_steps=200, pilot_floor=1e-3, metric="diag")
    starts = model.sample_prior(np.random.default_rng(0), 16)
    with set_up_by(time.monotonic() + 1e-3, 1e-3), pytest.raises(OverBudget) as stopped:
        tune(model, HMC(), HMCParams(1.0, 8), starts, seed=3, config=config)
    done = re.search(r"\((\d+) of 405 after", str(stopped.value))
    assert done and 3 <= int(done.group(1)) < 200


def test_the_command_line_says_not_converged_in_one_line_and_exits_4(capsys):
    args = SimpleNamespace(command="run", verbose=False)
    code = _exit_status(args, OverBudget("not converged within the budget of 1 minute: "
                                         "the pilot alone would take about 9 minutes"))
    err = capsys.readouterr().err
    assert code == EXIT_NOT_CONVERGED == 4
    assert err == ("bread-stan run: not converged within the budget of 1 minute: the pilot "
                   "alone would take about 9 minutes\n")


@pytest.mark.stan
def test_a_budget_the_set_up_cannot_fit_in_stops_before_any_step_count(tmp_path: Path):
    from bread_stan.workflows.bread import bread
    from bread_stan.workflows.settings import RunSettings, SamplerSettings
    from test_budget import normal_mean_programs

    model, simulator, data = normal_mean_programs()
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                              pilot_steps=20)
    with pytest.raises(OverBudget) as stopped:   # 0.06 s for pilot, check and steps
        bread(model, simulator, data, sampler=sampler, out_dir=tmp_path,
              run=RunSettings(steps="auto", budget_minutes=0.001, chains=20, seed=1,
                              progress=False, path="prior"))
    assert "alone would take about" in str(stopped.value)
    assert not list(tmp_path.glob("steps_*.npz"))


@pytest.mark.stan
def test_a_check_over_budget_names_the_step_count_the_tuned_path_predicts(tmp_path, monkeypatch):
    """Issue 42: a run stopped after its pilot (here the simulator check, made to overrun)
    names the T its tuned path predicts for --converged-nats, the first T that
    ``--steps auto`` runs when the set-up fits (the same run unpatched)."""
    from bread_stan.workflows import bread as bread_module
    from bread_stan.workflows.settings import RunSettings, SamplerSettings
    from test_budget import normal_mean_programs

    model, simulator, data = normal_mean_programs()
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                              pilot_steps=20)
    run = RunSettings(steps="auto", budget_minutes=10, chains=20, seed=1, progress=False,
                      path="prior")
    fitted = bread_module.bread(model, simulator, data, sampler=sampler, run=run)
    record = fitted.extra["auto_steps"]

    def overrun(*args, **kwargs):
        raise OverBudget("not converged within the budget of 10 minutes: the simulator "
                         "check's prior stage alone would take about 11 minutes",
                         "the simulator check's prior stage", 660.0)

    monkeypatch.setattr(bread_module, "check_simulator", overrun)
    with pytest.raises(OverBudget) as stopped:
        bread_module.bread(model, simulator, data, sampler=sampler, run=run)
    assert stopped.value.steps == min(record["chosen"])
    assert f"at about T = {stopped.value.steps} (L^2/(2T))" in str(stopped.value)
    assert f"length L = {record['length']:.3g}" in str(stopped.value)


def test_a_pilot_stopped_midway_names_the_least_T_of_the_path_it_measured():
    """Issue 42: a pilot that overran late (posteriordb's
    radon_hierarchical_intercept_noncentered: 15 of 16 grid betas in 8.9 of its 10
    minutes) stopped with no T, though most of its path was measured.  The stop now
    carries what the pilot measured, and the run names the least T that part implies:
    the rest of the path can only add length.  Exact here: sds 10 on a grid [0, 0.5]
    have length 5 (the sd constant), so 1 nat needs at least 5^2 / 2 = 12.5, rounded up to 13.
    Break tried: the measured part not kept on the stop (no T named: the test fails)."""
    from bread_stan.ais.budget import naming_least_steps

    stopped = OverBudget("not converged within the budget: the pilot alone would take "
                         "about 11 minutes", "the pilot", 660.0, pilot=True,
                         measured=(np.array([0.0, 0.25, 0.5]), np.full(3, 10.0)))
    with pytest.raises(OverBudget) as named, naming_least_steps(1.0):
        raise stopped
    assert named.value.steps == 13 and named.value.pilot
    assert ("(3 grid betas, up to beta 0.5) already has thermodynamic length 5, so a gap "
            "of 1 nat needs at least T = 13 (L^2/(2T)") in str(named.value)
    tiny = OverBudget("x", "the pilot", 1.0, measured=(np.array([0.0, 0.5]), np.ones(2)))
    with pytest.raises(OverBudget) as unnamed, naming_least_steps(1.0):
        raise tiny   # length 0.5: at least T = 0.125, below the least T a run takes
    assert unnamed.value is tiny and unnamed.value.steps is None
    # the pilot itself keeps what it measured on its stop
    model, _ = simulate_regression(40, 3, noise_sd=0.5, seed=1)
    config = TuningConfig(pilot_grid=8, pilot_steps=20, pilot_floor=1e-3, metric="diag")
    starts = model.sample_prior(np.random.default_rng(0), 16)
    done = []

    def over_at_third_beta(what, done_items, total, began, pilot=False):
        done.append(done_items)
        if done_items > 2 * 25:   # past two grid betas
            raise OverBudget("over", what, 60.0, pilot=pilot)

    import bread_stan.ais.tuning as tuning
    original, tuning.keep_pace = tuning.keep_pace, over_at_third_beta
    try:
        with set_up_by(time.monotonic() + 60.0, 60.0), pytest.raises(OverBudget) as over:
            tune(model, HMC(), HMCParams(1.0, 8), starts, seed=3, config=config)
    finally:
        tuning.keep_pace = original
    grid, sds = over.value.measured
    assert grid.size == 2 and grid[0] == 0.0 and sds.shape == (2,) and np.all(sds > 0)


def test_the_searches_for_q_stop_before_one_that_would_end_past_the_deadline():
    """Issue 42: posteriordb's nn_rbm1bJ10 (d = 7,951) spent 20 minutes of a 10-minute
    budget in its four Laplace mode searches, which cannot stop midway (the guard before
    them only knows a lower bound on their cost).  Now no search starts that, at the
    mean time of those before it, would end past the deadline; the run then has no
    Gaussian q, as when the guard refuses.  Here the deadline has passed, so the first
    search runs and the second does not; without a deadline all four run.
    Break tried: the check removed from the Laplace loop (no error: the test fails)."""
    from bread_stan.ais import waypoint
    from bread_stan.workflows.base_fit import fit_q

    model, _ = simulate_regression(40, 3, noise_sd=0.5, seed=1)
    pilot = model.sample_prior(np.random.default_rng(0), 16)
    base, record = waypoint.fit_base(model, pilot)
    assert record["fit"] == "laplace"
    with set_up_by(time.monotonic() - 1.0, 60.0):
        with pytest.raises(waypoint.FitPastBudget, match="the mode searches for q: 1 took"):
            waypoint.fit_base(model, pilot)
        with pytest.raises(waypoint.FitPastBudget):   # not Pathfinder instead
            fit_q(model, pilot, seed=1)


class _SlowTarget:
    """A target whose every evaluation takes ``delay`` seconds longer."""

    def __init__(self, model, delay: float):
        self.model, self.delay = model, delay

    # Python 3.12+ checks a runtime Protocol with getattr_static, which does not see
    # attributes that __getattr__ forwards: the Target's members are spelled out.
    @property
    def dim(self) -> int:
        return self.model.dim

    def __getattr__(self, name):
        return getattr(self.model, name)

    def evaluate(self, points, gradient=True):
        time.sleep(self.delay)
        return self.model.evaluate(points, gradient=gradient)


def test_a_pathfinder_run_for_q_stops_at_its_part_of_half_the_time_left(monkeypatch):
    """Issue 42: posteriordb's nn_rbm1bJ10 spent 10.7 minutes of a 10-minute budget in one
    Pathfinder run for q (no Laplace mode), which left no time for any pilot.  Now the
    runs together get half the time left, each an equal part of what remains, and one
    that has not ended in its part stops: no q (as when a search cannot start in time),
    nothing of its partial path kept.  Here 1 s is left, so each of 4 runs gets 0.125 s,
    and a run whose evaluations take 20 ms each cannot end in it.  A limit that is not
    reached changes no number.  Breaks tried: the limit not passed to pathfinder (the run
    ends after seconds and returns q), the check in L-BFGS's callback removed (it stops
    in the ELBOs instead): the test fails on each."""
    from bread_stan.ais import waypoint
    from bread_stan.approx import PathfinderOutOfTime, pathfinder
    from bread_stan.workflows import base_fit

    model, _ = simulate_regression(40, 3, noise_sd=0.5, seed=1)
    pilot = model.sample_prior(np.random.default_rng(0), 16)
    free = pathfinder(model, seed=4)
    limited = pathfinder(model, seed=4, seconds=1e6)
    assert np.array_equal(free.mean, limited.mean) and np.array_equal(free.cov, limited.cov)
    slow = _SlowTarget(model, 0.02)
    with pytest.raises(PathfinderOutOfTime, match=r"not ended after 0.1 s \(L-BFGS at iterate"):
        pathfinder(slow, seed=4, seconds=0.1)

    def no_mode(*args, **kwargs):
        raise waypoint.WaypointError("no mode")
    monkeypatch.setattr(waypoint, "fit_base", no_mode)
    base, record = base_fit.fit_q(model, pilot, seed=1)   # no budget: Pathfinder's q
    assert record["fit"] == "pathfinder"
    began = time.perf_counter()
    with set_up_by(time.monotonic() + 1.0, 60.0):
        with pytest.raises(waypoint.FitPastBudget, match="run 1 of 4 had not ended after"):
            base_fit.fit_q(slow, pilot, seed=1)
    assert time.perf_counter() - began < 0.125 + 0.5   # stopped within its part (+ 1 step)


def test_the_elbo_that_compares_pathfinder_runs_stops_with_the_runs_part_and_changes_nothing():
    """Measured on nn_rbm1bJ10 (d = 7,951) at --budget 10 after the limit above: the search
    stopped in time, but the ELBO of its dense Gaussian (256 draws, O(d^2) each) then ran
    on, and the run took 10.1 of the 10 minutes.  The ELBO now checks the run's limit
    between blocks of 16 draws (None once past it, so fit_q stops as for the search), and
    the blocks give the number of one batch, bit for bit.  Break tried: the check removed
    (the slow ELBO returns a number): the test fails."""
    from bread_stan.approx import pathfinder
    from bread_stan.workflows import base_fit

    model, _ = simulate_regression(40, 3, noise_sd=0.5, seed=1)
    fitted = pathfinder(model, seed=4)
    draws = fitted.sample(np.random.default_rng(7), base_fit.ELBO_DRAWS)
    ev = model.evaluate(draws, gradient=False)
    whole = float(np.mean(ev.log_prior + ev.log_lik - fitted.log_q(draws)))
    assert base_fit._elbo(model, fitted, 7) == whole
    assert base_fit._elbo(model, fitted, 7, until=time.perf_counter() + 60.0) == whole
    slow = _SlowTarget(model, 0.02)   # 16 blocks: 0.32 s at least
    began = time.perf_counter()
    assert base_fit._elbo(slow, fitted, 7, until=began + 0.05) is None
    assert time.perf_counter() - began < 0.05 + 0.1   # one block past the limit at most

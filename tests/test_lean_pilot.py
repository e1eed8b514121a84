"""A leaner pilot where the requested one would overrun a budget in minutes.

Reproduction (issue 42): in the posteriordb sweep at a 10-minute budget, the radon
programs stopped in their Gaussian path's pilot ("the pilot tuning nuts along beta alone
would take about 11 minutes (18 of 395 after 30 s)"), so the run named no step count.
Here the pilot's pace check is made to report such an overrun once (its clock is not
the test's to control), and the run pilots again, leaner, and goes on.

Exact tests of the level chosen (:func:`~bread_stan.workflows.lean_pilot.leaner`: the
transitions of each level against the time left) and of the stop that states the budget
the leanest pilot needs; one Stan test runs ``bread`` end to end: the leaner pilot is
recorded, the verdict's reproducing command names it and gives the same numbers bit for
bit, and the same command on the same ``--out`` resumes without a pilot.
Breaks tried: ``lean_settings`` returning the first level whatever the time left (the
level tests fail), ``concrete`` not applying the recorded pilot (the resume pilots
again with the requested settings: its fingerprint differs and the run is refused),
the pilot flag dropped from the pace check (the run stops instead of piloting again).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bread_stan.ais.budget import budget_sentence
from bread_stan.ais.path_choice import PathChoice
from bread_stan.deadline import OverBudget, set_up_by
from bread_stan.workflows.auto_path import concrete
from bread_stan.ais.pilot_grid import pilot_transitions
from bread_stan.workflows.lean_pilot import SHARE, lean_settings, leaner
from bread_stan.workflows.settings import RunSettings, SamplerSettings


def test_the_largest_level_that_fits_its_share_of_the_time_left():
    default = SamplerSettings()   # 16 grid betas, 20 transitions: 16 x 25 - 5 = 395
    assert pilot_transitions(16, 20, 5) == 395
    # the levels take 223, 145 and 99 of the 395 transitions: 56.5, 36.7 and 25.1 s of 100
    for allowed, level in ((60, (12, 14)), (40, (10, 10)), (30, (8, 8)), (20, None)):
        fits, leanest, seconds = leaner(default, 100.0, allowed)
        assert fits == (None if level is None
                        else {"pilot_grid": level[0], "pilot_steps": level[1]})
        assert leanest == {"pilot_grid": 8, "pilot_steps": 8}
        assert seconds == pytest.approx(100.0 * 99 / 395)
    # the levels are fractions of the requested pilot, never above it, at least 2 each
    fits, leanest, _ = leaner(SamplerSettings(pilot_grid=6, pilot_steps=20), 100.0, 1e9)
    assert fits == {"pilot_grid": 4, "pilot_steps": 14}
    assert leanest == {"pilot_grid": 3, "pilot_steps": 8}
    assert leaner(SamplerSettings(pilot_grid=2, pilot_steps=2), 100.0, 1e9) == (None, {},
                                                                                100.0)


def _pilot_over(needed: float, pilot: bool = True) -> OverBudget:
    return OverBudget("not converged within the budget of 10 minutes: the pilot tuning "
                      "nuts along beta alone would take about 11 minutes",
                      "the pilot tuning nuts along beta", needed, pilot=pilot)


def test_a_pilot_past_the_budget_gets_the_level_that_fits_and_other_stops_pass_through():
    sampler = SamplerSettings()
    with set_up_by(time.monotonic() + 500.0, 600.0):   # 100 s of the 600 spent
        level = lean_settings(_pilot_over(660.0), sampler, 600.0, "m")
        # half of the 500 s left is 250 s: 660 x 223/395 = 373 s does not fit, 660 x
        # 145/395 = 242 s does
        assert level == {"pilot_grid": 10, "pilot_steps": 10}
        with pytest.raises(OverBudget) as same:   # a check's overrun is not a pilot's
            lean_settings(_pilot_over(660.0, pilot=False), sampler, 600.0, "m")
        assert "leanest" not in str(same.value)
        with pytest.raises(OverBudget) as stopped:   # the leanest needs 4,000 x 99/395 s
            lean_settings(_pilot_over(4000.0), sampler, 600.0, "m")
    lean_need = 4000.0 * 99 / 395
    assert stopped.value.pilot and stopped.value.needed == pytest.approx(lean_need)
    text = str(stopped.value)
    assert "at its leanest (8 grid betas, 8 transitions at each)" in text
    # the budget at which the leanest pilot takes its share: 100 s spent + 1,003 s / 0.5
    need = (100.0 + lean_need / SHARE) / 60
    assert text.count("needs a budget above") == 1
    assert f"needs a budget above {need:.3g} minutes" in text
    with pytest.raises(OverBudget):   # no deadline (a run without a budget in minutes)
        lean_settings(_pilot_over(660.0), sampler, None, "m")


def test_the_recorded_pilot_is_the_runs_and_its_reproduction_names_it():
    lean = {"pilot_grid": 10, "pilot_steps": 10}
    choice = PathChoice("auto", "gaussian", "why", budget_minutes=10.0, pilot=lean)
    settled = concrete(SamplerSettings(), RunSettings(path="auto"), choice)
    assert (settled.sampler.pilot_grid, settled.sampler.pilot_steps) == (10, 10)
    assert PathChoice(**choice.to_dict()) == choice
    assert not choice.holds_for(20.0) and choice.holds_for(10.0)
    record = {"chosen": [10, 40], "stopped": "converged", "budget_minutes": 10.0,
              "level": 1.0}
    text = budget_sentence(record, 0.5, "gaussian", lean)
    assert "--steps 10,40 --path gaussian --pilot-grid 10 --pilot-steps 10 gives" in text
    assert "--pilot-grid" not in budget_sentence(record, 0.5, "gaussian")


@pytest.mark.stan
def test_a_run_whose_pilot_would_overrun_pilots_leaner_records_it_and_reproduces(
        tmp_path, monkeypatch):
    from bread_stan.ais import tuning
    from bread_stan.workflows.bread import bread
    from test_budget import normal_mean_programs
    from test_dask import assert_same_numbers

    model, simulator, data = normal_mean_programs()
    sampler = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16)
    common = dict(chains=20, seed=1, progress=False, path="prior")
    calls = []

    def over_once(what, done, total, began, pilot=False):
        calls.append(what)
        # 10 minutes of pilot in a 10-minute budget: half of the ~600 s left is ~300 s;
        # (12, 14) takes 600 x 223/395 = 339 s, (10, 10) 600 x 145/395 = 220 s
        if len(calls) == 1:
            raise OverBudget("not converged within the budget of 10 minutes: "
                             f"{what} alone would take about 10 minutes", what, 600.0,
                             pilot=pilot)

    monkeypatch.setattr(tuning, "keep_pace", over_once)
    budgeted = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "budgeted",
                     run=RunSettings(steps="auto", budget_minutes=10, **common))
    lean = {"pilot_grid": 10, "pilot_steps": 10}
    choice = budgeted.extra["path_choice"]
    assert choice["pilot"] == lean and choice["budget_minutes"] == 10
    assert len(budgeted.extra["tuning"]["grid_betas"]) < 16   # the leaner grid ran
    chosen = ",".join(map(str, budgeted.extra["auto_steps"]["chosen"]))
    assert f"--steps {chosen} --pilot-grid 10 --pilot-steps 10 gives the same" in \
        budgeted.headline()
    monkeypatch.undo()
    again = bread(model, simulator, data, sampler=SamplerSettings(
                      kernel="hmc", n_leapfrog=5, pilot_chains=16, **lean),
                  out_dir=tmp_path / "again",
                  run=RunSettings(steps=tuple(budgeted.extra["auto_steps"]["chosen"]),
                                  **common))
    assert_same_numbers(budgeted, again)
    # the same command on the same --out reads the leaner pilot back: nothing is piloted
    monkeypatch.setattr(tuning, "tune", None)
    monkeypatch.setattr("bread_stan.ais.path_kinds.tune", None)
    same = bread(model, simulator, data, sampler=sampler, out_dir=tmp_path / "budgeted",
                 run=RunSettings(steps="auto", budget_minutes=10, **common))
    assert same.extra["path_choice"] == choice
    for a, b in zip(budgeted.steps, same.steps, strict=True):
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)

"""Progress of long phases (bread_stan.progress): when lines are logged and what they say;
when a bar shows."""

import logging

import numpy as np

from bread_stan.ais.tuning import TuningConfig, tune
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.progress import PaceLog, duration, progress_bar


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_lines_every_interval_with_the_time_left_at_the_recent_pace():
    clock = _Clock()
    pace = PaceLog("tuning nuts", 10, "betas", every=30.0, clock=clock)
    clock.now = 10.0
    assert pace.tick(1) is None  # 10 s < 30 s since the start: no line
    clock.now = 20.0
    assert pace.tick(2) is None
    clock.now = 30.0
    # 3 items in 30 s: 10 s an item, 7 left -> 70 s
    assert pace.tick(3, "beta = 0.01") == ("tuning nuts: 3 of 10 betas after 30 s "
                                           "(beta = 0.01); about 70 s more at the recent pace")
    clock.now = 50.0
    assert pace.tick(4) is None  # 20 s since the previous line
    clock.now = 90.0
    # since the previous line: 2 items in 60 s, 30 s an item, 5 left -> 150 s
    # (the mean since the start, 22.5 s an item, would say 112 s)
    assert pace.tick(5) == ("tuning nuts: 5 of 10 betas after 90 s; about 2.5 minutes more "
                            "at the recent pace")
    clock.now = 91.0
    assert pace.tick(10) == "tuning nuts: 10 of 10 betas after 91 s"  # the end: always
    assert len(pace.lines) == 3


def test_duration_words():
    assert duration(45.0) == "45 s"
    assert duration(150.0) == "2.5 minutes"
    assert duration(3 * 3600.0) == "3 hours"
    assert duration(float("nan")) == duration(float("inf")) == "an unknown time"


def test_the_pilot_logs_its_progress_when_asked_and_no_bar_shows(caplog):
    """Under pytest stderr is not a terminal, so ``progress=True`` gives lines, not a bar;
    the last beta always gets one."""
    model, _ = simulate_regression(20, 2, noise_sd=0.5, seed=1)
    draws = model.sample_prior(np.random.default_rng(0), 8)
    config = TuningConfig(pilot_grid=4, pilot_steps=4, adapt_metric=False, pilot_floor=1e-3)
    with caplog.at_level(logging.INFO, logger="bread_stan"):
        tune(model, HMC(), HMCParams(0.5, 4), draws, seed=3, config=config, progress=True)
    assert [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("tuning hmc: 4 of 4 betas after")]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bread_stan"):
        tune(model, HMC(), HMCParams(0.5, 4), draws, seed=3, config=config, progress=False)
    assert not [r for r in caplog.records if "of 4 betas" in r.getMessage()]


class _Terminal:
    """A stand-in stderr that says it is a terminal."""

    def __init__(self):
        self.text = []

    def isatty(self):
        return True

    def write(self, text):
        self.text.append(text)
        return len(text)

    def flush(self):
        pass


def test_a_bar_only_when_asked_for_on_a_terminal_with_tqdm(monkeypatch):
    import sys

    assert progress_bar(5, True, "AIS") is None  # under pytest stderr is not a terminal
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert progress_bar(5, False, "AIS") is None  # on a terminal, but not asked for
    bar = progress_bar(5, True, "AIS")
    assert bar is not None and bar.total == 5
    bar.close()
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # tqdm not installed
    assert progress_bar(5, True, "AIS") is None

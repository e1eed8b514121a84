"""The calibration table's verdicts (scripts/studies/calibration.py): the per-row binomial rule,
the confirmatory rule for a flagged row and the family-wise false-alarm rate the footer
states.  Exact: small tables written by hand, numbers from scipy's binomial."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy import stats

from script_module import load_script


def _script():
    return load_script("studies/calibration")


def _table(seeds, first_seed, rows):
    return pd.DataFrame([dict(interval=name, chains=n, T=T, level=0.9, nominal_miss=0.05,
                              miss_low=low, miss_high=high, seeds=seeds, first_seed=first_seed,
                              reach_low=1.0, reach_high=1.0)
                         for name, n, T, low, high in rows])


def test_a_flagged_row_is_judged_on_its_rerun_on_fresh_seeds():
    cal = _script()
    official = cal.verdicts(_table(200, 0, [("bound, 5 exact draws", 50, 10, 0.090, 0.035),
                                            ("AIDE, two Gaussians", 100, 0, 0.030, 0.085),
                                            ("AIDE, two Gaussians", 20, 0, 0.040, 0.080)]))
    # 0.080 is the 97.5% quantile of Binomial(200, 0.05) / 200: at the limit is ok.
    assert list(official["verdict"]) == ["MISSES TOO OFTEN", "MISSES TOO OFTEN", "ok"]
    rerun = _table(2000, 2000, [("bound, 5 exact draws", 50, 10, 0.053, 0.046),
                                ("AIDE, two Gaussians", 100, 0, 0.0605, 0.041)])
    judged = cal.confirm(official, [rerun])
    assert list(judged["verdict"]) == [
        "flagged; seeds 2000-3999: 0.053 / 0.046, ok",
        "flagged; seeds 2000-3999: 0.060 / 0.041, MISSES TOO OFTEN",  # 121 > 120 of 2000
        "ok"]
    # A flagged row without a rerun keeps its flag.
    assert cal.confirm(official, [])["verdict"].iloc[0] == "MISSES TOO OFTEN"


def test_a_rerun_must_be_large_and_on_fresh_seeds():
    cal = _script()
    official = cal.verdicts(_table(200, 0, [("bound, 5 exact draws", 50, 10, 0.090, 0.035)]))
    for seeds, first in ((2000, 100), (1000, 2000)):  # overlapping; too small
        with pytest.raises(SystemExit, match="at least 2000 seeds outside 0-199"):
            cal.confirm(official, [_table(seeds, first, [("bound, 5 exact draws", 50, 10,
                                                          0.05, 0.05)])])


def test_the_footer_states_the_family_wise_false_alarm_rate():
    cal = _script()
    table = cal.verdicts(_table(200, 0, [("AIDE, two Gaussians", n, 0, 0.05, 0.05)
                                         for n in (20, 50, 100)]))
    table["one_sided"] = [None, "upper", None]  # a one-sided limit counts one side
    f = cal.false_alarms(table)
    first = stats.binom.sf(16, 200, 0.05)  # more than 16 of 200 misses (limit 0.080)
    second = stats.binom.sf(120, 2000, 0.05)  # more than 120 of 2000 (limit 0.060)
    assert f["sides"] == 5
    assert f["flagged"] == pytest.approx(5 * first)
    assert f["any_flagged"] == pytest.approx(1 - (1 - first) ** 5)
    assert f["family_wise"] == pytest.approx(5 * first * second)
    assert f"at most {5 * first * second:.3f}" in cal.multiplicity(table)

"""The protocol's data check: do data sets simulated at the fitted hyperparameters look
like the real data in elementary ways?

The agreement score compares AIS curves; it cannot see simulated data that are absurd
as data when AIS fails on both (a regression with vague priors whose simulated outcomes
ran from -20115 to -10254 against a real range of 20 to 144 scored "agree").  This
check compares, for every data variable the simulator generates, four statistics of the
real data (mean, standard deviation, minimum, maximum) with their distribution over
``n`` data sets simulated with the fitted hyperparameters (fresh parameters from their
prior given those hyperparameters, as the protocol's simulated data are drawn).

Test: a two-sided Monte Carlo p-value per statistic, p = 2 min(#{sim >= real},
#{sim <= real}) + 1) / (n + 1) (capped at 1), and the check fails when any p is below
``alpha`` divided by the number of statistics (Bonferroni).  With n = 1000 the
smallest p is 0.002, so up to about 25 statistics can be tested at alpha = 0.05.  What it
can see: simulated data on the wrong scale, location or range (a missing intercept, a
noise or prior scale far off).  What it cannot: differences in the dependence between
observations or in a statistic not among the four; a model that fits only after its
hyperparameters are fitted passes, as it should.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
from ..errors import InputError

__all__ = ["DataCheck", "data_check"]

_STATISTICS = {"mean": np.mean, "sd": np.std, "min": np.min, "max": np.max}


@dataclass(frozen=True)
class DataCheck:
    """Outcome of :func:`data_check`: one table row per (variable, statistic)."""

    passed: bool
    alpha: float
    n_simulated: int
    table: pd.DataFrame
    message: str

    def to_dict(self) -> dict:
        return {"passed": self.passed, "alpha": self.alpha, "n_simulated": self.n_simulated,
                "message": self.message,
                "table": json.loads(self.table.to_json(orient="records"))}

    @classmethod
    def from_dict(cls, data: Mapping) -> "DataCheck":
        return cls(bool(data["passed"]), float(data["alpha"]), int(data["n_simulated"]),
                   pd.DataFrame(data["table"]), str(data["message"]))


def _p_value(real: float, sims: np.ndarray) -> float:
    above = int(np.count_nonzero(sims >= real))
    below = int(np.count_nonzero(sims <= real))
    return float(min(1.0, 2 * (min(above, below) + 1) / (sims.size + 1)))


def data_check(real: Mapping[str, object], simulated: Mapping[str, np.ndarray], *,
               alpha: float = 0.05) -> DataCheck:
    """Compare real data with simulated data sets (module docstring).

    ``simulated`` maps each variable the simulator generates to an array with one row
    per simulated data set; variables absent from ``real`` are ignored.
    """
    if not 0 < alpha < 1:
        raise InputError("alpha must lie in (0, 1)")
    rows = []
    n = 0
    for name, draws in simulated.items():
        if name not in real:
            continue
        sims = np.asarray(draws, dtype=float)
        n = sims.shape[0]
        sims = sims.reshape(n, -1)
        values = np.asarray(real[name], dtype=float).ravel()
        if values.size != sims.shape[1] or not np.all(np.isfinite(values)):
            continue
        stats = _STATISTICS if values.size > 1 else {"mean": np.mean}
        for stat, fn in stats.items():
            r = float(fn(values))
            s = fn(sims, axis=1)
            sd = float(np.std(s))
            rows.append({"variable": name, "statistic": stat, "real": r,
                         "simulated_mean": float(np.mean(s)), "simulated_sd": sd,
                         "simulated_low": float(np.quantile(s, 0.025)),
                         "simulated_high": float(np.quantile(s, 0.975)),
                         "z": (r - float(np.mean(s))) / sd if sd > 0 else (
                             0.0 if r == float(np.mean(s)) else np.inf),
                         "p_value": _p_value(r, s)})
    table = pd.DataFrame(rows, columns=["variable", "statistic", "real", "simulated_mean",
                                        "simulated_sd", "simulated_low", "simulated_high",
                                        "z", "p_value"])
    if table.empty:
        return DataCheck(True, alpha, n, table, "data check: no simulated data variable to "
                         "compare with the real data")
    cut = alpha / len(table)
    bad = table[table["p_value"] < cut]
    if bad.empty:
        message = (f"data check passed: the real data's mean, sd, min and max lie within what "
                   f"{n} data sets simulated at the fitted hyperparameters produce "
                   f"(Bonferroni alpha {alpha:g} over {len(table)} statistics)")
        return DataCheck(True, alpha, n, table, message)
    worst = bad.loc[bad["z"].abs().idxmax()]
    parts = [f"{r.variable} {r.statistic} {r.real:.4g} (95% of simulated data sets: "
             f"{r.simulated_low:.4g} to {r.simulated_high:.4g}; p = {r.p_value:.2g})"
             for r in bad.itertuples()]
    message = (f"DATA CHECK FAILED: the data simulated at the fitted hyperparameters are unlike "
               f"the real data: {'; '.join(parts)}, below the Bonferroni cut {cut:.2g} over "
               f"{n} simulated data sets (worst: {worst.variable} {worst.statistic}, "
               f"{abs(worst.z):.3g} simulated sds off). The real data lie at or beyond the edge "
               "of what the fitted model produces, so the simulated data are a poor proxy for "
               "them in this respect and bounds on the simulated data may not carry over. Look "
               "for a missing intercept, a scale far off, or hyperpriors that keep the fitted "
               "scales from matching the data.")
    return DataCheck(False, alpha, n, table, message)

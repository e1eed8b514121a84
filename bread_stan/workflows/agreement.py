"""The protocol's agreement score: does the real data's forward AIS curve look like
those of data sets simulated from the fitted model?

Agreement score.  Let m(T) be the median forward estimate over chains after T
distributions and d(T) = m(T) - max_T' m(T') the shifted curve (the *deficit*,
<= 0).  The reference is not one simulated data set but n = 1 + ``replicates``
of them (D_sim and replicates D_1..D_K, each drawn afresh with eta_hat and
run exactly as the real data are: its own tuned kernel, forward AIS from the
same prior draws).  If the model fits, the real data set is one more draw
from the same distribution, so d_real(T) should fall in the prediction band of
the simulated curves: centre c(T), their mean; sd s(T), their sample sd (no
smaller than the Monte Carlo error of one curve); half-width
``t_{n-1}(1 - alpha / 2m) * s(T) * sqrt(1 + 1/n)`` with m the number of T
(Bonferroni: a well-specified model leaves the band anywhere with probability
about ``agreement_alpha`` = 0.05).  The relative difference at T is the part
of ``|d_real - c|`` outside the band divided by ``max(|d_real|, |c|, floor)``
(floor 1 nat, so two converged curves cannot disagree through tiny numbers):
how far, as a fraction of the deficit, the real curve is from anything the
model produces.  The score is its largest value over T, and the curves are
flagged when it exceeds ``agreement_threshold`` (0.1, the practical tolerance
that the S-sweep test uses too).  The band measures both Monte Carlo error and
how much the deficit varies between data sets of the model, which an earlier
score built on Monte Carlo error alone could not tell apart (a single simulated
data set scored 0 to 0.14 on well-specified runs of one test model, by seed).
``replicate_max_steps`` limits the replicates to cheaper T; the score uses the
T that all curves ran.  Calibration (5 replicates, so 6 simulated curves): on a
test model (``scripts/studies/agreement_calibration.py``, ``summary.md`` there) real
noise that fits was flagged 0 of 30 times with the default kernel NUTS (0 of 10
with HMC, L = 5; every score 0, no run outside the band), noise twice what the
prior allows 3 of 10 with either kernel, twenty times 10 of 10 (scores 0.98 to 1
with NUTS, 0.95 to 1 with HMC); in ``scripts/studies/protocol_study.py`` (HMC) linear
and logistic regression, AR(1), the mixture and centred MovieLens score 0, and
the misspecified uncentred MovieLens ratings score 0.21 (flagged: at 10 and 100
distributions the real deficit is 4288 and 882 nats against simulated means of
1938 and 631, beyond bands of 1452 and 86).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from ..errors import InputError

__all__ = ["Agreement", "agreement_score", "deficit_curve", "shifted_quartiles"]


def _median_se(x: np.ndarray) -> float:
    """Standard error of a sample median, from the IQR (normal approximation)."""
    q25, q75 = np.percentile(x, [25, 75])
    return float(1.2533 * (q75 - q25) / 1.349 / np.sqrt(x.size))


def shifted_quartiles(curves: Mapping[str, Mapping[int, np.ndarray]],
                      shifts: Mapping[str, float]) -> pd.DataFrame:
    """Quartiles over chains of each curve at each T, minus that curve's shift."""
    rows = []
    for name, by_steps in curves.items():
        for T in sorted(by_steps):
            x = np.asarray(by_steps[T], dtype=float)
            q25, q50, q75 = np.percentile(x, [25, 50, 75])
            s = shifts[name]
            rows.append({"curve": name, "steps": T, "q25": q25 - s, "median": q50 - s,
                         "q75": q75 - s, "shift": s, "chains": x.size})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Agreement:
    """How alike the shifted forward curves on real and simulated data are."""

    score: float
    threshold: float
    flagged: bool
    worst_steps: int
    n_simulated: int
    table: pd.DataFrame

    @property
    def message(self) -> str:
        if self.flagged:
            return (f"real and simulated forward curves disagree (score {self.score:.2f} > "
                    f"{self.threshold:g} at {self.worst_steps} distributions, outside the "
                    f"band of {self.n_simulated} simulated data sets): the simulated data "
                    "are not a fair proxy for the real data; suspect model misspecification")
        return (f"real and simulated forward curves agree (score {self.score:.2f}, "
                f"threshold {self.threshold:g}, {self.n_simulated} simulated data sets)")

    def to_dict(self) -> dict:
        return {"score": self.score, "threshold": self.threshold, "flagged": self.flagged,
                "worst_steps": self.worst_steps, "n_simulated": self.n_simulated,
                "message": self.message,
                "table": json.loads(self.table.to_json(orient="records"))}


def deficit_curve(by_steps: Mapping[int, np.ndarray], steps) -> np.ndarray:
    """Median forward estimate at each T in ``steps`` minus the largest of them."""
    med = np.array([np.median(by_steps[T]) for T in steps])
    return med - med.max()


def agreement_score(real: Mapping[int, np.ndarray], sims: Sequence[Mapping[int, np.ndarray]],
                    *, threshold: float = 0.1, alpha: float = 0.05,
                    floor: float = 1.0) -> Agreement:
    """Is the real deficit curve inside the spread of simulated data sets' curves?

    ``real`` and each of ``sims`` (at least two simulated data sets drawn with
    the fitted hyperparameters) map numbers of distributions to per-chain
    forward log estimates.  See the module docstring for the definition.
    """
    sims = list(sims)
    if len(sims) < 2:
        raise InputError("the agreement score needs at least two simulated data sets (the "
                         "protocol's D_sim and >= 1 replicate; set ProtocolSettings.replicates "
                         "or --replicates, 4 or more for a useful band)")
    steps = sorted(set(real).intersection(*sims))
    if len(steps) < 2:
        raise InputError("the agreement score needs at least two common numbers of steps")
    n = len(sims)
    d_real = deficit_curve(real, steps)
    d_sims = np.array([deficit_curve(c, steps) for c in sims])
    centre = d_sims.mean(axis=0)
    spread = d_sims.std(axis=0, ddof=1)
    # A chance-low sample sd cannot go below the Monte Carlo error of one curve.
    mc = np.sqrt(np.mean([[_median_se(np.asarray(c[T])) ** 2 for T in steps] for c in sims],
                         axis=0))
    spread = np.maximum(spread, mc)
    quantile = stats.t.ppf(1 - alpha / (2 * len(steps)), df=n - 1)
    half_width = quantile * spread * np.sqrt(1 + 1 / n)
    excess = np.maximum(np.abs(d_real - centre) - half_width, 0.0)
    rel = excess / np.maximum(np.maximum(np.abs(d_real), np.abs(centre)), floor)
    worst = int(np.argmax(rel))
    flagged = bool(rel[worst] > threshold)
    table = pd.DataFrame({"steps": steps, "real_shifted_median": d_real,
                          "sim_shifted_median": d_sims[0], "sims_mean": centre,
                          "sims_sd": spread, "half_width": half_width,
                          "unexplained": excess, "relative_difference": rel})
    return Agreement(float(rel.max()), float(threshold), flagged, int(steps[worst]), n, table)


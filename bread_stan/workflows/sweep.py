"""The protocol's S-sweep test: do the reverse curves move with the number S of
transitions that make the approximate reverse start?

S-sweep test.  The reference is the largest S.  For every T and every other S,
Welch's z-test compares the mean reverse estimates (the bound uses means);
p-values are Bonferroni-corrected over all comparisons.  A pair disagrees when
the corrected p-value is below ``sweep_alpha`` (0.01) *and* the difference
exceeds ``max(sweep_floor, sweep_tolerance * gap(T))`` (0.5 nats, 10% of the
gap at T): the test asks whether the reverse curve moves by an amount that
matters for the bound, not whether it moves at all.  The gap is the robust
version of the Jeffreys bound, median reverse minus median forward estimate on
D_sim (a few forward chains started deep in a prior's tail can stall and drag
the mean-based bound to thousands of nats, which would make any tolerance
proportional to it vacuous).  Snapshots of
one chain at different S are positively correlated, which makes the test
conservative (the variance of a difference is overstated).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["SweepTest", "s_sweep_test"]


@dataclass(frozen=True)
class SweepTest:
    """Whether reverse AIS curves depend on the number S of start transitions."""

    passed: bool
    reference_s: int
    table: pd.DataFrame

    @property
    def message(self) -> str:
        if self.passed:
            return (f"reverse curves do not move with S (reference S = {self.reference_s}): "
                    "the approximate reverse start is adequate")
        bad = self.table[self.table["disagree"]]
        where = ", ".join(f"S={int(r.S)} at {int(r.steps)} steps ({r.difference:+.3g} nats)"
                          for r in bad.itertuples())
        return (f"reverse curves move with S (reference S = {self.reference_s}): {where}; "
                "the reverse start is not yet a posterior draw, run more transitions")

    def to_dict(self) -> dict:
        return {"passed": self.passed, "reference_s": self.reference_s,
                "message": self.message,
                "table": json.loads(self.table.to_json(orient="records"))}


def s_sweep_test(reverse: Mapping[tuple[int, int], np.ndarray],
                 gap: Mapping[int, float] | None = None, *, alpha: float = 0.01,
                 tolerance: float = 0.1, floor: float = 0.5) -> SweepTest:
    """Test that mean reverse estimates agree across S at every T.

    ``reverse`` maps (S, T) to per-chain reverse log estimates; ``gap`` maps T
    to the size of the forward-reverse gap there (sets the practical tolerance).  See the module
    docstring for the definition.
    """
    sweep = sorted({S for S, _ in reverse})
    steps = sorted({T for _, T in reverse})
    ref = sweep[-1]
    rows = []
    for T in steps:
        u_ref = np.asarray(reverse[(ref, T)], dtype=float)
        for S in sweep[:-1]:
            u = np.asarray(reverse[(S, T)], dtype=float)
            finite = np.all(np.isfinite(u)) and np.all(np.isfinite(u_ref))
            diff = float(np.mean(u) - np.mean(u_ref)) if finite else np.inf
            se = float(np.sqrt(np.var(u, ddof=1) / u.size + np.var(u_ref, ddof=1) / u_ref.size))
            p = float(2 * stats.norm.sf(abs(diff) / se)) if finite and se > 0 else (
                1.0 if finite and diff == 0 else 0.0)
            b = abs(float(gap[T])) if gap is not None and T in gap else 0.0
            rows.append({"steps": T, "S": S, "mean": float(np.mean(u)),
                         "reference_mean": float(np.mean(u_ref)), "difference": diff,
                         "se": se, "p_value": p, "tolerance": max(floor, tolerance * b)})
    table = pd.DataFrame(rows, columns=["steps", "S", "mean", "reference_mean", "difference",
                                        "se", "p_value", "tolerance"])
    m = max(len(table), 1)
    table["p_adjusted"] = np.minimum(1.0, table["p_value"] * m)
    table["disagree"] = (table["p_adjusted"] < alpha) & (table["difference"].abs()
                                                         > table["tolerance"])
    return SweepTest(not bool(table["disagree"].any()), ref, table)


# --------------------------------------------------------------------------- #
# The result.

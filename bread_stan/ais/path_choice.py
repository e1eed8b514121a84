"""The rule behind ``path="auto"``: temper the likelihood from the prior, or go through a
Gaussian waypoint (:mod:`bread_stan.ais.waypoint`).

The number that decides is the standard deviation of the log likelihood over the
pilot's exact prior draws, the quantity whose inverse the pilot takes as the first beta
where the likelihood matters (``beta_floor`` of
:class:`~bread_stan.ais.tuning.TuningConfig`).  The prior path's pilot cannot place
its grid below ``floor_min`` = 1e-12, so a spread above ``1 / floor_min`` = 1e12 nats
means the first tempered densities change faster than the pilot can follow, and the
likelihood tempers a prior that is vague on the scale the data fix: the
half-Cauchy regression with an uncentred predictor of ``scripts/bench_hard.py`` has
spreads of 2e13 to 1e16 nats on its data sets, and tempering strands its chains (AIS
bounds of 2.4e5 nats at T = 10,000, SMC's best 319 nats), while the waypoint path
reaches 0.06 nats (``scripts/figures/bench_hard/results.md``).  Models where the prior
path works sit far below: Pima about 1e3, NHEFS about 1e5, eight schools at most 3e4,
the conjugate normal mean about 1e2, the vague-prior regression of issue 15 (three
normal(0, 100) coefficients, a predictor near 100) 1e9 to 1e11
(``scripts/path_choice_survey.py``).

What it cannot see: a funnel that the likelihood's spread does not announce (a
hierarchical scale whose prior is not vague on the data's scale), a prior path that
strands chains at spreads below 1e12, nor whether the waypoint's Laplace fit exists
(checked separately: no mode, and ``auto`` keeps the prior path).  Thirty-two draws of
a heavy-tailed quantity give a noisy sd; the margins on the models above are one
decade or more on either side.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .tuning import TuningConfig, loglik_sd

__all__ = ["PathChoice", "PATHS", "SPREAD_LIMIT", "choose", "given"]

PATHS = ("auto", "prior", "waypoint", "gaussian")  # "gaussian" only when asked for
SPREAD_LIMIT = 1.0 / TuningConfig().floor_min  # 1e12 nats: the pilot's floor cannot go lower


@dataclass(frozen=True)
class PathChoice:
    """Which path a run took and why: ``requested`` ("auto", "prior", "waypoint" or
    "gaussian"), ``path`` the one taken, ``reason`` one sentence, and the number it was
    based on (``loglik_sd`` over ``n_draws`` prior draws against ``limit``; None when no
    number was needed)."""

    requested: str
    path: str
    reason: str
    loglik_sd: float | None = None
    n_draws: int | None = None
    limit: float | None = None

    @property
    def tempering_strands(self) -> bool:
        """Whether the number says tempering from the prior would strand chains."""
        return self.loglik_sd is not None and self.loglik_sd > self.limit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def message(self) -> str:
        """One line for logs and reports."""
        how = "chosen automatically" if self.requested == "auto" else "as requested"
        return f"path {self.path} ({how}): {self.reason}"


def given(requested: str, path: str, reason: str,
          choice: PathChoice | None = None) -> PathChoice:
    """A path taken without the rule or against it (``requested`` is what was asked
    for): ``reason`` says why; ``choice`` keeps the rule's number when it was measured."""
    if choice is None:
        return PathChoice(requested, path, reason)
    return PathChoice(requested, path, reason, choice.loglik_sd, choice.n_draws, choice.limit)


def choose(log_lik, limit: float = SPREAD_LIMIT) -> PathChoice:
    """The rule on the log likelihood at the pilot's prior draws (n,): "waypoint" when
    its standard deviation (finite values only) exceeds ``limit``, else "prior"."""
    values = np.asarray(log_lik, dtype=float).ravel()
    sd = loglik_sd(values)
    n = int(np.count_nonzero(np.isfinite(values)))
    if sd > limit:
        reason = (f"the log likelihood's sd over {n} prior draws is {sd:.3g} nats, above "
                  f"{limit:.3g} (the pilot's floor cannot reach beta = 1/sd): tempering "
                  "from the prior would strand chains, so the run goes through a Gaussian "
                  "waypoint")
        return PathChoice("auto", "waypoint", reason, sd, n, float(limit))
    reason = (f"the log likelihood's sd over {n} prior draws is {sd:.3g} nats, at most "
              f"{limit:.3g}: tempering from the prior")
    return PathChoice("auto", "prior", reason, sd, n, float(limit))

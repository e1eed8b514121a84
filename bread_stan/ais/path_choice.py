"""The rules behind ``path="auto"``: temper the likelihood from the prior, start from a
Laplace Gaussian (:mod:`bread_stan.ais.gaussian_path`), or go through a Gaussian waypoint
(:mod:`bread_stan.ais.waypoint`).  :mod:`bread_stan.workflows.auto_path` applies them.

**The spread rule** (:func:`choose`).  The standard deviation of the log likelihood over
the pilot's exact prior draws is the quantity whose inverse the pilot takes as the first
beta where the likelihood matters (``pilot_floor`` of
:class:`~bread_stan.ais.tuning.TuningConfig`).  The prior path's pilot cannot place its
grid below ``floor_min`` = 1e-12, so a spread above ``1 / floor_min`` = 1e12 nats means
the first tempered densities change faster than the pilot can follow: tempering would
strand chains (the half-Cauchy regression with an uncentred predictor of
``scripts/bench/bench_hard.py`` has spreads of 2e13 to 1e16 nats, and AIS bounds of 2.4e5 nats
at T = 10,000).

**The cost rule** (:class:`PathCost`, :func:`cheaper`, :class:`abandon_when_costlier`).
Where both the prior path and the Gaussian path can run, each pilot measures its path's
thermodynamic length L (:func:`~bread_stan.ais.betas.thermodynamic_length`) and its
kernel's gradients per transition g.  AIS's gap at T distributions is about L^2 / (2T),
so a gap eps costs about g L^2 / (2 eps) gradients a chain, and g L^2 ranks the paths at
any accuracy; the cheaper is taken (a tie goes to the prior path, which needs no
normaliser).  The Gaussian path's pilot runs first; the prior path's is abandoned as
soon as the part of its path measured so far already costs more (the rest can only add
length), or its transitions take more than ``GRADIENT_RATIO`` = 8 times the Gaussian
path's gradients, so a funnel-shaped prior does not cost a full pilot, or it has spent
``BUDGET_RATIO`` times the Gaussian pilot's gradients.  Those two caps apply only where
the Gaussian path is predicted to be accurate anyway (its gap L^2 / (2T) at the run's
largest T at most ``CAPPED_GAP`` = 1 nat): where it is not (a long path from a poor q,
such as a Pathfinder fit to a funnel), the choice matters and the prior pilot runs until
it is shown costlier or finishes.  Gradients, not seconds: the same seed makes the same
choice on any machine.

What the cost rule cannot see: how well the kernels mix (L^2 / (2T) is the gap of
perfectly mixing transitions; a path whose chains lag has a larger gap than its length
says), a pilot that mis-measures the sd of the log likelihood at its grid betas, and the
Gaussian path's extra error from the estimate of the prior's normaliser (the path is a
candidate only when that estimate is trustworthy).  Where the Gaussian path cannot run,
the spread rule alone decides, as before: the waypoint above 1e12, else the prior path.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .betas import length_so_far
from .path_kinds import KINDS
from .pilot_grid import loglik_sd
from .tuning import TuningConfig

__all__ = ["PathChoice", "PathCost", "PATHS", "SPREAD_LIMIT", "choose", "given",
           "cheaper", "abandon_when_costlier", "GRADIENT_RATIO", "BUDGET_RATIO",
           "CAPPED_GAP"]

PATHS = ("auto", *KINDS)  # "auto": chosen by the pilots
SPREAD_LIMIT = 1.0 / TuningConfig().floor_min  # 1e12 nats: the pilot's floor cannot go lower


@dataclass(frozen=True)
class PathCost:
    """A path's cost as its pilot measured it: the thermodynamic length ``length``
    (:func:`~bread_stan.ais.betas.thermodynamic_length`) and the kernel's mean
    ``gradients`` per chain and transition.  AIS's gap at T distributions is about
    L^2 / (2 T), so reaching a gap eps takes about g L^2 / (2 eps) gradients a chain:
    ``cost`` = g L^2 compares paths at any accuracy.  ``complete`` False: the pilot
    was abandoned part way, and ``length`` is the part it measured (a lower bound).
    ``pilot_gradients``: the gradient evaluations the pilot spent (all chains; None:
    not known)."""

    length: float
    gradients: float
    complete: bool = True
    pilot_gradients: float | None = None

    @property
    def cost(self) -> float:
        return float(self.gradients * self.length ** 2)

    def describe(self) -> str:
        bound = "" if self.complete else " at least"
        return (f"length{bound} {self.length:.3g} x {self.gradients:.3g} gradients a "
                f"transition")


GRADIENT_RATIO = 8.0  # the prior path's pilot stops above this many times the rival's g
BUDGET_RATIO = 2.0  # ... or once it has spent this many times the rival pilot's gradients
CAPPED_GAP = 1.0  # nats: the two caps apply only where the rival's L^2 / (2 T) is below


class abandon_when_costlier:  # noqa: N801 (used as a function)
    """A ``give_up`` rule for the prior path's pilot (:func:`~bread_stan.ais.tuning.tune`):
    stop once the length measured so far, at the gradients per transition so far,
    already costs more than ``rival`` (the rest of the path can only add length), or
    once its transitions take more than ``GRADIENT_RATIO`` times the rival's gradients.
    The second rule is a cap on what the choice itself costs: a pilot whose trees reach
    the maximum depth at every beta (a funnel-shaped prior) spends minutes a grid beta,
    and it could win only on a path sqrt(8) = 2.8 times shorter than the Gaussian one.
    The third caps it in total: once the pilot has spent more than ``BUDGET_RATIO``
    times the gradients of the Gaussian path's whole pilot, the prior path is not shown
    cheaper within the budget and the Gaussian path runs (on a hierarchical model with
    many observations the prior path's length grows slowly over many grid betas, and
    its pilot would otherwise cost as much as AIS itself).  Both caps trade a possibly
    cheaper path for a bounded choice; neither affects what the bounds guarantee.  They
    apply only where the rival's predicted gap at ``steps`` distributions (the run's
    largest T; None: always), L^2 / (2T), is at most ``CAPPED_GAP``: giving up a
    possibly cheaper path is harmless only where the rival converges anyway.
    ``partial`` keeps the prior path's cost at the last grid beta measured."""

    def __init__(self, rival: PathCost, steps: int | None = None):
        self.rival = rival
        self.partial: PathCost | None = None
        self.capped = steps is None or rival.length ** 2 / (2 * steps) <= CAPPED_GAP

    def __call__(self, grid, sds, gradients: float, spent: float = 0.0) -> str | None:
        self.partial = PathCost(length_so_far(grid, sds), gradients, complete=False,
                                pilot_gradients=float(spent))
        budget = self.rival.pilot_gradients
        if self.capped and budget is not None and spent > BUDGET_RATIO * budget:
            return (f"by beta = {grid[-1]:.3g} the prior path's pilot has spent {spent:.3g} "
                    f"gradients, more than {BUDGET_RATIO:g} times the Gaussian path's "
                    f"whole pilot ({budget:.3g}), without costing less "
                    f"({self.partial.describe()} against {self.rival.describe()})")
        if self.capped and gradients > GRADIENT_RATIO * self.rival.gradients:
            return (f"by beta = {grid[-1]:.3g} the prior path's transitions take "
                    f"{gradients:.3g} gradients, more than {GRADIENT_RATIO:g} times the "
                    f"Gaussian path's {self.rival.gradients:.3g} (it could win only on a "
                    f"path {GRADIENT_RATIO ** 0.5:.2g} times shorter than the Gaussian "
                    f"path's {self.rival.length:.3g})")
        if self.partial.cost <= self.rival.cost:
            return None
        return (f"by beta = {grid[-1]:.3g} the prior path already costs more "
                f"({self.partial.describe()}) than the Gaussian path "
                f"({self.rival.describe()})")


def cheaper(gaussian: PathCost, prior: PathCost, choice: "PathChoice",
            abandoned: str | None = None) -> "PathChoice":
    """The path with the smaller cost g L^2 (ties to the prior path, which needs no
    normaliser), ``choice`` the spread rule's record; ``abandoned`` the reason the
    prior path's pilot was stopped, if it was."""
    costs = {"gaussian": asdict(gaussian), "prior": asdict(prior)}
    if abandoned is not None or gaussian.cost < prior.cost:
        why = abandoned or (f"the Gaussian path costs less ({gaussian.describe()}) than "
                            f"tempering from the prior ({prior.describe()})")
        path = "gaussian"
    else:
        why = (f"tempering from the prior costs no more ({prior.describe()}) than the "
               f"Gaussian path ({gaussian.describe()})")
        path = "prior"
    reason = (f"{why}; cost = gradients a transition x length^2, AIS's gap at T "
              "distributions being about length^2 / (2T)")
    return PathChoice("auto", path, reason, choice.loglik_sd, choice.n_draws, choice.limit,
                      costs)


@dataclass(frozen=True)
class PathChoice:
    """Which path a run took and why: ``requested`` ("auto", "prior", "waypoint" or
    "gaussian"), ``path`` the one taken, ``reason`` one sentence, and the number it was
    based on (``loglik_sd`` over ``n_draws`` prior draws against ``limit``; None when no
    number was needed).  ``budget_minutes``: the budget that decided the choice (a rival
    pilot stopped because it would overrun it, or a leaner pilot taken because the
    requested one would), else None: such a choice depends on the machine's speed, and a
    run with a larger budget chooses again.  ``pilot``: the pilot settings a budget made
    leaner (``{"pilot_grid": G, "pilot_steps": S}``; :mod:`bread_stan.workflows.lean_pilot`),
    else None; the run's sampler takes them."""

    requested: str
    path: str
    reason: str
    loglik_sd: float | None = None
    n_draws: int | None = None
    limit: float | None = None
    costs: dict | None = None  # path -> PathCost fields, when the pilots compared them
    budget_minutes: float | None = None
    pilot: dict | None = None

    @property
    def tempering_strands(self) -> bool:
        """Whether the number says tempering from the prior would strand chains."""
        return self.loglik_sd is not None and self.loglik_sd > self.limit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def holds_for(self, budget_minutes: float | None) -> bool:
        """Whether this choice, saved by an earlier run, holds for a run with this budget
        (None: none): a choice the pilots' seeded costs decided always does; one a budget
        decided only within a budget no larger."""
        return self.budget_minutes is None or (
            budget_minutes is not None and budget_minutes <= self.budget_minutes)

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
    return PathChoice(requested, path, reason, choice.loglik_sd, choice.n_draws, choice.limit,
                      choice.costs)


def choose(log_lik, limit: float = SPREAD_LIMIT) -> PathChoice:
    """The spread rule on the log likelihood at the pilot's prior draws (n,): "waypoint"
    when its standard deviation (finite values only) exceeds ``limit``, else "prior"."""
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

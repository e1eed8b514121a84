"""The Gaussian q that the Gaussian-base and waypoint paths start from.

:func:`fit_q` is the Laplace fit of :func:`bread_stan.ais.waypoint.fit_base` (the best of
a few mode searches from the pilot's exact prior draws) where the posterior has a mode
with downward curvature.  Where there is none (a hierarchical posterior whose density
grows without bound as a group scale goes to 0, so that the mode search ends in a
funnel's neck), q is a Pathfinder Gaussian instead (:func:`bread_stan.approx.pathfinder`:
the normal approximation of largest ELBO along an L-BFGS path): Pathfinder runs from
each pilot draw the mode searches started from
(:func:`~bread_stan.ais.waypoint.best_starts`), the runs' Gaussians are compared by
their ELBO on ``ELBO_DRAWS`` draws each (one run alone can stop in the funnel's neck),
and the best one's sds are widened as the Laplace fit's are.  The
path then runs as from a Laplace q: AIS from exact draws of q corrects whatever q gets
wrong, at the price of a longer path.  A posterior whose mode searches end at separate
modes is refused whichever way q would be fitted: one Gaussian cannot stand for it.

Within a budget in minutes the Pathfinder runs together may take :data:`SEARCH_SHARE` of
the time left when they start (the pilot that follows needs the rest), each an equal
part of what remains: a run that would not end in its part stops, and the run has no
Gaussian q, as when a search cannot start in time.  A stopped run's partial path is
never used, so whether q exists may depend on the machine, but q itself never does.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ..ais import waypoint
from ..ais.gaussian_base import DEFAULT_WIDEN, BaseFitError, GaussianBase
from ..approx import ApproximationError, PathfinderOutOfTime, pathfinder
from ..deadline import seconds_left
from ..errors import InputError
from ..progress import duration
from ..rng import Purpose, derived_seed
from ..target import Target

__all__ = ["fit_q"]

log = logging.getLogger(__name__)

ELBO_DRAWS = 256  # draws that compare the runs' Gaussians
_ELBO_BLOCK = 16  # draws a block, between which a budget's limit is checked
# The share of the time left that the Pathfinder runs for q may take within a budget.
# posteriordb's nn_rbm1bJ10 (7,951 parameters) spent 10.7 minutes of a 10-minute budget
# in one run, and so had no time left for any pilot.
SEARCH_SHARE = 0.5


def fit_q(target: Target, pilot: np.ndarray, seed: int, widen: float = DEFAULT_WIDEN
          ) -> tuple[GaussianBase, dict]:
    """q and its record (``record["fit"]`` is "laplace" or "pathfinder") from the pilot's
    exact prior draws ``pilot``; ``seed`` (the run's) seeds Pathfinder's draws.
    :class:`~bread_stan.ais.waypoint.WaypointError` when neither fit can be made, or
    when the mode searches find separate modes."""
    pilot = np.ascontiguousarray(np.asarray(pilot, dtype=float))
    try:
        return waypoint.fit_base(target, pilot, widen)
    except (waypoint.SeparateModesError, waypoint.FitPastBudget):
        raise
    except waypoint.WaypointError as error:
        no_laplace = str(error)
    t0, left = time.perf_counter(), seconds_left()
    fits, errors = [], []
    starts = waypoint.best_starts(target, pilot)
    for k, start in enumerate(starts):
        waypoint.another_search_fits(k, t0, "Pathfinder's runs for q")
        seed_k = derived_seed(seed, Purpose.PATHFINDER_BASE, k)
        part = _search_seconds(left, time.perf_counter() - t0, len(starts) - k)
        until = None if part is None else time.perf_counter() + part
        try:
            fitted = pathfinder(target, seed=seed_k, start=pilot[start], seconds=part)
        except PathfinderOutOfTime:
            raise _past(k, len(starts), part, left) from None
        except (ApproximationError, InputError) as error:
            errors.append(str(error))
            continue
        elbo = _elbo(target, fitted, seed_k, until)
        if elbo is None:
            raise _past(k, len(starts), part, left)
        fits.append((elbo, start, fitted))
    if not fits:
        reason = errors[0] if errors else "no pilot draw has a finite joint density"
        raise waypoint.WaypointError(f"{no_laplace}; nor a Pathfinder fit ({reason})")
    elbo, start, fitted = max(fits, key=lambda f: f[0])
    try:
        base = GaussianBase(fitted.mean, widen ** 2 * fitted.cov, widen)
    except BaseFitError as error:
        raise waypoint.WaypointError(f"{no_laplace}; nor a Pathfinder fit ({error})") from None
    info = fitted.diagnostics
    record = {"fit": "pathfinder", "no_laplace": no_laplace, "start": start, "elbo": elbo,
              "elbos": [f[0] for f in fits], "failed_searches": len(errors),
              "best_iteration": int(info["best_iteration"]),
              "iterations": int(info["iterations"]), "widen": widen,
              "seconds": time.perf_counter() - t0}
    log.info("no Laplace fit (%s); q is the Pathfinder Gaussian of largest ELBO over %d "
             "starts instead: ELBO %.6g (at L-BFGS iterate %d of %d), %.3g s", no_laplace,
             len(fits), elbo, record["best_iteration"], record["iterations"],
             record["seconds"])
    return base, record


def _past(k: int, runs: int, part: float, left: float) -> waypoint.FitPastBudget:
    """The stop of Pathfinder run ``k`` (of ``runs``) past its ``part`` of the budget."""
    return waypoint.FitPastBudget(
        f"Pathfinder's runs for q: run {k + 1} of {runs} had not ended after "
        f"{duration(part)}, its part of {SEARCH_SHARE:.0%} of the {duration(max(left, 0.0))} "
        "left")


def _search_seconds(left: float | None, spent: float, runs_left: int) -> float | None:
    """The seconds the next of ``runs_left`` Pathfinder runs may take: an equal part of
    what remains of :data:`SEARCH_SHARE` of the ``left`` seconds (None: no budget)."""
    if left is None:
        return None
    return max(SEARCH_SHARE * max(left, 0.0) - spent, 0.0) / runs_left


def _elbo(target: Target, fitted, seed: int, until: float | None = None) -> float | None:
    """The ELBO of Pathfinder's Gaussian from :data:`ELBO_DRAWS` draws: the comparison of
    starts needs more than the 25 draws each iterate gets along one path.  With ``until``
    (``time.perf_counter()``) it is None once that has passed between blocks of draws: a
    dense q of thousands of coordinates (posteriordb's nn_rbm1bJ10, d = 7,951) costs
    O(d^2) a draw, minutes for all, past the search's part of a budget.  The blocks
    change no number."""
    draws = fitted.sample(np.random.default_rng(seed), ELBO_DRAWS)
    terms = []
    for lo in range(0, ELBO_DRAWS, _ELBO_BLOCK):
        if until is not None and time.perf_counter() > until:
            return None
        block = draws[lo:lo + _ELBO_BLOCK]
        ev = target.evaluate(block, gradient=False)
        with np.errstate(invalid="ignore"):
            terms.append(ev.log_prior + ev.log_lik - fitted.log_q(block))
    with np.errstate(invalid="ignore"):
        elbo = float(np.mean(np.concatenate(terms)))
    return elbo if np.isfinite(elbo) else -np.inf

"""The prior normaliser c where the simulator knows it: exactly, or exactly up to a
rejection loop's acceptance probability, estimated from the loop's tries.

A drafted simulator (:mod:`bread_stan.stan.draft.normaliser`) computes, in every
draw, log c0: the exact log normaliser of the program's prior relative to the
distribution it draws from.  When a prior truncated by its declared bounds is drawn by
rejection (the whole prior redrawn until the bounds hold), c = c0 p with p the loop's
acceptance probability, and each draw's number of tries is Geometric(p) (tries until
the first success).  From n draws with S tries in all,

    p_hat = (n - 1) / (S - 1)

is unbiased for p (the minimum-variance unbiased estimator; S is negative binomial),
so c_hat = c0 p_hat is unbiased for c and the Gaussian path's upper end stays a
stochastic upper bound, as with the importance-sampling estimate
(:mod:`.prior_normaliser`).  Its standard error: var(p_hat) is about p^2 (1 - p) / n
(the Cramér-Rao bound, which p_hat reaches as n grows), so se(log p_hat) is
sqrt((1 - p) / n), with 1 - p_hat floored at 1 / S (a loop that never rejected in n
draws is not taken as certain to accept).  The number of draws is chosen from a pilot
(``tries_needed``) whose tries are then not used, so n does not depend on the draws
averaged.  Without a rejection loop c = c0 and the standard error is 0.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import InputError
from .prior_normaliser import NormaliserEstimate, TARGET_SE

__all__ = ["known_log_normaliser", "tries_needed", "MAX_TRY_DRAWS"]

MAX_TRY_DRAWS = 65_536


def tries_needed(pilot_tries: np.ndarray, target_se: float = TARGET_SE) -> int:
    """Draws whose tries make se(log p_hat) about ``target_se`` (at least the pilot's
    number, at most ``MAX_TRY_DRAWS``), judged from a pilot's tries."""
    tries = np.asarray(pilot_tries, dtype=float).ravel()
    p = tries.size / tries.sum()
    need = int(np.ceil((1 - p) / target_se ** 2))
    return int(np.clip(need, tries.size, MAX_TRY_DRAWS))


def known_log_normaliser(log_c_exact: np.ndarray, tries: np.ndarray | None = None
                         ) -> NormaliserEstimate:
    """log c from the simulator's exact part ``log_c_exact`` (one value per draw, all
    equal) and, when the prior is drawn by rejection, each draw's ``tries`` (at least 2
    draws).  Refuses exact parts that differ between draws (they must not depend on the
    draw) and tries below 1."""
    t0 = time.perf_counter()
    exact = np.asarray(log_c_exact, dtype=float).ravel()
    if exact.size == 0 or not np.all(np.isfinite(exact)) or np.ptp(exact) > 1e-9 * max(
            1.0, float(np.max(np.abs(exact)))):
        raise InputError("the simulator's exact log normaliser differs between draws or is "
                         "not finite; it must be one number (a drafter bug: please report "
                         "it)")
    log_c = float(exact[0])
    if tries is None:
        return NormaliserEstimate(log_c, 0.0, 0, exact.size, 0.0, float("nan"),
                                  time.perf_counter() - t0, method="exact")
    counts = np.asarray(tries, dtype=float).ravel()
    if counts.size < 2 or np.any(counts < 1) or np.any(counts != np.rint(counts)):
        raise InputError(f"the rejection loop's tries must be integers of at least 1 from at "
                         f"least 2 draws, got {counts.size} draws (min "
                         f"{counts.min() if counts.size else 'none'})")
    n, total = counts.size, float(counts.sum())
    p_hat = (n - 1) / (total - 1) if total > 1 else 1.0
    rel_var = max(1 - p_hat, 1 / total)   # n var(log p_hat); floored: never-rejecting n
    return NormaliserEstimate(log_c + float(np.log(p_hat)), float(np.sqrt(rel_var / n)), n,
                              exact.size, rel_var, float("nan"), time.perf_counter() - t0,
                              method="exact and rejection")

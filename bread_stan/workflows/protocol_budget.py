"""The real-data protocol's budget in minutes (``ProtocolSettings.budget_minutes``).

Both routes of the protocol start the clock after their compiles (:func:`budget_clock`):
from then on every set-up loop that keeps pace with a deadline (the simulator check, the
pilots, the reverse starts' sweep, a replicate's tuning) stops with
:class:`~bread_stan.deadline.OverBudget` once it would end past the budget, naming the
budget it needs (the fit on the real data once the budget is spent: its warmup's pace is
no measure of the rest).  The step counts are not chosen, as ``run --steps auto`` chooses
them: the user's ``--steps`` run in increasing order, each only when the pilot's pace
(seconds per chain and transition, times the chains, the transitions and the runs still
missing at that T) predicts that it ends within the time left (:func:`steps_to_start`).
What was left out is recorded in ``extra["budget"]``; a rerun in the same folder with a
larger budget runs only that.  The budget decides what runs, never a number.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Callable, Sequence

from ..deadline import OverBudget, seconds_left, set_up_by
from ..progress import duration

__all__ = ["REMEDY", "budget_clock", "not_started_sentence", "steps_to_start"]

log = logging.getLogger(__name__)

REMEDY = "no --budget"   # the other way past a stop, beside a larger budget


@contextmanager
def budget_clock(minutes: float | None):
    """The protocol's deadline, ``minutes`` from now (None: no budget, nothing stops)."""
    if minutes is None:
        yield
        return
    seconds = 60.0 * float(minutes)
    with set_up_by(time.monotonic() + seconds, seconds, REMEDY):
        yield


def steps_to_start(steps: Sequence[int], runs_missing: Callable[[int], int],
                   transition_seconds: float, extra: dict, name: str,
                   minutes: float | None) -> list[int]:
    """The step counts of ``steps`` (increasing) to run now: all of them without a budget;
    with one, the smallest whose predicted seconds add up within the time left.  A T's
    seconds are ``(T - 1) x runs_missing(T) x transition_seconds`` (the transitions of
    its runs still missing: one run of all chains is T - 1 transitions of them all;
    ``transition_seconds`` the pilot's time of one such transition of every chain).
    ``extra["budget"]`` records the budget, the step counts left out and their predicted
    seconds (it is removed when there is no budget, so that a resumed run's record is
    never stale)."""
    left = seconds_left()
    extra.pop("budget", None)
    if minutes is None or left is None:
        return list(steps)
    kept: list[int] = []
    predicted: dict[int, float] = {}
    spent = 0.0
    for T in sorted(steps):
        need = predicted[T] = (T - 1) * runs_missing(T) * transition_seconds
        if need > 0 and spent + need > left:   # a NaN pace (no pilot timing) runs
            break
        kept.append(T)
        spent += need if need > 0 else 0.0
    not_started = [T for T in sorted(steps) if T not in kept]
    budget = 60.0 * float(minutes)
    if not_started:
        first = not_started[0]
        text = (f"{first} distributions alone would take about {duration(predicted[first])} "
                f"(the pilot's pace), and {duration(max(left, 0.0))} of the budget of "
                f"{duration(budget)} are left")
        if not kept:
            raise OverBudget(
                f"not converged within the budget of {duration(budget)}: {text}, so no step "
                f"count could run; the protocol needs a budget above "
                f"{duration(budget - left + predicted[first])}, or {REMEDY} (the set-up is "
                "saved: the same command with a larger --budget resumes after it)",
                "step counts", predicted[first])
        log.warning("%s: step count(s) %s not started: %s (rerun with a larger --budget "
                    "and the same --out to add them)", name, ", ".join(map(str, not_started)),
                    text)
    extra["budget"] = {"minutes": float(minutes), "seconds_left": float(left),
                       "not_started": not_started,
                       "predicted_seconds": {str(T): predicted[T] for T in predicted}}
    return kept


def not_started_sentence(record: dict | None, finished: int) -> str | None:
    """The report's sentence on the step counts a budget left out (None: none were);
    ``finished``: the step counts that did finish."""
    if not record or not record.get("not_started"):
        return None
    left = record["not_started"]
    first = (record.get("predicted_seconds") or {}).get(str(left[0]))
    about = f" ({left[0]} distributions: about {duration(first)} at the pilot's pace)" \
        if first is not None else ""
    counts = (f"step count {left[0]} was" if len(left) == 1
              else f"step counts {', '.join(map(str, left))} were")
    return (f"Within the budget of {duration(60.0 * record['minutes'])}, {counts} not "
            f"started{about}; the same command with a "
            "larger --budget and the same --out adds them, rerunning nothing."
            + (" The agreement score and the S-sweep test need two finished step counts, so "
               "neither ran." if finished < 2 else ""))

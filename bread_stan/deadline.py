"""A deadline for a run's set-up: pilots and checks that would overrun the budget stop.

``--steps auto --budget M`` counts the pilots and the simulator check against the
budget, but they run before the first step count, so the budget could not stop them: a
hard model's pilot can take many times the whole budget before anything is scored.
Within :func:`set_up_by` (a context, set by the run), the set-up's loops call
:func:`keep_pace` after each item (a pilot's transition, a check stage's transition or
data set); when, once the loop has run for ``SETTLE`` of the budget, the items left would
end past the deadline at the pace since the loop started, it raises :class:`OverBudget`,
which names the loop and the time it would need.  Outside the context nothing is checked, so runs with ``--steps`` never stop.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from .errors import BreadStanError
from .progress import duration

__all__ = ["OverBudget", "set_up_by", "keep_pace", "seconds_left", "SETTLE"]

# The share of the budget a loop runs before its pace is judged.  A pilot's first
# transitions, from prior draws at the initial step size, are the slowest it makes: read
# after three of them, radon_county_intercept's pilot projected 23 minutes, after its
# first beta 7 minutes.  Waiting costs at most this share of the budget per loop.
SETTLE = 0.05


class OverBudget(BreadStanError):
    """A pilot or check would end past the run's budget: the run is not converged
    within the budget (the command line exits 4, as for a run that did not converge).
    ``what``: the loop; ``needed``: the seconds it alone would take; ``steps``: the step
    count a tuned path's pilot predicts for the converged level, where one was tuned
    before the loop stopped, or the least one the part of the path a stopped pilot
    measured implies (None otherwise); ``pilot``: the loop was a pilot's tuning
    along beta, which a leaner pilot can replace (:mod:`bread_stan.workflows.lean_pilot`);
    ``measured``: such a pilot's grid betas so far and the sds of the log likelihood it
    measured at them (None otherwise), the part of the path it had measured."""

    def __init__(self, message: str, what: str = "", needed: float = float("nan"),
                 steps: int | None = None, pilot: bool = False, measured=None):
        super().__init__(message)
        self.what, self.needed, self.steps, self.pilot = what, needed, steps, pilot
        self.measured = measured


@dataclass(frozen=True)
class _Deadline:
    at: float          # time.monotonic() at which the budget is spent
    seconds: float     # the whole budget (its clock started at ``at - seconds``)
    remedy: str        # the other way out the stop names, beside a larger budget


_DEADLINE: ContextVar[_Deadline | None] = ContextVar("bread_stan_set_up_deadline",
                                                     default=None)


RUN_REMEDY = "fixed step counts (--steps)"


@contextmanager
def set_up_by(at: float | None, seconds: float = 0.0, remedy: str = RUN_REMEDY):
    """Within this context, :func:`keep_pace` stops a loop that would end after ``at``
    (``time.monotonic()``; None: no deadline), the end of a budget of ``seconds``;
    ``remedy`` is the other way out its message names, beside a larger budget."""
    token = _DEADLINE.set(None if at is None
                          else _Deadline(float(at), float(seconds), remedy))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def seconds_left() -> float | None:
    """The seconds left before the deadline (None outside :func:`set_up_by`, or without
    a deadline): for a step that cannot stop midway to decide whether to start."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline.at - time.monotonic()


def keep_pace(what: str, done: int, total: int, started: float, pilot: bool = False,
              projected: bool = True) -> None:
    """Raise :class:`OverBudget` when ``total - done`` more items, at the pace of the
    ``done`` since ``started`` (``time.monotonic()``), would end past the deadline
    (``pilot``: the loop is a pilot's tuning along beta, as the error then says).
    ``projected`` False: only once the deadline has passed, for a loop whose first items
    say nothing of the rest (a NUTS warmup from far-off inits: posteriordb's sir made 3
    of 1,000 fit iterations in 40 s, a pace of 3.7 hours, and ended in 189 s)."""
    deadline = _DEADLINE.get()
    if deadline is None or done <= 0 or done >= total:
        return
    now = time.monotonic()
    if not projected:
        if now > deadline.at:
            raise OverBudget(
                f"not converged within the budget of {duration(deadline.seconds)}: {what} "
                f"had not ended when it was spent ({done} of {total} after "
                f"{duration(now - started)}), so no step count could run; the set-up needs "
                f"a budget above {duration(deadline.seconds)}, or {deadline.remedy}", what,
                float("nan"), pilot=pilot)
        return
    if now - started < SETTLE * deadline.seconds:
        return  # a loop's first items (chains far in the tails) are no measure of its pace
    needed = (now - started) / done * total
    if started + needed > deadline.at:
        before = started - (deadline.at - deadline.seconds)  # the set-up before this loop
        raise OverBudget(
            f"not converged within the budget of {duration(deadline.seconds)}: {what} "
            f"alone would take about {duration(needed)} ({done} of {total} after "
            f"{duration(now - started)}), so no step count could run; the set-up needs a "
            f"budget above {duration(before + needed)}, or {deadline.remedy}",
            what, needed, pilot=pilot)

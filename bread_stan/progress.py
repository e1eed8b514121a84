"""Progress of a long loop: a bar on a terminal, lines in the log otherwise.

:func:`progress_bar` gives a tqdm bar when progress is asked for and stderr is a
terminal (None otherwise, also when tqdm is not installed: a bar never stops a run).
A run whose output goes to a file (a batch job, a sweep) would otherwise say nothing
between the start of a phase and its end, which on a hard model can be many minutes:
:class:`PaceLog` logs one INFO line at most every ``every`` seconds, and always at the
end, with the time left estimated from the pace of the items since the previous line
(not from the mean since the start: the pilot's later betas cost more than its first
ones, so the recent pace is the better guess).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Callable

__all__ = ["progress_bar", "PaceLog", "duration"]

log = logging.getLogger(__name__)


def progress_bar(total: int, enabled: bool, desc: str):
    """A tqdm bar when asked for and attached to a terminal; otherwise None."""
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # progress bars are optional
        return None
    return tqdm(total=total, desc=desc, leave=False)


def duration(seconds: float) -> str:
    """"45 s", "3.2 minutes", "2.5 hours" for log lines."""
    if not math.isfinite(seconds):
        return "an unknown time"
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.2g} s"


class PaceLog:
    """Log "WHAT: DONE of TOTAL UNIT after S; about R more at the recent pace" lines.

    ``tick(done)`` after each item; a line is logged when ``every`` seconds have passed
    since the previous one (or since the start), and when ``done == total``.  The time
    left is ``(total - done)`` times the seconds per item since the previous line.
    ``clock`` is injectable for tests."""

    def __init__(self, what: str, total: int, unit: str, *, every: float = 30.0,
                 clock: Callable[[], float] = time.perf_counter):
        self.what, self.total, self.unit, self.every, self.clock = what, total, unit, every, clock
        self.start = self.last_time = clock()
        self.last_done = 0
        self.lines: list[str] = []

    def remaining(self, done: int, now: float) -> float:
        """Seconds left at the pace since the previous line."""
        if done <= self.last_done:
            return float("nan")
        per_item = (now - self.last_time) / (done - self.last_done)
        return per_item * (self.total - done)

    def tick(self, done: int, detail: str = "") -> str | None:
        """Record that ``done`` items are finished; return the line logged, if any."""
        now = self.clock()
        if done < self.total and now - self.last_time < self.every:
            return None
        text = f"{self.what}: {done} of {self.total} {self.unit} after {duration(now - self.start)}"
        if detail:
            text += f" ({detail})"
        if done < self.total:
            text += f"; about {duration(self.remaining(done, now))} more at the recent pace"
        self.last_time, self.last_done = now, done
        self.lines.append(text)
        log.info("%s", text)
        return text

"""Step counts chosen within a budget: ``--steps auto --budget M``.

AIS's gap at T distributions along a path of thermodynamic length L is about
L^2 / (2T) (:func:`~bread_stan.ais.betas.thermodynamic_length`; the path choice's cost
rests on the same law).  :func:`run_within_budget` picks the first T where that
prediction reaches the convergence level (:func:`first_steps`: at least
``MIN_STEPS``, at most what the pilot's time a transition says the budget allows),
measures the bound, and grows T by 3 to 4 times (:func:`next_steps`: towards the T the
fit of the bounds measured so far predicts) until the bound's upper limit is at most the
level, or the next T would not fit in what is left of the budget (predicted from the
seconds a transition of the finished step counts took: a step's time is linear in T).
Where the next T would not fit but the fit's T for the level, times ``LAST_TRY_MARGIN``,
would (:func:`last_try`), that T runs last.
The budget is in minutes of wall time, or in gradients (``budget_gradients``: the same
decision with gradient evaluations for seconds, the pilots' and the check's included;
a step's gradients are linear in T too, so the choice does not depend on the machine),
or both (the run stops at the first that would be exceeded).

The prediction of the T that would converge is fitted to the bounds' measured 95%
upper limits, the quantity the verdict compares with the level (:func:`fit_upper_limit`),
as two terms: the estimate, a T^-b (b = 1 with one finished step count, the L^2 / (2T)
law; by least squares over log T otherwise), plus the margin up to the upper limit, a
Monte Carlo error, m T^-c (c = 1/2 with one step count).  A fit to the estimates alone
would name a T at which the estimate reaches the level while its upper limit, and so the
verdict, does not; one power law through the upper limits would extrapolate the estimate's
1/T to a margin that falls as 1/sqrt(T).  What a run
chose and why is :class:`AutoSteps`, kept in the result's ``extra["auto_steps"]``; the
same numbers come from ``--steps`` with the chosen step counts, because a step count's
random streams depend on T alone, and ``--path`` with the path ``--path auto`` chose
(within a budget in minutes, a prior-path pilot that would overrun it is dropped for the
Gaussian path, so an unbudgeted run may choose another path).
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from .betas import length_so_far, thermodynamic_length
from ..deadline import OverBudget

__all__ = ["MIN_STEPS", "GROWTH", "DecayFit", "AutoSteps", "Meter", "fit_decay",
           "fit_upper_limit", "path_length", "first_steps", "next_steps", "run_within_budget",
           "budget_sentence", "naming_steps", "naming_least_steps", "last_try",
           "LAST_TRY_MARGIN", "Prediction", "predict_steps"]

MIN_STEPS = 10       # the smallest first T: fewer distributions measure little
GROWTH = (3.0, 4.0)  # each new T is 3 to 4 times the last
# Where that next T would overrun the budget, the fit's T for the level times this is
# tried instead (measured bounds were within 0.4 to 1.5 times the prediction).
LAST_TRY_MARGIN = 1.25


@dataclass(frozen=True)
class DecayFit:
    """A bound's decay in T.  One term, log(bound) = ``intercept`` - ``slope`` log(T),
    fitted to ``points`` step counts (``slope_fixed``: one step count, the slope set to
    1, the L^2 / (2T) law); or, with ``margin_intercept``, the upper limit as two terms
    (:func:`fit_upper_limit`): the estimate's, as above (``intercept`` None: no positive
    estimate), plus the margin up to the upper limit, exp(``margin_intercept``) times
    T^-``margin_slope`` (1/2 with one step count: a Monte Carlo error)."""

    intercept: float | None
    slope: float
    points: int
    slope_fixed: bool = False
    margin_intercept: float | None = None
    margin_slope: float = 0.5
    margin_fixed: bool = False
    last_steps: float | None = None   # two terms: the largest T fitted

    def _log_terms(self, log_T: float) -> list[float]:
        """Each term's log at T.  Beyond ``last_steps`` (two terms), each falls at most
        at AIS's asymptotic rate, 1/T for the estimate and 1/sqrt(T) for its margin:
        faster decay between small step counts (chains leaving a stranded start) is not
        extrapolated; a term that grows with T is taken as flat, within its noise."""
        terms = [(self.intercept, self.slope, 1.0),
                 (self.margin_intercept, self.margin_slope, 0.5)]
        if self.last_steps is None:
            return [a - b * log_T for a, b, _ in terms if a is not None]
        last = math.log(self.last_steps)
        return [a - b * min(log_T, last) - min(max(b, 0.0), cap) * max(log_T - last, 0.0)
                for a, b, cap in terms if a is not None]

    def bound_at(self, T: float) -> float:
        return float(sum(math.exp(v) for v in self._log_terms(math.log(T))))

    def steps_for(self, level: float) -> float:
        """The T at which the fitted bound reaches ``level`` (inf when it does not fall
        to it)."""
        slopes = [b for a, b in ((self.intercept, self.slope),
                                 (self.margin_intercept, self.margin_slope)) if a is not None]
        if not slopes or all(b <= 0 for b in slopes):
            return math.inf

        def excess(log_T: float) -> float:
            return sum(math.exp(min(v, 700.0)) for v in self._log_terms(log_T)) - level
        low, high = 0.0, 700.0
        if excess(high) > 0:
            return math.inf
        if excess(low) <= 0:
            return 1.0
        for _ in range(200):   # bisection in log T: the sum falls monotonically
            middle = (low + high) / 2
            low, high = (low, middle) if excess(middle) <= 0 else (middle, high)
        return float(math.exp(high))

    def describe(self) -> str:
        if self.margin_intercept is None:
            how = ("slope set to 1 (one step count: the L^2/(2T) law)" if self.slope_fixed
                   else f"fitted to {self.points} step counts")
            return (f"upper limit about {math.exp(self.intercept):.3g} T^-{self.slope:.2f}, "
                    f"{how}")
        how = ("one step count: slopes 1, the L^2/(2T) law, and 1/2"
               if self.slope_fixed and self.margin_fixed
               else f"fitted to {self.points} step counts")
        margin = f"{math.exp(self.margin_intercept):.3g} T^-{self.margin_slope:.2f}"
        beyond = ("" if self.slope <= 1.0 and self.margin_slope <= 0.5 else
                  f"; beyond T = {self.last_steps:.0f} at most 1/T and 1/sqrt(T)")
        if self.intercept is None:
            return f"upper limit about {margin}, its Monte Carlo margin ({how}{beyond})"
        return (f"upper limit about {math.exp(self.intercept):.3g} T^-{self.slope:.2f} + "
                f"{margin}, the estimate and its Monte Carlo margin ({how}{beyond})")


def _log_fit(steps, values, one_slope: float) -> tuple[float, float, int, bool] | None:
    """(intercept, slope, points, slope fixed) of log(value) on log(T) over the positive
    finite values; with one T, the slope is ``one_slope``."""
    T = np.asarray(steps, dtype=float)
    V = np.asarray(values, dtype=float)
    keep = np.isfinite(V) & (V > 0)
    T, V = T[keep], V[keep]
    if T.size == 0:
        return None
    x, y = np.log(T), np.log(V)
    if np.unique(T).size == 1:
        return float(np.mean(y + one_slope * x)), one_slope, int(T.size), True
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(-slope), int(T.size), False


def fit_decay(steps, bounds) -> DecayFit | None:
    """Least squares of log(bound) on log(T) over the step counts whose bound is
    positive and finite (None when there is none).  One such step count, or all at one
    T: the slope is 1."""
    fitted = _log_fit(steps, bounds, 1.0)
    return None if fitted is None else DecayFit(*fitted)


def fit_upper_limit(steps, estimates, uppers) -> DecayFit | None:
    """The upper limits' decay as two terms: the estimates' (:func:`fit_decay`, slope 1
    with one step count) and the margins', upper limit minus the estimate (its positive
    part): a Monte Carlo error, slope 1/2 with one step count.  At small T the estimate
    dominates and falls as 1/T; near a small level the margin does, and falls only as
    1/sqrt(T), so one power law fitted to the upper limits would promise too small a T.
    Beyond the largest T fitted, each term falls at most at that asymptotic rate
    (:meth:`DecayFit.bound_at`).  None when neither has a positive value."""
    estimates = np.asarray(estimates, dtype=float)
    margins = np.asarray(uppers, dtype=float) - np.maximum(estimates, 0.0)
    bound, margin = _log_fit(steps, estimates, 1.0), _log_fit(steps, margins, 0.5)
    if bound is None and margin is None:
        return None
    a, b, points, fixed = bound if bound is not None else (None, 1.0, 0, True)
    if margin is None:
        return DecayFit(a, b, points, fixed)
    return DecayFit(a, b, max(points, margin[2]), fixed, margin[0], margin[1], margin[3],
                    float(np.max(steps)))


def path_length(path) -> float | None:
    """The thermodynamic length of a tuned path as its pilot measured it: the sum of the
    legs' lengths on a path of several legs (T is split between them in proportion, so
    the gap is about (l1 + l2)^2 / (2T)), else the length of its one leg's measured sd
    curve; None where the pilot measured none (a path that tunes nothing)."""
    lengths = getattr(path, "lengths", None)
    if lengths is not None:
        return float(sum(lengths))
    tuning = path.leg_tuning() if hasattr(path, "leg_tuning") else path
    grid, sd = getattr(tuning, "grid_betas", None), getattr(tuning, "loglik_sd", None)
    if grid is None or sd is None:
        return None
    length = thermodynamic_length(grid, sd)
    return length if np.isfinite(length) else None


def _nice(T: float) -> int:
    """T rounded to two significant digits (20, 75, 300, 1200)."""
    return int(float(f"{T:.2g}"))


def first_steps(length: float | None, level: float, *, seconds_per_step: float | None = None,
                remaining: float | None = None, unit: str = "time") -> tuple[int, str]:
    """The first T and why: where L^2 / (2T) is ``level`` (two significant digits), at
    least ``MIN_STEPS``, and at most the T whose predicted time (``seconds_per_step``
    for each of T - 1 steps) fits in ``remaining`` seconds (``unit`` "gradients": the
    same in gradients, ``seconds_per_step`` then a step's gradients)."""
    if length is None:
        T, why = MIN_STEPS, "the pilot measured no thermodynamic length"
    else:
        wanted = length ** 2 / (2 * level)
        T = max(MIN_STEPS, _nice(math.ceil(wanted)))
        why = (f"the path's thermodynamic length L = {length:.3g} predicts a gap "
               f"L^2/(2T) of {level:g} nat at T = {wanted:.3g}")
    if seconds_per_step and remaining is not None and np.isfinite(seconds_per_step):
        allowed = 1 + remaining / seconds_per_step
        if allowed < T:
            T = max(MIN_STEPS, int(allowed))
            why += f"; the budget allows T = {T} (at the pilot's {unit} a transition)"
    return int(T), why


def next_steps(T: int, fit: DecayFit | None, level: float) -> int:
    """The T after ``T``: towards the fit's T for ``level``, 3 to 4 times ``T``."""
    wanted = fit.steps_for(level) if fit is not None else math.inf
    factor = float(np.clip(wanted / T, *GROWTH)) if np.isfinite(wanted) else GROWTH[1]
    return max(_nice(T * factor), T + 1)


def last_try(T: int, fit: DecayFit | None, level: float) -> int | None:
    """The T to try where the next 3 to 4 times ``T`` would overrun the budget: the
    fit's T for ``level`` times ``LAST_TRY_MARGIN``, when that is above ``T`` and below
    the next 3 times ``T`` (else None)."""
    wanted = fit.steps_for(level) if fit is not None else math.inf
    if not np.isfinite(wanted) or wanted <= T:
        return None
    tried = max(_nice(math.ceil(LAST_TRY_MARGIN * wanted)), T + 1)
    return tried if tried < GROWTH[0] * T else None


@dataclass
class AutoSteps:
    """What ``--steps auto`` chose: the budget (minutes), the level, the path's length
    and the first T's reason, the step counts in the order run, why it stopped
    ("converged", "budget" or "inconsistent"), the fit of the bounds, the T it predicts
    for the level and the minutes a run at that T takes here (from ``seconds_per_step``,
    the measured seconds of one of T - 1 steps, both directions), and the seconds spent
    (pilots and checks included, compiles not; ``setup_seconds`` those before the
    first step count, summed over the sessions of a resumed run).  With a budget in
    gradients (``budget_gradients``; ``budget_minutes`` then None unless both were
    given): ``gradients_per_step``, ``spent_gradients`` and ``setup_gradients`` the
    same in gradient evaluations, and ``predicted_gradients`` those of the predicted T."""

    budget_minutes: float | None
    level: float
    length: float | None = None
    first_reason: str = ""
    chosen: list[int] = field(default_factory=list)
    stopped: str = ""
    fit: dict | None = None
    predicted_steps: float | None = None
    predicted_minutes: float | None = None
    seconds_per_step: float | None = None
    spent_seconds: float = 0.0
    setup_seconds: float = 0.0  # pilots and check, over every session of the run
    budget_gradients: float | None = None
    gradients_per_step: float | None = None
    spent_gradients: float | None = None
    setup_gradients: float | None = None
    predicted_gradients: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def decay(self) -> DecayFit | None:
        return DecayFit(**self.fit) if self.fit else None


class Meter:
    """One budget's arithmetic: what was spent (``before``: by the finished step counts
    and earlier sessions; ``now()``: this session's setup so far) and the cost of one
    of a step's T - 1 steps, from the finished step counts (``per_step(step)``: one
    step count's cost) or, before any, the pilot's ``pilot_rate``; ``unit`` "time"
    (seconds, on a clock) or "gradients"."""

    def __init__(self, budget: float, before: float, now: Callable[[], float],
                 per_step: Callable[[object], float], pilot_rate: float | None,
                 unit: str):
        self.budget, self.before, self.now = budget, before, now
        self.per_step, self.pilot_rate, self.unit = per_step, pilot_rate, unit
        self.finished: list = []

    def spent(self) -> float:
        return self.before + self.now()

    def add(self, step, ran_now: bool = False) -> None:
        """A finished step count (``ran_now``: in this session, so a clock's ``now()``
        has counted it already)."""
        if not (ran_now and self.unit == "time"):
            self.before += self.per_step(step)
        self.finished.append(step)

    def rate(self) -> float | None:
        own = [s for s in self.finished if self.per_step(s) > 0]
        if not own:
            return self.pilot_rate
        return sum(map(self.per_step, own)) / sum(s.n_steps - 1 for s in own)

    def fits(self, T: int) -> bool:
        rate = self.rate()
        return rate is None or not np.isfinite(rate) or self.spent() + rate * (T - 1) <= self.budget


def _next_within(T: int, fit: DecayFit | None, level: float, meters: list[Meter]
                 ) -> int | None:
    """The T after ``T`` that fits every budget: 3 to 4 times ``T`` (:func:`next_steps`),
    else the last try (:func:`last_try`), else None."""
    for candidate in (next_steps(T, fit, level), last_try(T, fit, level)):
        if candidate is not None and all(meter.fits(candidate) for meter in meters):
            return candidate
    return None


def _gradients(step) -> float:
    return float(step.forward.n_grad + step.reverse.n_grad)


def run_within_budget(run_one: Callable[[int], object], done: list, judge, *,
                      budget_minutes: float | None, level: float, length: float | None,
                      pilot_seconds_per_step: float | None = None,
                      started: float | None = None, setup_before: float = 0.0,
                      on_start: Callable[[AutoSteps], None] | None = None,
                      clock=time.monotonic, budget_gradients: float | None = None,
                      setup_gradients: float = 0.0,
                      pilot_gradients_per_step: float | None = None) -> AutoSteps:
    """Run step counts (``run_one(T)`` returns the finished step) until the largest is
    converged (``judge(step)`` returns its :class:`~.verdict.StepVerdict`) or the next
    would exceed the budget.  ``done``: steps finished by an interrupted run (their
    seconds count as spent, and the choice continues from them: never rerun);
    ``started``: the clock when this session's part of the budget started (its pilot
    and check included); ``setup_before``: the seconds earlier sessions of the run
    spent before their step counts (``AutoSteps.setup_seconds`` as saved), so that a
    rerun of a finished run stops where it stopped.  ``on_start`` gets the record
    before the first step count runs (to save it: an interrupted run keeps its
    setup seconds).  ``budget_gradients``: a budget in gradient evaluations instead of
    (or beside) minutes, ``setup_gradients`` those of the pilots and the check, and
    ``pilot_gradients_per_step`` the pilot's prediction of one step's."""
    if budget_minutes is None and budget_gradients is None:
        raise ValueError("a budget in minutes or in gradients is needed")
    started = clock() if started is None else started
    seconds = gradients = None
    if budget_minutes is not None:
        seconds = Meter(60.0 * budget_minutes, setup_before, lambda: clock() - started,
                        lambda s: s.wall_time, pilot_seconds_per_step, "time")
    if budget_gradients is not None:
        gradients = Meter(float(budget_gradients), setup_gradients, lambda: 0.0, _gradients,
                          pilot_gradients_per_step, "gradients")
    meters = [m for m in (seconds, gradients) if m is not None]
    finished = {}
    for step in done:
        finished[int(step.n_steps)] = step
        for meter in meters:
            meter.add(step)

    record = AutoSteps(budget_minutes, level, length,
                       setup_seconds=setup_before + clock() - started,
                       budget_gradients=budget_gradients,
                       setup_gradients=setup_gradients if budget_gradients is not None
                       else None)
    first, record.first_reason = first_steps(length, level)
    for meter in meters:  # the smallest T any budget allows
        capped, why = first_steps(length, level, seconds_per_step=meter.rate(),
                                  remaining=meter.budget - meter.spent(), unit=meter.unit)
        if capped < first:
            first, record.first_reason = capped, why
    chosen = sorted(finished)
    fit = None
    while True:
        if chosen:
            last = finished[chosen[-1]]
            verdict = judge(last)
            Ts = sorted(finished)
            # the upper limits: the verdict's criterion, so the predicted T is where it
            # would say converged, not where the estimate alone reaches the level
            bounds = [judge(finished[T]).bound for T in Ts]
            fit = fit_upper_limit(Ts, [b.estimate for b in bounds], [b.ci_high for b in bounds])
            if verdict.converged:
                record.stopped = "converged"
                break
            if not verdict.consistent:
                record.stopped = "inconsistent"
                break
            T = _next_within(chosen[-1], fit, level, meters)
            if T is None:
                record.stopped = "budget"
                break
        else:
            T = first
        if on_start is not None:
            on_start(record)
            on_start = None
        finished[T] = run_one(T)
        for meter in meters:
            meter.add(finished[T], ran_now=True)
        chosen.append(T)
    record.chosen = chosen
    return _finish(record, fit, seconds, gradients)


def _finish(record: AutoSteps, fit: DecayFit | None, seconds: Meter | None,
            gradients: Meter | None) -> AutoSteps:
    """The record's fit, the budgets' spending and rates, and the predicted T's cost."""
    record.fit = asdict(fit) if fit is not None else None
    if seconds is not None:
        record.seconds_per_step, record.spent_seconds = seconds.rate(), seconds.spent()
    if gradients is not None:
        record.gradients_per_step, record.spent_gradients = gradients.rate(), gradients.spent()
    if fit is not None and record.stopped != "converged":
        predicted = fit.steps_for(record.level)
        if np.isfinite(predicted):
            record.predicted_steps = float(_nice(math.ceil(predicted)))
            if record.seconds_per_step:
                record.predicted_minutes = record.seconds_per_step * (predicted - 1) / 60
            if record.gradients_per_step:
                record.predicted_gradients = record.gradients_per_step * (predicted - 1)
    return record


def budget_sentence(record: dict, bound: float, path: str | None = None,
                    pilot: dict | None = None) -> str:
    """The verdict of a run with ``--steps auto`` in one sentence (``bound``: the bound
    at its largest T); empty when it stopped on an inconsistent step count.  ``path``:
    the path ``--path auto`` chose (None when the path was given) and ``pilot``: the
    leaner pilot a budget took (``pilot_grid``, ``pilot_steps``; None when none), which
    the command that reproduces the numbers names."""
    auto = AutoSteps(**record)
    steps = ",".join(map(str, sorted(auto.chosen)))
    same = (f"--steps {steps}" + (f" --path {path}" if path else "")
            + (f" --pilot-grid {pilot['pilot_grid']} --pilot-steps {pilot['pilot_steps']}"
               if pilot else ""))
    minutes = " and ".join(
        ([f"{auto.budget_minutes:g} minute{'' if auto.budget_minutes == 1 else 's'}"]
         if auto.budget_minutes is not None else [])
        + ([f"{auto.budget_gradients:.4g} gradients"] if auto.budget_gradients is not None
           else []))
    if auto.stopped == "converged":
        return (f"Converged at T = {auto.chosen[-1]} (step counts {steps} chosen within a "
                f"budget of {minutes}; {same} gives the same numbers).")
    if auto.stopped != "budget":
        return ""
    text = (f"Not converged within the budget of {minutes}: largest "
            f"T = {max(auto.chosen)}, bound {bound:.3g} nats")
    fit = auto.decay()
    if auto.predicted_steps is None:
        why = ("the bound did not decrease with T" if fit is not None
               else "no positive bound to fit")
        return text + f"; no T predicted ({why}). Step counts run: {steps}."
    text += "; " + _decay_clause(fit, auto.predicted_steps, auto.level,
                                 auto.predicted_minutes, auto.predicted_gradients)
    return text + (f". Step counts run: {steps}; --steps {steps},"
                   f"{auto.predicted_steps:.0f} with the same --out runs only the new one.")


def _decay_clause(fit: DecayFit, steps: float, level: float, minutes: float | None,
                  gradients: float | None = None) -> str:
    text = (f"at the measured rate of decay ({fit.describe()}), about T = {steps:.0f} for "
            f"{level:g} nat")
    if minutes is not None:
        return text + f" (about {minutes:.3g} minutes on this machine)"
    return text + (f" (about {gradients:.3g} gradients)" if gradients is not None else "")


@dataclass(frozen=True)
class Prediction:
    """The T at which the fit of the measured bounds' upper limits reaches ``level``
    (two significant digits), the fit, and the minutes a run at that T takes here (at
    the seconds a step took in the largest step count; None when unknown)."""

    steps: int
    level: float
    fit: DecayFit
    minutes: float | None = None

    def as_dict(self) -> dict:
        return {"steps": self.steps, "level": self.level, "minutes": self.minutes,
                "fit": asdict(self.fit)}

    def sentence(self, steps_run) -> str:
        """The prediction in words, with the command that runs it."""
        run = ",".join(map(str, sorted(steps_run)))
        clause = _decay_clause(self.fit, self.steps, self.level, self.minutes)
        return (clause[0].upper() + clause[1:]
                + f": --steps {run},{self.steps} with the same --out runs only the new one.")


def predict_steps(steps, estimates, uppers, level: float,
                  seconds_per_step: float | None = None) -> Prediction | None:
    """Where step counts run with fixed ``steps`` end not converged: the T the decay of
    their bounds predicts for ``level`` (the fit ``--steps auto`` makes,
    :func:`fit_upper_limit`), or None when the bounds do not fall to it.
    ``seconds_per_step``: the wall time of one of a step count's T - 1 steps."""
    fit = fit_upper_limit(steps, estimates, uppers)
    wanted = math.inf if fit is None else fit.steps_for(level)
    if not np.isfinite(wanted) or wanted <= max(steps):
        return None
    T = _nice(math.ceil(wanted))
    minutes = (seconds_per_step * (T - 1) / 60
               if seconds_per_step and np.isfinite(seconds_per_step) else None)
    return Prediction(T, level, fit, minutes)


@contextmanager
def naming_steps(path, level: float):
    """A set-up loop after the pilot that overruns the budget (the check's kernel at the
    prior, the simulator check) stops with the step count the tuned path predicts: its
    pilot's thermodynamic length L puts a gap of ``level`` nat at T = L^2 / (2 level)
    (the first T ``--steps auto`` would have run)."""
    try:
        yield
    except OverBudget as over:
        length = path_length(path)
        if length is None:
            raise
        steps, _ = first_steps(length, level)
        raise OverBudget(f"{over}; the tuned path (thermodynamic length L = {length:.3g}) "
                         f"predicts a gap of {level:g} nat at about T = {steps} (L^2/(2T))",
                         over.what, over.needed, steps) from None


@contextmanager
def naming_least_steps(level: float):
    """A pilot that overruns the budget before its path is tuned stops with the least
    step count the part of the path it measured implies: the rest of the path can only
    add length, so a gap of ``level`` nat needs at least T = L_so_far^2 / (2 level).
    Named where that is at least ``MIN_STEPS``, and not where a tuned path named its T."""
    try:
        yield
    except OverBudget as over:
        if over.steps is not None or over.measured is None:
            raise
        grid, sds = over.measured
        length = length_so_far(grid, sds)
        wanted = length ** 2 / (2 * level)
        if wanted < MIN_STEPS:
            raise
        steps = _nice(math.ceil(wanted))
        raise OverBudget(f"{over}; the part of the path its pilot measured ({len(grid)} "
                         f"grid betas, up to beta {grid[-1]:.3g}) already has thermodynamic "
                         f"length {length:.3g}, so a gap of {level:g} nat needs at least "
                         f"T = {steps} (L^2/(2T); the rest of the path only adds length)",
                         over.what, over.needed, steps, over.pilot, over.measured) from None

"""A leaner pilot where the requested one would overrun a budget in minutes.

Under ``--steps auto --budget M`` a pilot's tuning along beta keeps pace with the
budget (:mod:`bread_stan.deadline`).  At the default size (16 grid betas per three
decades of beta, 5 + 20 transitions at each, 32 chains) a model whose gradient is
costly can need more than the whole budget for the pilot alone: posteriordb's radon
programs needed 10 to 17 minutes of a 10-minute budget, and stopped without a step
count.  :func:`leaner` then picks the largest of :data:`LEVELS` whose pilot, at the pace
the stopped one measured, takes at most :data:`SHARE` of the time left, and the run
pilots again with it, once.  The leaner settings are recorded in the path choice
(:attr:`~bread_stan.ais.path_choice.PathChoice.pilot`): a resumed run pilots the same
way, and ``--pilot-grid G --pilot-steps S`` beside the chosen step counts reproduces
every number.

What a leaner pilot costs: its grid betas lie further apart (step sizes and the log
likelihood's sd are interpolated across wider gaps) and it makes fewer transitions at
each (chains follow the moving distribution less closely, dual averaging has fewer
rounds), so the path it tunes may need more steps for the same bound.  The estimates
and the bound stay valid under any tuning, since the pilot never touches scored chains.
"""

from __future__ import annotations

import logging

from ..ais.pilot_grid import pilot_transitions
from ..ais.tuning import TuningConfig
from ..deadline import OverBudget, seconds_left
from ..progress import duration
from .settings import SamplerSettings

__all__ = ["LEVELS", "SHARE", "leaner", "lean_settings"]

log = logging.getLogger(__name__)

# (pilot_grid, pilot_steps) as fractions of the requested pilot's, from the default down:
# (12, 14), (10, 10) and (8, 8) for the default (16, 20), about 0.56, 0.37 and 0.25 of its
# transitions.  Leaner still, the two windows of dual averaging have fewer than 4 rounds
# each and the schedule's curve of the log likelihood's sd is too coarse.
LEVELS = ((0.75, 0.7), (0.625, 0.5), (0.5, 0.4))
# The share of the time left that the leaner pilot may take.  The simulator check and the
# first step count need the rest; but a pilot that ends lets a run stopped later name the
# step count its tuned path predicts, so the pilot is given half.
SHARE = 0.5


def leaner(sampler: SamplerSettings, needed: float, allowed: float
           ) -> tuple[dict | None, dict, float]:
    """The largest of :data:`LEVELS` whose pilot takes at most ``allowed`` seconds, where
    ``sampler``'s pilot takes ``needed`` (None if none does), the leanest level, and the
    seconds that one takes; levels as ``{"pilot_grid": G, "pilot_steps": S}``, each at
    least 2 and below ``sampler``'s (empty when none is)."""
    grid, steps = sampler.pilot_grid, sampler.pilot_steps
    below = []
    for g, s in LEVELS:
        level = (max(2, round(grid * g)), max(2, round(steps * s)))
        if level != (grid, steps) and level not in below:   # fractions: never above
            below.append(level)
    if not below:
        return None, {}, needed
    burn_in = TuningConfig.burn_in
    full = pilot_transitions(grid, steps, burn_in)
    seconds = {level: needed * pilot_transitions(*level, burn_in) / full for level in below}
    fits = next((level for level in below if seconds[level] <= allowed), None)
    as_dict = lambda level: {"pilot_grid": level[0], "pilot_steps": level[1]}  # noqa: E731
    return (None if fits is None else as_dict(fits)), as_dict(below[-1]), seconds[below[-1]]


def lean_settings(over: OverBudget, sampler: SamplerSettings, budget_seconds: float | None,
                  name: str) -> dict:
    """The leaner pilot settings to pilot again with, after a pilot stopped by ``over``
    within a budget of ``budget_seconds`` (its deadline set by
    :func:`~bread_stan.deadline.set_up_by`).  Re-raises ``over`` where it was not a
    pilot's (or the run has no budget in minutes), and raises an
    :class:`~bread_stan.deadline.OverBudget` that states the budget the leanest pilot
    needs where none fits."""
    left = seconds_left()
    if not over.pilot or budget_seconds is None or left is None:
        raise over
    elapsed = budget_seconds - left   # the deadline is the budget's end
    level, leanest, lean_need = leaner(sampler, over.needed, SHARE * left)
    if level is not None:
        log.info("%s: %s would take about %s, past the budget of %s: piloting again "
                 "with a leaner pilot (%d grid betas per three decades, %d transitions at each; "
                 "--pilot-grid %d --pilot-steps %d with the chosen step counts gives the "
                 "same numbers)", name, over.what, duration(over.needed),
                 duration(budget_seconds), level["pilot_grid"], level["pilot_steps"],
                 level["pilot_grid"], level["pilot_steps"])
        return level
    if not leanest:
        raise over
    raise OverBudget(
        f"not converged within the budget of {duration(budget_seconds)}: {over.what} "
        f"alone would take about {duration(over.needed)}, and at its leanest "
        f"({leanest['pilot_grid']} grid betas, {leanest['pilot_steps']} transitions at "
        f"each) about {duration(lean_need)}, more than {SHARE:.0%} of the "
        f"{duration(max(left, 0.0))} left, so no step count could run; the set-up needs a "
        f"budget above {duration(elapsed + lean_need / SHARE)}, or fixed step counts "
        "(--steps)", over.what, lean_need, pilot=True, measured=over.measured) from None


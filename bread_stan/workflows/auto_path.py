"""Settle a run's annealing path before anything is scored: ``path="auto"`` made concrete.

:func:`resolve_path` (bread and compare) evaluates the log likelihood at the pilot's
exact prior draws (the very draws the pilot then tunes on), applies the rule of
:mod:`bread_stan.ais.path_choice`, and, when it says "waypoint", fits the waypoint's
Laplace approximation at once, so that a model without a posterior mode falls back to
the prior path before the run's fingerprint is taken.  The settings it returns are
concrete (path "prior" or "waypoint", ridge "stan" or "relative"): they are what the
fingerprint and the saved header record, so a run that resolves to the prior path has
the fingerprint of ``path="prior"`` and resumes results saved under it.  One decision
serves the forward and the reverse runs and every step count.

:func:`prior_path_only` is the same step for the workflows that run the prior path only
(protocol, subjective, aide): "auto" falls back with a logged reason, an explicit
"waypoint" or "gaussian" is refused in one line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from ..ais import waypoint
from ..ais.gaussian_base import GaussianBase
from ..ais.path_choice import PathChoice, choose, given
from ..errors import InputError
from ..rng import Purpose, derived_seed
from ..stan.simulator import Simulator
from .problem import Problem, prior_draws
from .settings import RunSettings, SamplerSettings

__all__ = ["Resolution", "resolve_path", "prior_path_only"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Resolution:
    """Concrete settings for the run, the choice behind them, and the waypoint q with
    its fit record when the path is "waypoint" and it was fitted here."""

    sampler: SamplerSettings
    run: RunSettings
    choice: PathChoice
    fitted: tuple[GaussianBase, dict] | None = None


def _concrete(sampler: SamplerSettings, run: RunSettings, choice: PathChoice,
              fitted=None) -> Resolution:
    return Resolution(sampler.for_path(choice.path), replace(run, path=choice.path), choice,
                      fitted)


def resolve_path(problems: list[Problem], simulator: Simulator, sampler: SamplerSettings,
                 run: RunSettings, name: str) -> Resolution:
    """The path of a bread/compare run on ``problems`` (tuned on the first), logged."""
    if run.path != "auto":
        choice = given(run.path, run.path, "set in RunSettings.path")
        return _concrete(sampler, run, choice)
    first = problems[0]
    pilot = prior_draws(first, simulator, sampler.pilot_chains,
                        derived_seed(run.seed, Purpose.PILOT))
    rule = choose(first.target.evaluate(pilot, gradient=False).log_lik)
    fitted, choice = None, rule
    if rule.path == "waypoint":
        cannot = None
        if run.algorithm != "ais":
            cannot = "the waypoint path runs AIS only and this run is SMC"
        elif sampler.kernel == "imh":
            cannot = "the waypoint path tunes HMC or NUTS on each leg and this run is IMH"
        elif run.exact_draws != 1:
            cannot = (f"the waypoint is fitted to one data set and this run has "
                      f"{run.exact_draws} exact draws")
        else:
            try:
                fitted = waypoint.fit_base(first.target, pilot)
            except waypoint.WaypointError as error:
                cannot = f"no Gaussian waypoint ({error})"
        if cannot is not None:
            reason = (f"the log likelihood's sd over {rule.n_draws} prior draws is "
                      f"{rule.loglik_sd:.3g} nats, above {rule.limit:.3g}: tempering from "
                      f"the prior may strand chains, but {cannot}; the run tempers from the "
                      "prior")
            choice = given("auto", "prior", reason, rule)
            log.warning("%s: %s", name, choice.message)
            return _concrete(sampler, run, choice)
    log.info("%s: %s", name, choice.message)
    return _concrete(sampler, run, choice, fitted)


def prior_path_only(sampler: SamplerSettings, run: RunSettings,
                    workflow: str) -> tuple[SamplerSettings, RunSettings]:
    """Settings for a workflow that runs the prior path only: "auto" becomes "prior"
    (logged), "waypoint" and "gaussian" are refused."""
    if run.path in ("waypoint", "gaussian"):
        raise InputError(f"RunSettings(path={run.path!r}) is for bread and compare; "
                         f"{workflow} runs the prior path: use path='prior' or 'auto'")
    if run.path == "auto":
        log.info("%s runs the prior path (path 'auto' needs no choice here)", workflow)
    return sampler.for_path("prior"), replace(run, path="prior")

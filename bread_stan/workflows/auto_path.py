"""Settle a run's annealing path before anything is scored: ``path="auto"`` made concrete.

:func:`resolve_path` (bread and compare) evaluates the log likelihood at the pilot's
exact prior draws (the very draws the pilots then tune on) and lets the pilots of two
paths bid (:mod:`bread_stan.ais.path_choice`):

1. The Gaussian-base path (:mod:`bread_stan.ais.gaussian_path`), where it can run (AIS,
   HMC or NUTS, one exact draw, a Gaussian q (:mod:`bread_stan.workflows.base_fit`: a
   Laplace fit at the posterior's mode, or Pathfinder's where there is none), a prior
   normaliser whose estimate can be trusted): its q is fitted, its leg tuned, and the
   leg's thermodynamic length L and gradients a transition g measured.
2. Tempering from the prior, unless the spread of the log likelihood says it would
   strand chains: its pilot runs with the rule that abandons it once the part of the
   path measured so far already costs more (g L^2) than the Gaussian path.

The cheaper path is taken, and its tuning handed to the run (:attr:`Resolution.tuned`),
so neither pilot runs twice.  Where the Gaussian path cannot run, the spread rule alone
decides between the prior path and the Gaussian waypoint, as before.  A model for which
no q can be fitted (no mode and no Pathfinder fit, or separate modes) falls back to the
prior path before the run's fingerprint is taken.
The settings returned are concrete (path "prior", "waypoint" or "gaussian", ridge
"stan" or "relative"): they are what the fingerprint and the saved header record.  One
decision serves the forward and the reverse runs and every step count; the pilots are
seeded, and their costs counted in gradients, not seconds, so the same seed makes the
same choice on any machine.

:func:`prior_path_only` is the same step for the workflows that run the prior path only
(protocol, subjective, aide): "auto" falls back with a logged reason, an explicit
"waypoint" or "gaussian" is refused in one line.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..ais import gaussian_path, waypoint
from ..deadline import OverBudget, seconds_left
from ..progress import duration
from ..ais.betas import ScheduleError, thermodynamic_length
from ..ais.gaussian_base import GaussianBase
from ..ais.path_choice import (PathChoice, PathCost, abandon_when_costlier, cheaper, choose,
                               given)
from ..ais.path import PilotInputs
from ..ais.path_kinds import kind
from ..ais.prior_normaliser import fit_draws
from ..ais.tuning import PilotAbandoned, TunedKernel, tune
from ..errors import InputError
from ..rng import Purpose, derived_seed
from ..stan.simulator import Simulator
from .base_fit import fit_q
from .simulator_normaliser import simulator_normaliser
from .problem import Problem, pilot_draws, unconstrained_draws
from .settings import RunSettings, SamplerSettings

__all__ = ["Resolution", "resolve_path", "concrete", "prior_path_only", "fit_gaussian"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Resolution:
    """Concrete settings for the run, the choice behind them, the waypoint q with its
    fit record when the path is "waypoint" and it was fitted here, and the path's
    tuning when a pilot here made it (a ``GaussianPath`` or a ``TunedKernel``)."""

    sampler: SamplerSettings
    run: RunSettings
    choice: PathChoice
    fitted: tuple[GaussianBase, dict] | None = None
    tuned: gaussian_path.GaussianPath | TunedKernel | None = None


def concrete(sampler: SamplerSettings, run: RunSettings, choice: PathChoice,
             fitted=None, tuned=None) -> Resolution:
    """The resolution that runs ``choice``'s path with the requested ``sampler`` and
    ``run`` made concrete for it (the sampler with ``choice``'s leaner pilot, if a budget
    took one)."""
    if choice.pilot:   # a leaner pilot that a budget took (workflows.lean_pilot)
        sampler = replace(sampler, **choice.pilot)
    return Resolution(sampler.for_path(choice.path), replace(run, path=choice.path), choice,
                      fitted, tuned)


def pilot_inputs(problem: Problem, simulator: Simulator, sampler: SamplerSettings,
                 run: RunSettings, fitted=None) -> PilotInputs:
    """What fitting any path of ``problem`` may use, on the run's seeds (so a run that
    fits it again gets the same path): the pilot's exact prior draws, the sampler made
    concrete for each path, q fitted on the pilot draws
    (:func:`~bread_stan.workflows.base_fit.fit_q`) unless ``fitted`` is given, and the
    prior's normaliser from the simulator (computed when the drafted simulator can,
    else exact prior draws to estimate it from)."""
    pilot_seed = derived_seed(run.seed, Purpose.PILOT)
    pilot = pilot_draws(problem, simulator, sampler.pilot_chains, pilot_seed)

    def on_path(name: str) -> tuple:
        settings = sampler.for_path(name)
        return (*settings.make(), settings.tuning_config())

    def normaliser() -> tuple:
        fit = simulator.simulate(fit_draws(problem.target.dim),
                                 derived_seed(run.seed, Purpose.NORMALISER_PRIOR))
        known = simulator_normaliser(simulator, fit,
                                     derived_seed(run.seed, Purpose.NORMALISER_TRIES),
                                     problem.target.compiled.program.code)
        return (None if known is not None else unconstrained_draws(problem, fit)), known

    return PilotInputs(problem.target, on_path, pilot, pilot_seed, run.seed, run.progress,
                       fitted, lambda: fit_q(problem.target, pilot, run.seed), normaliser)


def fit_gaussian(problem: Problem, simulator: Simulator, sampler: SamplerSettings,
                 run: RunSettings, fitted=None) -> gaussian_path.GaussianPath:
    """The Gaussian-base path of ``problem`` (see :func:`pilot_inputs`)."""
    return kind("gaussian").fit(pilot_inputs(problem, simulator, sampler, run, fitted))


def _cannot_fit(sampler: SamplerSettings, run: RunSettings) -> str | None:
    """Why neither path that starts from a fitted Gaussian q (Gaussian, waypoint) can run
    here, or None."""
    if run.algorithm != "ais":
        return "a path from a fitted Gaussian runs AIS only and this run is SMC"
    if sampler.kernel == "imh":
        return "a path from a fitted Gaussian tunes HMC or NUTS and this run is IMH"
    if run.exact_draws != 1:
        return (f"a Gaussian q is fitted to one data set and this run has "
                f"{run.exact_draws} exact draws")
    return None


def _fit_past_budget(problem: Problem, pilot: np.ndarray) -> str | None:
    """Why q is not fitted within a budget in minutes: its mode searches cannot stop
    midway, and their least cost (:func:`~bread_stan.ais.waypoint.fit_seconds_at_least`:
    a d x d Hessian's gradients and dense algebra each) exceeds the time left; else None."""
    left = seconds_left()
    if left is None:
        return None
    needed = waypoint.fit_seconds_at_least(problem.target, pilot)
    if needed <= left:
        return None
    return (f"fitting a Gaussian q to {problem.target.dim} parameters would take at least "
            f"{duration(needed)} (a {problem.target.dim} x {problem.target.dim} Hessian per "
            f"mode search), past the {duration(max(left, 0.0))} left of the budget")


def _gaussian_candidate(problem, simulator, sampler, run, name, fitted,
                        kept: gaussian_path.GaussianPath | None = None
                        ) -> tuple[gaussian_path.GaussianPath | None, PathCost | None, str]:
    """The Gaussian path on the fitted q ``fitted`` (``kept`` where an earlier run tuned
    it) and its cost, or None, None and why it cannot run."""
    if kept is not None:
        log.info("%s: choosing the path: the Gaussian-base path an earlier run tuned on "
                 "these settings, not tuned again", name)
        path = kept
    else:
        log.info("%s: choosing the path: fitting the Gaussian-base path's pilot", name)
        path = fit_gaussian(problem, simulator, sampler, run, fitted)
    if not path.normaliser.trustworthy:
        return None, None, (f"the prior normaliser's estimate cannot be trusted (Pareto k "
                            f"{path.normaliser.pareto_k:.2f})")
    try:
        return path, _leg_cost(path.leg), ""
    except ScheduleError as error:
        return None, None, f"its pilot could not measure the path ({error})"


def _leg_cost(tuned: TunedKernel) -> PathCost:
    """The cost of a path its whole pilot measured."""
    return PathCost(thermodynamic_length(tuned.grid_betas, tuned.loglik_sd),
                    tuned.gradients_per_transition,
                    pilot_gradients=(tuned.pilot_gradients if np.isfinite(tuned.pilot_gradients)
                                     else None))


def resolve_path(problems: list[Problem], simulator: Simulator, sampler: SamplerSettings,
                 run: RunSettings, name: str,
                 kept: gaussian_path.GaussianPath | None = None) -> Resolution:
    """The path of a bread/compare run on ``problems`` (tuned on the first), logged;
    ``kept``: the Gaussian path an earlier run tuned on these settings and seeds (its q
    and pilot are not fitted again)."""
    if run.path != "auto":
        choice = given(run.path, run.path, "set in RunSettings.path")
        return concrete(sampler, run, choice)
    first = problems[0]
    pilot_seed = derived_seed(run.seed, Purpose.PILOT)
    pilot = pilot_draws(first, simulator, sampler.pilot_chains, pilot_seed)
    rule = choose(first.target.evaluate(pilot, gradient=False).log_lik)
    # One fit of q serves both paths that start from it.
    cannot = unavailable = _cannot_fit(sampler, run) or (
        None if kept is not None else _fit_past_budget(first, pilot))
    fitted = None
    if cannot is None and kept is not None:
        fitted = kept.base, kept.fit
    elif cannot is None:
        try:
            fitted = fit_q(first.target, pilot, run.seed)
        except waypoint.WaypointError as error:
            cannot, unavailable = (f"no Gaussian waypoint ({error})",
                                   f"no Gaussian q ({error})")
    if fitted is not None:
        gaussian, cost, unavailable = _gaussian_candidate(first, simulator, sampler, run,
                                                          name, fitted, kept)
        if gaussian is not None:
            return _bid(first, sampler, run, name, rule, gaussian, cost, pilot, pilot_seed)
    if rule.path == "waypoint" and cannot is not None:
        reason = (f"the log likelihood's sd over {rule.n_draws} prior draws is "
                  f"{rule.loglik_sd:.3g} nats, above {rule.limit:.3g}: tempering from "
                  f"the prior may strand chains, but {cannot}; the run tempers from the "
                  f"prior (the Gaussian-base path is not a candidate: {unavailable})")
        choice = given("auto", "prior", reason, rule)
        log.warning("%s: %s", name, choice.message)
        return concrete(sampler, run, choice)
    choice = given("auto", rule.path, f"{rule.reason}; the Gaussian-base path is not a "
                   f"candidate: {unavailable}", rule)
    log.info("%s: %s", name, choice.message)
    return concrete(sampler, run, choice, fitted if rule.path == "waypoint" else None)


def _bid(first: Problem, sampler: SamplerSettings, run: RunSettings, name: str,
         rule: PathChoice, gaussian: gaussian_path.GaussianPath, rival: PathCost, pilot,
         pilot_seed) -> Resolution:
    """The cheaper of the Gaussian path (fitted, costing ``rival``) and the prior path
    (its pilot run here, abandoned once it costs more), with the winner's tuning."""
    if rule.tempering_strands:
        reason = (f"the log likelihood's sd over {rule.n_draws} prior draws is "
                  f"{rule.loglik_sd:.3g} nats, above {rule.limit:.3g}: tempering from the "
                  "prior would strand chains; the Gaussian path (the waypoint's second leg "
                  "alone, so cheaper than the waypoint path) runs instead")
        choice = PathChoice("auto", "gaussian", reason, rule.loglik_sd, rule.n_draws,
                            rule.limit, {"gaussian": asdict(rival)})
        log.info("%s: %s", name, choice.message)
        return concrete(sampler, run, choice, tuned=gaussian)
    on_path = sampler.for_path("prior")
    kernel, base_params = on_path.make()
    log.info("%s: choosing the path: the prior path's pilot (abandoned once it costs "
             "more than the Gaussian path: %s)", name, rival.describe())
    give_up = abandon_when_costlier(rival, steps=None if run.auto_steps else max(run.steps))
    try:
        tuned = tune(first.target, kernel, base_params, pilot, seed=pilot_seed,
                     config=on_path.tuning_config(), progress=run.progress, give_up=give_up)
    except PilotAbandoned as stopped:
        choice = cheaper(rival, give_up.partial, rule, abandoned=str(stopped))
        log.info("%s: %s", name, choice.message)
        return concrete(sampler, run, choice, tuned=gaussian)
    except OverBudget as over:   # the Gaussian path, tuned already, may still fit
        choice = PathChoice("auto", "gaussian", "the prior path's pilot would take about "
                            f"{duration(over.needed)}, past the budget",
                            rule.loglik_sd, rule.n_draws, rule.limit,
                            {"gaussian": asdict(rival)}, run.budget_minutes)
        log.info("%s: %s", name, choice.message)
        return concrete(sampler, run, choice, tuned=gaussian)
    try:
        choice = cheaper(rival, _leg_cost(tuned), rule)
    except ScheduleError as error:
        choice = cheaper(rival, give_up.partial, rule, abandoned=(
            f"the prior path's pilot could not measure its length ({error})"))
    log.info("%s: %s", name, choice.message)
    return concrete(sampler, run, choice, tuned=gaussian if choice.path == "gaussian"
                    else tuned)


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

"""One model on one simulated data set: simulation of the problem and prior draws.

:func:`simulate_problem` draws (x*, y*) from the simulator program, builds the
model's target on y* and checks its prior/likelihood split; :func:`prior_draws`
gives exact prior draws in the model's unconstrained space; :func:`problem_seed`
is the seed of one purpose for problem k of a multi-draw run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..ais.results import DirectionResult, StepResult
from ..errors import BreadStanError, InputError
from ..rng import Purpose, derived_seed
from ..stan.model import unflatten_draws
from ..stan.simulator import Simulator, check_data_names, draw_at, split_draw
from ..stan.tempered import StanTarget, check_split, compile_tempered

__all__ = ["Problem", "constrained", "pilot_draws", "prior_draws", "problem_seed",
           "simulate_problem", "largest_simulated_value", "unconstrained_draws",
           "prior_starts", "join_problems", "stack"]

log = logging.getLogger(__name__)

_CHECK_DRAWS = 8  # prior draws at which the model's prior/likelihood split is checked


@dataclass
class Problem:
    """One model on one simulated data set: its target and its exact draw."""

    name: str
    target: StanTarget
    x_star: np.ndarray  # unconstrained exact posterior draw
    truth: dict[str, Any]
    simulated_data: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)  # the model's data on y*
    # the pilot's prior draws by (n, seed), with their simulator (see pilot_draws)
    pilots: dict = field(default_factory=dict, repr=False, compare=False)
    # parameter draws tried and redrawn where the model rejects them (stan.redraw)
    redraws: dict | None = None


def problem_seed(seed: int, purpose: int, *rest_and_k: int) -> int:
    """The seed of one purpose for problem k (the last argument); problem 0 keeps the
    single-draw run's seed, so K = 1 and the first problem of K > 1 agree."""
    *rest, k = rest_and_k
    return derived_seed(seed, purpose, *rest) if k == 0 else derived_seed(seed, purpose,
                                                                            *rest, k)


def simulate_problem(name, model, simulator: Simulator, data: Mapping, seed: int,
                      threads, truth_draw: Mapping | None = None) -> Problem:
    compiled = compile_tempered(model)
    check_data_names(simulator, compiled)
    simulator.honour(compiled, data)   # a draw the model rejects too is redrawn
    if truth_draw is None:
        truth_draw = draw_at(simulator.simulate(1, problem_seed(seed, Purpose.TRUTH, 0)), 0)
    params, overrides = split_draw(truth_draw, compiled)
    model_data = {**data, **overrides}
    target = StanTarget(compiled, model_data, threads=threads)
    try:
        x_star = target.param_unconstrain(params)
    except InputError:
        raise  # a shape or name problem, not a draw outside the constraints
    except BreadStanError as error:
        raise type(error)(f"the simulator drew parameters outside the model's constraints "
                          f"(bounds, ordered, simplex, ...): {error}; its draws must satisfy "
                          "them (sort_asc for an ordered vector, abs for a half-normal)"
                          ) from None
    problem = Problem(name, target, x_star, _as_lists(params), _as_lists(overrides),
                       model_data)
    check_split(target, prior_draws(problem, simulator, _CHECK_DRAWS,
                                     derived_seed(seed, Purpose.CHECK)))
    if simulator.redraws.rejected:
        problem.redraws = simulator.redraws.to_dict()
        log.info("%s: %s", name, simulator.redraws.describe())
    return problem


def _as_lists(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in values.items()}


def prior_draws(problem: Problem, simulator: Simulator, n: int, seed: int) -> np.ndarray:
    return unconstrained_draws(problem, simulator.simulate_prior(n, seed))


def pilot_draws(problem: Problem, simulator: Simulator, n: int, seed: int) -> np.ndarray:
    """:func:`prior_draws` for the pilot, simulated once per problem and simulator:
    the path's choice, its fit and the check's kernel at the prior all start from the
    same draws (a copy each time, so that no caller changes another's)."""
    cached = problem.pilots.get((n, seed))
    if cached is None or cached[0] is not simulator:
        cached = problem.pilots[n, seed] = (simulator, prior_draws(problem, simulator, n, seed))
    return cached[1].copy()


def unconstrained_draws(problem: Problem, draws: Mapping[str, np.ndarray]) -> np.ndarray:
    """The model parameters of a batch of simulator draws, unconstrained (n, d)."""
    params, _ = split_draw(draws, problem.target.compiled)
    return problem.target.param_unconstrain_batch(params)


def constrained(problem: Problem, u: np.ndarray) -> dict[str, np.ndarray]:
    flat = problem.target.param_constrain(u)
    return unflatten_draws(flat, problem.target.param_names())


def largest_simulated_value(problem: Problem) -> str:
    """Which simulated data variable of ``problem`` reaches the largest magnitude, and
    how large: a clause for errors that an extreme simulated data set explains."""
    name, top = None, 0.0
    for key, value in problem.simulated_data.items():
        values = np.abs(np.asarray(value, dtype=float)).ravel()
        if values.size and np.nanmax(values) > top:
            name, top = key, float(np.nanmax(values))
    if name is None:
        return "the simulated data are all zero"
    text = f"the data set simulated for this run reaches |{name}| = {top:.3g}"
    if not np.isfinite(top) or top > 1e15:
        text += (" (the prior predictive overflows: the priors are too vague for the "
                 "model's scale; give proper, weakly informative priors)")
    return text


def prior_starts(problems: list[Problem], simulator: Simulator, run,
                  T: int) -> list[np.ndarray]:
    """The forward chains' exact prior draws at ``T`` (unconstrained), per problem; for
    SMC, (runs, 2P - 1, d): each run's forward particles and its conditional run's
    free ones."""
    per = 1 if run.algorithm == "ais" else 2 * run.particles_per_run - 1
    draws = simulator.simulate_prior(run.chains * per, derived_seed(run.seed, Purpose.PRIOR, T))
    starts = []
    for problem, rows in zip(problems, np.array_split(np.arange(run.chains), len(problems))):
        rows = (rows[:, None] * per + np.arange(per)).ravel()
        params, _ = split_draw({name: v[rows] for name, v in draws.items()},
                               problem.target.compiled)
        u = problem.target.param_unconstrain_batch(params)
        starts.append(u if run.algorithm == "ais" else u.reshape(-1, per, u.shape[1]))
    return starts


def join_problems(problems: list[Problem], parts: list[StepResult]) -> StepResult:
    """One step from each problem's step (final forward positions still unconstrained)."""
    for problem, one in zip(problems, parts):
        one.draws = constrained(problem, one.draws.pop("unconstrained"))
    if len(parts) == 1:
        return parts[0]
    T = parts[0].n_steps
    return StepResult(T, stack([p.forward for p in parts]), stack([p.reverse for p in parts]),
                      parts[0].betas, {name: np.concatenate([p.draws[name] for p in parts])
                                       for name in parts[0].draws})


def stack(directions: list[DirectionResult]) -> DirectionResult:
    """One direction's chains over several problems, labelled by problem."""
    sizes = [d.log_estimates.size for d in directions]
    weights = np.asarray(sizes, dtype=float) / sum(sizes)
    keys = set.intersection(*(set(d.diagnostics) for d in directions))
    additive = {"divergences", "divergent_chains", "non_finite_estimates"}
    diagnostics = {key: float(sum(d.diagnostics[key] for d in directions)) if key in additive
                   else float(np.dot(weights, [d.diagnostics[key] for d in directions]))
                   for key in keys}
    cumulative = (np.concatenate([d.cumulative for d in directions])
                  if all(d.cumulative is not None for d in directions) else None)
    return DirectionResult(
        np.concatenate([d.log_estimates for d in directions]),
        sum(d.wall_time for d in directions), sum(d.n_grad for d in directions), diagnostics,
        cumulative, directions[0].cumulative_at if cumulative is not None else None,
        np.repeat(np.arange(len(directions)), sizes))

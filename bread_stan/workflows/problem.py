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

from ..errors import BreadStanError, InputError
from ..rng import Purpose, derived_seed
from ..stan.model import unflatten_draws
from ..stan.simulator import Simulator, check_data_names, draw_at, split_draw
from ..stan.tempered import StanTarget, check_split, compile_tempered

__all__ = ["Problem", "constrained", "prior_draws", "problem_seed", "simulate_problem",
           "largest_simulated_value", "unconstrained_draws"]

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

"""The model's own rejections honoured: a failed simulator draw redrawn, where exact.

Where a Stan density throws (``normal_lpdf`` at a scale <= 0, ``poisson_lpmf`` at a
negative rate), the model's tempered density ``prior(x) * lik(y | x)^beta`` is zero for
every beta > 0, so the model's joint distribution is the prior conditioned on the
region R where its likelihood evaluates, times the likelihood.  A simulator whose data
draw fails (an ``_rng`` refusing the same argument) at a parameter draw outside R is
therefore made exact by drawing the parameters again, until a draw succeeds: the
accepted draws are the prior conditioned on R (rejection sampling), then the data.

What is checked, at each failed draw: the simulator's parameter part (the drafted
simulator with its data draws left out, :func:`~.draft.emit.emit_parameter_part`, whose
draw ``i`` of a seed makes the same RNG calls as the simulator's draw ``i`` up to its
first data draw) gives the parameters x of the failed draw; the model, on the data it
was given, must have a finite log prior at x (prior_only = 1) and a log likelihood that
is not finite at x (its joint evaluation throws, or is -inf or NaN).  Stan's densities
check their parameter arguments before the outcome, so a throw at x on valid data is
the same for every data set; a -inf or NaN is judged on the data given.  A failure the
model does not share (``poisson_log_rng`` refuses log rates above 20.79 that
``poisson_log_lpmf`` accepts) is refused in one line: no redraw samples that model.

The redraws of draw ``i`` of seed ``s`` are the simulator's draws ``0, 1, ...`` of the
seed ``derived_seed(s, Purpose.SIMULATOR_REDRAW, i)``, so they do not depend on the
batch size; after :data:`TRIES` failures the draw stops with an error.  The share
redrawn, rejected parameter draws over all draws tried, is counted in
:class:`RedrawCount`; it estimates the prior mass outside R.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import BreadStanError, PriorDrawError, StanDataError
from ..rng import Purpose, derived_seed
from .compile import CompiledModel, Program, compile_model
from .draft import draft_program
from .model import StanModel, unflatten_draws
from .tempered import StanTarget

__all__ = ["NoParameterPart", "RedrawCount", "Rejections", "TRIES"]

logger = logging.getLogger("bread_stan")

TRIES = 1000   # failed parameter draws in a row before one draw is given up
_BATCH = 16    # redraws simulated at once


class NoParameterPart(StanDataError):
    """The simulator has no known parameter part: a failed draw cannot be checked."""


@dataclass
class RedrawCount:
    """Parameter draws tried and rejected (redrawn) by one simulator."""

    tried: int = 0
    rejected: int = 0

    @property
    def share(self) -> float:
        """Rejected parameter draws over all draws tried."""
        return self.rejected / self.tried if self.tried else 0.0

    def to_dict(self) -> dict:
        return {"tried": self.tried, "rejected": self.rejected, "share": self.share}

    def describe(self) -> str:
        return (f"{self.rejected} of {self.tried} parameter draws ({self.share:.1%}) were "
                "redrawn: the model's likelihood fails to evaluate there, so its joint "
                "distribution is the prior conditioned on where it evaluates")


class Rejections:
    """Confirms a failed simulator draw against ``model`` (compiled, with ``prior_only``)
    on ``data``, and redraws it.  ``parameter_part``: the simulator's parameter part
    (program or compiled), or None to draft it from the model's program and use it only
    if the model's draft is the simulator itself."""

    def __init__(self, model: CompiledModel, data: Mapping[str, Any], *,
                 parameter_part: str | Program | CompiledModel | None = None):
        self.model = model
        self.data = dict(data)
        self._part = parameter_part
        self._part_model: StanModel | None = None
        self._target: StanTarget | None = None
        self.count = RedrawCount()

    def parameter_part(self, simulator: CompiledModel, values: Mapping) -> StanModel:
        """The simulator's parameter part on the simulator's data ``values``."""
        if self._part_model is None:
            part = self._part
            if isinstance(part, NoParameterPart):     # found missing before
                raise part
            if part is None:
                try:
                    part = _drafted_part(self.model, simulator)
                except NoParameterPart as missing:
                    self._part = missing
                    raise
            if not isinstance(part, CompiledModel):
                part = compile_model(part)
            self._part_model = StanModel(part, values)
        return self._part_model

    def parameters(self, simulator: CompiledModel, values: Mapping, seed: int,
                   index: int) -> dict[str, np.ndarray]:
        """The parameters of the simulator's draw ``index`` of ``seed`` (its parameter
        part's draw), by name."""
        part = self.parameter_part(simulator, values)
        names = part.param_names(True, True)
        out = np.empty((1, len(names)))
        if part.generate_batch(seed, index, out):
            raise PriorDrawError(f"the parameters of draw {index} cannot be drawn: "
                                 f"{next(iter(part.last_errors.values()))}")
        return unflatten_draws(out, names)

    def confirm(self, params: Mapping[str, np.ndarray], failure: str) -> None:
        """Raise unless the model rejects ``params`` (one draw, a leading axis of 1):
        a finite log prior and a log likelihood that is not finite there."""
        if self._target is None:
            self._target = StanTarget(self.model, self.data, threads=1)
        target = self._target
        declared = self.model.info.get("parameters", {})
        at = {k: np.asarray(params[k]) for k in declared}
        shown = ", ".join(f"{k} = {np.squeeze(v).tolist()}" for k, v in at.items())
        try:
            u = target.param_unconstrain_batch(at)
        except Exception as error:   # a draw outside the model's constraints
            raise StanDataError(f"{failure} (at {shown}, which the model's constraints "
                                f"refuse: {error})") from None
        ev = target.evaluate(u, gradient=False)
        prior, lik = float(ev.log_prior[0]), float(ev.log_lik[0])
        if not np.isfinite(prior):
            raise StanDataError(f"{failure} (at {shown}, where the model's prior is zero too: "
                                "the simulator draws outside the model's prior)")
        if np.isfinite(lik):
            raise StanDataError(
                f"{failure}; the model's likelihood evaluates at these parameters ({shown}: "
                f"log likelihood {lik:.6g} on the data given), so the failure is the "
                "simulator's alone and no redraw samples the model: give proper, weakly "
                "informative priors")

    def redraw(self, simulate: Callable[[int, int, int], tuple[np.ndarray, dict]],
               simulator: CompiledModel, values: Mapping, seed: int, index: int,
               failure: str) -> np.ndarray:
        """The row replacing the failed draw ``index`` of ``seed``: confirmed, then
        redrawn.  ``simulate(seed, first, n)`` -> (rows, failures by row)."""
        self._confirm_at(simulator, values, seed, index, failure)
        self.count.rejected += 1
        stream = derived_seed(seed, Purpose.SIMULATOR_REDRAW, index)
        for first in range(0, TRIES, _BATCH):
            rows, failures = simulate(stream, first, _BATCH)
            for k in range(_BATCH):
                self.count.tried += 1
                if k not in failures:
                    return rows[k]
                self._confirm_at(simulator, values, stream, first + k,
                                 f"redraw {first + k} of draw {index}: {failures[k]}")
                self.count.rejected += 1
        raise StanDataError(f"draw {index} was redrawn {TRIES} times and every parameter "
                            "draw fell where the model's likelihood fails to evaluate "
                            f"(the last: {failure}); the prior puts almost no mass where "
                            "the model is defined: give proper, weakly informative priors")

    def _confirm_at(self, simulator, values, seed: int, index: int, failure: str) -> None:
        self.confirm(self.parameters(simulator, values, seed, index), failure)


def _drafted_part(model: CompiledModel, simulator: CompiledModel) -> Program:
    """The parameter part of the simulator drafted from ``model``; refused unless that
    draft is ``simulator`` (a hand-written simulator has no known parameter part)."""
    try:
        drafted = draft_program(model.program)
    except BreadStanError as error:    # not draftable (or stanc refuses it)
        raise NoParameterPart(f"no simulator can be drafted from the model to find the "
                              f"parameters of a failed draw: {error}") from None
    if drafted.text != simulator.program.code or drafted.parameter_part is None:
        raise NoParameterPart("the simulator is not the one drafted from the model (or its "
                            "data draws are not its last draws), so the parameters of a "
                            "failed draw cannot be found to check that the model rejects them")
    return Program(drafted.parameter_part, f"{simulator.program.name}_parameters")

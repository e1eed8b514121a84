"""Exact joint draws from a simulator program (SPEC section 3).

A simulator program (``stan_models/README.md``) has no parameters; its
generated quantities draw every unknown from the prior, then the data.  Draw
``i`` of seed ``s`` uses Stan's RNG stream ``create_rng(s, i + 1)``, so it does
not depend on the batch size or the thread count.

A simulator data variable ``y_observed`` missing from the data is filled with the
data ``y`` (the drafter's convention for an outcome it draws only in part, or in the
model's statement order: the elements it does not draw keep their observed values).
The hyperparameter convention (``hyper_given`` and ``h_given`` arrays) is
filled in here: ``hyper=None`` draws the hyperparameters from their prior,
``hyper={"sigma_sq": 0.5, "tau": [1.0, 2.0], ...}`` fixes them (a hyperparameter
may be a scalar, vector, matrix or array: its value has the hyperparameter's shape).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from ..errors import PriorDrawError, PriorOnlyMissingError, StanDataError
from .compile import (DEFAULT_STANC_ARGS, CompiledModel, Program, compile_many, compile_model,
                      read_program, stanc_info)
from .data import DataLike, load_data, nonfinite_entries
from .draft import OBSERVED_SUFFIX, REJECTED, SIZE_REJECTED
from .model import StanModel, unflatten_draws, variable_shapes
from .redraw import NoParameterPart, RedrawCount, Rejections
from .tempered import PRIOR_ONLY

__all__ = ["Simulator", "split_draw", "draw_at", "to_unconstrained", "check_data_names",
           "check_conventions", "compile_with_simulator"]

logger = logging.getLogger("bread_stan")

_HYPER_FLAG = "hyper_given"
# Stan's message for an output drawn outside its declared bounds
_BOUND = re.compile(r"write_array: (?P<name>\w+)(?:\[[^\]]*\])? is \S+, but must be "
                    r"(?P<side>greater|less) than or equal to (?P<at>[^\s(]+)")
_SUFFIX = "_given"


class Simulator:
    """Runs a simulator program's generated quantities in seeded batches.

    ``hyper`` fixes the hyperparameters (all of them, by name, each a number or an
    array of the hyperparameter's shape); None draws them.
    """

    def __init__(self, program: str | os.PathLike | Program | CompiledModel,
                 data: DataLike = None, *, hyper: Mapping[str, Any] | None = None,
                 threads: int | None = None, batch_size: int = 1000,
                 stanc_args: Sequence[str] = DEFAULT_STANC_ARGS, **compile_options):
        if not isinstance(program, CompiledModel):
            program = compile_model(program, stanc_args=stanc_args, **compile_options)
        self.compiled = program
        self.hyper_given = bool(hyper)   # the hyperparameters fixed, not drawn
        inputs = program.data_variables
        self.hyperparameters = sorted(name[:-len(_SUFFIX)] for name in inputs
                                      if name.endswith(_SUFFIX) and name != _HYPER_FLAG)
        values = load_data(data)
        self.data = dict(values)
        for name in inputs:    # a drafted simulator's observed values of an outcome
            given = name[:-len(OBSERVED_SUFFIX)]
            if name.endswith(OBSERVED_SUFFIX) and name not in values and given in values:
                values[name] = values[given]
        values.update(self._hyper_data(inputs, hyper))
        self.model = StanModel(program, values, threads=threads)
        if self.model.dim != 0:
            raise StanDataError(f"simulator program {program.program.name} has parameters; "
                                "a simulator draws everything in generated quantities")
        self.batch_size = int(batch_size)
        self.names = self.model.param_names(True, True)
        self.shapes = variable_shapes(self.names)
        gq = program.info.get("generated quantities", {})
        self._int_outputs = {k for k, v in gq.items() if v.get("type") == "int"}
        self._values = values
        self.rejections: Rejections | None = None

    def honour(self, model: CompiledModel, data: Mapping[str, Any], *,
               parameter_part=None) -> "Simulator":
        """Redraw the parameters of a draw whose data draw fails where ``model`` (on
        ``data``) rejects them too (:mod:`.redraw`); a failure the model does not share
        stays a refusal.  Returns self."""
        if self.rejections is None or self.rejections.model.library != model.library:
            self.rejections = Rejections(model, data, parameter_part=parameter_part)
        return self

    @property
    def redraws(self) -> RedrawCount | None:
        """Parameter draws tried and redrawn so far (None when not honouring a model)."""
        return None if self.rejections is None else self.rejections.count

    def _hyper_data(self, inputs: Mapping, hyper: Mapping[str, Any] | None) -> dict:
        if _HYPER_FLAG not in inputs:
            if hyper:
                raise StanDataError("hyper was given but the simulator program does not "
                                    "declare `int<lower=0, upper=1> hyper_given;` and "
                                    "`array[hyper_given] real h_given;` per hyperparameter")
            return {}
        if hyper is None:
            return {_HYPER_FLAG: 0, **{f"{h}{_SUFFIX}": [] for h in self.hyperparameters}}
        unknown = set(hyper) - set(self.hyperparameters)
        missing = set(self.hyperparameters) - set(hyper)
        if unknown or missing:
            raise StanDataError(f"hyper must give exactly the hyperparameters "
                                f"{self.hyperparameters}; unknown {sorted(unknown)}, "
                                f"missing {sorted(missing)}")
        given = {_HYPER_FLAG: 1}
        for h, v in hyper.items():
            value = np.asarray(v, dtype=float)
            shape_dims = int(inputs[f"{h}{_SUFFIX}"].get("dimensions", 1)) - 1
            if value.ndim != shape_dims:
                raise StanDataError(f"hyper[{h!r}] has shape {value.shape}, but {h} has "
                                    f"{shape_dims} dimension(s) (its {h}{_SUFFIX} is an "
                                    f"array of values of {h}'s shape)")
            given[f"{h}{_SUFFIX}"] = value[None].tolist()
        return given

    def simulate_flat(self, n: int, seed: int, *, first: int = 0,
                      threads: int | None = None) -> np.ndarray:
        """Draws ``first .. first + n - 1`` as a flat (n, outputs) array (Stan's order)."""
        out = np.empty((n, len(self.names)))
        for start in range(0, n, self.batch_size):
            stop = min(n, start + self.batch_size)
            rc = self.model.generate_batch(seed, first + start, out[start:stop], threads)
            if self.rejections is not None:
                self.rejections.count.tried += stop - start
            if rc:
                failures = dict(self.model.last_errors)
                if self._redraw(out[start:stop], failures, seed, first + start, threads):
                    continue
                index, message = next(iter(failures.items()))
                bad = nonfinite_entries(self.data)
                bound = _BOUND.search(message)
                rejected = REJECTED in message or SIZE_REJECTED in message
                cause = "" if rejected else (
                    f" (the data given to the simulator are not finite: "
                         f"{', '.join(bad)})" if bad else
                         f" ({bound['name']} was drawn outside its declared bound "
                         f"{'lower' if bound['side'] == 'greater' else 'upper'}="
                         f"{float(bound['at']):g}: a distribution in the model gives mass outside "
                         f"{bound['name']}'s declared support, which no draw may have; use a "
                         "distribution on that support, or drop the bound)" if bound else
                         " (an _rng function refused a value the simulator drew: BREAD "
                         "simulates data from the prior, so its draws must give finite "
                         "parameters and data; a prior as vague as inv_gamma(0.001, 0.001), "
                         "or normal(0, 1000) under exp or inv_logit, overflows: give proper, "
                         "weakly informative priors, or check the simulator's data)")
                vague = not (rejected or bad or bound)   # the last cause: a prior draw
                raise (PriorDrawError if vague else StanDataError)(
                    f"simulation failed for {rc} draw(s); draw {first + start + index}: "
                    f"{message}{cause}")
        return out

    def _redraw(self, rows: np.ndarray, failures: dict[int, str], seed: int, first: int,
                threads: int | None) -> bool:
        """Replace the failed ``rows`` (draws ``first + k``) by confirmed redraws;
        False (nothing replaced) when no model is honoured or a failure is the drafted
        simulator's own refusal."""
        if self.rejections is None or any(REJECTED in m or SIZE_REJECTED in m
                                          for m in failures.values()):
            return False

        def simulate(stream: int, at: int, n: int):
            batch = np.empty((n, len(self.names)))
            failed = self.model.generate_batch(stream, at, batch, threads)
            return batch, dict(self.model.last_errors) if failed else {}

        try:
            self.rejections.parameter_part(self.compiled, self._values)
        except NoParameterPart as why:
            logger.info("no redraw of the failed simulator draws: %s", why)
            return False
        for k, message in sorted(failures.items()):
            rows[k] = self.rejections.redraw(
                simulate, self.compiled, self._values, seed, first + k,
                f"simulation failed at draw {first + k}: {message}")
        return True

    def simulate(self, n: int, seed: int, *, first: int = 0,
                 threads: int | None = None) -> dict[str, np.ndarray]:
        """Draws as a dict name -> array of shape ``(n, *stan_shape)``."""
        return self._as_dict(self.simulate_flat(n, seed, first=first, threads=threads),
                             self.names)

    def simulate_prior(self, n: int, seed: int, *,
                       threads: int | None = None) -> dict[str, np.ndarray]:
        """The parameters of draws ``0 .. n - 1`` (the prior's exact draws, which the
        tempered path starts from at beta = 0): those of :meth:`simulate`'s draws where
        nothing fails.  When a model is honoured (:meth:`honour`), a draw whose data draw
        fails keeps its parameters (from the simulator's parameter part, not redrawn:
        the prior is not conditioned) and the outputs are the parameter part's only."""
        if self.rejections is None:
            return self.simulate(n, seed, threads=threads)
        out = np.empty((n, len(self.names)))
        failed: dict[int, str] = {}
        for start in range(0, n, self.batch_size):
            stop = min(n, start + self.batch_size)
            if self.model.generate_batch(seed, start, out[start:stop], threads):
                failed.update({start + k: m for k, m in self.model.last_errors.items()})
        if not failed:
            return self._as_dict(out, self.names)
        try:
            if any(REJECTED in m or SIZE_REJECTED in m for m in failed.values()):
                raise NoParameterPart("the drafted simulator's own refusal")
            part = self.rejections.parameter_part(self.compiled, self._values)
        except NoParameterPart:
            return self.simulate(n, seed, threads=threads)    # refused as simulate refuses
        names = part.param_names(True, True)
        rows = np.asarray([self.names.index(name) for name in names])
        kept = np.ascontiguousarray(out[:, rows])
        for i in sorted(failed):
            if part.generate_batch(seed, i, kept[i:i + 1], threads):
                raise PriorDrawError(f"simulation failed for draw {i}, whose parameters "
                                     f"cannot be drawn either: {part.last_errors[0]}")
        return self._as_dict(kept, names)

    def _as_dict(self, flat: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
        draws = unflatten_draws(flat, names)
        for name in self._int_outputs & draws.keys():
            draws[name] = np.rint(draws[name]).astype(np.int64)
        return draws


def check_conventions(model_info: Mapping, simulator_info: Mapping, *, model: str = "the model",
                      simulator: str = "the simulator", hyper: Mapping | None = None) -> None:
    """Refuse a model/simulator pair that breaks the conventions of
    ``stan_models/README.md``, from ``stanc --info`` alone (no C++ compile): the model
    declares ``prior_only``; the simulator has no parameters, generates every model
    parameter under the model's name, and declares ``hyper_given`` if ``hyper`` is given.
    """
    if PRIOR_ONLY not in model_info.get("inputs", {}):
        raise PriorOnlyMissingError(model)
    if simulator_info.get("parameters"):
        raise StanDataError(f"simulator program {simulator} has a parameters block "
                            f"({', '.join(simulator_info['parameters'])}); a simulator draws "
                            "everything in generated quantities with _rng functions")
    generated = simulator_info.get("generated quantities", {})
    missing = [p for p in model_info.get("parameters", {}) if p not in generated]
    if missing:
        raise StanDataError(f"simulator program {simulator} does not generate the parameters "
                            f"{missing} of {model}; its generated quantities must use the "
                            "model's names")
    if hyper and _HYPER_FLAG not in simulator_info.get("inputs", {}):
        raise StanDataError("hyper was given but the simulator program does not declare "
                            "`int<lower=0, upper=1> hyper_given;` and "
                            "`array[hyper_given] real h_given;` per hyperparameter")


def compile_with_simulator(models: Sequence, simulator, *, hyper: Mapping | None = None,
                           max_workers: int = 3, **options
                           ) -> tuple[list[CompiledModel], CompiledModel]:
    """Check the conventions of every (model, simulator) pair with stanc, then compile
    the models, the simulator (and a missing bridge object) in parallel.

    A program given as a :class:`CompiledModel` is used as it is.  Returns the compiled
    models (in order) and the compiled simulator.
    """
    items = [m if isinstance(m, CompiledModel) else read_program(m)
             for m in [*models, simulator]]
    toolchain = options.get("toolchain")
    infos = [i.info if isinstance(i, CompiledModel) else stanc_info(i, toolchain)
             for i in items]
    for item, info in zip(items[:-1], infos[:-1]):
        check_conventions(info, infos[-1], model=_label(item), simulator=_label(items[-1]),
                          hyper=hyper)
    todo = [i for i in items if not isinstance(i, CompiledModel)]
    built = iter(compile_many(todo, workers=min(max_workers, len(todo) + 1), **options)
                 if todo else [])
    compiled = [i if isinstance(i, CompiledModel) else next(built) for i in items]
    return compiled[:-1], compiled[-1]


def _label(item: Program | CompiledModel) -> str:
    program = item.program if isinstance(item, CompiledModel) else item
    return str(program.path or program.name)


def draw_at(draws: Mapping[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    """Draw ``i`` of a batch of draws (dict of arrays with a leading draw axis)."""
    return {k: np.asarray(v)[i] for k, v in draws.items()}


def _model_info(model: Any) -> dict:
    compiled = getattr(model, "compiled", model)
    if not isinstance(compiled, CompiledModel):
        raise TypeError("model must be a StanTarget, a StanModel or a CompiledModel")
    return compiled.info


def split_draw(draw: Mapping[str, Any], model: Any) -> tuple[dict, dict]:
    """Split a simulator draw into (model parameters, data overrides) by name.

    Parameters are the model's parameters; data overrides are the model's data
    variables (except ``prior_only``) that the draw contains.  Anything else
    is an extra output and is left out.
    """
    info = _model_info(model)
    parameters = info.get("parameters", {})
    inputs = info.get("inputs", {})
    missing = [p for p in parameters if p not in draw]
    if missing:
        raise StanDataError(f"the simulator does not generate the model parameters "
                            f"{missing}; its generated quantities must use the model's names")
    params = {k: draw[k] for k in parameters}
    data = {k: v for k, v in draw.items() if k in inputs and k != "prior_only"}
    bad = nonfinite_entries({**params, **data}, batched=_batched(draw, parameters))
    if bad:
        raise PriorDrawError(f"the simulator produced non-finite values: {', '.join(bad)}; "
                             "a prior this vague reaches values beyond double precision "
                             "(a lognormal with a half-Cauchy scale, or exp of a wide "
                             "normal, overflows to inf): give proper, weakly informative "
                             "priors, or check the simulator's generated quantities (and "
                             "the data they use)")
    return params, data


def _batched(draw: Mapping[str, Any], parameters: Mapping[str, Any]) -> bool:
    """Whether ``draw`` has a leading draw axis (judged on the first parameter)."""
    for name, declared in parameters.items():
        dims = declared.get("dimensions", 0) if isinstance(declared, Mapping) else 0
        return np.ndim(draw[name]) > dims
    return False


def check_data_names(simulator: Simulator, model: Any) -> list[str]:
    """The model's data variables that the simulator neither generates nor reads.

    Each is named in a warning (BREAD would run on the observed values while
    taking a prior draw for the exact posterior draw); a simulator that
    generates none of the model's data is refused with :class:`StanDataError`.
    """
    inputs = set(_model_info(model).get("inputs", {})) - {"prior_only"}
    generated = set(simulator.compiled.info.get("generated quantities", {}))
    read = set(simulator.compiled.data_variables)
    if not inputs & generated:
        raise StanDataError(
            f"the simulator generates none of the model's data variables "
            f"({', '.join(sorted(inputs - read)) or ', '.join(sorted(inputs))}); it generates "
            f"{', '.join(sorted(generated))}. Its generated quantities must write the "
            "simulated data under the model's names")
    missing = sorted(inputs - generated - read)
    if missing:
        logger.warning("the simulator does not generate the model's data variable(s) %s "
                       "(nor reads them): BREAD keeps their observed values, so the "
                       "simulated draw is not an exact posterior draw unless they are "
                       "fixed inputs; the simulator generates %s", ", ".join(missing),
                       ", ".join(sorted(generated)))
    return missing


def to_unconstrained(params: Mapping[str, Any], model: Any, *, batched: bool = True
                     ) -> np.ndarray:
    """Unconstrained vectors of a parameters dict: (n, d) if ``batched`` else (d,)."""
    target = getattr(model, "full_model", model)
    if not isinstance(target, StanModel):
        raise TypeError("model must be a StanTarget or a StanModel")
    if batched:
        return target.param_unconstrain_batch(params)
    return target.param_unconstrain(params)

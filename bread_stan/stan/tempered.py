"""A Stan model program as an AIS target: log prior and log likelihood, split.

The model program follows the ``prior_only`` convention of
``stan_models/README.md``.  One compiled library serves two model instances,
built with ``prior_only = 1`` (log prior, with the log-Jacobian) and
``prior_only = 0`` (the joint); the log likelihood is their difference.  One
batched C call evaluates both at every point, with gradients.

Both targets here offer native HMC and NUTS transitions (``target.native``, a
:class:`~bread_stan.stan.native.NativeKernels`), which the kernels use
automatically.  :class:`JointTarget` is the posterior alone (beta = 1, one
model instance, one gradient per leapfrog step): what the fit samples.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from .compile import (DEFAULT_STANC_ARGS, CompiledModel, Program, compile_model,
                      read_program, stanc_info)
from .data import DataLike, load_data
from ..errors import InputError, ModelSetupError, PriorOnlyMissingError
from .model import StanModel, as_points, output_array
from .native import NativeKernels
from ..target import Evaluation

__all__ = ["StanTarget", "JointTarget", "compile_tempered", "check_split", "PRIOR_ONLY"]

logger = logging.getLogger("bread_stan")

PRIOR_ONLY = "prior_only"


def compile_tempered(model: str | os.PathLike | Program | CompiledModel, *,
                     stanc_args: Sequence[str] = DEFAULT_STANC_ARGS,
                     **compile_options) -> CompiledModel:
    """Compile a model program after checking it has the ``prior_only`` split.

    The check runs stanc only, so a program without the convention is refused
    before paying for a C++ compile.
    """
    if isinstance(model, CompiledModel):
        if PRIOR_ONLY not in model.data_variables:
            raise PriorOnlyMissingError(str(model.program.path or model.program.name))
        return model
    program = read_program(model)
    info = stanc_info(program, compile_options.get("toolchain"), stanc_args)
    if PRIOR_ONLY not in info.get("inputs", {}):
        raise PriorOnlyMissingError(str(program.path or program.name))
    return compile_model(program, stanc_args=stanc_args, **compile_options)


class StanTarget:
    """The :class:`~bread_stan.target.Target` of a Stan model program and its data.

    ``threads`` is the number of threads of each batched call (None: all cores);
    results do not depend on it.  The user's data need not contain
    ``prior_only``: it is supplied here.  ``prior_model`` reuses the prior instance
    of another target of the same program (for data sets that differ only in
    variables the prior does not read; the caller vouches for that).
    """

    def __init__(self, model: str | os.PathLike | Program | CompiledModel, data: DataLike,
                 threads: int | None = None, *, stanc_args: Sequence[str] = DEFAULT_STANC_ARGS,
                 prior_model: StanModel | None = None, **compile_options):
        model = compile_tempered(model, stanc_args=stanc_args, **compile_options)
        values = load_data(data)
        if PRIOR_ONLY in values:
            logger.warning("ignoring prior_only in the data: StanTarget sets it itself")
        if prior_model is not None and prior_model.compiled.library != model.library:
            raise InputError("prior_model is an instance of another program")
        self.prior_model = prior_model or StanModel(model, {**values, PRIOR_ONLY: 1},
                                                    threads=threads)
        self.full_model = StanModel(model, {**values, PRIOR_ONLY: 0}, threads=threads)
        self.compiled = model
        self.threads = 0 if threads is None else int(threads)
        self.last_errors: dict[int, str] = {}
        self.native = (NativeKernels(self.full_model, self.prior_model, self.threads)
                       if NativeKernels.available(self.full_model) else None)

    @property
    def dim(self) -> int:
        """Number of unconstrained coordinates."""
        return self.full_model.dim

    def joint(self) -> "JointTarget":
        """The posterior on the real data (prior_only = 0) as a one-instance target."""
        return JointTarget(self.full_model)

    def param_names(self, include_tp: bool = False, include_gq: bool = False) -> list[str]:
        return self.full_model.param_names(include_tp, include_gq)

    def param_unc_names(self) -> list[str]:
        return self.full_model.param_unc_names()

    def evaluate(self, points: np.ndarray, *, gradient: bool = True,
                 out: Evaluation | None = None) -> Evaluation:
        """Log prior, log likelihood (and gradients) of the (n, d) ``points``, one C call.

        A point that fails gets ``log_prior = -inf`` (domain errors, ``reject``) or
        NaN; the messages are in ``self.last_errors``.
        """
        points = as_points(points, self.dim)
        n, d = points.shape
        if out is None:
            out = Evaluation(np.empty(n), np.empty(n),
                             np.empty((n, d)) if gradient else None,
                             np.empty((n, d)) if gradient else None)
        lp = output_array(out.log_prior, (n,))
        ll = output_array(out.log_lik, (n,))
        gp = output_array(out.grad_prior, (n, d)) if gradient else None
        gl = output_array(out.grad_lik, (n, d)) if gradient else None
        self.full_model.split_batch(self.prior_model, points, lp, ll, gp, gl, self.threads,
                                    "StanTarget.evaluate")
        self.last_errors = self.full_model.last_errors
        return out

    def log_prior_likelihood(self, points: np.ndarray, beta: float | np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Log prior (n,), log likelihood (n,) and the gradient of
        ``log prior + beta * log lik`` (n, d); ``beta`` is a scalar or one per point."""
        ev = self.evaluate(points, gradient=True)
        beta = np.asarray(beta, dtype=np.float64)
        scale = beta[:, None] if beta.ndim == 1 else beta
        return ev.log_prior, ev.log_lik, ev.grad_prior + scale * ev.grad_lik

    def param_unconstrain(self, values: Mapping[str, Any]) -> np.ndarray:
        """Unconstrained vector (d,) of a dict of parameter values (Stan shapes)."""
        return self.full_model.param_unconstrain(values)

    def param_unconstrain_batch(self, values: Mapping[str, Any]) -> np.ndarray:
        """Unconstrained vectors (n, d) of a dict of arrays with a leading draw axis."""
        return self.full_model.param_unconstrain_batch(values)

    def param_constrain(self, u: np.ndarray, include_tp: bool = False) -> np.ndarray:
        """Constrained parameter values (flat, Stan's order) of ``u`` (d,) or (n, d)."""
        return self.full_model.param_constrain(u, include_tp)


class JointTarget:
    """The joint density of a :class:`StanModel` (log density with the Jacobian) as a
    :class:`~bread_stan.target.Target`: reported as the log prior, with log likelihood 0,
    so that at beta = 1 (or any beta) kernels sample the posterior.  One gradient per
    point, where a :class:`StanTarget` needs two."""

    def __init__(self, model: StanModel):
        self.model = model
        self.native = (NativeKernels(model, None, model.threads)
                       if NativeKernels.available(model) else None)

    @property
    def dim(self) -> int:
        return self.model.dim

    def evaluate(self, points: np.ndarray, *, gradient: bool = True) -> Evaluation:
        """Log joint (n,) and its gradient (n, d) as the log prior; zeros for the likelihood."""
        points = as_points(points, self.dim)
        n, d = points.shape
        if not gradient:
            return Evaluation(self.model.log_density_batch(points, jacobian=True), np.zeros(n))
        lp, grad = self.model.log_density_gradient_batch(points, jacobian=True)
        return Evaluation(lp, np.zeros(n), grad, np.zeros((n, d)))


def check_split(target: StanTarget, points: np.ndarray) -> None:
    """Refuse a model whose prior/likelihood split cannot be what its author meant,
    judged at exact prior draws ``points`` (n, d) with n >= 2.

    * The log likelihood is exactly 0 with a zero gradient at every point: the
      prior (prior_only = 1) and the joint (prior_only = 0) agree, so the
      likelihood is not inside ``if (!prior_only)`` (or there are no data).
    * The log prior does not depend on some unconstrained coordinate at any
      point: that parameter has no prior statement, so the prior is improper.
    """
    ev = target.evaluate(np.atleast_2d(points), gradient=True)
    ok = np.isfinite(ev.log_prior) & np.isfinite(ev.log_lik)
    if not ok.any():
        return  # nothing to judge by; the engine reports points outside the support
    name = target.compiled.program.path or target.compiled.program.name
    if np.all(ev.log_lik[ok] == 0) and np.all(ev.grad_lik[ok] == 0):
        raise ModelSetupError(
            f"in {name}, the log likelihood is exactly 0 at all {int(ok.sum())} prior draws "
            "checked: the densities with prior_only = 1 and prior_only = 0 agree, so the "
            "likelihood is not inside `if (!prior_only) { ... }` (or the data are empty). "
            "Wrap every likelihood statement in it")
    flat = np.all(ev.grad_prior[ok] == 0, axis=0)
    if flat.any():
        flat &= ~_bounded_by_the_prior(target, np.atleast_2d(points)[ok][0],
                                       ev.log_prior[ok][0], flat)
    if flat.any():
        names = [n for n, f in zip(target.param_unc_names(), flat) if f]
        raise ModelSetupError(
            f"in {name}, the log prior does not depend on {', '.join(names)} at any of the "
            f"{int(ok.sum())} prior draws checked: no prior statement covers "
            f"{'it' if len(names) == 1 else 'them'}, so the prior is improper and AIS from "
            "the prior is meaningless. Give every parameter a proper prior")


def _bounded_by_the_prior(target: StanTarget, point: np.ndarray, log_prior: float,
                          flat: np.ndarray) -> np.ndarray:
    """Which of the ``flat`` coordinates the prior still bounds: a uniform(a, b) on an
    unbounded parameter has a zero gradient inside (a, b) but a log prior of -inf beyond
    it, so moving the coordinate far (1e2 to 1e12 either way) changes the log prior."""
    steps = np.array([s * 10.0 ** k for k in (2, 4, 8, 12) for s in (1.0, -1.0)])
    bounded = np.zeros_like(flat)
    for j in np.flatnonzero(flat):
        probes = np.repeat(point[None, :], steps.size, axis=0)
        probes[:, j] += steps
        moved = target.evaluate(probes, gradient=False).log_prior
        bounded[j] = np.any(moved != log_prior)
    return bounded

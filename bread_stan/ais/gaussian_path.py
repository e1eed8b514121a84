"""AIS from a Laplace Gaussian base to the posterior, the prior's normaliser estimated.

``RunSettings(path="gaussian")``.  With q the Gaussian the waypoint path fits
(:func:`~bread_stan.ais.waypoint.fit_base`: Laplace at the best of a few mode searches,
sds widened 1.5 times), the run is the waypoint path's second leg alone:

    log g_b(u) = (1 - b) log q(u) + b log p~(u, y),      b from 0 to 1

forward from exact draws of q, reverse from the exact posterior draw, with the frozen
pilot-tuned kernels of that leg (:func:`~bread_stan.ais.waypoint.tune_base_leg`).  Its
sampler is a different one from the prior path's (a Laplace fit, then AIS from it), and
the bound B = mean U - mean L is on the Jeffreys divergence of its output; B does not
depend on the prior's normaliser.

The weights estimate log(c p(y)), where c is the integral of the program's prior
density (1/2 for each half-normal or half-Cauchy on a ``<lower=0>`` parameter, unknown
in general).  c is estimated once per run from exact prior draws
(:func:`~bread_stan.ais.prior_normaliser.estimate_log_normaliser`, unbiased for c), or
given by the caller when a drafted simulator computes it
(:mod:`~bread_stan.ais.known_normaliser`: exact, or unbiased up to a rejection loop's
acceptance probability), and subtracted from every chain's estimate in both
directions, so the sandwich is [L - log c_hat, U - log c_hat].  What that costs in rigour: exp(-U) c_hat is unbiased for
1/p(y), so the upper end stays a stochastic upper bound; the lower end's expectation may
exceed log p(y) by Jensen's gap of -log c_hat, about se(log c_hat)^2 / 2
(``normaliser.jensen_gap``), which the run records.  The raw AIS weights
(``log_weights``) are left as they are.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .path import OneLeg, PilotInputs
from .run_config import RunConfig
from .gaussian_base import DEFAULT_WIDEN, GaussianBase
from .prior_normaliser import DEFAULT_DRAWS, NormaliserEstimate, estimate_log_normaliser
from .tuning import TunedKernel, TuningConfig, tune
from .waypoint import (EndKernels, base_leg_target, fit_base, fit_name, leg_from_record,
                       leg_record, tune_base_leg, two_ends)
from ..kernels.base import Kernel
from ..rng import Stream, chain_seed_sequences
from ..stan.model import StanModel
from ..target import Target

__all__ = ["GaussianPath", "fit_gaussian_path", "prior_log_density", "tune_prior_end"]

log = logging.getLogger(__name__)


def _generator(seed, stream: Stream) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(chain_seed_sequences(seed, int(stream), [0])[0]))


@dataclass(frozen=True, eq=False)
class GaussianPath(OneLeg):
    """The base q, the frozen tuning of the path from q to the posterior, the estimate
    of the program prior's normaliser, and the Laplace fit's record: a one-leg
    :class:`~bread_stan.ais.path.Path` on the geometric path from q to the model's
    joint, ``log c`` subtracted from every estimate."""

    base: GaussianBase
    leg: TunedKernel
    normaliser: NormaliserEstimate
    fit: dict

    name = "gaussian"
    what = "a Gaussian path"

    @property
    def log_c(self) -> float:
        return self.normaliser.log_c

    def leg_tuning(self) -> TunedKernel:
        return self.leg

    def leg_target(self, model: Target) -> Target:
        return base_leg_target(model, self.base)

    def betas(self, config: RunConfig, T: int) -> np.ndarray:
        return np.asarray(super().betas(config, T), dtype=float)

    def forward_starts(self, seed, n: int) -> np.ndarray:
        """Exact draws (n, d) of q that start the forward chains (``seed`` the step
        count's, stream ``Stream.GAUSSIAN_BASE_STARTS``)."""
        return self.base.sample(_generator(seed, Stream.GAUSSIAN_BASE_STARTS), int(n))

    needs_prior_end = True  # the check's prior chains want a kernel tuned at the prior

    def check_kernel(self, prior_end: TunedKernel | None = None) -> "TunedKernel | EndKernels":
        return self.endpoints(prior_end)

    @classmethod
    def fit(cls, inputs: PilotInputs) -> "GaussianPath":
        """q (the path choice's, else fitted on the pilot), its leg tuned and the prior's
        normaliser computed or estimated, on the run's seeds."""
        kernel, base_params, config = inputs.sampler("gaussian")
        fitted = inputs.fitted if inputs.fitted is not None else inputs.fit_q()
        draws, known = inputs.normaliser()
        return fit_gaussian_path(inputs.model, kernel, base_params, inputs.pilot, draws,
                                 seed=inputs.seed, config=config, progress=inputs.progress,
                                 fitted=fitted, normaliser=known)

    def describe(self) -> str:
        """What the path is, for the path line of reports and the CLI."""
        c = self.normaliser
        how = {"exact": f"computed exactly by the drafted simulator, log c = {c.log_c:.4f}",
               "exact and rejection": (
                   f"computed by the drafted simulator, exactly up to its rejection loop's "
                   f"acceptance probability (estimated from {c.n_draws} draws' tries), log c = "
                   f"{c.log_c:.4f} (se {c.se:.2g})")}.get(c.method, (
            f"estimated by importance sampling from exact prior draws, log c = {c.log_c:.4f} "
            f"(se {c.se:.2g}, Pareto k {c.pareto_k:.2f}"
            f"{'' if c.trustworthy else ': NOT trustworthy'})"))
        return (f"a {fit_name(self.fit)} Gaussian (sds times {self.fit['widen']:g}) "
                "then AIS from "
                "its exact draws to the posterior: a different sampler from AIS from the prior, "
                f"and the bound is on its output; the prior's normaliser c, {how}, "
                "is subtracted from every estimate: the upper end stays a stochastic upper "
                "bound, the lower end's expectation may exceed log p(y) by about se^2/2 = "
                f"{c.jensen_gap:.2g} nats")

    # What the workflows read from a tuned kernel.
    @property
    def kind(self) -> str:
        return self.leg.kind

    @property
    def dense(self) -> bool:
        return self.leg.dense

    @property
    def step_size(self) -> np.ndarray:
        return self.leg.step_size

    @property
    def seconds_per_transition(self) -> float:
        return self.leg.seconds_per_transition

    @property
    def gradients_per_transition(self) -> float:
        return self.leg.gradients_per_transition

    def problems(self) -> list[str]:
        out = list(self.leg.problems())
        if not self.normaliser.trustworthy:
            out.append(f"the prior normaliser's weights have Pareto k "
                       f"{self.normaliser.pareto_k:.2f} > 0.7: its standard error, and the "
                       "sandwich's shift by it, cannot be trusted")
        return out

    def endpoints(self, prior_end: TunedKernel | None = None) -> "TunedKernel | EndKernels":
        """A tuned kernel on the prior path's two ends, for the simulator check: the
        leg's params at the posterior serve the posterior end; at the prior end, those
        tuned at beta = 0 of the prior path (``prior_end``, from :func:`tune_prior_end`),
        else the leg's params at q (valid there, but tuned to the posterior's scale, so
        the check's prior chains move slowly: a funnel-shaped prior makes every tree
        reach the maximum depth)."""
        start = prior_end if prior_end is not None else self.leg
        return two_ends(start, self.leg, self.leg.seconds_per_transition)

    def to_dict(self) -> dict:
        return {"path": "gaussian", "base": self.base.to_dict(),
                "legs": [leg_record(self.leg, self.base)],
                "normaliser": self.normaliser.to_dict(), "fit": self.fit}

    @classmethod
    def from_dict(cls, data: dict) -> "GaussianPath":
        """The path :meth:`to_dict` wrote, bit for bit."""
        base = GaussianBase.from_dict(data["base"])
        (leg,) = data["legs"]
        return cls(base, leg_from_record(leg, base),
                   NormaliserEstimate.from_dict(data["normaliser"]), dict(data["fit"]))



def prior_log_density(model: Target) -> Callable[[np.ndarray], np.ndarray]:
    """The program's log prior (with the Jacobian, all constants) at (n, d) points: the
    prior instance alone on a Stan target (no likelihood evaluated), else the target's
    ``log_prior``."""
    prior = getattr(model, "prior_model", None)
    if isinstance(prior, StanModel):
        return lambda u: prior.log_density_batch(np.ascontiguousarray(u), jacobian=True)
    return lambda u: model.evaluate(np.ascontiguousarray(u), gradient=False).log_prior


def fit_gaussian_path(model: Target, kernel: Kernel, base_params, pilot_draws,
                      normaliser_draws, *, seed, config: TuningConfig = TuningConfig(),
                      widen: float = DEFAULT_WIDEN, n_normaliser: int = DEFAULT_DRAWS,
                      progress: bool = False,
                      fitted: tuple[GaussianBase, dict] | None = None,
                      normaliser: NormaliserEstimate | None = None) -> GaussianPath:
    """q fitted as the waypoint path fits it (from the pilot's exact prior draws
    ``pilot_draws``), the leg from q to the posterior tuned on a pilot of as many exact
    draws of q, and log c estimated from ``n_normaliser`` importance draws (stream
    ``Stream.PRIOR_NORMALISER``) with a proposal fitted to the exact prior draws
    ``normaliser_draws``.  ``fitted``: q and its record, when fitted already;
    ``normaliser``: log c when known otherwise (:mod:`bread_stan.ais.known_normaliser`; then
    ``normaliser_draws`` is not read)."""
    pilot = np.ascontiguousarray(np.asarray(pilot_draws, dtype=float))
    base, record = fitted if fitted is not None else fit_base(model, pilot, widen)
    leg = tune_base_leg(base_leg_target(model, base), kernel, base_params, base,
                        pilot.shape[0], seed=seed, config=config, progress=progress)
    t0 = time.perf_counter()
    if normaliser is None:
        normaliser = estimate_log_normaliser(prior_log_density(model), normaliser_draws,
                                             _generator(seed, Stream.PRIOR_NORMALISER),
                                             n_normaliser)
    else:
        log.info("%s", normaliser.message)
    log.info("gaussian path: %s fit in %.2g s; log c = %.4f (se %.2g, %s) in %.2g s",
             fit_name(record), record["seconds"], normaliser.log_c, normaliser.se,
             normaliser.method, time.perf_counter() - t0)
    return GaussianPath(base, leg, normaliser, record)


def tune_prior_end(model: Target, kernel: Kernel, base_params, path: GaussianPath,
                   prior_draws, *, seed, config: TuningConfig = TuningConfig()
                   ) -> TunedKernel:
    """The kernel tuned at beta = 0 of the prior path alone (the pilot's exact prior
    draws ``prior_draws``, stream ``Stream.CHECK_PRIOR_END``), with the leg's kind of
    metric, for :meth:`GaussianPath.endpoints`."""
    # q's covariance as the leg's metric is no reason for a dense one at the prior end
    from_base = path.leg.dense and len(path.leg.inv_metric) == 1
    metric = "dense" if path.leg.dense and not from_base else "diag"
    return tune(model, kernel, base_params, prior_draws, seed=seed, at=np.zeros(1),
                config=replace(config, metric=metric, stream=int(Stream.CHECK_PRIOR_END)))

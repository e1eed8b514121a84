"""AIS from the prior to the posterior through a Gaussian waypoint (two geometric legs).

Tempering the likelihood of a vague prior can make every intermediate density a funnel:
with a half-Cauchy scale sigma and coefficients of uncentred predictors, the
coefficients' width given sigma is about ``sigma / sqrt(beta) / ||x||`` while sigma's
tempered marginal spreads over decades, and no frozen step size or metric serves both the
neck and the mouth.  This path never tempers the likelihood alone.  With q a Gaussian in
the unconstrained space fitted to the posterior (a Laplace approximation, sds widened)::

    leg 1:  log f_s(u) = (1 - s) log p0(u) + s log q(u),          s from 0 to 1
    leg 2:  log g_b(u) = (1 - b) log q(u)  + b log p~(u, y),       b from 0 to 1

where p0 is the program's prior (with the Jacobian; its exact draws start the forward
chains, as on the prior path) and p~ = p0 * likelihood.  Leg 1 interpolates two fixed
distributions (no likelihood), leg 2 runs from q to a posterior q approximates.  The
program's prior normaliser c (1/2 for ``sigma ~ cauchy(0, 2.5)`` on a positive sigma)
cancels: leg 1's weights estimate 1/c, leg 2's c p(y), so their sum estimates log p(y)
itself (AIS from q alone, SPEC section 7.1, estimates log(c p(y))).

Each leg is a :class:`~bread_stan.target.Target` the engine runs unchanged
(:class:`PriorToBase`, then :class:`~bread_stan.ais.gaussian_base.GaussianBaseTarget`;
:func:`leg_targets`), both with native transitions on a Stan model (the model library
evaluates log q next to the prior or the joint, bit for bit the Python numbers), tuned by
its own pilot (:func:`fit_waypoint`: leg 1's from the pilot's prior draws,
leg 2's from exact draws of q) and frozen.  A run at T distributions gives leg i ``T_i``
of them in proportion to its thermodynamic length (the gap of a leg is about
``L_i^2 / (2 T_i)``, so the sum is smallest there), ``T_1 + T_2 - 1 = T``: q is shared,
so a chain makes T - 1 transitions, as on the prior path.

Exactness.  Forward: leg 1 from exact prior draws, then leg 2 from leg 1's final states;
reverse: leg 2 from the exact posterior draw, then leg 1 from its final states.  Read as
one schedule of T distributions, forward applies the kernels at 2..T and reverse at
T - 1..1 (SPEC section 1); the one distribution both legs hold, q, gets leg 2's frozen
params at b = 0 in both directions (:class:`TiedEnd`), so the reverse run is the exact
mirror of the forward one and E[U] - E[L] bounds the Jeffreys divergence of the forward
output as in SPEC section 2.  Leg 2 uses random streams ``Stream.WAYPOINT + s`` where
leg 1 uses s, so a block of chains gives the numbers it gives in any batch.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

import numpy as np

from .path import Leg, PilotInputs
from .run_config import RunConfig, step_schedule
from .betas import thermodynamic_length
from .gaussian_base import (DEFAULT_WIDEN, BaseFitError, GaussianBase, GaussianBaseTarget,
                            joint_density)
from .tuning import TunedKernel, TuningConfig, metric_from_base, tune
from ..deadline import seconds_left
from ..errors import InputError
from ..kernels.base import Kernel
from ..progress import duration
from ..rng import Stream, chain_seed_sequences
from ..stan.model import StanModel
from ..stan.native import NativeKernels
from ..store import load_for_run, save_for_run
from ..target import Evaluation, Target

__all__ = ["PriorToBase", "TiedEnd", "WaypointPath", "WaypointError", "SeparateModesError",
           "FitPastBudget", "another_search_fits",
           "best_starts", "fit_base", "fit_seconds_at_least", "fit_name", "fit_waypoint",
           "leg_targets", "base_leg_target", "tune_base_leg", "leg_record", "leg_from_record",
           "BASE_METRIC",
           "EndKernels", "two_ends", "LEG1_FLOOR_MIN"]

log = logging.getLogger(__name__)

LEG1_FLOOR_MIN = 1e-30  # leg 1's log q - log p0 varies by ~1e14 over prior draws: floor below
_STARTS = 4  # mode searches, from the pilot's prior draws of highest joint density
_TIMED_DIM = 200  # up to this many parameters a fit is cheap; the size of the timed product


class WaypointError(InputError):
    """No Gaussian waypoint could be fitted (no mode, no curvature there)."""


class SeparateModesError(WaypointError):
    """The mode searches found separate modes: no one Gaussian stands for the posterior."""


class FitPastBudget(WaypointError):
    """The searches for q stopped: another would end past the run's budget."""


def another_search_fits(done: int, began: float, what: str) -> None:
    """Within a budget in minutes (:func:`~bread_stan.deadline.seconds_left`), raise
    :class:`FitPastBudget` when another of the searches for q, at the mean time of the
    ``done`` so far (since ``began``, ``time.perf_counter()``), would end past the
    deadline: a search cannot stop midway, so none starts that cannot end in time."""
    left = seconds_left()
    if left is None or done == 0:
        return
    each = (time.perf_counter() - began) / done
    if each > left:
        raise FitPastBudget(f"{what}: {done} took {duration(each * done)}, and another "
                            f"would end past the budget ({duration(max(left, 0.0))} left)")


class PriorToBase:
    """Leg 1 as a Target: the model's log prior as the "prior", ``log q - log p0`` as the
    "log likelihood", so that beta = 1 is q.  On a Stan target (one with ``prior_model``
    and native transitions) the model library runs the transitions too (``native``:
    ``prior_base_point`` in ``csrc/bridge.cpp``, bit for bit this class's numbers)."""

    def __init__(self, model: Target, base: GaussianBase):
        if base.dim != model.dim:
            raise InputError(f"the base has {base.dim} coordinates, the model {model.dim}")
        self.model, self.base = model, base
        prior = getattr(model, "prior_model", None)
        self.native = (NativeKernels(model.full_model, prior, model.threads, base=base)
                       if getattr(model, "native", None) is not None
                       and isinstance(prior, StanModel) else None)

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    def evaluate(self, points: np.ndarray, *, gradient: bool = True) -> Evaluation:
        ev = self.model.evaluate(points, gradient=gradient)
        log_q, grad_q = self.base.log_density(np.ascontiguousarray(points, dtype=float))
        with np.errstate(invalid="ignore"):
            log_lik = log_q - ev.log_prior
        if not gradient:
            return Evaluation(ev.log_prior, log_lik)
        return Evaluation(ev.log_prior, log_lik, ev.grad_prior, grad_q - ev.grad_prior)


class TiedEnd:
    """A frozen kernel schedule whose last temperature uses ``params`` (the next leg's
    first): the distribution the legs share gets one kernel in both directions."""

    def __init__(self, schedule, params):
        self.inner, self.params = schedule, params
        self.betas = schedule.betas
        self.steps_per_temperature = schedule.steps_per_temperature
        self.kind = getattr(schedule, "kind", None)

    def params_at(self, t: int):
        return self.params if int(t) == len(self.betas) - 1 else self.inner.params_at(t)


@dataclass(frozen=True, eq=False)
class WaypointPath:
    """The waypoint q and each leg's frozen tuning; ``lengths`` are the legs' measured
    thermodynamic lengths (they split T), ``fit`` the mode search's record."""

    base: GaussianBase
    tunings: tuple[TunedKernel, TunedKernel]
    lengths: tuple[float, float]
    fit: dict

    name = "waypoint"
    log_c = 0.0

    def split(self, T: int) -> tuple[int, int]:
        """(T_1, T_2), ``T_1 + T_2 - 1 = T``, each at least 2, T_i - 1 in proportion
        to the legs' thermodynamic lengths."""
        if T < 3:
            raise InputError(f"the waypoint path needs at least 3 distributions, got {T}")
        l1, l2 = self.lengths
        share = l1 / (l1 + l2) if l1 + l2 > 0 else 0.5
        t1 = int(np.clip(round(1 + (T - 1) * share), 2, T - 1))
        return t1, T - t1 + 1

    def targets(self, model: Target) -> tuple[Target, Target]:
        """Leg 1's and leg 2's targets on ``model`` (a prior/likelihood split target)."""
        return leg_targets(model, self.base)

    def legs(self, model: Target, config: RunConfig, T: int) -> list[Leg]:
        """Leg 1 (prior to q) and leg 2 (q to posterior) at T distributions, leg 2's
        chains on streams offset by ``Stream.WAYPOINT``."""
        (_, s1, e1), (_, s2, e2) = self.schedules(config, T)
        first, second = self.targets(model)
        return [Leg(first, s1, e1), Leg(second, s2, e2, int(Stream.WAYPOINT))]

    def forward_starts(self, seed, n: int) -> None:
        return None  # the prior's exact draws

    needs_prior_end = False

    def check_kernel(self, prior_end=None) -> "TunedKernel | EndKernels":
        return self.endpoints()

    def describe(self) -> None:
        return None

    def leg_tuning(self) -> None:
        return None  # two legs: SMC runs on one-leg paths only

    @classmethod
    def fit(cls, inputs: PilotInputs) -> "WaypointPath":
        """q (the path choice's, else fitted on the pilot) and both legs tuned."""
        kernel, base_params, config = inputs.sampler("waypoint")
        fitted = inputs.fitted if inputs.fitted is not None else inputs.fit_q()
        return fit_waypoint(inputs.model, kernel, base_params, inputs.pilot,
                            seed=inputs.seed, config=config, progress=inputs.progress,
                            fitted=fitted)

    def schedules(self, config: RunConfig, T: int) -> tuple[tuple, tuple]:
        """Each leg's (betas, frozen schedule, increment thinning) at T distributions,
        leg 1's last kernel tied to leg 2's first."""
        t1, t2 = self.split(T)
        b1, s1, e1 = step_schedule(config, self.tunings[0], t1)
        b2, s2, e2 = step_schedule(config, self.tunings[1], t2)
        return (b1, TiedEnd(s1, s2.params_at(0)), e1), (b2, s2, e2)

    def betas(self, config: RunConfig, T: int) -> np.ndarray:
        """The T distributions as one schedule of path positions in [0, 1]: leg 1's
        betas halved, then leg 2's mapped to [0.5, 1] (q at 0.5)."""
        (b1, _, _), (b2, _, _) = self.schedules(config, T)
        b1, b2 = np.asarray(b1, dtype=float), np.asarray(b2, dtype=float)
        out = np.concatenate([0.5 * b1, 0.5 + 0.5 * b2[1:]])
        out[-1] = 1.0
        return out

    # What the workflows read from a tuned kernel.
    @property
    def kind(self) -> str:
        return self.tunings[0].kind

    @property
    def dense(self) -> bool:
        return any(leg.dense for leg in self.tunings)

    @property
    def step_size(self) -> np.ndarray:
        return np.concatenate([leg.step_size for leg in self.tunings])

    @property
    def seconds_per_transition(self) -> float:
        return float(np.mean([leg.seconds_per_transition for leg in self.tunings]))

    @property
    def gradients_per_transition(self) -> float:
        return float(np.mean([leg.gradients_per_transition for leg in self.tunings]))

    def problems(self) -> list[str]:
        return [f"leg {i + 1}: {text}" for i, leg in enumerate(self.tunings)
                for text in leg.problems()]

    def endpoints(self) -> "TunedKernel | EndKernels":
        """A tuned kernel on the prior path's two ends (leg 1's params at the prior, leg
        2's at the posterior), for the simulator check, which runs there only."""
        return two_ends(*self.tunings, self.seconds_per_transition)

    def to_dict(self) -> dict:
        return {"path": "waypoint", "base": self.base.to_dict(),
                "legs": [leg_record(leg, self.base) for leg in self.tunings],
                "lengths": list(self.lengths), "fit": self.fit}

    @classmethod
    def from_dict(cls, data: dict) -> "WaypointPath":
        """The path :meth:`to_dict` wrote, bit for bit."""
        base = GaussianBase.from_dict(data["base"])
        first, second = (leg_from_record(leg, base) for leg in data["legs"])
        return cls(base, (first, second), tuple(float(x) for x in data["lengths"]),
                   dict(data["fit"]))

    def save(self, path, fingerprint: str | None = None) -> None:
        """Write the path (q and both legs' tuning) as JSON, atomically, with the
        ``fingerprint`` of the run it was fitted for (see :meth:`load`)."""
        save_for_run(path, self.to_dict(), fingerprint)

    @classmethod
    def load(cls, path, fingerprint: str | None = None) -> "WaypointPath | None":
        """Read a path saved by :meth:`save` (None when it was saved for a run of
        another ``fingerprint``); CorruptFileError if damaged."""
        return load_for_run(path, fingerprint, cls.from_dict, "a waypoint path")


@dataclass(frozen=True)
class EndKernels:
    """Kernel params at the prior path's two ends, each with its own kind of metric (a
    diagonal one at the prior beside q's dense covariance at the posterior): what the
    simulator check reads, ``schedule([0, 1]).params_at(0 or 1)``.  A diagonal metric
    stored as a dense matrix would cost the check O(d^2) a leapfrog step."""

    at_prior: object
    at_posterior: object

    @classmethod
    def of(cls, prior_end: TunedKernel, posterior_end: TunedKernel) -> "EndKernels":
        ends = np.array([0.0, 1.0])
        return cls(prior_end.schedule(ends).params_at(0),
                   posterior_end.schedule(ends).params_at(1))

    def schedule(self, betas) -> "EndKernels":
        if not np.array_equal(np.asarray(betas, dtype=float), [0.0, 1.0]):
            raise InputError("the two ends' kernels serve betas 0 and 1 only")
        return self

    def params_at(self, t: int):
        return (self.at_prior, self.at_posterior)[int(t)]


def two_ends(prior_end: TunedKernel, posterior_end: TunedKernel, seconds: float
             ) -> "TunedKernel | EndKernels":
    """The kernel of the prior path's two ends, for the simulator check: ``prior_end``'s
    params at beta 0 (its first grid beta), ``posterior_end``'s at 1 (its last); where
    one metric is dense and the other diagonal, each keeps its own kind
    (:class:`EndKernels`).  ``seconds``: the pilot's seconds a transition."""
    both = prior_end.inv_metric is not None and posterior_end.inv_metric is not None
    if both and prior_end.dense != posterior_end.dense:
        return EndKernels.of(prior_end, posterior_end)
    metric = np.stack([prior_end.inv_metric[0], posterior_end.inv_metric[-1]]) if both else None
    return TunedKernel(posterior_end.kind, np.array([0.0, 1.0]),
                       np.array([prior_end.step_size[0], posterior_end.step_size[-1]]), metric,
                       dict(posterior_end.fixed), posterior_end.beta_floor,
                       np.array([prior_end.accept[0], posterior_end.accept[-1]]), seconds)


BASE_METRIC = "the base's covariance"


def leg_record(leg: TunedKernel, base: GaussianBase) -> dict:
    """A leg's tuned kernel as plain JSON, its metric named :data:`BASE_METRIC` when it
    is q's covariance (recorded once, with q)."""
    record = leg.to_dict()
    if (leg.dense and len(leg.inv_metric) == 1
            and np.array_equal(leg.inv_metric[0], base.cov)):
        record["inv_metric"] = BASE_METRIC
    return record


def leg_from_record(record: dict, base: GaussianBase) -> TunedKernel:
    """The tuned kernel :func:`leg_record` wrote, bit for bit."""
    if record.get("inv_metric") == BASE_METRIC:
        record = {**record, "inv_metric": base.cov[None].copy()}
    return TunedKernel.from_dict(record)


def leg_targets(model: Target, base: GaussianBase) -> tuple[Target, Target]:
    """Leg 1's and leg 2's targets on ``model`` through ``base``.  On a Stan target both
    offer native transitions: leg 2 reads the joint from the full model instance
    (``full_model``), whose library evaluates log q as well."""
    return PriorToBase(model, base), base_leg_target(model, base)


def base_leg_target(model: Target, base: GaussianBase) -> GaussianBaseTarget:
    """Leg 2's target alone: the geometric path from ``base`` to ``model``'s joint (on a
    Stan target, read from its full model instance, with native transitions)."""
    full = getattr(model, "full_model", None)
    source = full if getattr(model, "native", None) is not None and isinstance(
        full, StanModel) else model
    return GaussianBaseTarget(source, base)


MODE_DISTANCE = 3.0  # sds (of the best mode's Laplace fit) between two modes found
MODE_MASS = 0.01  # share of the best mode's Laplace mass a second mode must hold to count


def second_mode(best: tuple, found: list[tuple]) -> str | None:
    """A sentence on a mode found besides the best, more than ``MODE_DISTANCE`` sds from
    it (Mahalanobis, in the best mode's Laplace covariance) and holding at least
    ``MODE_MASS`` of its Laplace mass, or None.  ``found``: (base, log joint at the
    mode, start) per successful search.  Searches that end at the same mode agree to
    the optimiser's tolerance, far inside one sd."""
    base, value, _ = best

    def peak(q: GaussianBase, at: np.ndarray) -> float:
        return float(q.log_density(at[None, :])[0][0])

    # From q's own factorisation: log q(m) - log q(x) = (Mahalanobis / widen)^2 / 2, and
    # log p(mode) - log q(mode) is the log Laplace mass up to the widening's constant.
    # (log_peak is log q at its own mean, so only the best base is ever inverted)
    top = base.log_peak
    log_mass = value - top
    for other, other_value, _ in found:
        distance = base.widen * np.sqrt(max(2.0 * (top - peak(base, other.mean)), 0.0))
        with np.errstate(over="ignore"):  # a far wider second mode: share inf, as it is
            share = np.exp(other_value - other.log_peak - log_mass)
        if distance > MODE_DISTANCE and share >= MODE_MASS:
            return (f"log joint {value:.4g} and {other_value:.4g} at modes {distance:.3g} sds "
                    f"apart, the second holding about {min(share, 1.0):.0%} of the first's "
                    "Laplace mass")
    return None


def best_starts(model: Target, pilot: np.ndarray, n: int = _STARTS) -> list[int]:
    """The indices of the ``n`` pilot draws of highest finite joint density, best first:
    where the searches for q start (Laplace's mode searches, Pathfinder's runs)."""
    ev = model.evaluate(pilot, gradient=False)
    joint = ev.log_prior + ev.log_lik
    order = np.argsort(-np.nan_to_num(joint, nan=-np.inf))
    return [int(i) for i in order if np.isfinite(joint[i])][:n]


def fit_seconds_at_least(model: Target, pilot: np.ndarray, starts: int = _STARTS) -> float:
    """A lower bound on the seconds :func:`fit_base` takes on this machine: per mode
    search, the Hessian's 2 d gradient evaluations (timed on a few ``pilot`` draws) and
    the floating-point operations of its dense algebra (an eigendecomposition, an inverse
    and a Cholesky factor of a d x d matrix: at least 11/3 d^3) at the rate of a matrix
    product, the fastest dense operation (timed here); the searches' own L-BFGS steps are
    not counted.  0 up to ``_TIMED_DIM`` parameters, where a fit is cheap."""
    d = model.dim
    if d <= _TIMED_DIM:
        return 0.0
    few = np.ascontiguousarray(np.asarray(pilot, dtype=float)[:8])
    density = joint_density(model)
    t0 = time.perf_counter()
    density(few, True)
    gradient = (time.perf_counter() - t0) / len(few)
    a = np.random.default_rng(0).normal(size=(_TIMED_DIM, _TIMED_DIM))
    fastest = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        a @ a
        fastest = min(fastest, time.perf_counter() - t0)
    per_flop = fastest / (2 * _TIMED_DIM ** 3)
    return starts * (2 * d * gradient + 11 / 3 * d ** 3 * per_flop)


def fit_base(model: Target, pilot, widen: float = DEFAULT_WIDEN) -> tuple[GaussianBase, dict]:
    """The waypoint q: the Laplace approximation (sds times ``widen``) from the best of
    mode searches started at the pilot draws of highest joint density, and the search's
    record.  :class:`WaypointError` when no search finds a mode with downward curvature,
    or when the searches find separate modes (:func:`second_mode`)."""
    pilot = np.ascontiguousarray(np.asarray(pilot, dtype=float))
    t0 = time.perf_counter()
    starts = best_starts(model, pilot)
    found, errors = [], []
    for k, i in enumerate(starts):
        another_search_fits(k, t0, "the mode searches for q")
        try:
            base = GaussianBase.laplace(model, pilot[i], widen)
        except BaseFitError as error:
            errors.append(str(error))
            continue
        at = model.evaluate(base.mean[None, :], gradient=False)
        found.append((base, float(at.log_prior[0] + at.log_lik[0]), int(i)))
    if not found:
        reason = errors[0] if errors else "no pilot draw has a finite joint density"
        raise WaypointError(f"the waypoint path needs a posterior mode with a Gaussian "
                            f"approximation there: {reason}; use the prior path "
                            "(RunSettings(path='prior'))")
    best = max(found, key=lambda f: f[1])
    other = second_mode(best, found)
    if other is not None:
        raise SeparateModesError(
            f"mode searches from the {len(starts)} prior draws of highest joint "
            f"density found separate modes ({other}): one Gaussian cannot stand for a "
            "posterior with several modes; use the prior path (RunSettings(path='prior'))")
    return best[0], {"fit": "laplace", "log_joint_at_mode": best[1], "start": best[2],
                     "failed_searches": len(errors), "widen": widen,
                     "seconds": time.perf_counter() - t0}


def fit_name(record: dict) -> str:
    """How q was fitted, for messages: "Laplace" or "Pathfinder"."""
    return {"pathfinder": "Pathfinder"}.get(record.get("fit", "laplace"), "Laplace")


def fit_waypoint(model: Target, kernel: Kernel, base_params, pilot_draws, *, seed,
                 config: TuningConfig = TuningConfig(), widen: float = DEFAULT_WIDEN,
                 progress: bool = False, fitted: tuple[GaussianBase, dict] | None = None
                 ) -> WaypointPath:
    """Fit the waypoint q to ``model``'s posterior (:func:`fit_base`: Laplace, sds times
    ``widen``) from the pilot's exact prior draws (never scored), and tune each leg's
    kernel on its own pilot with ``config`` (leg 1 from ``pilot_draws``, its floor
    allowed down to :data:`LEG1_FLOOR_MIN`; leg 2 from as many exact draws of q, on
    stream ``Stream.WAYPOINT_PILOT``).  ``fitted``: q and its record from
    :func:`fit_base` on the same draws, when the caller has fitted it already."""
    pilot = np.ascontiguousarray(np.asarray(pilot_draws, dtype=float))
    base, record = fitted if fitted is not None else fit_base(model, pilot, widen)
    leg1, leg2 = leg_targets(model, base)
    tuned1 = tune(leg1, kernel, base_params, pilot, seed=seed,
                  config=replace(config, floor_min=min(config.floor_min, LEG1_FLOOR_MIN)),
                  progress=progress)
    tuned2 = tune_base_leg(leg2, kernel, base_params, base, pilot.shape[0], seed=seed,
                           config=config, progress=progress)
    lengths = tuple(thermodynamic_length(t.grid_betas, t.loglik_sd) for t in (tuned1, tuned2))
    log.info("waypoint: %s fit in %.2g s; thermodynamic lengths %.3g (prior to q) and "
             "%.3g (q to posterior)", fit_name(record), record["seconds"], *lengths)
    return WaypointPath(base, (tuned1, tuned2), lengths, record)


def tune_base_leg(leg: Target, kernel: Kernel, base_params, base: GaussianBase, n: int, *,
                  seed, config: TuningConfig = TuningConfig(), progress: bool = False
                  ) -> TunedKernel:
    """The frozen tuning of the leg from q to the posterior (``leg``, from
    :func:`leg_targets`): a pilot of ``n`` chains started from exact draws of q (stream
    ``Stream.WAYPOINT_BASE_DRAWS``), its transitions on stream ``Stream.WAYPOINT_PILOT``.
    Leg 2 of the waypoint path, and the whole of the Gaussian-base path
    (:mod:`bread_stan.ais.gaussian_path`).  Where "auto" would estimate a diagonal
    metric and q is strongly correlated, q's covariance is the metric at every beta
    (:func:`~bread_stan.ais.tuning.metric_from_base`)."""
    gen = np.random.Generator(np.random.PCG64(
        chain_seed_sequences(seed, int(Stream.WAYPOINT_BASE_DRAWS), [0])[0]))
    return tune(leg, kernel, base_params, base.sample(gen, int(n)), seed=seed,
                config=replace(config, stream=int(Stream.WAYPOINT_PILOT)), progress=progress,
                base_metric=metric_from_base(base.cov, config, int(n)))

"""Frozen independent Metropolis-Hastings proposals along beta, from an SMC pilot.

The pilot (:func:`tune_imh`, never scored) is PyMC's adaptive tempered SMC: its
particles start from exact prior draws; at each stage the next beta is the largest
whose incremental weights keep an effective sample size of ``ess_fraction`` of the
particles (by bisection); the particles are resampled, their mean and covariance
estimated, and each particle makes independent Metropolis-Hastings steps with the
proposal built from them as below (a t, widened) until ``move_fraction`` of them
have moved at least once (at most ``max_steps``).
At each stage beta the pilot records the moved particles' mean and regularised
covariance, the standard deviation of their log likelihood (the curve the adaptive
schedule and the SMC resampling steps read, as a tuned HMC kernel's) and the
number of steps the stage needed.

The result, a :class:`TunedIMH`, turns any schedule of betas into a frozen kernel
schedule (:class:`IMHSchedule`).  At beta ``b`` between stage betas ``g_j`` and
``g_{j+1}`` the proposal's precision and precision-times-mean are interpolated
linearly in beta::

    P_b = (1 - t) P_j + t P_{j+1},   h_b = (1 - t) h_j + t h_{j+1},
    t = (b - g_j) / (g_{j+1} - g_j),  P = Sigma^-1,  h = P mu,

the exact tempered family when prior and likelihood are Gaussian (the precision of
``prior * lik^b`` is linear in b), and positive definite whatever the estimates (a
convex combination of positive definite matrices).  The proposal at ``b`` is a
multivariate t with ``df`` degrees of freedom (or a normal), centred at
``mu_b = P_b^-1 h_b``, with covariance ``widen^2 P_b^-1``: heavier tails and a wider
spread than the pilot's estimate, so that the importance ratio target/proposal stays
bounded where the estimate is off.  Each scored temperature runs the median over
stages of the pilot's step counts (times ``steps_per_temperature``).

Everything is a function of the pilot's particles only, fixed before any scored run:
forward and reverse (conditional) runs use the same kernel ``K_k`` at each
temperature, an MH kernel exactly invariant for the tempered density there (SPEC
section 8's argument holds unchanged).  The linear algebra is
:mod:`bread_stan.linalg`'s, so a temperature's proposal is the same bits on any
processor and in any batch or shard.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import InputError
from ..kernels.base import initial_state
from ..kernels.imh import IMH, MAX_DF, IMHParams
from ..linalg import cholesky, matmul, row_dot, triangular_inverse
from ..rng import ChainRandom, Stream, chain_seed_sequences
from ..target import Target
from .betas import Betas, validate
from .path import OneLeg
from .metric_estimates import regularised_covariance
from .tuning import PILOT_STREAM
from ..progress import progress_bar

__all__ = ["IMHTuningConfig", "TunedIMH", "IMHSchedule", "tune_imh", "next_beta"]

log = logging.getLogger(__name__)

_MAX_STAGES = 10_000


@dataclass(frozen=True)
class IMHTuningConfig:
    """The pilot's and the frozen proposals' settings (see the module docstring).

    ``df``: the proposal's degrees of freedom (None: normal); ``widen``: its sd over the
    pilot's; ``ess_fraction``: the pilot's effective sample size kept per stage;
    ``move_fraction`` and ``max_steps``: a stage's MH steps; ``metric_ridge``: the
    covariance's regularisation (``ridge`` of
    :func:`~bread_stan.ais.metric_estimates.regularised_covariance`; the name of
    :class:`~bread_stan.ais.tuning.TuningConfig`'s, under which a saved run's
    fingerprint still reads ``ridge``: :func:`~bread_stan.ais.tuning.fingerprint_fields`).
    """

    df: int | None = 10
    widen: float = 1.2
    ess_fraction: float = 0.5
    move_fraction: float = 0.9
    max_steps: int = 10
    metric_ridge: str = "relative"
    stream: int = PILOT_STREAM

    def __post_init__(self):
        if self.df is not None and (int(self.df) != self.df or not 3 <= self.df <= MAX_DF):
            raise InputError(f"df must be a whole number in 3..{MAX_DF} or None (a normal "
                             f"proposal); got {self.df!r}")
        if not self.widen >= 1.0:
            raise InputError(f"widen must be at least 1; got {self.widen}")
        if not 0.0 < self.ess_fraction < 1.0:
            raise InputError(f"ess_fraction must be in (0, 1); got {self.ess_fraction}")
        if not 0.0 < self.move_fraction < 1.0:
            raise InputError(f"move_fraction must be in (0, 1); got {self.move_fraction}")
        if int(self.max_steps) != self.max_steps or self.max_steps < 1:
            raise InputError(f"max_steps must be a whole number >= 1; got {self.max_steps}")


@dataclass(frozen=True, eq=False)
class TunedIMH(OneLeg):
    """The pilot's stage betas (G,) from 0 to 1, the particles' means (G, d) and
    regularised covariances (G, d, d) there, the sd of their log likelihood (G,),
    the mean acceptance (G,; NaN at beta 0) and MH steps (G,; 0 at beta 0) of each
    stage, the proposal's ``df`` and ``widen``, and the pilot's seconds per particle
    and step."""

    grid_betas: np.ndarray
    means: np.ndarray
    covs: np.ndarray
    loglik_sd: np.ndarray
    accept: np.ndarray
    stage_steps: np.ndarray
    df: int | None
    widen: float
    seconds_per_transition: float = float("nan")

    kind = "imh"
    what = "an IMH pilot's result"
    dense = True  # one (d, d) proposal per chain and temperature (memory estimates)

    def __post_init__(self):
        object.__setattr__(self, "grid_betas", validate(self.grid_betas))
        G = self.grid_betas.size
        covs = np.asarray(self.covs, dtype=float)
        if covs.ndim != 3 or covs.shape[0] != G or np.shape(self.means) != covs.shape[:2]:
            raise InputError(f"need {G} means (d,) and covariances (d, d), one per stage beta")

    @property
    def beta_floor(self) -> float:
        """The first positive stage beta: where the resampling rule's log scale starts."""
        return float(self.grid_betas[1])

    @property
    def steps(self) -> int:
        """MH steps per scored temperature: the median over the pilot's stages."""
        return max(1, int(math.ceil(np.median(self.stage_steps[1:]))))

    @property
    def step_size(self) -> np.ndarray:
        """No step size: the acceptance per stage stands in for it in the logs."""
        return np.nan_to_num(self.accept, nan=1.0)

    @cached_property
    def _natural(self) -> tuple[np.ndarray, np.ndarray]:
        """Precisions (G, d, d) and precision-times-means (G, d) of the stages."""
        inv = triangular_inverse(cholesky(self.covs))
        prec = matmul(np.swapaxes(inv, -1, -2), inv)
        prec = 0.5 * (prec + np.swapaxes(prec, -1, -2))
        return prec, row_dot(prec, np.asarray(self.means, dtype=float)[:, None, :])

    def params(self, beta: float) -> IMHParams:
        """The frozen proposal at ``beta`` (see the module docstring)."""
        g = self.grid_betas
        j = int(np.clip(np.searchsorted(g, beta, side="right") - 1, 0, g.size - 2))
        t = float(np.clip((beta - g[j]) / (g[j + 1] - g[j]), 0.0, 1.0))
        prec, h = self._natural
        p_b = (1.0 - t) * prec[j] + t * prec[j + 1]
        h_b = (1.0 - t) * h[j] + t * h[j + 1]
        chol = cholesky(p_b)                    # P_b = C C'
        inv = triangular_inverse(chol)          # C^-1; P_b^-1 = C^-T C^-1
        mean = row_dot(inv.T, row_dot(inv, h_b))
        c = _shape_factor(self.df, self.widen)
        return IMHParams(mean, c * np.ascontiguousarray(inv.T), np.ascontiguousarray(chol.T) / c,
                         self.df)

    def schedule(self, betas, steps_per_temperature: int = 1) -> "IMHSchedule":
        """The frozen kernel schedule for these betas: :attr:`steps` MH steps per
        temperature, times ``steps_per_temperature``."""
        return IMHSchedule(betas, self, self.steps * int(steps_per_temperature))

    def problems(self) -> list[str]:
        """Signs that the pilot went wrong (none are known for IMH yet)."""
        return []

    def to_dict(self) -> dict:
        lst = lambda a: np.asarray(a).tolist()  # noqa: E731
        return {"kind": "imh", "grid_betas": lst(self.grid_betas), "means": lst(self.means),
                "covs": lst(self.covs), "loglik_sd": lst(self.loglik_sd),
                "accept": lst(self.accept), "stage_steps": lst(self.stage_steps),
                "df": self.df, "widen": self.widen, "steps": self.steps,
                "seconds_per_transition": self.seconds_per_transition}

    @classmethod
    def from_dict(cls, data: dict) -> "TunedIMH":
        arr = lambda a: np.asarray(a, dtype=float)  # noqa: E731
        if data.get("kind") != "imh":
            raise ValueError("not an IMH pilot's result")
        return cls(arr(data["grid_betas"]), arr(data["means"]), arr(data["covs"]),
                   arr(data["loglik_sd"]), arr(data["accept"]), arr(data["stage_steps"]),
                   data["df"], float(data["widen"]),
                   float(data.get("seconds_per_transition", float("nan"))))



class IMHSchedule:
    """A frozen IMH kernel schedule: ``params_at(t)`` is the proposal at ``betas[t]``,
    computed when asked (memory flat in T)."""

    kind = "imh"

    def __init__(self, betas, tuned: TunedIMH, steps_per_temperature: int = 1):
        if int(steps_per_temperature) < 1:
            raise InputError("steps_per_temperature must be at least 1")
        self.betas = betas if isinstance(betas, Betas) else validate(betas)
        self.tuned = tuned
        self.steps_per_temperature = int(steps_per_temperature)

    @property
    def n_temperatures(self) -> int:
        return len(self.betas)

    def params_at(self, t: int) -> IMHParams:
        t = int(t)
        if not 0 <= t < self.n_temperatures:
            raise IndexError(f"temperature {t} out of range for {self.n_temperatures}")
        return self.tuned.params(float(self.betas[t]))

    def with_steps(self, steps_per_temperature: int) -> "IMHSchedule":
        return IMHSchedule(self.betas, self.tuned, steps_per_temperature)

    def to_dict(self) -> dict:
        return {"betas": np.asarray(self.betas, dtype=float).tolist(), "kind": "imh",
                "steps_per_temperature": self.steps_per_temperature,
                "tuned": self.tuned.to_dict()}


def _shape_factor(df: int | None, widen: float) -> float:
    """The factor on a covariance's square root that gives a t with ``df`` degrees of
    freedom (a normal for None) the covariance ``widen^2`` times it."""
    return widen * (1.0 if df is None else math.sqrt((df - 2) / df))


def _column_mean(x: np.ndarray) -> np.ndarray:
    cols = np.array(x.T, order="C")
    return np.add.reduce(cols, axis=-1) / x.shape[0]


def _sd(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.std(finite, ddof=1)) if finite.size > 1 else 0.0


def _ess(logw: np.ndarray) -> float:
    m = np.max(logw)
    if not np.isfinite(m):
        return 0.0
    w = np.exp(logw - m)
    return float(w.sum() ** 2 / np.sum(w * w))


def next_beta(log_lik: np.ndarray, beta: float, ess_fraction: float) -> float:
    """The largest beta' in (beta, 1] whose weights ``(beta' - beta) log_lik`` keep an
    effective sample size of at least ``ess_fraction`` of the particles (bisection)."""
    ll = np.where(np.isnan(log_lik), -np.inf, log_lik)
    want = ess_fraction * ll.size
    if _ess((1.0 - beta) * ll) >= want:
        return 1.0
    lo, hi = beta, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _ess((mid - beta) * ll) >= want:
            lo = mid
        else:
            hi = mid
    if lo <= beta:
        raise FloatingPointError("the IMH pilot's tempering stalled: no particle has a "
                                 "finite log likelihood at a larger beta")
    return lo


def tune_imh(target: Target, prior_draws, *, seed, config: IMHTuningConfig = IMHTuningConfig(),
             progress: bool = False) -> TunedIMH:
    """Run the adaptive SMC pilot from exact prior draws ``prior_draws`` (n, d), never
    scored, and freeze its proposals (see the module docstring).  Particle moves use
    random stream ``config.stream``; resampling, chain 0 of
    :attr:`~bread_stan.rng.Stream.IMH_PILOT_RESAMPLE`."""
    x = np.ascontiguousarray(np.asarray(prior_draws, dtype=float))
    if x.ndim != 2 or x.shape[1] != target.dim or x.shape[0] < 2 * target.dim + 2:
        raise InputError(f"the IMH pilot needs at least 2 d + 2 = {2 * target.dim + 2} prior "
                         f"draws of shape (n, {target.dim}); got {x.shape} (raise pilot_chains)")
    n, d = x.shape
    rng = ChainRandom.from_seed(seed, n, stream=config.stream)
    resample = np.random.Generator(np.random.PCG64(
        chain_seed_sequences(seed, Stream.IMH_PILOT_RESAMPLE, [0])[0]))
    kernel = IMH()
    state = initial_state(target, x, gradient=False)
    if not np.all(np.isfinite(state.evaluation.log_prior)):
        raise InputError("some pilot prior draws have zero or non-computable prior density")
    beta, betas = 0.0, [0.0]
    means, covs = [_column_mean(x)], [regularised_covariance(x, config.metric_ridge)]
    sds, accepts, steps = [_sd(state.evaluation.log_lik)], [float("nan")], [0]
    n_steps, start = 0, time.perf_counter()
    bar = progress_bar(1000, progress, "IMH pilot")
    while beta < 1.0:
        if len(betas) > _MAX_STAGES:
            raise FloatingPointError(f"the IMH pilot took more than {_MAX_STAGES} stages")
        new = next_beta(state.evaluation.log_lik, beta, config.ess_fraction)
        ll = np.where(np.isnan(state.evaluation.log_lik), -np.inf, state.evaluation.log_lik)
        logw = (new - beta) * ll
        c = np.cumsum(np.exp(logw - np.max(logw)))
        anc = np.minimum(np.searchsorted(c, resample.random(n) * c[-1], side="right"), n - 1)
        state = state.take(anc)
        c = _shape_factor(config.df, config.widen)
        params = IMHParams.from_covariance(
            _column_mean(state.position),
            c * c * regularised_covariance(state.position, config.metric_ridge), config.df)
        moved = np.zeros(n, dtype=bool)
        acc, k = [], 0
        while k < config.max_steps and moved.mean() < config.move_fraction:
            before = state.position
            state, info = kernel.step(rng, state, target, np.full(n, new), params)
            moved |= np.any(state.position != before, axis=1)
            acc.append(float(np.mean(info.accept_stat)))
            k += 1
        n_steps += k
        beta = new
        betas.append(beta)
        means.append(_column_mean(state.position))
        covs.append(regularised_covariance(state.position, config.metric_ridge))
        sds.append(_sd(state.evaluation.log_lik))
        accepts.append(float(np.mean(acc)))
        steps.append(k)
        if bar is not None:
            bar.update()
        log.debug("IMH pilot beta=%.4g: %d steps, acceptance %.3f", beta, k, accepts[-1])
    if bar is not None:
        bar.close()
    seconds = (time.perf_counter() - start) / max(n * n_steps, 1)
    tuned = TunedIMH(np.array(betas), np.stack(means), np.stack(covs), np.array(sds),
                     np.array(accepts), np.array(steps, dtype=float), config.df, config.widen,
                     seconds)
    log.info("IMH pilot: %d stages, %d MH steps per temperature (acceptance %.2f .. %.2f)",
             len(betas) - 1, tuned.steps, np.nanmin(tuned.accept), np.nanmax(tuned.accept))
    return tuned

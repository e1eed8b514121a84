"""Inference algorithms as AIDE sees them (SPEC 7.3): outputs, their log xi, meta-inference.

Each algorithm approximates the posterior p(x | y) in the model's unconstrained space and
is described by three things:

- ``run(n, seed)``: n independent outputs x (n, d) and, per run, log xi of its own trace,
  ``log xi = log p~(x, y) - log Z_hat(trace)``;
- ``meta_log_xi(outputs, m, seed)``: (n, m) log xi from m meta-inference traces proposed
  given each output.  Averaged over m (log-mean-exp), the own trace's log xi is an
  upward-biased estimate of log q(x) for x from the algorithm, meta-inference traces a
  downward-biased one: that is the direction AIDE needs;
- ``tractable``: the output density q(x) is known and normalised, ``log xi = log q(x)``
  and no trace is needed (M = 1 suffices).

Implementations: :class:`TractableAlgorithm` (any object with ``sample(rng, n)`` and
``log_density(points)``: a Gaussian approximation, an exact posterior), :class:`AISAlgorithm`
(forward AIS; meta-inference is reverse AIS from the output), :class:`SIRAlgorithm`
(importance sampling with resampling; meta-inference is conditional SIR),
:class:`SMCAlgorithm` (SMC with resampling; meta-inference is conditional SMC), and
:class:`ReferenceAlgorithm` (draws taken as exact posterior draws; gold standard only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np
from scipy.special import logsumexp

from ..ais import engine, smc
from ..ais.frozen_kernels import KernelSchedule
from ..ais.gaussian_base import joint_density
from ..kernels.base import Kernel, initial_state
from ..rng import ChainRandom, Purpose, derived_seed
from ..target import Target
from ..errors import InputError

__all__ = ["Cost", "AlgorithmRuns", "MetaInference", "InferenceAlgorithm", "TractableAlgorithm",
           "AISAlgorithm", "SIRAlgorithm", "SMCAlgorithm", "ReferenceAlgorithm",
           "log_density_of"]


@dataclass(frozen=True)
class Cost:
    """Work done: gradient evaluations, density evaluations (no gradient), wall seconds."""

    gradients: int = 0
    densities: int = 0
    seconds: float = 0.0

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.gradients + other.gradients, self.densities + other.densities,
                    self.seconds + other.seconds)

    def to_dict(self) -> dict[str, float]:
        return {"gradients": self.gradients, "densities": self.densities,
                "seconds": self.seconds}


@dataclass
class AlgorithmRuns:
    """n runs: outputs (n, d) unconstrained, log xi of each run's own trace (n,), cost."""

    outputs: np.ndarray
    log_xi: np.ndarray
    cost: Cost


@dataclass
class MetaInference:
    """log xi (n, m) of m meta-inference traces per output, and the cost."""

    log_xi: np.ndarray
    cost: Cost


@runtime_checkable
class InferenceAlgorithm(Protocol):
    """What AIDE needs of an inference algorithm (see the module docstring)."""

    name: str
    tractable: bool

    @property
    def dim(self) -> int: ...

    def run(self, n: int, seed: int) -> AlgorithmRuns: ...

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference: ...


def log_density_of(approximation: Any, points: np.ndarray) -> np.ndarray:
    """``approximation.log_density(points)`` as an (n,) array (a ``(log q, gradient)`` pair,
    as :class:`~bread_stan.ais.gaussian_base.GaussianBase` returns, gives its first part)."""
    value = approximation.log_density(np.ascontiguousarray(points, dtype=float))
    if isinstance(value, tuple):
        value = value[0]
    return np.asarray(value, dtype=float).reshape(-1)


def _check_outputs(outputs, dim: int) -> np.ndarray:
    x = np.ascontiguousarray(outputs, dtype=float)
    if x.ndim != 2 or x.shape[1] != dim:
        raise InputError(f"outputs must have shape (n, {dim}), got {x.shape}")
    return x


def _check_count(name: str, value, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InputError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


class TractableAlgorithm:
    """An algorithm whose normalised output density is known: log xi = log q(x).

    ``approximation`` has ``sample(rng, n) -> (n, d)`` and ``log_density(points)`` (an (n,)
    array or a ``(log q, gradient)`` pair), in the model's unconstrained space.  Its own
    cost (fitting) is not counted here; ``fit_cost`` may carry it.
    """

    tractable = True

    def __init__(self, approximation: Any, name: str = "tractable", fit_cost: Cost = Cost()):
        self.approximation = approximation
        self.name = name
        self.fit_cost = fit_cost

    @property
    def dim(self) -> int:
        dim = getattr(self.approximation, "dim", None)
        if dim is None:
            dim = np.asarray(self.approximation.mean).size
        return int(dim)

    def run(self, n: int, seed: int) -> AlgorithmRuns:
        n = _check_count("n", n)
        t0 = time.perf_counter()
        x = np.asarray(self.approximation.sample(np.random.default_rng(seed), n), dtype=float)
        log_q = log_density_of(self.approximation, x)
        return AlgorithmRuns(x, log_q, Cost(seconds=time.perf_counter() - t0))

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference:
        """log q(x), the same for every m (no trace)."""
        x = _check_outputs(outputs, self.dim)
        t0 = time.perf_counter()
        log_q = log_density_of(self.approximation, x)
        return MetaInference(np.repeat(log_q[:, None], _check_count("m", m), axis=1),
                             Cost(seconds=time.perf_counter() - t0))


class ReferenceAlgorithm:
    """Reference draws (n_ref, d) taken as exact posterior draws: a gold standard only.

    An exact sampler's output density is p~(x, y) / Z with Z unknown.  AIDE's estimate does
    not need Z: it enters the gold term as -log Z and the target term as +log Z, so it
    cancels exactly.  This algorithm therefore reports ``log xi = log p~(x, y)`` (the
    constant left out), ``normalised = False`` says the two terms are each shifted by log Z
    (only their sum means something).  If the reference draws are exact (independent)
    posterior draws, AIDE with this gold is AIDE with gold = the exact posterior; if not,
    the subjective divergence's caveats apply (SPEC 7.2).  As a target it would merely
    assert its own exactness, so :func:`~bread_stan.meta.estimator.estimate_aide` refuses it
    there.  ``run`` takes n of the draws without replacement (give thinned draws).
    """

    tractable = True
    normalised = False

    def __init__(self, draws: np.ndarray, source: Any, name: str = "reference"):
        self.draws = np.ascontiguousarray(draws, dtype=float)
        if self.draws.ndim != 2 or self.draws.shape[0] < 2:
            raise InputError(f"reference draws must have shape (n >= 2, d), got "
                             f"{self.draws.shape}")
        self._density = joint_density(source)
        self.name = name

    @property
    def dim(self) -> int:
        return self.draws.shape[1]

    def _log_xi(self, x: np.ndarray) -> np.ndarray:
        return self._density(x, False)[0]

    def run(self, n: int, seed: int) -> AlgorithmRuns:
        n = _check_count("n", n)
        if n > self.draws.shape[0]:
            raise InputError(f"asked for {n} gold runs but there are only "
                             f"{self.draws.shape[0]} reference draws; give more draws or "
                             "fewer gold runs")
        t0 = time.perf_counter()
        pick = np.random.default_rng(seed).choice(self.draws.shape[0], n, replace=False)
        x = self.draws[np.sort(pick)]
        return AlgorithmRuns(x, self._log_xi(x), Cost(densities=n,
                                                      seconds=time.perf_counter() - t0))

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference:
        x = _check_outputs(outputs, self.dim)
        t0 = time.perf_counter()
        log_xi = self._log_xi(x)
        return MetaInference(np.repeat(log_xi[:, None], _check_count("m", m), axis=1),
                             Cost(densities=x.shape[0], seconds=time.perf_counter() - t0))


class SIRAlgorithm:
    """Importance sampling with resampling: P particles from ``proposal``, one output.

    The output is particle i with probability proportional to its weight
    ``w_i = p~(x_i, y) / k(x_i)``; ``log Z_hat = log mean_i w_i``.  Meta-inference
    (conditional SIR, Cusumano-Towner & Mansinghka 2017, section 3.2): put the output at a
    uniformly chosen slot and draw the other P - 1 particles afresh from k (log Z_hat does
    not depend on the slot, so none is drawn).  ``source`` is a StanModel or a Target whose
    joint log density is p~; ``proposal`` has ``sample`` and ``log_density`` as in
    :class:`TractableAlgorithm`.
    """

    tractable = False

    def __init__(self, source: Any, proposal: Any, particles: int, name: str | None = None):
        self._density = joint_density(source)
        self.proposal = proposal
        self.particles = _check_count("particles", particles)
        self.name = name or f"sir:{self.particles}"
        self._dim = int(getattr(source, "dim"))

    @property
    def dim(self) -> int:
        return self._dim

    def _log_weights(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            w = self._density(x, False)[0] - log_density_of(self.proposal, x)
        return np.where(np.isnan(w), -np.inf, w)

    def run(self, n: int, seed: int) -> AlgorithmRuns:
        n, P, d = _check_count("n", n), self.particles, self.dim
        t0 = time.perf_counter()
        rng = np.random.default_rng(seed)
        particles = np.asarray(self.proposal.sample(rng, n * P), dtype=float).reshape(n, P, d)
        log_w = self._log_weights(particles.reshape(n * P, d)).reshape(n, P)
        log_z = logsumexp(log_w, axis=1) - np.log(P)
        probs = np.exp(log_w - logsumexp(log_w, axis=1, keepdims=True))
        pick = (probs.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).clip(max=P - 1)
        x = particles[np.arange(n), pick]
        log_joint = log_w[np.arange(n), pick] + log_density_of(self.proposal, x)
        return AlgorithmRuns(x, log_joint - log_z,
                             Cost(densities=n * (P + 1), seconds=time.perf_counter() - t0))

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference:
        x = _check_outputs(outputs, self.dim)
        n, m, P, d = x.shape[0], _check_count("m", m), self.particles, self.dim
        t0 = time.perf_counter()
        rng = np.random.default_rng(seed)
        log_w_x = self._log_weights(x)  # (n,)
        log_joint = log_w_x + log_density_of(self.proposal, x)
        if P > 1:
            fresh = np.asarray(self.proposal.sample(rng, n * m * (P - 1)), dtype=float)
            log_w = self._log_weights(fresh.reshape(-1, d)).reshape(n, m, P - 1)
            all_w = np.concatenate([np.broadcast_to(log_w_x[:, None, None], (n, m, 1)), log_w],
                                   axis=2)
        else:
            all_w = np.broadcast_to(log_w_x[:, None, None], (n, m, 1))
        log_z = logsumexp(all_w, axis=2) - np.log(P)
        return MetaInference(log_joint[:, None] - log_z,
                             Cost(densities=n * (2 + m * (P - 1)),
                                  seconds=time.perf_counter() - t0))


def _log_joint(target: Target, x: np.ndarray) -> np.ndarray:
    """log p~(x, y) (prior and likelihood, Jacobian included) at points ``x``."""
    ev = target.evaluate(x, gradient=False)
    return ev.log_prior + ev.log_lik


class AISAlgorithm:
    """Forward AIS over a frozen kernel schedule; meta-inference by reverse AIS.

    ``target`` is the engine's Target (its log prior is the base: the model's prior, or a
    Gaussian q0 via :class:`~bread_stan.ais.gaussian_base.GaussianBaseTarget`; log prior +
    log likelihood is the model's p~), ``draw_base(n, seed)`` gives exact base draws.
    ``run``: base draws from ``draw_base(n, derived_seed(seed, Purpose.ALGORITHM_BASE))``, then
    ``engine.forward(..., seed=derived_seed(seed, Purpose.ALGORITHM_CHAINS))``;
    log xi = log p~(x) - L.

    ``run_blocks`` (optional) runs the chains in blocks elsewhere (a Dask cluster):
    ``run_blocks(function, blocks)`` returns ``[function(target, *args) for args in
    blocks]`` in order, however it computes them; ``block_size`` chains per block.
    Chain i draws from stream i of its seed whatever block it runs in, so the numbers
    are those of one local batch.

    ``meta_log_xi``: the exact reversal of the forward chain (the paper's conditional SMC
    with one particle).  The forward chain's last transition is K_T, applied after the
    last increment, so the reversal first applies K_T to the output (stream 0 of
    ``derived_seed(seed, Purpose.ALGORITHM_REVERSE_START)``) and then runs the engine's
    reverse AIS from there (``seed=derived_seed(seed, Purpose.ALGORITHM_REVERSE)``), whose
    estimate U is log Z_hat: log xi = log p~(x) - U.
    From an exact posterior draw, K_T changes nothing in distribution, so with an exact
    gold and M_t = 1 AIDE is the BREAD bound (SPEC 7.3).
    """

    tractable = False

    def __init__(self, target: Target, kernel: Kernel, schedule: KernelSchedule,
                 draw_base: Callable[[int, int], np.ndarray], name: str | None = None,
                 run_blocks: Callable[[Callable, list[tuple]], list] | None = None,
                 block_size: int | None = None):
        self.target = target
        self.kernel = kernel
        self.schedule = schedule
        self.draw_base = draw_base
        self.name = name or f"ais:{schedule.n_temperatures}"
        self.run_blocks = run_blocks
        self.block_size = block_size

    @property
    def dim(self) -> int:
        return int(self.target.dim)

    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        return _log_joint(self.target, x)

    def _in_blocks(self, function: Callable, starts: np.ndarray, *args) -> list:
        """``function(target, starts[lo:hi], *args, lo)`` for blocks of chains, in order."""
        n = starts.shape[0]
        size = max(1, n if self.run_blocks is None or not self.block_size else self.block_size)
        blocks = [(starts[lo:lo + size], *args, lo) for lo in range(0, n, size)]
        if self.run_blocks is None:
            return [function(self.target, *block) for block in blocks]
        return self.run_blocks(function, blocks)

    def run(self, n: int, seed: int) -> AlgorithmRuns:
        n = _check_count("n", n)
        t0 = time.perf_counter()
        starts = self.draw_base(n, derived_seed(seed, Purpose.ALGORITHM_BASE))
        parts = self._in_blocks(_forward_block, starts, self.kernel, self.schedule,
                                derived_seed(seed, Purpose.ALGORITHM_CHAINS))
        x = np.concatenate([p[0] for p in parts])
        log_xi = np.concatenate([p[1] for p in parts])
        return AlgorithmRuns(x, log_xi, Cost(gradients=sum(p[2] for p in parts), densities=n,
                                             seconds=time.perf_counter() - t0))

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference:
        x = _check_outputs(outputs, self.dim)
        n, m = x.shape[0], _check_count("m", m)
        t0 = time.perf_counter()
        starts = np.repeat(x, m, axis=0)  # row i * m + j: trace j of output i
        ev = self.target.evaluate(starts, gradient=False)
        log_joint = ev.log_prior + ev.log_lik
        # An output where the model has no density (a target's draw off the model's
        # support, numerically) has xi = 0 for this algorithm: log xi = -inf, no trace.
        ok = np.isfinite(log_joint)
        log_xi = np.full(n * m, -np.inf)
        grads = 0
        if ok.any():
            parts = self._in_blocks(_reversal_block, starts[ok], self.kernel, self.schedule,
                                    derived_seed(seed, Purpose.ALGORITHM_REVERSE_START),
                                    derived_seed(seed, Purpose.ALGORITHM_REVERSE))
            log_xi[ok] = log_joint[ok] - np.concatenate([p[0] for p in parts])
            grads += sum(p[1] for p in parts)
        log_xi = log_xi.reshape(n, m)
        return MetaInference(log_xi, Cost(gradients=grads, densities=n * m,
                                          seconds=time.perf_counter() - t0))


def _forward_block(target: Target, starts: np.ndarray, kernel: Kernel, schedule: KernelSchedule,
                   seed: int, first_chain: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Forward AIS chains ``first_chain ..`` from ``starts``: outputs, log xi, gradients."""
    fwd = engine.forward(target, kernel, schedule, starts, seed=seed, first_chain=first_chain)
    x = fwd.final_positions
    ev = target.evaluate(x, gradient=False)
    return x, ev.log_prior + ev.log_lik - fwd.log_estimates, int(fwd.n_grad)


def _reversal_block(target: Target, starts: np.ndarray, kernel: Kernel,
                    schedule: KernelSchedule, step_seed: int, reverse_seed: int,
                    first_chain: int) -> tuple[np.ndarray, int]:
    """Reversals ``first_chain ..`` of forward chains ending at ``starts``: K_T from
    ``step_seed``, then reverse AIS from ``reverse_seed``; log Z_hat (U) and gradients."""
    n = starts.shape[0]
    state = initial_state(target, starts, gradient=kernel.needs_gradient)
    rng = ChainRandom.from_seed(step_seed, n, first_chain=first_chain)
    last = schedule.n_temperatures - 1
    beta = np.full(n, float(schedule.betas[last]))
    grads = 0
    for _ in range(schedule.steps_per_temperature):
        state, info = kernel.step(rng, state, target, beta, schedule.params_at(last))
        grads += int(np.sum(info.n_grad))
    rev = engine.reverse(target, kernel, schedule, state.position, seed=reverse_seed,
                         first_chain=first_chain)
    return rev.log_estimates, grads + int(rev.n_grad)


class SMCAlgorithm:
    """Forward SMC with ``particles`` particles over a frozen kernel schedule, resampled at
    the fixed steps ``resample_at``; meta-inference by conditional SMC (SPEC 8).

    ``run``: base draws (n, P, d) from ``draw_base(n * P, derived_seed(seed, 0))``, then
    :func:`~bread_stan.ais.smc.forward_smc` (``seed=derived_seed(seed, 1)``); log xi =
    log p~(x) - L.  ``meta_log_xi``: the output's reversal, as
    :class:`AISAlgorithm`'s: K_T on the output (stream 0 of ``derived_seed(seed, 2)``),
    then :func:`~bread_stan.ais.smc.conditional_smc` from there with P - 1 free
    particles from ``draw_base`` (``derived_seed(seed, 4)``; ``seed=derived_seed(seed,
    3)``), whose U is log Z_hat: log xi = log p~(x) - U.  With P = 1 this is
    :class:`AISAlgorithm`, number for number.
    """

    tractable = False

    def __init__(self, target: Target, kernel: Kernel, schedule: KernelSchedule,
                 draw_base: Callable[[int, int], np.ndarray], particles: int,
                 resample_at=(), name: str | None = None):
        self.target = target
        self.kernel = kernel
        self.schedule = schedule
        self.draw_base = draw_base
        self.particles = _check_count("particles", particles)
        self.resample_at = np.asarray(resample_at, dtype=np.int64)
        self.name = name or f"smc:{self.particles}"

    @property
    def dim(self) -> int:
        return int(self.target.dim)

    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        return _log_joint(self.target, x)

    def run(self, n: int, seed: int) -> AlgorithmRuns:
        n, P = _check_count("n", n), self.particles
        t0 = time.perf_counter()
        starts = self.draw_base(n * P, derived_seed(seed, Purpose.ALGORITHM_BASE)).reshape(n, P, self.dim)
        fwd = smc.forward_smc(self.target, self.kernel, self.schedule, starts,
                              seed=derived_seed(seed, Purpose.ALGORITHM_CHAINS), resample_at=self.resample_at)
        x = fwd.final_positions
        log_xi = self._log_joint(x) - fwd.log_estimates
        return AlgorithmRuns(x, log_xi, Cost(gradients=int(fwd.n_grad), densities=n,
                                             seconds=time.perf_counter() - t0))

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference:
        x = _check_outputs(outputs, self.dim)
        n, m, P = x.shape[0], _check_count("m", m), self.particles
        t0 = time.perf_counter()
        starts = np.repeat(x, m, axis=0)  # row i * m + j: trace j of output i
        log_joint = self._log_joint(starts)
        ok = np.isfinite(log_joint)
        log_xi = np.full(n * m, -np.inf)
        grads = 0
        k = int(ok.sum())
        if k:
            state = initial_state(self.target, starts[ok], gradient=self.kernel.needs_gradient)
            rng = ChainRandom.from_seed(derived_seed(seed, Purpose.ALGORITHM_REVERSE_START), k)
            last = self.schedule.n_temperatures - 1
            beta = np.full(k, float(self.schedule.betas[last]))
            for _ in range(self.schedule.steps_per_temperature):
                state, info = self.kernel.step(rng, state, self.target, beta,
                                               self.schedule.params_at(last))
                grads += int(np.sum(info.n_grad))
            free = self.draw_base(k * (P - 1), derived_seed(seed, Purpose.ALGORITHM_FREE_PARTICLES)) if P > 1 else \
                np.zeros((0, self.dim))
            cond = smc.conditional_smc(self.target, self.kernel, self.schedule, state.position,
                                       free.reshape(k, P - 1, self.dim),
                                       seed=derived_seed(seed, Purpose.ALGORITHM_REVERSE), resample_at=self.resample_at)
            log_xi[ok] = log_joint[ok] - cond.log_estimates
            grads += int(cond.n_grad)
        return MetaInference(log_xi.reshape(n, m), Cost(gradients=grads, densities=n * m,
                                                        seconds=time.perf_counter() - t0))

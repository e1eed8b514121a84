"""MCMC as AIDE sees it: T transitions of a frozen kernel at the posterior from a tractable
start, and its meta-inference (Cusumano-Towner & Mansinghka 2017, section 3.3).

MCMC is AIS (SPEC 1, 7.1) whose path jumps from the start density q0 to the posterior at
the first step and then stays at beta = 1: betas (0, 1) with T kernel steps at beta = 1.
With the generic SMC meta-inference of SPEC 7.3 and 8 with one particle, the weights are

- forward (the run's own trace): x_0 ~ q0, then x_t ~ K(. | x_{t-1}) for t = 1..T at the
  posterior; the only increment is (1 - 0) * (log p~(x_0) - log q0(x_0)), so
  ``log Z_hat = log p~(x_0) - log q0(x_0)`` and ``log xi = log p~(x_T) - log Z_hat``;
- meta-inference (the reverse chain from the output x): v_T = x, v_{t-1} ~ R(. | v_t) for
  t = T..1 with R the reversal of K with respect to the posterior, and the reverse weight's
  only increment (0 - 1) * (log p~(v_0) - log q0(v_0)), so
  ``log Z_hat = U = log p~(v_0) - log q0(v_0)`` and ``log xi = log p~(x) - U``.

HMC, NUTS and random-walk Metropolis are reversible with respect to the posterior, so
R = K: the reverse chain is T more steps of the same kernel.  This is
:class:`~bread_stan.meta.algorithms.AISAlgorithm` with the schedule (0, 1) and T steps per
temperature, number for number (its reversal's K_T steps are this reverse chain; its
reverse AIS then scores the increment and runs T steps at beta = 0 that change no
number), without those T wasted steps and for starts whose support is not the posterior's
(Stan's uniform(-2, 2) on the unconstrained scale).

What AIDE then measures.  Averaged over M reverse chains, xi is unbiased for the output
density: E[p~(x) q0(v_0) / p~(v_0)] = sum_v K^T(v, x) q0(v) = q_T(x) (reversibility), so
LME over M traces tends to log q_T(x) as M grows, and E[D] >= J(q_T, p) falls towards it
with M.  With M = 1 the expectation is J(q0, p) for every T (the gold side's reverse chain
from a posterior draw ends at a posterior draw, the target side's trace starts at q0):
AIDE with one trace says how far the start is, not how far T steps got.  The kernel is
frozen (tuned on a run that is not scored); Stan's warm-up adapts while it runs, which
is not what is scored here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..kernels.base import Kernel, initial_state
from ..rng import ChainRandom, Purpose, derived_seed
from ..target import Target
from ..errors import InputError
from .algorithms import AlgorithmRuns, Cost, MetaInference, log_density_of

__all__ = ["StartDistribution", "uniform_start", "density_start", "MCMCAlgorithm",
           "MCMC_STARTS"]

MCMC_STARTS = ("uniform", "prior", "q0")


@dataclass(frozen=True)
class StartDistribution:
    """Where a chain starts: ``draw(n, seed) -> (n, d)`` exact draws and
    ``log_density(points) -> (n,)`` their log density (normalised, or up to a constant:
    a constant cancels between AIDE's two terms as log Z does for reference draws)."""

    name: str
    draw: Callable[[int, int], np.ndarray]
    log_density: Callable[[np.ndarray], np.ndarray]


class _Uniform:
    """uniform(-radius, radius) on every unconstrained coordinate (a class: it pickles)."""

    def __init__(self, dim: int, radius: float):
        self.dim, self.radius = int(dim), float(radius)

    def draw(self, n: int, seed: int) -> np.ndarray:
        return np.random.default_rng(seed).uniform(-self.radius, self.radius, (n, self.dim))

    def log_density(self, points: np.ndarray) -> np.ndarray:
        x = np.asarray(points, dtype=float)
        inside = np.all(np.abs(x) <= self.radius, axis=1)
        return np.where(inside, -self.dim * np.log(2 * self.radius), -np.inf)


def uniform_start(dim: int, radius: float = 2.0) -> StartDistribution:
    """Stan's default initialisation: uniform(-2, 2) on the unconstrained scale."""
    u = _Uniform(dim, radius)
    return StartDistribution(f"uniform(-{radius:g}, {radius:g})", u.draw, u.log_density)


def density_start(name: str, distribution: Any) -> StartDistribution:
    """A start from an object with ``sample(rng, n)`` and ``log_density(points)`` (a
    :class:`~bread_stan.ais.gaussian_base.GaussianBase`, a grid's exact distribution)."""
    return StartDistribution(
        name, lambda n, seed: np.asarray(distribution.sample(np.random.default_rng(seed), n),
                                         dtype=float),
        lambda x: log_density_of(distribution, x))


def _log_joint(target: Target, x: np.ndarray) -> np.ndarray:
    ev = target.evaluate(np.ascontiguousarray(x, dtype=float), gradient=False)
    return ev.log_prior + ev.log_lik


def _chain_block(target: Target, starts: np.ndarray, kernel: Kernel, params: Any, steps: int,
                 seed: int, first_chain: int) -> tuple[np.ndarray, np.ndarray, int, float]:
    """``steps`` kernel steps at beta = 1 for chains ``first_chain ..`` from ``starts``
    (chain i on stream 0, chain first_chain + i of ``seed``): final positions, log p~
    there, gradients and the summed acceptance statistic."""
    n = starts.shape[0]
    state = initial_state(target, starts, gradient=kernel.needs_gradient)
    rng = ChainRandom.from_seed(seed, n, first_chain=first_chain)
    beta = np.ones(n)
    grads, accept = 0, 0.0
    for _ in range(steps):
        state, info = kernel.step(rng, state, target, beta, params)
        grads += int(np.sum(info.n_grad))
        accept += float(np.sum(info.accept_stat))
    ev = state.evaluation
    return state.position, ev.log_prior + ev.log_lik, grads, accept


class MCMCAlgorithm:
    """T steps of ``kernel`` with frozen ``params`` at the posterior of ``target`` (its
    beta = 1 density, log prior + log likelihood, is the model's p~) from ``start``.

    ``run``: starts from ``start.draw(n, derived_seed(seed, Purpose.ALGORITHM_BASE))``,
    chains on ``derived_seed(seed, Purpose.ALGORITHM_CHAINS)``; log xi = log p~(x_T) -
    (log p~(x_0) - log q0(x_0)).  ``meta_log_xi``: T steps of the same kernel (its own
    reversal) from the output on ``derived_seed(seed, Purpose.ALGORITHM_REVERSE_START)``;
    log xi = log p~(x) - (log p~(v_0) - log q0(v_0)), -inf where q0(v_0) = 0.  The seeds
    are :class:`~bread_stan.meta.algorithms.AISAlgorithm`'s, so with the schedule (0, 1)
    and T steps per temperature it gives the same numbers.  ``run_blocks`` and
    ``block_size`` as for AISAlgorithm.  ``accept_stat`` holds the mean acceptance
    statistic of the last ``run``.
    """

    tractable = False

    def __init__(self, target: Target, kernel: Kernel, params: Any, start: StartDistribution,
                 steps: int, name: str | None = None,
                 run_blocks: Callable[[Callable, list[tuple]], list] | None = None,
                 block_size: int | None = None):
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise InputError(f"an MCMC run needs at least one transition, got {steps!r}")
        self.target = target
        self.kernel = kernel
        self.params = params
        self.start = start
        self.steps = int(steps)
        self.name = name or f"mcmc:{self.steps}"
        self.run_blocks = run_blocks
        self.block_size = block_size
        self.accept_stat = float("nan")

    @property
    def dim(self) -> int:
        return int(self.target.dim)

    def _chains(self, starts: np.ndarray, seed: int):
        """The chains from ``starts`` in blocks (locally, or by ``run_blocks``)."""
        n = starts.shape[0]
        size = n if self.run_blocks is None or not self.block_size else int(self.block_size)
        blocks = [(starts[lo:lo + size], self.kernel, self.params, self.steps, seed, lo)
                  for lo in range(0, n, size)]
        if self.run_blocks is None:
            parts = [_chain_block(self.target, *b) for b in blocks]
        else:
            parts = self.run_blocks(_chain_block, blocks)
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                sum(p[2] for p in parts), sum(p[3] for p in parts))

    def run(self, n: int, seed: int) -> AlgorithmRuns:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"n must be a whole number >= 1, got {n!r}")
        t0 = time.perf_counter()
        starts = np.ascontiguousarray(self.start.draw(int(n), derived_seed(seed, Purpose.ALGORITHM_BASE)),
                                      dtype=float)
        with np.errstate(invalid="ignore"):
            log_z = _log_joint(self.target, starts) - self.start.log_density(starts)
        x, log_joint, grads, accept = self._chains(starts, derived_seed(seed, Purpose.ALGORITHM_CHAINS))
        self.accept_stat = accept / (n * self.steps)
        return AlgorithmRuns(x, log_joint - log_z, Cost(gradients=grads,
                                                        densities=n * (self.steps + 2),
                                                        seconds=time.perf_counter() - t0))

    def meta_log_xi(self, outputs: np.ndarray, m: int, seed: int) -> MetaInference:
        x = np.ascontiguousarray(outputs, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise InputError(f"outputs must have shape (n, {self.dim}), got {x.shape}")
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise InputError(f"m must be a whole number >= 1, got {m!r}")
        n, t0 = x.shape[0], time.perf_counter()
        starts = np.repeat(x, m, axis=0)  # row i * m + j: trace j of output i
        log_joint = _log_joint(self.target, starts)
        ok = np.isfinite(log_joint)  # no density at the output: xi = 0, no trace
        log_xi = np.full(n * m, -np.inf)
        grads = 0
        if ok.any():
            v0, log_joint_v0, grads, _ = self._chains(
                starts[ok], derived_seed(seed, Purpose.ALGORITHM_REVERSE_START))
            with np.errstate(invalid="ignore"):
                u = log_joint_v0 - self.start.log_density(v0)
            log_xi[ok] = np.where(np.isnan(u), -np.inf, log_joint[ok] - u)
        return MetaInference(log_xi.reshape(n, m),
                             Cost(gradients=grads, densities=n * m * (self.steps + 2),
                                  seconds=time.perf_counter() - t0))

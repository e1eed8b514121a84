"""Static Hamiltonian Monte Carlo: fixed step size and number of leapfrog steps.

One transition per chain: draw a momentum, run ``n_leapfrog`` leapfrog steps
with a diagonal or dense inverse metric, accept with the Metropolis probability
``min(1, exp(H0 - H1))``.  All chains of the batch advance together (one model
call per leapfrog step); a chain whose trajectory reaches a non-finite density
or gradient leaves the batch at once and is rejected (the set of visited
positions is the same forwards and backwards, so rejecting on it keeps the
kernel reversible) and counts as divergent.

When the target offers native transitions (``target.native``, as a
:class:`~bread_stan.stan.tempered.StanTarget` does) the trajectories run in the
model library, one call per transition for the whole batch, chains spread over
threads, from the same random numbers (drawn here, in the same order): the
results are those of this Python kernel, bit for bit.  ``HMC(native=False)``,
or ``BREAD_STAN_NATIVE=0``, keeps the Python kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..rng import ChainRandom
from ..target import Evaluation, Target
from .base import ChainState, StepInfo, batch_of
from .integrator import (check_step_randomisation, draw_momentum, kinetic, leapfrog,
                         native_default, per_chain, per_chain_metric, randomised_step_size,
                         take_chains, tempered_grad, tempered_logp)

__all__ = ["HMCParams", "HMC"]

DIVERGENCE_THRESHOLD = 1000.0


@dataclass(frozen=True)
class HMCParams:
    """Step size (scalar or per chain), leapfrog steps (scalar or per chain),
    inverse metric (diagonal (d,) or (n, d); dense (1, d, d) or (n, d, d); None
    for the identity) and step-size
    jitter j: each transition draws its step size uniformly from
    [(1 - j) step_size, (1 + j) step_size], per chain (Stan's ``stepsize_jitter``).

    ``rescue_prob`` r: with probability r a transition instead uses a step size
    smaller by a factor log-uniform in [1e-3, 1] ("rescue" steps).

    Both keep the kernel exact (a mixture, chosen independently of the state, of
    exact kernels).  Rescue steps free chains stranded where the density is far
    more curved than where the step size was tuned (an AIS chain started from a
    prior draw deep in the tails, say), which a fixed step size rejects for ever;
    they cost a fraction r of the transitions of well-placed chains.
    """

    step_size: float | np.ndarray = 0.1
    n_leapfrog: int | np.ndarray = 10
    inv_metric: np.ndarray | None = None
    step_size_jitter: float = 0.0
    rescue_prob: float = 0.0

    def __post_init__(self):
        check_step_randomisation(self.step_size_jitter, self.rescue_prob)


def _select(mask: np.ndarray, new: Evaluation, old: Evaluation) -> Evaluation:
    m2 = mask[:, None]
    return Evaluation(np.where(mask, new.log_prior, old.log_prior),
                      np.where(mask, new.log_lik, old.log_lik),
                      np.where(m2, new.grad_prior, old.grad_prior),
                      np.where(m2, new.grad_lik, old.grad_lik))


class HMC:
    """Static HMC with Metropolis correction; ``params`` is :class:`HMCParams`.

    ``native``: run transitions in the target's model library when it offers them
    (None: yes, unless ``BREAD_STAN_NATIVE=0``); False keeps the Python kernel.
    """

    needs_gradient = True
    params_class = HMCParams

    def __init__(self, native: bool | None = None):
        self.native = native_default(native)

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: HMCParams, chains: np.ndarray | None = None
             ) -> tuple[ChainState, StepInfo]:
        chains, beta = batch_of("HMC", params, HMCParams, state, chains, beta)
        q0 = state.position
        n, d = q0.shape
        eps, _ = randomised_step_size(rng, chains, per_chain(params.step_size, n, "step_size"),
                                      params.step_size_jitter, params.rescue_prob)
        n_leap = per_chain(params.n_leapfrog, n, "n_leapfrog", integer=True)
        minv = per_chain_metric(params.inv_metric, n, d)

        ev0 = state.evaluation
        native = getattr(target, "native", None) if self.native else None
        with np.errstate(all="ignore"):
            p0 = draw_momentum(rng.normal(d, chains), minv)
            if native is not None:
                out = native.hmc(q0, ev0, beta, eps, n_leap, minv, p0, rng.log_uniform(chains))
                info = StepInfo(accept_stat=np.exp(np.minimum(out.delta, 0.0)),
                                divergent=out.divergent, energy_error=out.energy_error,
                                n_grad=out.n_grad, tree_depth=np.zeros(n, dtype=np.int64))
                return ChainState(out.position, out.evaluation), info
            h0 = kinetic(p0, minv) - tempered_logp(ev0, beta)
            g0 = tempered_grad(ev0, beta)

            # The proposal starts as a copy of the current state; chains that
            # stop early keep ``ok = False`` and are rejected below.
            q_end = q0.copy()
            p_end = p0.copy()
            ev_end = Evaluation(ev0.log_prior.copy(), ev0.log_lik.copy(),
                                ev0.grad_prior.copy(), ev0.grad_lik.copy())
            ok = np.ones(n, dtype=bool)
            n_grad = np.zeros(n, dtype=np.int64)

            ids = np.flatnonzero(n_leap > 0)
            q, p, g = q0[ids], p0[ids], g0[ids]
            # Per-chain settings of the chains still moving, re-gathered only
            # when some chain stops (the batch is usually whole to the end).
            e_ids, m_ids = eps[ids], take_chains(minv, ids)
            b_ids, n_ids = beta[ids], n_leap[ids]
            k = 0
            while ids.size:
                q, p, g, ev = leapfrog(target, q, p, g, e_ids, m_ids, b_ids)
                k += 1
                n_grad[ids] += 1
                bad = ~(np.isfinite(tempered_logp(ev, b_ids)) & np.isfinite(g).all(axis=1))
                done = bad | (n_ids == k)
                if done.any():
                    fin = ids[done]
                    q_end[fin], p_end[fin] = q[done], p[done]
                    ev_end.log_prior[fin], ev_end.log_lik[fin] = ev.log_prior[done], ev.log_lik[done]
                    ev_end.grad_prior[fin], ev_end.grad_lik[fin] = ev.grad_prior[done], ev.grad_lik[done]
                    ok[ids[bad]] = False
                    keep = ~done
                    ids, q, p, g = ids[keep], q[keep], p[keep], g[keep]
                    e_ids, m_ids, b_ids, n_ids = e_ids[keep], m_ids[keep], b_ids[keep], n_ids[keep]

            h1 = kinetic(p_end, minv) - tempered_logp(ev_end, beta)
            delta = np.where(ok, h0 - h1, -np.inf)
            delta = np.where(np.isnan(delta), -np.inf, delta)
            accept = rng.log_uniform(chains) < delta
            accept_stat = np.exp(np.minimum(delta, 0.0))
            energy_error = np.where(ok, h1 - h0, np.inf)
            divergent = ~ok | ~np.isfinite(h1) | (energy_error > DIVERGENCE_THRESHOLD)

        position = np.where(accept[:, None], q_end, q0)
        info = StepInfo(accept_stat=accept_stat, divergent=divergent,
                        energy_error=energy_error, n_grad=n_grad,
                        tree_depth=np.zeros(n, dtype=np.int64))
        return ChainState(position, _select(accept, ev_end, ev0)), info

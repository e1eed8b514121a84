"""HMC and NUTS transitions run inside a model library (``csrc/bridge.cpp``).

:class:`NativeKernels` is what a Stan target offers as ``target.native``: one C
call advances a whole batch of chains by one transition of the tempered density
``log_prior + beta * log_lik``, chains spread over the target's threads.  The
kernels :class:`~bread_stan.kernels.hmc.HMC` and
:class:`~bread_stan.kernels.nuts.NUTS` use it automatically; they draw the
random numbers (momenta, log-uniforms) from the chains' own streams and pass
them in, so that a native transition gives the Python kernel's result bit for
bit.  This module only moves arrays across the C boundary; an inverse metric
shared by all chains (a stride-0 broadcast, as ``per_chain_metric`` makes it)
crosses once, not once per chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.integrator import is_shared
from ..target import Evaluation
from .model import StanModel
from ..errors import InputError

__all__ = ["NativeKernels", "NativeStep"]


@dataclass
class NativeStep:
    """The outcome of one native transition of n chains (arrays of shape (n,) unless said).

    HMC fills ``delta`` (H0 - H1, -inf when the trajectory left the support) and
    ``accepted``; NUTS fills ``sum_metro`` (sum over leapfrog steps of
    min(1, exp(H0 - H))), ``tree_depth`` and ``used`` (look-ahead values used,
    -1 when too few were given).
    """

    position: np.ndarray  # (n, d)
    evaluation: Evaluation
    energy_error: np.ndarray
    divergent: np.ndarray
    n_grad: np.ndarray
    delta: np.ndarray | None = None
    accepted: np.ndarray | None = None
    sum_metro: np.ndarray | None = None
    tree_depth: np.ndarray | None = None
    used: np.ndarray | None = None

    def fill(self, rows: np.ndarray, other: "NativeStep") -> None:
        """Overwrite chains ``rows`` with the results of ``other`` (a run of just those)."""
        for name in ("position", "energy_error", "divergent", "n_grad", "delta", "accepted",
                     "sum_metro", "tree_depth", "used"):
            mine = getattr(self, name)
            if mine is not None:
                mine[rows] = getattr(other, name)
        for name in ("log_prior", "log_lik", "grad_prior", "grad_lik"):
            getattr(self.evaluation, name)[rows] = getattr(other.evaluation, name)


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


class NativeKernels:
    """Native transitions of the split prior/likelihood density of two model instances
    (``prior`` built with prior_only = 1, ``full`` with prior_only = 0), or, with
    ``prior=None``, of ``full``'s joint density (reported as the log prior, with log
    likelihood 0), or, with a ``base`` (``prior=None``), of the path from a Gaussian
    base q0 to ``full``'s joint (log q0 as the log prior, log p~ - log q0 as the log
    likelihood, as :class:`~bread_stan.ais.gaussian_base.GaussianBaseTarget`), or, with
    ``prior`` and ``base`` both, of the path from the prior to q0 (the prior's log
    density as the log prior, log q0 minus it as the log likelihood, as
    :class:`~bread_stan.ais.waypoint.PriorToBase`; ``full`` gives only the dimension)."""

    def __init__(self, full: StanModel, prior: StanModel | None = None, threads: int = 0,
                 base=None):
        self.full, self.prior, self.threads = full, prior, int(threads)
        self.lib = full.lib
        # GaussianBase.native_block(): [log normaliser, mean, sd or (L^-1, L^-T)]
        self._base = None if base is None else _f64(base.native_block())
        self._base_dense = base is not None and not base.diagonal

    @staticmethod
    def available(model: StanModel) -> bool:
        """Whether ``model``'s library has the native transitions."""
        return model.lib.bread_nuts_transition is not None

    def _state(self, position, evaluation, beta, step_size, inv_metric, momentum):
        n, d = position.shape
        if evaluation.grad_prior is None or evaluation.grad_lik is None:
            raise InputError("this kernel needs gradients; build the state with gradient=True")
        args = [_f64(position), _f64(evaluation.log_prior), _f64(evaluation.log_lik),
                _f64(evaluation.grad_prior), _f64(evaluation.grad_lik),
                _f64(np.broadcast_to(beta, (n,))), _f64(np.broadcast_to(step_size, (n,)))]
        metric = np.asarray(inv_metric, dtype=np.float64)
        if metric.shape not in ((n, d), (n, d, d)):
            raise InputError(f"the inverse metric must be (n, d) or (n, d, d), got {metric.shape}")
        return args, metric, _f64(momentum)

    def _outputs(self, n: int, d: int, n_stats: int, n_flags: int):
        return (np.empty((n, d)), Evaluation(np.empty(n), np.empty(n), np.empty((n, d)),
                                             np.empty((n, d))),
                np.empty((n, n_stats)), np.empty((n, n_flags), dtype=np.int64))

    def _call(self, function, inputs, middle, metric, momentum, log_u, extra, outputs):
        q, ev, stats, flags = outputs
        # One metric broadcast to every chain (stride 0) goes across once, not copied n times.
        shared = is_shared(metric)
        block = _f64(metric[0] if shared else metric)
        self.full.native_transition(
            function, self.prior,
            [self._base, self._base_dense, q.shape[0], *inputs, *middle, metric.ndim == 3,
             shared, block, momentum, log_u, *extra, q, ev.log_prior, ev.log_lik,
             ev.grad_prior, ev.grad_lik, stats, flags], self.threads)

    def hmc(self, position, evaluation, beta, step_size, n_leapfrog, inv_metric, momentum,
            log_u) -> NativeStep:
        """One static-HMC transition per chain (see ``bread_hmc_transition`` in bridge.hpp)."""
        n, d = position.shape
        inputs, metric, momentum = self._state(position, evaluation, beta, step_size,
                                               inv_metric, momentum)
        n_leap = np.ascontiguousarray(np.broadcast_to(n_leapfrog, (n,)), dtype=np.int64)
        outputs = self._outputs(n, d, 2, 3)
        self._call("bread_hmc_transition", inputs, [n_leap], metric, momentum,
                   _f64(log_u), [], outputs)
        q, ev, stats, flags = outputs
        return NativeStep(q, ev, energy_error=stats[:, 1], divergent=flags[:, 1].astype(bool),
                          n_grad=flags[:, 2].copy(), delta=stats[:, 0],
                          accepted=flags[:, 0].astype(bool))

    def nuts(self, position, evaluation, beta, step_size, max_depth, inv_metric, momentum,
             log_u) -> NativeStep:
        """One NUTS transition per chain from the look-ahead ``log_u`` (n, k)."""
        n, d = position.shape
        inputs, metric, momentum = self._state(position, evaluation, beta, step_size,
                                               inv_metric, momentum)
        log_u = _f64(log_u)
        outputs = self._outputs(n, d, 2, 4)
        self._call("bread_nuts_transition", inputs, [int(max_depth)], metric, momentum,
                   log_u, [log_u.shape[1]], outputs)
        q, ev, stats, flags = outputs
        return NativeStep(q, ev, energy_error=stats[:, 1], divergent=flags[:, 0].astype(bool),
                          n_grad=flags[:, 1].copy(), sum_metro=stats[:, 0],
                          tree_depth=flags[:, 2].copy(), used=flags[:, 3].copy())

"""The No-U-Turn sampler as Stan runs it, advanced in lockstep over a batch of chains.

Per chain this is Stan's ``base_nuts`` transition: multinomial sampling of the
state along the trajectory (uniform progressive sampling inside a subtree,
biased progressive sampling when a new subtree joins the trajectory), the
generalised no-U-turn criterion on sharp momenta checked across every merged
subtree *and* across the two extra spans Stan added (left subtree plus the first
point of the right one, right subtree plus the last point of the left one), a
maximum tree depth, and a divergence when the energy error exceeds 1000 (a
divergent leaf ends the trajectory without sampling from its subtree).  The
acceptance statistic is the mean of ``min(1, exp(H0 - H))`` over all leapfrog
steps taken, as in Stan.

Vectorisation.  The recursive tree builder is replaced by an iterative one
(the checkpoint idea of iterative NUTS implementations): a subtree of depth j
is built leaf by leaf, and after leaf k (0-based) the completed subtrees are
merged like carries in a binary counter: for each set low bit l of k, the
pending subtree of size 2^l stored in slot l is merged, as the left sibling,
with the subtree just completed.  When k = 2^j - 1 the carry reaches level j
and the new subtree is complete; it is then merged into the trajectory.  Every
iteration of the main loop does one leapfrog step for every chain still
building, with ONE call to ``target.evaluate`` for all of them; a chain whose
trajectory has ended (U-turn, divergence, maximum depth) is removed from the
working arrays, so it costs no further gradients.  Each chain draws from its own
random stream, so its path does not depend on which other chains share the
batch.

Random numbers.  The momentum comes from the chain's normal stream; every other
decision takes the next value ``log U`` of the chain's look-ahead stream
(:meth:`~bread_stan.rng.ChainRandom.peek_log_uniform`), in this order: the
first direction; per leapfrog step, one per merge of two subtrees (lowest
level first; taken even when the merge then fails the no-U-turn check); when a
subtree completes, one for the jump to it and, if the trajectory goes on, one
for the next direction.  Directions are forward when ``log U < log(1/2)``; a
merge takes the right subtree's proposal when ``log U < log(w_right / w_total)``.

Native transitions.  When the target offers them (``target.native``: a
:class:`~bread_stan.stan.native.NativeKernels`, as a
:class:`~bread_stan.stan.tempered.StanTarget` does) the whole transition of
every chain runs in the model library, one call for the batch, chains spread
over threads.  It consumes the same random numbers and returns the same states,
decisions, gradient counts and depths, bit for bit; only ``accept_stat`` may
differ in the last bits (numpy's SIMD ``exp`` against the C library's).
``NUTS(native=False)``, or ``BREAD_STAN_NATIVE=0``, keeps this Python kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..rng import ChainRandom
from ..target import Evaluation, Target
from .base import ChainState, StepInfo, batch_of
from .integrator import (check_step_randomisation, draw_momentum, kinetic, leapfrog,
                         native_default, per_chain, per_chain_metric, randomised_step_size,
                         row_dot, take_chains, tempered_grad, tempered_logp, velocity)

__all__ = ["NUTSParams", "NUTS"]

DIVERGENCE_THRESHOLD = 1000.0


@dataclass(frozen=True)
class NUTSParams:
    """Step size (scalar or per chain), inverse metric (diagonal (d,) or (n, d);
    dense (1, d, d) or (n, d, d); None for the identity) and maximum tree depth (at most
    2^max_depth - 1 leapfrog steps per transition).

    ``step_size_jitter`` and ``rescue_prob`` randomise each transition's step
    size as :class:`~bread_stan.kernels.hmc.HMCParams` does (drawn before the
    momentum); both default to 0, Stan's NUTS.  A rescue transition builds its
    tree to at most ``rescue_depth``: its small step rarely makes a U-turn, and
    without that cap it would cost the full 2^max_depth - 1 leapfrog steps.
    The depth is chosen with the step size, independently of the state, so the
    mixture stays exact.
    """

    step_size: float | np.ndarray = 0.1
    inv_metric: np.ndarray | None = None
    max_depth: int = 10
    step_size_jitter: float = 0.0
    rescue_prob: float = 0.0
    rescue_depth: int = 4

    def __post_init__(self):
        check_step_randomisation(self.step_size_jitter, self.rescue_prob)
        if int(self.rescue_depth) < 1:
            raise ValueError(f"rescue_depth must be at least 1, got {self.rescue_depth}")


class _Work:
    """Per-chain working arrays of the chains still building, compacted together."""

    def compact(self, keep: np.ndarray) -> None:
        for name, value in vars(self).items():
            setattr(self, name, value[keep])


# A subtree summary is packed into two arrays so that storing, merging and
# selecting touch few numpy objects: vectors (m, 6, d) and scalars (m, 4).
BEG, END, RHO, Q, GP, GL = range(6)  # momenta at both ends, sum of momenta, proposal
LSW, LP, LL, DH = range(4)  # log sum of weights; proposal's log prior, log lik, H - H0
_PROP_V = np.array([False, False, False, True, True, True])[:, None]
_PROP_S = np.array([False, True, True, True])
LOG_HALF = -0.6931471805599453  # the double nearest log(1/2): directions


def _merge_ok(minv, left, right) -> np.ndarray:
    """Stan's no-U-turn checks when subtree ``left`` (built first) is joined by ``right``.

    ``left`` and ``right`` are packed (k, >=3, d) with momenta at the first and
    last point built (rows BEG, END) and summed momentum (row RHO).  Each check
    asks that the sharp momenta at both ends of a span point along its summed
    momentum: the whole merged span, ``left`` plus the first point of
    ``right``, and ``right`` plus the last point of ``left``.
    """
    k, _, d = left.shape
    spans = np.empty((k, 3, d))
    np.add(left[:, RHO], right[:, RHO], out=spans[:, 0])
    np.add(left[:, RHO], right[:, BEG], out=spans[:, 1])
    np.add(right[:, RHO], left[:, END], out=spans[:, 2])
    spans = spans[:, None]
    dl = row_dot(velocity(left[:, BEG:END + 1], minv)[:, :, None], spans).reshape(k, 6)
    dr = row_dot(velocity(right[:, BEG:END + 1], minv)[:, :, None], spans).reshape(k, 6)
    # (beg, whole) (beg, left_ext) (end, right_ext) of each side; see the docstring
    return np.all(dl[:, _LEFT_CHECKS] > 0, axis=1) & np.all(dr[:, _RIGHT_CHECKS] > 0, axis=1)


# Flat indices into the (end-row j, span m) products j * 3 + m.
_LEFT_CHECKS = np.array([0 * 3 + 0, 0 * 3 + 1, 1 * 3 + 2])  # l_beg:whole, l_beg:l+r_beg, l_end:r+l_end
_RIGHT_CHECKS = np.array([1 * 3 + 0, 0 * 3 + 1, 1 * 3 + 2])  # r_end:whole, r_beg:l+r_beg, r_end:r+l_end


class NUTS:
    """Stan's NUTS with a diagonal or dense metric; ``params`` is :class:`NUTSParams`.

    ``native``: run transitions in the target's model library when it offers them
    (None: yes, unless ``BREAD_STAN_NATIVE=0``); False keeps the Python kernel.
    """

    needs_gradient = True
    params_class = NUTSParams

    def __init__(self, native: bool | None = None):
        self.native = native_default(native)
        self._lookahead = 64  # log-uniforms shown to the native kernel per chain

    def step(self, rng: ChainRandom, state: ChainState, target: Target,
             beta: np.ndarray, params: NUTSParams, chains: np.ndarray | None = None
             ) -> tuple[ChainState, StepInfo]:
        chains, beta = batch_of("NUTS", params, NUTSParams, state, chains, beta)
        n, d = state.position.shape
        eps, rescued = randomised_step_size(rng, chains,
                                            per_chain(params.step_size, n, "step_size"),
                                            params.step_size_jitter, params.rescue_prob)
        minv = per_chain_metric(params.inv_metric, n, d)
        max_depth = int(params.max_depth)
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        rescue_depth = min(int(params.rescue_depth), max_depth)
        if rescue_depth == max_depth or not rescued.any():
            return self._batch(rng, chains, state, target, beta, eps, minv, max_depth)
        # Rescued chains build shallower trees: run the two groups separately.
        # Each chain reads only its own streams, so the split changes no draw.
        parts = [(rows, self._batch(rng, chains[rows], state.take(rows), target, beta[rows],
                                    eps[rows], take_chains(minv, rows), depth))
                 for rows, depth in ((np.flatnonzero(~rescued), max_depth),
                                     (np.flatnonzero(rescued), rescue_depth)) if rows.size]
        return _combine(n, d, parts)

    def _batch(self, rng, chains, state, target, beta, eps, minv, max_depth):
        """One transition of the chains in ``state``, all with tree depth ``max_depth``."""
        native = getattr(target, "native", None) if self.native else None
        with np.errstate(all="ignore"):
            if native is not None:
                return self._native(native, rng, chains, state, beta, eps, minv, max_depth)
            return _transition(rng, target, chains, state, beta, eps, minv, max_depth)

    def _native(self, native, rng, chains, state, beta, eps, minv, max_depth):
        n, d = state.position.shape
        p0 = draw_momentum(rng.normal(d, chains), minv)
        most = _max_uniforms(max_depth)
        k = min(self._lookahead, most)
        out = native.nuts(state.position, state.evaluation, beta, eps, max_depth, minv, p0,
                          rng.peek_log_uniform(k, chains))
        short = np.flatnonzero(out.used < 0)
        if short.size:  # some trees needed more look-ahead: run them again with all they can use
            again = native.nuts(state.position[short], state.evaluation.take(short), beta[short],
                                eps[short], max_depth, take_chains(minv, short), p0[short],
                                rng.peek_log_uniform(most, chains[short]))
            out.fill(short, again)
        rng.advance_log_uniform(out.used, chains)
        self._lookahead = int(min(most, max(64, 2 * out.used.max())))
        info = StepInfo(accept_stat=out.sum_metro / np.maximum(out.n_grad, 1),
                        divergent=out.divergent, energy_error=out.energy_error,
                        n_grad=out.n_grad, tree_depth=out.tree_depth)
        return ChainState(out.position, out.evaluation), info


def _combine(n: int, d: int, parts) -> tuple[ChainState, StepInfo]:
    """The batch's state and info put together from ``(rows, (state, info))`` parts."""
    position = np.empty((n, d))
    ev = Evaluation(np.empty(n), np.empty(n), np.empty((n, d)), np.empty((n, d)))
    first = parts[0][1][1]
    info = {f.name: np.empty(n, dtype=getattr(first, f.name).dtype) for f in fields(StepInfo)}
    for rows, (state, step_info) in parts:
        position[rows] = state.position
        for f in fields(Evaluation):
            getattr(ev, f.name)[rows] = getattr(state.evaluation, f.name)
        for name, values in info.items():
            values[rows] = getattr(step_info, name)
    return ChainState(position, ev), StepInfo(**info)


def _max_uniforms(max_depth: int) -> int:
    """The most look-ahead values one transition can use: 1 + (2^D - 1 - D) merges +
    2 per doubling."""
    return 2 ** max_depth + max_depth


class _LogUniforms:
    """The transition's view of each chain's look-ahead stream, widened when used up."""

    def __init__(self, rng: ChainRandom, chains: np.ndarray, max_depth: int):
        self.rng, self.chains = rng, chains
        self.most = _max_uniforms(max_depth)
        self.k = min(64, self.most)
        self.values = rng.peek_log_uniform(self.k, chains)
        self.used = np.zeros(chains.size, dtype=np.int64)

    def next(self, rows: np.ndarray) -> np.ndarray:
        """The next value of each chain ``rows`` (indices into the batch, distinct)."""
        at = self.used[rows]
        if at.size and at.max() >= self.k:
            self.k = min(self.most, max(2 * self.k, int(at.max()) + 1))
            self.values = self.rng.peek_log_uniform(self.k, self.chains)
        self.used[rows] += 1
        return self.values[rows, at]

    def finish(self) -> None:
        self.rng.advance_log_uniform(self.used, self.chains)


def _transition(rng, target, chains, state, beta, eps, minv, max_depth):
    q0, ev0 = state.position, state.evaluation
    n, d = q0.shape
    p0 = draw_momentum(rng.normal(d, chains), minv)
    log_u = _LogUniforms(rng, chains, max_depth)
    w = _start_trajectory(q0, p0, ev0, beta, eps, minv, max_depth, log_u)

    # The sample: the initial point until a proposal is accepted.
    out_v = np.stack([q0, ev0.grad_prior, ev0.grad_lik], axis=1)
    out_s = np.stack([ev0.log_prior, ev0.log_lik, np.zeros(n)], axis=1)
    n_leap = np.zeros(n, dtype=np.int64)
    sum_metro = np.zeros(n)
    depth_out = np.zeros(n, dtype=np.int64)
    divergent = np.zeros(n, dtype=bool)

    while w.ids.size:
        # One leapfrog step for every chain still building: one model call.
        direction = np.where(w.side == 1, w.eps, -w.eps)
        w.cq, w.cp, w.cg, ev = leapfrog(target, w.cq, w.cp, w.cg, direction, w.minv, w.beta)
        h = kinetic(w.cp, w.minv) - tempered_logp(ev, w.beta)
        dh = h - w.h0
        dh = np.where(np.isnan(dh), np.inf, dh)  # also when the start had no density
        n_leap[w.ids] += 1
        sum_metro[w.ids] += np.exp(np.minimum(-dh, 0.0))
        alive = ~(dh > DIVERGENCE_THRESHOLD)
        divergent[w.ids[~alive]] = True

        cur_v, cur_s = _leaf_subtree(w, ev, dh)
        _carry_up(w, cur_v, cur_s, alive, log_u, max_depth)
        complete = alive & (w.leaf == np.left_shift(1, w.depth) - 1)
        w.leaf += 1
        finished = ~alive
        sel = np.flatnonzero(complete)
        if sel.size:
            finished[sel] = _join_trajectory(w, cur_v, cur_s, sel, log_u, out_v, out_s,
                                             max_depth)
        if finished.any():
            depth_out[w.ids[finished]] = w.depth[finished]
            w.compact(~finished)

    log_u.finish()
    accept_stat = sum_metro / np.maximum(n_leap, 1)
    evaluation = Evaluation(out_s[:, 0].copy(), out_s[:, 1].copy(),
                            out_v[:, 1].copy(), out_v[:, 2].copy())
    info = StepInfo(accept_stat=accept_stat, divergent=divergent,
                    energy_error=out_s[:, 2].copy(), n_grad=n_leap, tree_depth=depth_out)
    return ChainState(out_v[:, 0].copy(), evaluation), info


def _start_trajectory(q0, p0, ev0, beta, eps, minv, max_depth, log_u) -> _Work:
    """The working arrays of a trajectory holding only the start point, its first
    direction drawn."""
    n, d = q0.shape
    g0 = tempered_grad(ev0, beta)
    w = _Work()
    w.ids = np.arange(n)
    w.beta, w.eps, w.minv = beta, eps, minv
    w.h0 = kinetic(p0, minv) - tempered_logp(ev0, beta)
    # Trajectory: both ends (side 0 backward, 1 forward; position, momentum,
    # tempered gradient), summed momentum and log sum of weights.
    w.ends = np.repeat(np.stack([q0, p0, g0], axis=1)[:, None], 2, axis=1)
    w.rho, w.lsw = p0.copy(), np.zeros(n)
    w.depth = np.zeros(n, dtype=np.int64)  # valid doublings so far = depth being built
    w.leaf = np.zeros(n, dtype=np.int64)  # next leaf's index within that subtree
    # Pending left subtrees, one slot per level.
    w.slot_v = np.zeros((n, max_depth, 6, d))
    w.slot_s = np.zeros((n, max_depth, 4))
    w.side = (log_u.next(w.ids) < LOG_HALF).astype(np.int64)
    w.cq, w.cp, w.cg = q0.copy(), p0.copy(), g0.copy()  # the point to integrate from
    return w


def _leaf_subtree(w, ev, dh) -> tuple[np.ndarray, np.ndarray]:
    """The point just reached, packed as a one-point subtree (vectors, scalars)."""
    m, d = w.cq.shape
    cur_v = np.empty((m, 6, d))
    cur_v[:, BEG:RHO + 1] = w.cp[:, None, :]
    cur_v[:, Q], cur_v[:, GP], cur_v[:, GL] = w.cq, ev.grad_prior, ev.grad_lik
    cur_s = np.empty((m, 4))
    cur_s[:, LSW], cur_s[:, LP], cur_s[:, LL], cur_s[:, DH] = -dh, ev.log_prior, ev.log_lik, dh
    return cur_v, cur_s


def _carry_up(w, cur_v, cur_s, alive, log_u, max_depth) -> None:
    """Merge the new leaf's subtree with the pending left subtrees, like carries in a
    binary counter, and store it where the carry stops.

    Updates ``cur_v``/``cur_s`` to the merged subtree and ``alive`` (False where a
    merge fails the no-U-turn checks), in place.
    """
    carry = alive.copy()
    for level in range(max_depth):
        merge = carry & ((w.leaf >> level) & 1).astype(bool)
        if merge.any():
            idx = np.flatnonzero(merge)
            ok = _merge_level(w, cur_v, cur_s, idx, level, log_u.next(w.ids[idx]))
            alive[idx[~ok]] = False
            merge[idx[~ok]] = False
        # Store the subtree of the chains that stop here; merged chains
        # overwrite the slot they just emptied, which is harmless.
        np.copyto(w.slot_v[:, level], cur_v, where=carry[:, None, None])
        np.copyto(w.slot_s[:, level], cur_s, where=carry[:, None])
        carry = merge
        if not carry.any():
            break


def _merge_level(w, cur_v, cur_s, idx, level, log_u) -> np.ndarray:
    """Merge slot ``level`` (left) with the current subtree (right) for chains ``idx``.

    Updates ``cur_v``/``cur_s`` in place; returns which merges pass the
    no-U-turn checks.
    """
    lv, ls = w.slot_v[idx, level], w.slot_s[idx, level]
    rv, rs = cur_v[idx], cur_s[idx]
    ok = _merge_ok(w.minv[idx], lv, rv)
    lsw = np.logaddexp(ls[:, LSW], rs[:, LSW])
    # Uniform progressive sampling: the right proposal with probability w_right / w_total.
    take_left = ~(log_u < rs[:, LSW] - lsw)
    new_v = np.where(take_left[:, None, None] & _PROP_V, lv, rv)
    new_v[:, BEG] = lv[:, BEG]
    new_v[:, RHO] = lv[:, RHO] + rv[:, RHO]
    new_s = np.where(take_left[:, None] & _PROP_S, ls, rs)
    new_s[:, LSW] = lsw
    cur_v[idx] = new_v
    cur_s[idx] = new_s
    return ok


def _join_trajectory(w, cur_v, cur_s, sel, log_u, out_v, out_s, max_depth) -> np.ndarray:
    """Join the completed subtrees of chains ``sel`` to their trajectories.

    Biased progressive sampling of the subtree's proposal, the trajectory-level
    no-U-turn checks, then the next direction.  Returns, for the chains
    ``sel``, whether their transition has ended.
    """
    side = w.side[sel]
    sub_v, sub_s = cur_v[sel], cur_s[sel]
    # Biased progressive sampling: move to the new subtree with probability
    # min(1, w_new / w_old).
    jump = log_u.next(w.ids[sel]) < sub_s[:, LSW] - w.lsw[sel]
    take = w.ids[sel[jump]]
    out_v[take] = sub_v[jump, Q:]
    out_s[take] = sub_s[jump, LP:]
    w.lsw[sel] = np.logaddexp(w.lsw[sel], sub_s[:, LSW])

    # The old trajectory is the left (first built) part: its far end is on the
    # other side, its near end on the side being extended.
    old = np.empty((sel.size, 3, w.rho.shape[1]))
    old[:, BEG] = w.ends[sel, 1 - side, 1]  # far end
    old[:, END] = w.ends[sel, side, 1]  # near end
    old[:, RHO] = w.rho[sel]
    ok = _merge_ok(w.minv[sel], old, sub_v)
    w.rho[sel] += sub_v[:, RHO]
    w.ends[sel, side] = np.stack([w.cq[sel], w.cp[sel], w.cg[sel]], axis=1)

    w.depth[sel] += 1
    done = ~ok | (w.depth[sel] >= max_depth)
    go = sel[~done]
    if go.size:
        new_side = (log_u.next(w.ids[go]) < LOG_HALF).astype(np.int64)
        w.side[go] = new_side
        start = w.ends[go, new_side]
        w.cq[go], w.cp[go], w.cg[go] = start[:, 0], start[:, 1], start[:, 2]
        w.leaf[go] = 0
    return done

"""Running a path: one direction, both, or every number of distributions, AIS or SMC.

Every run of the toolkit goes through these functions, on any
:class:`~bread_stan.ais.path.Path`: the path gives its legs at T distributions, each
leg is one batch of the annealing loop (:func:`bread_stan.ais.engine.anneal`; SMC
passes its resampling policy, :mod:`bread_stan.ais.smc`), the legs' runs are joined in
temperature order and the path's ``log_c`` is subtracted from every estimate.

Streams: a direction's chain i uses (seed, stream + leg offset, first_chain + i) on
each leg, so chains run in blocks (shards) give the numbers of one batch.  :func:`run`
gives the i-th step count streams 2i (forward) and 2i + 1 (reverse).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, replace

import numpy as np

from ..errors import InputError
from ..target import Target
from . import engine, smc
from .engine import AISRun, chain_diagnostics
from .path import FixedKernel, Path
from .results import BreadResult, StepResult
from .run_config import RunConfig, jsonable_config

__all__ = ["run_direction", "run_both", "run_smc", "run", "join_legs", "as_path"]

log = logging.getLogger(__name__)


def as_path(tuned) -> Path:
    """``tuned`` as a path: a path as it is; None or a fixed params object as the
    prior path with that kernel at every temperature."""
    if tuned is None or not hasattr(tuned, "legs"):
        return FixedKernel(tuned)
    return tuned


def run_direction(path: Path, model: Target, kernel, config: RunConfig, T: int,
                  direction: str, start, *, seed, stream: int | None = None,
                  first_chain: int = 0,
                  n_chains: int | None = None, increments: bool = True,
                  progress: bool = False) -> AISRun:
    """One direction of AIS along ``path`` at T distributions from ``start``: forward
    from exact draws of the path's start (n, d), lower bounds on log p(y); reverse from
    exact posterior draws (or one draw repeated for ``n_chains``), upper bounds.
    ``stream``: default 0 forward, 1 reverse."""
    if stream is None:
        stream = 0 if direction == "forward" else 1
    legs = path.legs(model, config, T)
    order = legs if direction == "forward" else legs[::-1]
    runs, x = [], start
    for i, leg in enumerate(order):
        one = engine.forward if direction == "forward" else engine.reverse
        extra = {"n_chains": n_chains} if direction == "reverse" and i == 0 else {}
        runs.append(one(leg.target, kernel, leg.schedule, x, seed=seed,
                        stream=stream + leg.stream_offset,
                        increments_every=leg.every if increments else None,
                        first_chain=first_chain, progress=progress, **extra))
        x = runs[-1].final_positions
    if len(runs) == 1:
        return _shift(runs[0], path.log_c)
    return _shift(join_legs(direction, runs, [len(leg.schedule.betas) for leg in legs]),
                  path.log_c)


def run_both(path: Path, model: Target, kernel, config: RunConfig, T: int, starts,
             posterior, *, seed, streams: tuple[int, int] = (0, 1), increments: bool = True,
             progress: bool = False) -> tuple[AISRun, AISRun]:
    """Both directions (a single posterior draw repeated for as many reverse chains as
    forward starts); on a one-leg path in one batch of the loop."""
    legs = path.legs(model, config, T)
    if len(legs) == 1:
        leg = legs[0]
        runs = engine.forward_and_reverse(
            leg.target, kernel, leg.schedule, starts, posterior, seed=seed,
            streams=(streams[0] + leg.stream_offset, streams[1] + leg.stream_offset),
            increments_every=leg.every if increments else None, progress=progress)
        return tuple(_shift(r, path.log_c) for r in runs)
    n = np.shape(starts)[0]
    single = np.ndim(posterior) == 1 or np.shape(posterior)[0] == 1
    return (run_direction(path, model, kernel, config, T, "forward", starts, seed=seed,
                          stream=streams[0], increments=increments, progress=progress),
            run_direction(path, model, kernel, config, T, "reverse", posterior, seed=seed,
                          stream=streams[1], increments=increments, progress=progress,
                          n_chains=n if single else None))


def run_smc(path: Path, model: Target, kernel, config: RunConfig, T: int, direction: str,
            start, resampling: smc.SMCConfig, *, seed, streams: tuple[int, int] = (0, 1),
            first_run: int = 0, progress: bool = False) -> dict[str, smc.SMCRun]:
    """SMC along a one-leg ``path`` at T distributions: ``direction`` "forward" from
    prior particles (runs, 2P - 1, d) (the first P of each run), "reverse" (conditional
    SMC) from (exact draw(s), the same particles), "both" from (particles, (exact
    draw(s), particles)); resampling steps from ``resampling`` and the path's pilot."""
    legs = path.legs(model, config, T)
    if len(legs) != 1:
        raise InputError(f"SMC runs on one-leg paths; the {path.name} path has {len(legs)}")
    leg = legs[0]
    at = resampling.steps_for(leg.schedule.betas, path.leg_tuning())
    P = resampling.particles
    kw = {"seed": seed, "resample_at": at, "increments_every": leg.every,
          "first_run": first_run, "progress": progress}
    if direction == "forward":
        return {"forward": smc.forward_smc(leg.target, kernel, leg.schedule, start[:, :P],
                                           stream=streams[0], **kw)}
    x_star, prior = start if direction == "reverse" else start[1]
    x_star = np.asarray(x_star, dtype=float)
    if x_star.ndim == 1:
        x_star = np.repeat(x_star[None, :], prior.shape[0], axis=0)
    if direction == "both":
        fwd, rev = smc.forward_and_conditional(leg.target, kernel, leg.schedule,
                                               start[0][:, :P], x_star, prior[:, P:], P,
                                               streams=streams, **kw)
        return {"forward": fwd, "reverse": rev}
    return {"reverse": smc.conditional_smc(leg.target, kernel, leg.schedule, x_star,
                                           prior[:, P:], stream=streams[1], **kw)}


def join_legs(direction: str, runs: list[AISRun], lengths: list[int]) -> AISRun:
    """One direction's run over consecutive legs (``runs`` in the order they ran;
    ``lengths``: each leg's number of distributions, in forward order)."""
    first, second = runs
    leg1, leg2 = (first, second) if direction == "forward" else (second, first)
    n1 = leg1.schedule.steps_per_temperature * (len(leg1.schedule.betas) - 1)
    n2 = leg2.schedule.steps_per_temperature * (len(leg2.schedule.betas) - 1)
    stats = {"accept_stat": (n1 * leg1.chain_stats["accept_stat"]
                             + n2 * leg2.chain_stats["accept_stat"]) / (n1 + n2),
             "tree_depth": (n1 * leg1.chain_stats["tree_depth"]
                            + n2 * leg2.chain_stats["tree_depth"]) / (n1 + n2),
             "divergences": leg1.chain_stats["divergences"] + leg2.chain_stats["divergences"],
             "n_grad": leg1.chain_stats["n_grad"] + leg2.chain_stats["n_grad"]}
    w = leg1.log_weights + leg2.log_weights
    cumulative = cumulative_at = None
    if leg1.cumulative is not None and leg2.cumulative is not None:
        cumulative = np.concatenate([leg1.cumulative,
                                     leg2.cumulative + leg1.log_estimates[:, None]], axis=1)
        cumulative_at = np.concatenate([leg1.cumulative_at,
                                        leg2.cumulative_at + lengths[0] - 1])
    return AISRun(
        direction=direction, log_weights=w, log_estimates=leg1.log_estimates + leg2.log_estimates,
        final_positions=second.final_positions, n_grad=first.n_grad + second.n_grad,
        wall_time=first.wall_time + second.wall_time,
        diagnostics=chain_diagnostics(w, stats, n1 + n2, shared_batch=False),
        chain_stats=stats, cumulative=cumulative, cumulative_at=cumulative_at)


def _shift(run: AISRun, log_c: float) -> AISRun:
    """Estimates of log(c p(y)) made estimates of log p(y) (nothing on the prior path)."""
    if log_c == 0.0:
        return run
    cumulative = None if run.cumulative is None else run.cumulative - log_c
    return replace(run, log_estimates=run.log_estimates - log_c, cumulative=cumulative)


def run(target: Target, kernel, prior_draws, posterior_draws, *, seed: int, path=None,
        config: RunConfig = RunConfig(), model: str | None = None,
        resampling: smc.SMCConfig | None = None,
        on_step: Callable[[StepResult], None] | None = None) -> BreadResult:
    """Forward and reverse runs along ``path`` for each number of distributions in
    ``config.steps``: AIS, or SMC with ``resampling``.

    ``path``: a tuned path (:class:`~bread_stan.ais.path.Path`: e.g. a
    :class:`~bread_stan.ais.tuning.TunedKernel`), a fixed params object used at every
    temperature, or None for a kernel without params.  The i-th step count uses random
    streams 2i (forward) and 2i + 1 (reverse), so ``config.steps[0]`` reproduces
    :func:`engine.forward <bread_stan.ais.engine.forward>` and
    :func:`engine.reverse <bread_stan.ais.engine.reverse>` with their default streams.
    AIS: ``prior_draws`` (n, d); a single posterior draw is repeated for n reverse chains.
    SMC: ``prior_draws`` (runs, 2P - 1, d), run r's forward particles ``[:P]`` and its
    conditional run's free particles ``[P:]``; ``posterior_draws`` one draw or one per
    run.  ``on_step`` receives each finished step (to save it at once).
    """
    tuned, path = path, as_path(path)
    if resampling is None:
        prior, post = engine.check_starts(target, prior_draws, posterior_draws)
    else:
        prior, post = smc.check_starts(target, prior_draws, posterior_draws,
                                       resampling.particles)
    settings = {"config": jsonable_config(config), "seed": seed,
                "kernel": type(kernel).__name__, "n_forward": prior.shape[0],
                "n_reverse": post.shape[0]}
    if resampling is not None:
        settings.update(algorithm="smc", smc=asdict(resampling))
    if tuned is not None and hasattr(tuned, "to_dict"):
        settings["tuning"] = tuned.to_dict()
    elif tuned is not None:
        settings["params"] = {k: np.asarray(v).tolist() if v is not None else None
                              for k, v in asdict(tuned).items()}
    result = BreadResult(model or getattr(target, "name", type(target).__name__), settings)
    for i, T in enumerate(config.steps):
        if resampling is None:
            fwd, rev = _ais_step(path, target, kernel, config, T, prior, post, seed, i)
        else:
            both = run_smc(path, target, kernel, config, T, "both", (prior, (post, prior)),
                           resampling, seed=seed, streams=(2 * i, 2 * i + 1),
                           progress=config.progress)
            fwd, rev = both["forward"], both["reverse"]
        step = StepResult(T, fwd.to_direction_result(), rev.to_direction_result(),
                          path.betas(config, T), {"unconstrained": fwd.final_positions})
        log.info("T=%d: mean lower %.4g, mean upper %.4g, %.3g s, %d gradients", T,
                 np.mean(fwd.log_estimates), np.mean(rev.log_estimates),
                 fwd.wall_time + rev.wall_time, fwd.n_grad + rev.n_grad)
        result.steps.append(step)
        if on_step is not None:
            on_step(step)
    return result


def _ais_step(path: Path, target: Target, kernel, config: RunConfig, T: int, prior, post,
              seed: int, i: int) -> tuple[AISRun, AISRun]:
    """Step count i's two directions: in one batch (``config.combined``) or two."""
    if config.combined:
        return run_both(path, target, kernel, config, T, prior, post, seed=seed,
                        streams=(2 * i, 2 * i + 1), progress=config.progress)
    kw = {"seed": seed, "progress": config.progress}
    return (run_direction(path, target, kernel, config, T, "forward", prior, stream=2 * i,
                          **kw),
            run_direction(path, target, kernel, config, T, "reverse", post,
                          stream=2 * i + 1, **kw))

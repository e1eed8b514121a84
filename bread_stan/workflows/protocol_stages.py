"""The stages of a real-data protocol run that both of its routes share: the run's
context, resuming, the reverse starts (S frozen beta = 1 transitions from the
approximate posterior draw), the simulated data's forward and reverse runs in one
batch per temperature, and a forward run on its own (the real data's).

The routes are :func:`bread_stan.workflows.protocol.protocol` (forward AIS from the
full prior, a simulator with ``*_given`` hyperparameters) and
:mod:`bread_stan.workflows.protocol_fitted` (parameters fixed at fitted values, AIS
from a fitted Gaussian); each stage reads only the target, the tuned kernel and the
starts it is handed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..ais import engine
from ..ais.results import DirectionResult, StepResult
from ..ais.tuning import TunedKernel
from ..ais.verdict import VerdictSettings
from ..deadline import keep_pace
from ..kernels.base import initial_state
from ..rng import ChainRandom, Purpose, Stream, derived_seed
from ..store import load_if_sound, load_json, load_unit, save_unit
from .common import check_resumable
from .fit import FitResult, fit
from .problem import constrained
from .protocol_budget import steps_to_start
from .protocol_replicates import forward_run
from .protocol_result import HEADER, ProtocolResult, save_direction
from .settings import RunSettings, SamplerSettings

if TYPE_CHECKING:
    from .protocol import ProtocolSettings

__all__ = ["Context", "carry_over", "forward_only", "hyper_rhat", "previous_result",
           "reverse_start_snapshots", "reverse_starts", "runs_missing", "simulated_step",
           "steps_within_budget"]

log = logging.getLogger(__name__)


def reverse_starts(target, kernel, params, x_star: np.ndarray, n: int,
                   sweep: tuple[int, ...], seed: int) -> tuple[dict[int, np.ndarray], dict]:
    """Snapshots after S transitions at beta = 1 of n chains started at ``x_star``."""
    rng = ChainRandom.from_seed(seed, n, stream=Stream.REVERSE_START)
    state = initial_state(target, np.repeat(x_star[None, :], n, axis=0), gradient=True)
    beta = np.ones(n)
    snaps = {0: state.position.copy()} if 0 in sweep else {}
    accept, divergent, n_grad = 0.0, 0, 0
    t0, began = time.perf_counter(), time.monotonic()
    for i in range(1, max(sweep) + 1):
        keep_pace("the reverse starts' sweep", i - 1, max(sweep), began)
        state, info = kernel.step(rng, state, target, beta, params)
        accept += float(np.nanmean(info.accept_stat))
        divergent += int(np.sum(info.divergent))
        n_grad += int(np.sum(info.n_grad))
        if i in sweep:
            snaps[i] = state.position.copy()
    total = max(max(sweep), 1)
    return snaps, {"accept_stat": accept / total, "divergences": float(divergent),
                   "gradients": float(n_grad), "seconds": time.perf_counter() - t0}


def hyper_rhat(fitted: FitResult, hyper: Mapping) -> dict[str, float]:
    """Largest R-hat over the elements of each hyperparameter (names as Stan writes them, "tau[1]")."""
    index = fitted.summary.index.astype(str)
    out = {}
    for h in hyper:
        rows = (index == h) | index.str.startswith(f"{h}[")
        if rows.any():
            out[h] = float(fitted.summary.loc[rows, "r_hat"].max())
    return out


@dataclass(frozen=True)
class Context:
    """What every stage of one protocol run reads: its name, output folder (None: nothing
    saved), settings and kernel."""

    name: str
    out: Path | None
    sampler: SamplerSettings
    run: RunSettings
    settings: "ProtocolSettings"
    kernel: object
    verdict: VerdictSettings = VerdictSettings()   # the simulated data's verdict levels

    def seed(self, purpose: Purpose, *index: int) -> int:
        return derived_seed(self.run.seed, purpose, *index)


def real_fit(ctx: Context, target, inits) -> FitResult:
    """The NUTS fit on the real data (``target``), loaded from ``out/fit`` when saved
    there, else from ``inits(chains)`` (unconstrained starting points) and saved."""
    fit_dir = ctx.out / "fit" if ctx.out is not None else None
    fitted = None
    if fit_dir is not None:
        fitted = load_if_sound(fit_dir / "fit.npz", lambda path: FitResult.load(path.parent))
    fit_settings = ctx.settings.fit
    if fitted is not None:
        log.info("%s: fit loaded from %s", ctx.name, fit_dir)
    else:
        fitted = fit(target, inits(fit_settings.chains), settings=fit_settings,
                     seed=ctx.seed(Purpose.FIT))
        if fit_dir is not None:
            fitted.save(fit_dir)
    return fitted


def fitted_values(ctx: Context, fitted: FitResult, names) -> tuple[dict, dict[str, float]]:
    """The fitted values eta_hat of the parameters ``names`` (the posterior summary of
    ``ProtocolSettings.fit``) and their R-hat, with a warning above 1.1."""
    fit_settings = ctx.settings.fit
    hyper = fitted.hyperparameters(names, fit_settings.hyper_summary)
    rhat = hyper_rhat(fitted, hyper)
    if any(r > 1.1 for r in rhat.values()):
        # Only the hyperparameters matter here: label switching or rotations of
        # other parameters (mixtures, factorisations) inflate R-hat harmlessly.
        log.warning("%s: the fit's hyperparameters have R-hat %s (> 1.1); the fitted values "
                    "may be unreliable (longer warmup, more draws?)", ctx.name,
                    {h: round(r, 3) for h, r in rhat.items()})
    log.info("%s: fitted hyperparameters (posterior %s): %s", ctx.name,
             fit_settings.hyper_summary, {k: np.round(v, 4).tolist() for k, v in hyper.items()})
    return hyper, rhat


def previous_result(out: Path | None, header: dict) -> ProtocolResult | None:
    """The result saved in ``out`` by an earlier run with the same settings, if any."""
    if out is None:
        return None
    saved = load_if_sound(out / HEADER, load_json)
    if saved is None:
        return None
    check_resumable(out, saved.get("settings", {}), header)
    return ProtocolResult.load(out)


def carry_over(result: ProtocolResult, previous: ProtocolResult, ctx: Context) -> None:
    """Keep what a resumed run computed before, at the step counts, S values and
    replicates still asked for."""
    steps, settings = ctx.run.steps, ctx.settings
    result.sim.steps = [s for s in previous.sim.steps if s.n_steps in steps]
    result.real_forward = {T: d for T, d in previous.real_forward.items() if T in steps}
    result.reverse_sweep = {k: d for k, d in previous.reverse_sweep.items()
                            if k[0] in settings.s_sweep and k[1] in steps}
    result.replicate_forward = {
        k: {T: d for T, d in by_steps.items() if T in steps}
        for k, by_steps in previous.replicate_forward.items() if k <= settings.replicates}
    result.extra.update({k: v for k, v in previous.extra.items() if k not in result.extra})


def runs_missing(result: ProtocolResult, settings: "ProtocolSettings", T: int) -> int:
    """The runs of all chains still to make at T distributions: the simulated forward
    run, the reverse run of each S, the real data's forward run, each replicate's."""
    replicated = settings.replicate_max_steps is None or T <= settings.replicate_max_steps
    return (int(T not in {st.n_steps for st in result.sim.steps})
            + sum((S, T) not in result.reverse_sweep for S in settings.s_sweep)
            + int(T not in result.real_forward)
            + sum(replicated and T not in result.replicate_forward.get(k, {})
                  for k in range(1, settings.replicates + 1)))


def steps_within_budget(ctx: Context, result: ProtocolResult,
                        tuned_sim: TunedKernel) -> list[int]:
    """The step counts to run now (:func:`~.protocol_budget.steps_to_start`): the runs
    still missing at each T, at the simulated data's pilot pace of one transition of
    every chain."""
    return steps_to_start(ctx.run.steps, lambda T: runs_missing(result, ctx.settings, T),
                          tuned_sim.seconds_per_transition * ctx.run.chains
                          * ctx.sampler.steps_per_temperature, result.extra, ctx.name,
                          ctx.settings.budget_minutes)


def reverse_start_snapshots(ctx: Context, result: ProtocolResult, problem,
                             tuned_sim: TunedKernel) -> dict[int, np.ndarray]:
    """The reverse chains' starts of every S of the sweep (loaded when saved; computed
    and saved when the sweep holds a new S)."""
    s_sweep = ctx.settings.s_sweep
    starts_path = ctx.out / "reverse_starts.npz" if ctx.out is not None else None
    starts: dict[int, np.ndarray] = {}
    saved_starts = load_if_sound(starts_path, load_unit) if starts_path is not None else None
    if saved_starts is not None:
        starts = {int(k[1:]): v for k, v in saved_starts[0].items()}
    if not set(s_sweep) <= set(starts):
        # The snapshots are a deterministic function of the seed, so recomputing
        # for a larger sweep reproduces the saved ones.
        at_one = tuned_sim.schedule(np.array([0.0, 1.0])).params_at(1)
        starts, info = reverse_starts(problem.target, ctx.kernel, at_one, problem.x_star,
                                       ctx.run.chains, s_sweep,
                                       ctx.seed(Purpose.REVERSE_START))
        result.extra["reverse_start"] = info
        log.info("%s: reverse starts after S = %s transitions at beta = 1 (%.1f s, "
                 "acceptance %.2f)", ctx.name, list(s_sweep), info["seconds"],
                 info["accept_stat"])
        if starts_path is not None:
            save_unit(starts_path, {f"S{S}": v for S, v in starts.items()}, {})
    return starts


def simulated_step(ctx: Context, result: ProtocolResult, problem, tuned_sim: TunedKernel,
                    starts: dict[int, np.ndarray], T: int, betas, every, prior) -> None:
    """The simulated forward run and the reverse runs of the missing S at T
    distributions, in one batch per temperature, saved and put into ``result``."""
    out, settings = ctx.out, ctx.settings
    fwd_done = {st.n_steps: st for st in result.sim.steps}.get(T)
    missing = [S for S in settings.s_sweep if (S, T) not in result.reverse_sweep]
    chain_seed = ctx.seed(Purpose.CHAINS, T)
    groups = [] if fwd_done is not None else [engine.Group("forward", prior, chain_seed, 0)]
    # Stream 1 + S: a reverse chain's randomness depends on its S, not on the sweep.
    groups += [engine.Group("reverse", starts[S], chain_seed, 1 + S) for S in missing]
    if groups:
        runs = engine.anneal(problem.target, ctx.kernel,
                             tuned_sim.schedule(betas, ctx.sampler.steps_per_temperature),
                             groups, increments_every=every, progress=ctx.run.progress)
        if fwd_done is None:
            fwd = runs.pop(0)
            fwd_done = StepResult(T, fwd.to_direction_result(), None, betas,
                                  constrained(problem, fwd.final_positions))
        for S, r in zip(missing, runs):
            result.reverse_sweep[(S, T)] = r.to_direction_result()
            if out is not None:
                save_direction(out / "sweep" / f"reverse_S{S}_T{T}.npz",
                               result.reverse_sweep[(S, T)])
    step = StepResult(T, fwd_done.forward, result.reverse_sweep[(settings.s_main, T)],
                      betas, fwd_done.draws)
    result.sim.steps = [st for st in result.sim.steps if st.n_steps != T] + [step]
    if groups:
        if out is not None:
            result.sim.save_step(out / "sim", step)
        check = step.consistency()
        if not check.passed:
            log.warning("%s, simulated data, %d distributions: %s", ctx.name, T, check.message)
        log.info("%s: simulated data, T=%d: bound %.4g nats, %.1f s", ctx.name, T,
                 step.bound().estimate, step.wall_time)


def forward_only(ctx: Context, target, tuned: TunedKernel, seed: int, path: Path | None,
                  label: str, T: int, betas, every, prior) -> DirectionResult:
    """A forward run on its own (the real data's), saved to ``path``."""
    fwd = forward_run(target, ctx.kernel, tuned, betas, prior, seed, every,
                   ctx.sampler.steps_per_temperature, ctx.run.progress)
    done = fwd.to_direction_result()
    if path is not None:
        save_direction(path, done)
    log.info("%s: %s, T=%d: median forward estimate %.4g, %.1f s", ctx.name, label, T,
             float(np.median(fwd.log_estimates)), fwd.wall_time)
    return done

"""The real-data protocol (SPEC section 4): is simulated data a fair proxy for the real data?

Bounds are rigorous only on simulated data.  :func:`protocol` does, for one
model, simulator and real data set:

0. **Check** the simulator against the model
   (:func:`~bread_stan.workflows.simulator_check.check_simulator`, unless
   ``RunSettings.check_simulator`` is off; recorded in ``extra["simulator_check"]``).
1. **Fit**: NUTS on the real data (:mod:`bread_stan.workflows.fit`); the fitted
   hyperparameters eta_hat are the posterior medians of the simulator's
   ``*_given`` variables (``ProtocolSettings.fit.hyper_summary``).
2. **Simulate**: theta ~ p(theta | eta_hat), D_sim ~ p(D | eta_hat, theta), with
   the simulator's given-hyperparameters mode.
3. **Forward AIS** on D_sim and on D_real, both from exact draws of the *full*
   prior p(eta, theta) (the same prior draws for both, which pairs the curves),
   each with a kernel tuned along beta on its own data set on never-scored
   pilot chains and frozen.
4. **Reverse start**: from (eta_hat, theta), ``S`` transitions of the sampler's
   kernel tuned at beta = 1 on D_sim (frozen, so they leave p(eta, theta | D_sim)
   invariant), one independent chain per reverse AIS chain, snapshotted at
   every S of the sweep; reverse AIS on D_sim from each snapshot.
5. **Outputs**: (a) quartile curves of forward (real, simulated) and reverse
   (simulated) estimates against the number of distributions, each shifted by
   its largest forward estimate, with an :class:`Agreement` score and flag;
   (b) the :class:`SweepTest` of whether the reverse curves move with S;
   (c) the Jeffreys bound on D_sim against steps and wall time (a
   :class:`~bread_stan.ais.results.BreadResult` of the simulated data, forward
   chains with the reverse chains of the largest S).

Everything is saved as it finishes into ``out_dir`` and a rerun with the same
settings resumes (the fit, the tuned kernels, the reverse starts and each
number of distributions are reused); every random choice is a pure function
of ``run.seed`` and its purpose.

The agreement score is in :mod:`.agreement`, the S-sweep test in :mod:`.sweep`,
the result and its files in :mod:`.protocol_result`, the replicates in
:mod:`.protocol_replicates`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..ais import engine
from ..ais.results import BreadResult, DirectionResult, StepResult
from ..store import load_if_sound, load_json, load_unit, save_unit
from ..ais.tuning import TunedKernel
from ..kernels.base import initial_state
from ..rng import ChainRandom, Purpose, Stream, derived_seed
from ..stan.data import load_data
from ..parallel.executor import Executor
from ..stan.simulator import Simulator, compile_with_simulator, draw_at, split_draw
from ..stan.tempered import StanTarget
from .common import (check_program, check_resumable, default_name, fingerprints,
                     output_directory, program_text, setup_warnings, warn_if_costly)
from .problem import constrained, prior_draws, simulate_problem
from .settings import RunSettings, SamplerSettings
from .data_check import data_check
from .fit import FitResult, FitSettings, fit
from .simulator_check import CheckSettings, SimulatorCheck, check_simulator
from .protocol_result import (
    HEADER,
    ProtocolResult,
    save_direction,
    write_header,
)
from ..errors import InputError
from .auto_path import prior_path_only
from .programs import attach, prepared
from .protocol_replicates import forward_run, run_replicates, tuned_kernel

__all__ = ["ProtocolSettings", "protocol"]

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class ProtocolSettings:
    """The protocol's own settings (the AIS runs use SamplerSettings / RunSettings).

    ``s_sweep``: numbers of beta = 1 transitions from (eta_hat, theta) before
    reverse AIS; the curves (a) and the bound (c) use the largest.
    ``replicates``: further simulated data sets whose forward curves make the
    agreement score's reference band (each costs one forward AIS run per T up
    to ``replicate_max_steps``, None for all, and one tuning); 0 turns the
    score off.  ``agreement_*``: see the module docstring.
    """

    s_sweep: tuple[int, ...] = (10, 100, 1000, 10000)
    fit: FitSettings = field(default_factory=FitSettings)
    replicates: int = 5
    replicate_max_steps: int | None = None
    agreement_threshold: float = 0.1
    agreement_alpha: float = 0.05
    agreement_floor: float = 1.0
    sweep_alpha: float = 0.01
    sweep_tolerance: float = 0.1
    sweep_floor: float = 0.5
    data_check_draws: int = 1000
    data_check_alpha: float = 0.05

    def __post_init__(self):
        sweep = tuple(sorted(set(int(s) for s in self.s_sweep)))
        if not sweep or min(sweep) < 0:
            raise InputError("s_sweep must be non-negative numbers of transitions")
        object.__setattr__(self, "s_sweep", sweep)
        if self.replicates < 0:
            raise InputError("replicates must be >= 0 (the agreement score needs >= 1, "
                             "and is well calibrated from about 4)")
        if self.replicate_max_steps is not None and self.replicate_max_steps < 1:
            raise InputError("replicate_max_steps must be a positive number of distributions "
                             "(or None for all)")
        if not 0 < self.agreement_alpha < 1:
            raise InputError("agreement_alpha must lie in (0, 1)")
        if self.data_check_draws < 100:
            raise InputError("data_check_draws must be at least 100 (the data check's "
                             "smallest p-value is 2 / (draws + 1))")
        if not 0 < self.data_check_alpha < 1:
            raise InputError("data_check_alpha must lie in (0, 1)")

    @property
    def s_main(self) -> int:
        return self.s_sweep[-1]


# The workflow.

def _reverse_starts(target: StanTarget, kernel, params, x_star: np.ndarray, n: int,
                    sweep: tuple[int, ...], seed: int) -> tuple[dict[int, np.ndarray], dict]:
    """Snapshots after S transitions at beta = 1 of n chains started at ``x_star``."""
    rng = ChainRandom.from_seed(seed, n, stream=Stream.REVERSE_START)
    state = initial_state(target, np.repeat(x_star[None, :], n, axis=0), gradient=True)
    beta = np.ones(n)
    snaps = {0: state.position.copy()} if 0 in sweep else {}
    accept, divergent, n_grad = 0.0, 0, 0
    t0 = time.perf_counter()
    for i in range(1, max(sweep) + 1):
        state, info = kernel.step(rng, state, target, beta, params)
        accept += float(np.nanmean(info.accept_stat))
        divergent += int(np.sum(info.divergent))
        n_grad += int(np.sum(info.n_grad))
        if i in sweep:
            snaps[i] = state.position.copy()
    total = max(max(sweep), 1)
    return snaps, {"accept_stat": accept / total, "divergences": float(divergent),
                   "gradients": float(n_grad), "seconds": time.perf_counter() - t0}


def _prior_unconstrained(target: StanTarget, simulator: Simulator, n: int, seed: int
                         ) -> np.ndarray:
    """Unconstrained exact draws of the full prior (hyperparameters drawn too)."""
    params, _ = split_draw(simulator.simulate(n, seed), target.compiled)
    return target.param_unconstrain_batch(params)


def _hyper_rhat(fitted: FitResult, hyper: Mapping) -> dict[str, float]:
    """Largest R-hat over the elements of each hyperparameter (names as Stan writes them, "tau[1]")."""
    index = fitted.summary.index.astype(str)
    out = {}
    for h in hyper:
        rows = (index == h) | index.str.startswith(f"{h}[")
        if rows.any():
            out[h] = float(fitted.summary.loc[rows, "r_hat"].max())
    return out


def _header(name, model, simulator, data, sampler, run, settings) -> dict:
    scored = run.scored()
    pset = asdict(settings)
    pset["s_sweep"] = list(settings.s_sweep)
    # Only what changes numbers already computed: the sweep, the step counts and the
    # replicates may grow on resume, and the agreement / sweep-test thresholds act at
    # analysis time.
    fingerprint, parts = fingerprints(
        kind="protocol", model=program_text(model), simulator=program_text(simulator),
        data={k: np.asarray(v).tolist() for k, v in data.items()}, sampler=asdict(sampler),
        tuning=sampler.tuning_fingerprint(), run=scored, fit=pset["fit"])
    return {"model": name, "fingerprint": fingerprint, "fingerprints": parts,
            "steps": list(run.steps), "fit": pset["fit"],
            "sampler": asdict(sampler), "run": {**scored, "schedule": asdict(run.schedule)},
            "protocol": pset}


def protocol(model, simulator=None, real_data=None, *, sampler: SamplerSettings = SamplerSettings(),
             run: RunSettings = RunSettings(), settings: ProtocolSettings = ProtocolSettings(),
             out_dir: str | Path | None = None, name: str | None = None,
             executor: Executor | None = None,
             likelihood: str | Sequence[str] | None = None) -> ProtocolResult:
    """Run the real-data protocol of SPEC section 4 (see the module docstring).

    ``model`` is a Stan program as it is (path, text or ``cmdstanpy.CmdStanModel``),
    split and given a drafted simulator when it has no ``prior_only`` or no
    ``simulator`` is given, as :func:`bread_stan.bread` does (``likelihood``; the
    programs in ``out_dir/programs`` and ``extra["programs"]``); a given simulator
    follows ``stan_models/README.md`` with the given-hyperparameters inputs.  ``real_data`` is the model's data (dict or JSON path).  With
    ``out_dir`` every finished part is saved at once and a rerun with the same
    settings resumes; adding step counts or S values to a finished run only
    computes what is new (the reverse starts are snapshots of one seeded chain
    per reverse chain, so a longer sweep reproduces the saved snapshots).

    Wall time in the bound against seconds (c): the simulated forward chains and
    the reverse chains of every S share one batch per temperature; each group is
    charged its share of the batch's time in proportion to its gradients, so a
    step's time is what one forward plus one reverse run cost.

    ``executor`` (:class:`~bread_stan.parallel.executor.Executor`) runs the
    replicates on a Dask cluster, one whole replicate (simulation, tuning, its
    forward runs) per task, each saved as it arrives: the same numbers as locally.
    """
    sampler, run = prior_path_only(sampler, run, "protocol")
    check_program("model", model)
    if simulator is not None:
        check_program("simulator", simulator)
    if run.algorithm != "ais":
        raise InputError("the real-data protocol runs AIS only; use RunSettings(algorithm="
                         "'ais') here (SMC runs under bread, compare and subjective)")
    out = Path(out_dir) if out_dir is not None else None
    name = name or default_name(model)
    with output_directory(out), prepared([model], simulator, out, [name],
                                         likelihood) as programs:
        result = _protocol(programs.models[0], programs.simulator, real_data, sampler, run,
                           settings, out, name, executor)
        attach(result, programs.records[name], out, lambda where: write_header(where, result))
        return result


@dataclass(frozen=True)
class _Context:
    """What every stage of one protocol run reads: its name, output folder (None: nothing
    saved), settings and kernel."""

    name: str
    out: Path | None
    sampler: SamplerSettings
    run: RunSettings
    settings: ProtocolSettings
    kernel: object

    def seed(self, purpose: Purpose, *index: int) -> int:
        return derived_seed(self.run.seed, purpose, *index)


def _protocol(model, simulator, real_data, sampler: SamplerSettings, run: RunSettings,
              settings: ProtocolSettings, out: Path | None, name: str | None,
              executor: Executor | None = None) -> ProtocolResult:
    data = load_data(real_data)
    name = name or default_name(model)
    header = _header(name, model, simulator, data, sampler, run, settings)
    previous = _previous(out, header)
    (compiled,), sim_compiled = compile_with_simulator([model], simulator)
    kernel, base = sampler.make()
    ctx = _Context(name, out, sampler, run, settings, kernel)
    prior_sim = Simulator(sim_compiled, data, threads=run.threads)
    real_target = StanTarget(compiled, data, threads=run.threads)
    # 0. The simulator check, before anything expensive (its own pilot tuning).
    if run.check_simulator:
        simulator_check = check_simulator(
            compiled, prior_sim, data, sampler=sampler, threads=run.threads,
            settings=CheckSettings(seed=ctx.seed(Purpose.PROTOCOL_CHECK))).to_dict()
    else:
        simulator_check = SimulatorCheck.skipped().to_dict()
    # 1. Fit on the real data.
    fitted, hyper, hyper_rhat = _fit_real(ctx, real_target, prior_sim)
    # 2. Simulate with the fitted hyperparameters.
    problem, extra = _simulate_at_fit(ctx, model, compiled, sim_compiled, data, hyper)
    extra.update({"truth": problem.truth, "fit_sampler": fitted.sampler,
                  "fit_max_rhat": fitted.max_rhat, "fit_min_ess_bulk": fitted.min_ess_bulk,
                  "fit_hyper_rhat": hyper_rhat, "hyper_summary": settings.fit.hyper_summary,
                  "simulator_check": simulator_check})
    sim = BreadResult(name, header, [], {"truth": problem.truth, "known_log_ml_bounds": {},
                                         "simulator_check": simulator_check})
    result = ProtocolResult(name, header, fitted, hyper, sim, {}, {}, extra)
    if previous is not None:
        _carry_over(result, previous, ctx)
    result.extra["executor"] = (executor or Executor()).describe()
    if out is not None:
        write_header(out, result)
    # 3. Kernels tuned along beta on each data set (pilot chains from the full prior).
    pilot, tuned_sim, tuned_real = _tune_both(ctx, result, problem, real_target, prior_sim,
                                              base)
    # 4. Reverse starts: S frozen beta = 1 transitions from (eta_hat, theta) on D_sim.
    starts = _reverse_start_snapshots(ctx, result, problem, tuned_sim)
    if out is not None:
        write_header(out, result)
        result.sim.save_header(out / "sim")

    def step_inputs(T: int):
        """The betas, increment thinning and forward prior draws of T distributions."""
        every = (None if run.increment_blocks is None
                 else max(1, math.ceil((T - 1) / run.increment_blocks)))
        return (run.schedule.lazy(T, tuned_sim), every,
                prior_draws(problem, prior_sim, run.chains, ctx.seed(Purpose.PRIOR, T)))

    run_replicates(executor or Executor(), result, out, name, compiled, sim_compiled, data,
                   hyper, run, sampler, settings, pilot, step_inputs)
    # 5. AIS for each number of distributions.
    for T in run.steps:
        betas, every, prior = step_inputs(T)
        _simulated_step(ctx, result, problem, tuned_sim, starts, T, betas, every, prior)
        if T not in result.real_forward:
            result.real_forward[T] = _forward_only(
                ctx, real_target, tuned_real, ctx.seed(Purpose.REAL_CHAINS, T),
                out / "real" / f"forward_{T}.npz" if out is not None else None, "real data",
                T, betas, every, prior)
    result.sim.steps.sort(key=lambda s: s.n_steps)
    if out is not None:
        result.save(out)
    for problem_text in result.problems():
        log.warning("%s: %s", name, problem_text)
    return result


def _previous(out: Path | None, header: dict) -> ProtocolResult | None:
    """The result saved in ``out`` by an earlier run with the same settings, if any."""
    if out is None:
        return None
    saved = load_if_sound(out / HEADER, load_json)
    if saved is None:
        return None
    check_resumable(out, saved.get("settings", {}), header)
    return ProtocolResult.load(out)


def _fit_real(ctx: _Context, real_target: StanTarget, prior_sim: Simulator
              ) -> tuple[FitResult, dict, dict[str, float]]:
    """The fit on the real data (loaded when saved), its hyperparameters eta_hat and
    their R-hat."""
    fit_dir = ctx.out / "fit" if ctx.out is not None else None
    fitted = None
    if fit_dir is not None:
        fitted = load_if_sound(fit_dir / "fit.npz", lambda path: FitResult.load(path.parent))
    fit_settings = ctx.settings.fit
    if fitted is not None:
        log.info("%s: fit loaded from %s", ctx.name, fit_dir)
    else:
        inits = _prior_unconstrained(real_target, prior_sim, fit_settings.chains,
                                     ctx.seed(Purpose.FIT_INIT))
        fitted = fit(real_target, inits, settings=fit_settings, seed=ctx.seed(Purpose.FIT))
        if fit_dir is not None:
            fitted.save(fit_dir)
    hyper = fitted.hyperparameters(prior_sim.hyperparameters, fit_settings.hyper_summary)
    hyper_rhat = _hyper_rhat(fitted, hyper)
    if any(r > 1.1 for r in hyper_rhat.values()):
        # Only the hyperparameters matter here: label switching or rotations of
        # other parameters (mixtures, factorisations) inflate R-hat harmlessly.
        log.warning("%s: the fit's hyperparameters have R-hat %s (> 1.1); the fitted values "
                    "may be unreliable (longer warmup, more draws?)", ctx.name,
                    {h: round(r, 3) for h, r in hyper_rhat.items()})
    log.info("%s: fitted hyperparameters (posterior %s): %s", ctx.name,
             fit_settings.hyper_summary, {k: np.round(v, 4).tolist() for k, v in hyper.items()})
    return fitted, hyper, hyper_rhat


def _simulate_at_fit(ctx: _Context, model, compiled, sim_compiled, data, hyper):
    """The simulated problem (theta and D_sim drawn with eta_hat), and the result's extra
    entries of the simulated data and of its check against the real data."""
    run = ctx.run
    fixed_sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
    truth = draw_at(fixed_sim.simulate(1, ctx.seed(Purpose.TRUTH)), 0)
    _, overrides = split_draw(truth, compiled)
    problem = simulate_problem(ctx.name + " (simulated)", model, fixed_sim, data, run.seed,
                               run.threads, truth)
    # Do data simulated at eta_hat look like the real data at all?
    simulated = fixed_sim.simulate(ctx.settings.data_check_draws,
                                   ctx.seed(Purpose.DATA_CHECK))
    checked = data_check(data, {k: simulated[k] for k in overrides},
                         alpha=ctx.settings.data_check_alpha)
    (log.info if checked.passed else log.warning)("%s: %s", ctx.name, checked.message)
    return problem, {"simulated_data": {k: np.asarray(v).tolist()
                                        for k, v in overrides.items()},
                     "data_check": checked.to_dict()}


def _carry_over(result: ProtocolResult, previous: ProtocolResult, ctx: _Context) -> None:
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


def _tune_both(ctx: _Context, result: ProtocolResult, problem, real_target, prior_sim, base
               ) -> tuple[np.ndarray, TunedKernel, TunedKernel]:
    """The pilot draws and the kernels tuned along beta on the simulated and the real
    data (loaded when saved), their setup warnings recorded in ``result``."""
    out, sampler, run, name = ctx.out, ctx.sampler, ctx.run, ctx.name
    t0 = time.perf_counter()
    pilot = prior_draws(problem, prior_sim, sampler.pilot_chains, ctx.seed(Purpose.PILOT))
    tuned_sim = tuned_kernel(out / "tuning_sim.json" if out else None, problem.target,
                             ctx.kernel, base, pilot, ctx.seed(Purpose.PILOT), sampler,
                             run.progress)
    tuned_real = tuned_kernel(out / "tuning_real.json" if out else None, real_target,
                              ctx.kernel, base, pilot, ctx.seed(Purpose.REAL_PILOT), sampler,
                              run.progress)
    result.extra.setdefault("tuning_seconds", time.perf_counter() - t0)
    result.sim.extra["tuning"] = tuned_sim.to_dict()
    setup_warnings(result.sim.extra, tuned_sim, name + " (simulated)")
    setup_warnings(result.extra, tuned_real, name + " (real data)")
    # Per T: simulated forward, one reverse run per S, real forward, the replicates.
    warn_if_costly(name, tuned_sim, list(run.steps), sampler.steps_per_temperature * run.chains
                   * (2 + len(ctx.settings.s_sweep) + ctx.settings.replicates),
                   problem.target.dim)
    return pilot, tuned_sim, tuned_real


def _reverse_start_snapshots(ctx: _Context, result: ProtocolResult, problem,
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
        starts, info = _reverse_starts(problem.target, ctx.kernel, at_one, problem.x_star,
                                       ctx.run.chains, s_sweep,
                                       ctx.seed(Purpose.REVERSE_START))
        result.extra["reverse_start"] = info
        log.info("%s: reverse starts after S = %s transitions at beta = 1 (%.1f s, "
                 "acceptance %.2f)", ctx.name, list(s_sweep), info["seconds"],
                 info["accept_stat"])
        if starts_path is not None:
            save_unit(starts_path, {f"S{S}": v for S, v in starts.items()}, {})
    return starts


def _simulated_step(ctx: _Context, result: ProtocolResult, problem, tuned_sim: TunedKernel,
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


def _forward_only(ctx: _Context, target, tuned: TunedKernel, seed: int, path: Path | None,
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

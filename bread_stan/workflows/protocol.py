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
the result and its files in :mod:`.protocol_result`.
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
from ..stan.compile import CompiledModel
from ..stan.simulator import Simulator, compile_with_simulator, draw_at, split_draw
from ..stan.tempered import StanTarget
from .common import (check_program, check_resumable, default_name, fingerprints, load_or_tune,
                     output_directory, program_text, setup_warnings, warn_if_costly)
from .problem import constrained, prior_draws, simulate_problem
from .settings import RunSettings, SamplerSettings
from .data_check import data_check
from .fit import FitResult, FitSettings, fit
from .simulator_check import CheckSettings, SimulatorCheck, check_simulator
from .protocol_result import (
    HEADER,
    ProtocolResult,
    replicate_path,
    save_direction,
    write_header,
)
from ..errors import InputError
from .auto_path import prior_path_only
from .programs import attach, prepared

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


def _tuned(path: Path | None, target, kernel, base, pilot, seed, sampler,
           progress: bool = False) -> TunedKernel:
    return load_or_tune(path, target, kernel, base, sampler.tuning_config(), seed,
                        lambda _: pilot, progress=progress)[0]


def _replicate_problem(name: str, model, fixed_sim: Simulator, data: Mapping, seed: int,
                       threads, k: int):
    """The k-th replicate: a fresh (theta, data) drawn with the fitted hyperparameters."""
    truth_k = draw_at(fixed_sim.simulate(1, derived_seed(seed, Purpose.REPLICATE_TRUTH, k)), 0)
    return simulate_problem(f"{name} (replicate {k})", model, fixed_sim, data, seed,
                             threads, truth_k)


def _forward(target, kernel, tuned: TunedKernel, betas, prior, seed: int, every,
             steps_per_temperature: int, progress: bool) -> engine.AISRun:
    """Forward AIS of the protocol's forward-only runs (real data, replicates)."""
    return engine.anneal(target, kernel, tuned.schedule(betas, steps_per_temperature),
                          [engine.Group("forward", prior, seed, 0)],
                          increments_every=every, progress=progress)[0]


@dataclass(frozen=True)
class _ReplicateJob:
    """One whole replicate, one task: its data set, tuning (unless ``tuned`` was
    saved) and forward runs at ``steps`` (T -> betas, thinning, prior draws); with
    ``out`` (a task run in this process) the tuning and each forward run are saved
    there as they finish."""

    name: str
    model: CompiledModel
    simulator: CompiledModel
    data: dict
    hyper: dict
    seed: int
    k: int
    sampler: SamplerSettings
    pilot: np.ndarray
    tuned: TunedKernel | None
    steps: dict
    out: Path | None = None
    threads: int | None = 1
    progress: bool = False
    replicates: int = 0


def _run_replicate(job: _ReplicateJob) -> tuple[dict, dict[int, DirectionResult]]:
    """Run one replicate (on a worker: threads 1, nothing saved): its tuned kernel (as
    a dict) and forward results."""
    fixed_sim = Simulator(job.simulator, job.data, hyper=job.hyper, threads=job.threads)
    problem_k = _replicate_problem(job.name, job.model, fixed_sim, job.data, job.seed,
                                   job.threads, job.k)
    kernel, base = job.sampler.make()
    path = None
    if job.out is not None:
        (job.out / "replicates").mkdir(parents=True, exist_ok=True)
        path = job.out / "replicates" / f"tuning_r{job.k}.json"
    tuned = job.tuned or _tuned(path, problem_k.target, kernel, base, job.pilot,
                                derived_seed(job.seed, Purpose.REPLICATE_PILOT, job.k),
                                job.sampler, job.progress)
    forward = {}
    for T, (betas, every, prior) in job.steps.items():
        fwd = _forward(problem_k.target, kernel, tuned, betas, prior,
                       derived_seed(job.seed, Purpose.REPLICATE_CHAINS, job.k, T), every,
                       job.sampler.steps_per_temperature, job.progress)
        forward[T] = fwd.to_direction_result()
        if job.out is not None:
            save_direction(replicate_path(job.out, job.k, T), forward[T])
            log.info("%s: replicate %d of %d, T=%d: median forward estimate %.4g, %.1f s",
                     job.name, job.k, job.replicates, T, float(np.median(fwd.log_estimates)),
                     fwd.wall_time)
    return tuned.to_dict(), forward


def _run_replicates(executor: Executor, result: ProtocolResult, out: Path | None,
                    name: str, compiled, sim_compiled, data, hyper, run: RunSettings,
                    sampler: SamplerSettings, settings: ProtocolSettings, pilot,
                    step_inputs) -> None:
    """Run the missing replicates on ``executor``, one task each.  A task run in this
    process saves its tuning and each forward run as it finishes (threads and progress
    as the run's); one sent to a cluster is saved as it arrives."""
    here = executor.in_process
    steps = [T for T in run.steps
             if settings.replicate_max_steps is None or T <= settings.replicate_max_steps]
    tasks, inputs = {}, {}
    for k in range(1, settings.replicates + 1):
        missing = [T for T in steps if T not in result.replicate_forward.get(k, {})]
        if not missing:
            continue
        for T in missing:
            if T not in inputs:
                inputs[T] = step_inputs(T)  # the same for every replicate
        path = out / "replicates" / f"tuning_r{k}.json" if out is not None else None
        tuned = load_if_sound(path, TunedKernel.load) if path is not None else None
        tasks[f"replicate-{k}"] = (_ReplicateJob(
            name, compiled, sim_compiled, dict(data), dict(hyper), run.seed, k, sampler, pilot,
            tuned, {T: inputs[T] for T in missing}, out if here else None,
            run.threads if here else 1, run.progress and here, settings.replicates),)

    def arrived(key: str, value) -> None:
        k = int(key.rsplit("-", 1)[1])
        tuned, forward = value
        result.replicate_forward.setdefault(k, {}).update(forward)
        if out is not None and not here:
            (out / "replicates").mkdir(parents=True, exist_ok=True)
            TunedKernel.from_dict(tuned).save(out / "replicates" / f"tuning_r{k}.json")
            for T, done in forward.items():
                save_direction(replicate_path(out, k, T), done)
        log.info("%s: replicate %d of %d done (%s)", name, k, settings.replicates,
                 executor.describe()["kind"])

    executor.run(_run_replicate, tasks, arrived, progress=run.progress,
                 saved_in=str(out / "replicates") if out is not None else None)


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


def _protocol(model, simulator, real_data, sampler: SamplerSettings, run: RunSettings,
              settings: ProtocolSettings, out: Path | None, name: str | None,
              executor: Executor | None = None) -> ProtocolResult:
    data = load_data(real_data)
    name = name or default_name(model)
    header = _header(name, model, simulator, data, sampler, run, settings)
    previous = None
    if out is not None:
        saved = load_if_sound(out / HEADER, load_json)
        if saved is not None:
            check_resumable(out, saved.get("settings", {}), header)
            previous = ProtocolResult.load(out)

    (compiled,), sim_compiled = compile_with_simulator([model], simulator)
    kernel, base = sampler.make()
    prior_sim = Simulator(sim_compiled, data, threads=run.threads)
    real_target = StanTarget(compiled, data, threads=run.threads)
    # 0. The simulator check, before anything expensive (its own pilot tuning).
    if run.check_simulator:
        simulator_check = check_simulator(
            compiled, prior_sim, data, sampler=sampler, threads=run.threads,
            settings=CheckSettings(seed=derived_seed(run.seed, Purpose.PROTOCOL_CHECK))).to_dict()
    else:
        simulator_check = SimulatorCheck.skipped().to_dict()

    # 1. Fit on the real data.
    fit_dir = out / "fit" if out is not None else None
    fitted = None
    if fit_dir is not None:
        fitted = load_if_sound(fit_dir / "fit.npz", lambda path: FitResult.load(path.parent))
    if fitted is not None:
        log.info("%s: fit loaded from %s", name, fit_dir)
    else:
        inits = _prior_unconstrained(real_target, prior_sim, settings.fit.chains,
                                     derived_seed(run.seed, Purpose.FIT_INIT))
        fitted = fit(real_target, inits, settings=settings.fit,
                     seed=derived_seed(run.seed, Purpose.FIT))
        if fit_dir is not None:
            fitted.save(fit_dir)
    hyper = fitted.hyperparameters(prior_sim.hyperparameters, settings.fit.hyper_summary)
    hyper_rhat = _hyper_rhat(fitted, hyper)
    if any(r > 1.1 for r in hyper_rhat.values()):
        # Only the hyperparameters matter here: label switching or rotations of
        # other parameters (mixtures, factorisations) inflate R-hat harmlessly.
        log.warning("%s: the fit's hyperparameters have R-hat %s (> 1.1); the fitted values "
                    "may be unreliable (longer warmup, more draws?)", name,
                    {h: round(r, 3) for h, r in hyper_rhat.items()})
    log.info("%s: fitted hyperparameters (posterior %s): %s", name,
             settings.fit.hyper_summary, {k: np.round(v, 4).tolist() for k, v in hyper.items()})

    # 2. Simulate with the fitted hyperparameters.
    fixed_sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
    truth = draw_at(fixed_sim.simulate(1, derived_seed(run.seed, Purpose.TRUTH)), 0)
    _, overrides = split_draw(truth, compiled)
    problem = simulate_problem(name + " (simulated)", model, fixed_sim, data, run.seed,
                                run.threads, truth)

    # Do data simulated at eta_hat look like the real data at all?
    simulated = fixed_sim.simulate(settings.data_check_draws,
                                   derived_seed(run.seed, Purpose.DATA_CHECK))
    checked = data_check(data, {k: simulated[k] for k in overrides},
                         alpha=settings.data_check_alpha)
    (log.info if checked.passed else log.warning)("%s: %s", name, checked.message)

    extra = {"simulated_data": {k: np.asarray(v).tolist() for k, v in overrides.items()},
             "data_check": checked.to_dict(),
             "truth": problem.truth, "fit_sampler": fitted.sampler,
             "fit_max_rhat": fitted.max_rhat, "fit_min_ess_bulk": fitted.min_ess_bulk,
             "fit_hyper_rhat": hyper_rhat,
             "hyper_summary": settings.fit.hyper_summary, "simulator_check": simulator_check}
    sim = BreadResult(name, header, [], {"truth": problem.truth, "known_log_ml_bounds": {},
                                         "simulator_check": simulator_check})
    result = ProtocolResult(name, header, fitted, hyper, sim, {}, {}, extra)
    if previous is not None:
        result.sim.steps = [s for s in previous.sim.steps if s.n_steps in run.steps]
        result.real_forward = {T: d for T, d in previous.real_forward.items() if T in run.steps}
        result.reverse_sweep = {k: d for k, d in previous.reverse_sweep.items()
                                if k[0] in settings.s_sweep and k[1] in run.steps}
        result.replicate_forward = {
            k: {T: d for T, d in by_steps.items() if T in run.steps}
            for k, by_steps in previous.replicate_forward.items() if k <= settings.replicates}
        result.extra.update({k: v for k, v in previous.extra.items() if k not in extra})
    result.extra["executor"] = (executor or Executor()).describe()
    if out is not None:
        write_header(out, result)

    # 3. Kernels tuned along beta on each data set (pilot chains from the full prior).
    t0 = time.perf_counter()
    pilot = prior_draws(problem, prior_sim, sampler.pilot_chains,
                         derived_seed(run.seed, Purpose.PILOT))
    tuned_sim = _tuned(out / "tuning_sim.json" if out else None, problem.target, kernel, base,
                       pilot, derived_seed(run.seed, Purpose.PILOT), sampler, run.progress)
    tuned_real = _tuned(out / "tuning_real.json" if out else None, real_target, kernel, base,
                        pilot, derived_seed(run.seed, Purpose.REAL_PILOT), sampler, run.progress)
    result.extra.setdefault("tuning_seconds", time.perf_counter() - t0)
    result.sim.extra["tuning"] = tuned_sim.to_dict()
    setup_warnings(result.sim.extra, tuned_sim, name + " (simulated)")
    setup_warnings(result.extra, tuned_real, name + " (real data)")
    # Per T: simulated forward, one reverse run per S, real forward, the replicates.
    warn_if_costly(name, tuned_sim, list(run.steps), sampler.steps_per_temperature * run.chains
                   * (2 + len(settings.s_sweep) + settings.replicates), problem.target.dim)

    # 4. Reverse starts: S frozen beta = 1 transitions from (eta_hat, theta) on D_sim.
    starts_path = out / "reverse_starts.npz" if out is not None else None
    starts: dict[int, np.ndarray] = {}
    saved_starts = load_if_sound(starts_path, load_unit) if starts_path is not None else None
    if saved_starts is not None:
        starts = {int(k[1:]): v for k, v in saved_starts[0].items()}
    if not set(settings.s_sweep) <= set(starts):
        # The snapshots are a deterministic function of the seed, so recomputing
        # for a larger sweep reproduces the saved ones.
        at_one = tuned_sim.schedule(np.array([0.0, 1.0])).params_at(1)
        starts, info = _reverse_starts(problem.target, kernel, at_one, problem.x_star,
                                       run.chains, settings.s_sweep,
                                       derived_seed(run.seed, Purpose.REVERSE_START))
        result.extra["reverse_start"] = info
        log.info("%s: reverse starts after S = %s transitions at beta = 1 (%.1f s, "
                 "acceptance %.2f)", name, list(settings.s_sweep), info["seconds"],
                 info["accept_stat"])
        if starts_path is not None:
            save_unit(starts_path, {f"S{S}": v for S, v in starts.items()}, {})
    if out is not None:
        write_header(out, result)
        result.sim.save_header(out / "sim")

    def step_inputs(T: int):
        """The betas, increment thinning and forward prior draws of T distributions."""
        every = (None if run.increment_blocks is None
                 else max(1, math.ceil((T - 1) / run.increment_blocks)))
        return (run.schedule.lazy(T, tuned_sim), every,
                prior_draws(problem, prior_sim, run.chains,
                             derived_seed(run.seed, Purpose.PRIOR, T)))

    _run_replicates(executor or Executor(), result, out, name, compiled, sim_compiled, data,
                    hyper, run, sampler, settings, pilot, step_inputs)

    # 5. AIS for each number of distributions.
    for T in run.steps:
        betas, every, prior = step_inputs(T)
        fwd_done = {st.n_steps: st for st in result.sim.steps}.get(T)
        missing = [S for S in settings.s_sweep if (S, T) not in result.reverse_sweep]
        chain_seed = derived_seed(run.seed, Purpose.CHAINS, T)
        groups = [] if fwd_done is not None else [engine.Group("forward", prior, chain_seed, 0)]
        # Stream 1 + S: a reverse chain's randomness depends on its S, not on the sweep.
        groups += [engine.Group("reverse", starts[S], chain_seed, 1 + S) for S in missing]
        if groups:
            runs = engine.anneal(problem.target, kernel,
                               tuned_sim.schedule(betas, sampler.steps_per_temperature), groups,
                               increments_every=every, progress=run.progress)
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
                log.warning("%s, simulated data, %d distributions: %s", name, T, check.message)
            log.info("%s: simulated data, T=%d: bound %.4g nats, %.1f s", name, T,
                     step.bound().estimate, step.wall_time)
        def forward_only(target, tuned: TunedKernel, seed: int, path: Path | None,
                         label: str) -> DirectionResult:
            fwd = _forward(target, kernel, tuned, betas, prior, seed, every,
                           sampler.steps_per_temperature, run.progress)
            done = fwd.to_direction_result()
            if path is not None:
                save_direction(path, done)
            log.info("%s: %s, T=%d: median forward estimate %.4g, %.1f s", name, label, T,
                     float(np.median(fwd.log_estimates)), fwd.wall_time)
            return done

        if T not in result.real_forward:
            result.real_forward[T] = forward_only(
                real_target, tuned_real, derived_seed(run.seed, Purpose.REAL_CHAINS, T),
                out / "real" / f"forward_{T}.npz" if out is not None else None, "real data")
    result.sim.steps.sort(key=lambda s: s.n_steps)
    if out is not None:
        result.save(out)
    for problem_text in result.problems():
        log.warning("%s: %s", name, problem_text)
    return result

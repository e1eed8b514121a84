"""BREAD on a Stan model: simulate, tune, run AIS both ways, bound the divergence.

:func:`bread` is the one call a user makes (SPEC sections 2 and 3):

1. simulate one exact draw (x*, y*) from the simulator program;
2. build the model's target on y* (``prior_only`` split);
3. tune the kernel on pilot chains started from prior draws that are never scored,
   and freeze it;
4. check the simulator against the model with that frozen kernel
   (:func:`~bread_stan.workflows.simulator_check.check_simulator`; recorded in
   ``extra["simulator_check"]``, skipped with ``RunSettings(check_simulator=False)``);
5. for each number of distributions T, run forward AIS from fresh exact prior
   draws and reverse AIS from x*, and save the step as soon as it finishes.

:func:`compare` runs :func:`bread` on several programs of one model that share
one simulated data set and one exact posterior draw (names are matched, so the
collapsed program simply ignores the variables it integrates out).

Every random choice derives from ``seed`` and the purpose (truth, pilot, the
prior draws and chains of each T), never from the order in which step counts run,
so an interrupted run resumed later gives the numbers of an uninterrupted one.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..ais import engine, smc
from ..ais.budget import naming_least_steps, naming_steps, path_length, run_within_budget
from ..ais.gaussian_path import tune_prior_end
from ..ais.path_kinds import kind
from ..ais.run_directory import RunDirectory
from ..ais.betas import ScheduleError
from ..ais.results import BreadResult, StepResult
from ..ais.tuning import TunedKernel
from ..ais.verdict import VerdictSettings
from ..parallel.executor import Executor
from ..parallel.shards import ShardContext
from ..rng import Purpose, derived_seed
from ..stan.compile import CompiledModel
from ..stan.data import load_data
from ..stan.simulator import Simulator, compile_with_simulator, draw_at
from ..parallel.steps import run_steps_in_shards
from .common import (ResumeMismatchError, check_known_bounds, check_program, default_name,
                     fingerprints, output_directory, program_text, resume_steps,
                     setup_warnings, warn_if_costly)
from .problem import (Problem, join_problems, largest_simulated_value, pilot_draws,
                      prior_starts, problem_seed, simulate_problem)
from .settings import RunSettings, SamplerSettings
from .auto_path import Resolution, pilot_inputs, resolve_path
from .saved_choice import settle
from .lean_pilot import lean_settings
from .programs import attach, prepared
from ..ais.path_choice import PathChoice, given
from .simulator_check import (CheckDraws, CheckSettings, SimulatorCheck, check_simulator,
                              simulate_check_draws)
from ..deadline import OverBudget, set_up_by
from ..errors import BreadStanError, InputError

__all__ = ["SamplerSettings", "RunSettings", "VerdictSettings", "bread", "compare",
           "ResumeMismatchError"]

log = logging.getLogger(__name__)

# the Gaussian and waypoint paths (q and the legs' tuning), kept for a resume
GAUSSIAN_PATH_FILE, WAYPOINT_PATH_FILE = "gaussian_path.json", "waypoint_path.json"


def _run_problem(problems: list[Problem], *args, **kwargs) -> BreadResult:
    """Tune on the first problem, check the simulator with the frozen kernel, then run
    every step count over all problems on ``executor`` (here by default).  ``run`` and
    ``sampler`` are concrete (path "prior", "waypoint" or "gaussian"); ``choice`` is the
    choice behind the path and ``fitted`` the waypoint q when it was fitted already.  A
    path the pilot could not measure names the simulated data's largest value (an
    overflowing prior predictive is the usual cause)."""
    try:
        return _tune_check_and_run(problems, *args, **kwargs)
    except ScheduleError as error:
        raise ScheduleError(f"{error}; {largest_simulated_value(problems[0])}") from None


def _tune_check_and_run(problems: list[Problem], simulator: Simulator,
                        sampler: SamplerSettings, run: RunSettings, out_dir: Path | None,
                        header: dict, known_log_ml_bounds: Mapping[str, float] | None,
                        verdict: VerdictSettings, data: Mapping,
                        executor: Executor | None = None, choice: PathChoice | None = None,
                        fitted=None, tuned_here=None, check_draws: CheckDraws | None = None,
                        started: float | None = None) -> BreadResult:
    started = time.monotonic() if started is None else started  # the budget's clock
    first = problems[0]
    result = _new_result(problems, header, known_log_ml_bounds, verdict)
    choice = choice or given(run.path, run.path, "set in RunSettings.path")
    result.extra["path_choice"] = choice.to_dict()
    if first.redraws:   # the model's own rejections, redrawn (stan.redraw)
        result.extra["redraws"] = first.redraws
    done = resume_steps(result, out_dir, header) if out_dir is not None else set()
    check = run.check_simulator and "simulator_check" not in result.extra
    if check and check_draws is None:
        # the check's draws, simulated first: a failing simulator stops before the pilot
        check_draws = simulate_check_draws(simulator, data, _check_settings(run),
                                           run.threads, first.target.compiled)
    if run.path != "prior" and sampler.kernel == "imh":
        raise InputError(f"path={run.path!r} tunes HMC or NUTS on each leg; use "
                         "kernel='nuts' (or 'hmc') with it, or path='prior' with kernel='imh'")
    path, seconds = RunDirectory(out_dir, header["fingerprint"]).load_or_fit(
        run.path, lambda: kind(run.path).fit(pilot_inputs(first, simulator, sampler, run,
                                                          fitted)), tuned_here)
    with naming_steps(path, verdict.converged_nats):
        prior_end = _prior_end(first, simulator, sampler, run, path) if check else None
    check_kernel = path.check_kernel(prior_end)
    _describe_path(result, choice, path)
    if seconds is not None:
        result.extra["tuning_seconds"] = seconds
        log.info("%s: tuned %s along beta in %.1f s", first.name, sampler.kernel, seconds)
    result.extra["tuning"] = path.to_dict()
    result.extra["executor"] = (executor or Executor()).describe()
    setup_warnings(result.extra, path, first.name)
    todo = [] if run.auto_steps else [T for T in run.steps if T not in done]
    # Said before the simulator check, so that a long run is announced right after the pilot.
    warn_if_costly(first.name, path, todo,
                   2 * run.chains * run.particles_per_run * sampler.steps_per_temperature,
                   first.target.dim)
    if "simulator_check" not in result.extra:
        with naming_steps(path, verdict.converged_nats):
            result.extra["simulator_check"] = _check(first, simulator, data, sampler, run,
                                                     check_kernel, check_draws)
    if out_dir is not None:
        result.save_header(out_dir)
    for T in sorted(done):
        log.info("%s: %d distributions already done, loaded from %s", first.name, T, out_dir)
    finish = _finisher(result, out_dir, 1 if run.auto_steps else len(run.steps))
    if run.auto_steps:
        _within_budget(result, problems, simulator, path, sampler, run, out_dir,
                       header["fingerprint"], executor or Executor(), finish, started,
                       prior_end)
    else:
        _run_steps(problems, simulator, sampler.make()[0], path, sampler, run, todo, out_dir,
                   header["fingerprint"], executor or Executor(), finish)
    result.steps.sort(key=lambda s: s.n_steps)
    result.extra["setup_gradients"] = _setup_gradients(result, prior_end)
    if out_dir is not None:
        result.save(out_dir)
    return result


def _setup_gradients(result: BreadResult, prior_end) -> dict:
    """Gradients before the first scored transition beside the scored ones: the pilots
    (every ``pilot_gradients`` of the path's tuning, and the check's kernel at the prior;
    not a rival path's abandoned pilot) and the simulator check."""
    def pilots(record) -> float:
        if isinstance(record, dict):
            return sum(float(v) if k == "pilot_gradients" and np.isfinite(float(v))
                       else pilots(v) for k, v in record.items())
        return sum(map(pilots, record)) if isinstance(record, list) else 0.0
    pilot = pilots(result.extra["tuning"]) + pilots(prior_end.to_dict() if prior_end else {})
    check = float(result.extra["simulator_check"].get("n_grad", 0))
    scored = float(sum(s.forward.n_grad + s.reverse.n_grad for s in result.steps))
    total = pilot + check + scored
    return {"pilots": pilot, "check": check, "scored": scored,
            "share": (pilot + check) / total if total > 0 else float("nan")}


def _within_budget(result: BreadResult, problems: list[Problem], simulator: Simulator, path,
                   sampler: SamplerSettings, run: RunSettings, out_dir: Path | None,
                   fingerprint: str, executor: Executor, finish, started: float,
                   prior_end=None) -> None:
    """``steps="auto"``: run step counts chosen within ``run.budget_minutes`` and/or
    ``run.budget_gradients`` (the pilots' and the check's gradients counted:
    :func:`_setup_gradients`, ``prior_end`` the check's kernel at the prior)
    (:func:`~bread_stan.ais.budget.run_within_budget`; the clock ``started`` after the
    compiles), each saved as it finishes; what was chosen in ``extra["auto_steps"]``."""
    settings = result.verdict_settings()

    def run_one(T: int) -> StepResult:
        _run_steps(problems, simulator, sampler.make()[0], path, sampler, run, [T], out_dir,
                   fingerprint, executor, finish)
        return result.step(T)

    def save(record) -> None:  # before the first new step count: its setup seconds
        result.extra["auto_steps"] = record.to_dict()
        if out_dir is not None:
            result.save_header(out_dir)

    def per_step(what: str) -> float | None:  # the pilot's prediction of a step's cost
        cost = (2 * run.chains * sampler.steps_per_temperature
                * float(getattr(path, f"{what}_per_transition", float("nan"))))
        return cost if cost > 0 else None

    saved = result.extra.get("auto_steps") or {}  # the setup of the run's earlier sessions
    setup = _setup_gradients(result, prior_end)  # pilots and check: the same in every session
    record = run_within_budget(run_one, list(result.steps), lambda step: step.verdict(settings),
                               budget_minutes=run.budget_minutes,
                               level=settings.converged_nats, length=path_length(path),
                               pilot_seconds_per_step=per_step("seconds"),
                               started=started, setup_before=saved.get("setup_seconds", 0.0),
                               on_start=save, budget_gradients=run.budget_gradients,
                               setup_gradients=setup["pilots"] + setup["check"],
                               pilot_gradients_per_step=per_step("gradients"))
    result.extra["auto_steps"] = record.to_dict()
    log.info("%s: step counts %s chosen within the budget (%s)", result.model,
             ", ".join(map(str, record.chosen)), record.stopped)


def _new_result(problems: list[Problem], header: dict,
                known_log_ml_bounds: Mapping[str, float] | None,
                verdict: VerdictSettings) -> BreadResult:
    """The empty result of a run: the header, the simulated problems, the verdict's
    settings."""
    first = problems[0]
    extra = {"truth": first.truth, "simulated_data": first.simulated_data,
             "known_log_ml_bounds": dict(known_log_ml_bounds or {}),
             "verdict_settings": asdict(verdict)}
    if len(problems) > 1:
        extra["exact_draws"] = len(problems)
        extra["problems"] = [{"truth": p.truth, "simulated_data": p.simulated_data}
                             for p in problems]
    return BreadResult(first.name, header, [], extra)


def _describe_path(result: BreadResult, choice: PathChoice, path) -> None:
    """The path line of reports: the choice's reason, and what the path is where it
    says more than its name (the Gaussian path: its q and the prior's normaliser)."""
    described = path.describe()
    if described is None:
        return
    why = described if choice.requested != "auto" else (
        f"{choice.reason}. The {path.name.capitalize()} path: {described}")
    result.extra["path_choice"] = given(choice.requested, path.name, why, choice).to_dict()


def _finisher(result: BreadResult, out_dir: Path | None, n_step_counts: int):
    """What happens to each finished step: kept, saved at once, its verdict logged."""
    def finish(step: StepResult) -> None:
        result.steps.append(step)
        if out_dir is not None:
            result.save_step(out_dir, step)
        verdict = step.verdict(result.verdict_settings(), n_step_counts=n_step_counts)
        if not verdict.consistent:
            log.warning("%s, %d distributions: %s", result.model, step.n_steps,
                        verdict.message)
    return finish


def _prior_end(problem: Problem, simulator: Simulator, sampler: SamplerSettings,
               run: RunSettings, path):
    """The kernel tuned at the prior for the simulator check, where the path has none
    there of its own (the Gaussian path); else None."""
    if not path.needs_prior_end:
        return None
    kernel, base_params = sampler.make()
    pilot_seed = derived_seed(run.seed, Purpose.PILOT)
    return tune_prior_end(problem.target, kernel, base_params, path,
                          pilot_draws(problem, simulator, sampler.pilot_chains, pilot_seed),
                          seed=pilot_seed, config=sampler.tuning_config())


def _ais_config(sampler: SamplerSettings, run: RunSettings, T: int,
                progress: bool) -> engine.RunConfig:
    return engine.RunConfig(steps=(T,), schedule=run.schedule,
                            steps_per_temperature=sampler.steps_per_temperature,
                            increment_blocks=run.increment_blocks, progress=progress)


def _run_steps(problems: list[Problem], simulator: Simulator, kernel, tuned,
               sampler: SamplerSettings, run: RunSettings, steps: Sequence[int],
               out_dir: Path | None, fingerprint: str, executor: Executor, finish) -> None:
    """Run ``steps`` in shards on ``executor`` (see :func:`run_steps_in_shards`: locally
    one batch per problem, as :func:`runs.run <bread_stan.ais.runs.run>`); each
    step's problems joined into one step, its forward chains' draws constrained."""
    config = _ais_config(sampler, run, steps[0] if steps else 2, False)
    smc_config = (smc.SMCConfig(particles=run.particles_per_run) if run.algorithm == "smc"
                  else None)
    contexts = [ShardContext(p.target.compiled, p.data, kernel, tuned, config, smc=smc_config,
                             target=p.target)
                for p in problems]
    # SMC: a reverse shard needs the exact draw and its runs' free prior particles.
    def starts(T: int) -> list[np.ndarray]:
        own = tuned.forward_starts(derived_seed(run.seed, Purpose.PRIOR, T), run.chains)
        if own is not None:  # exact draws of the path's own start (one problem)
            return [own]
        return prior_starts(problems, simulator, run, T)

    run_steps_in_shards(
        contexts, lambda T: [(prior, p.x_star if smc_config is None else (p.x_star, prior))
                             for p, prior in zip(problems, starts(T))],
        lambda T, k: problem_seed(run.seed, Purpose.CHAINS, T, k), steps,
        sampler.steps_per_temperature, out_dir, fingerprint, executor,
        lambda parts: finish(join_problems(problems, parts)), run.progress)


def _check(problem: Problem, simulator: Simulator, data: Mapping, sampler: SamplerSettings,
           run: RunSettings, tuned: TunedKernel, draws: CheckDraws | None = None) -> dict:
    """The simulator check with the run's frozen kernel (on its ``draws`` simulated
    already, if given), as a plain dict."""
    if not run.check_simulator:
        return SimulatorCheck.skipped().to_dict()
    check = check_simulator(problem.target.compiled, simulator, data, sampler=sampler,
                            settings=_check_settings(run), tuned=tuned, threads=run.threads,
                            draws=draws)
    return check.to_dict()


def _check_settings(run: RunSettings) -> CheckSettings:
    return CheckSettings(seed=derived_seed(run.seed, Purpose.CHECK))


def _header(name: str, model, simulator, data: Mapping, sampler: SamplerSettings,
            run: RunSettings, hyper) -> dict:
    scored = run.scored()
    fingerprint, parts = fingerprints(
        model=program_text(model), simulator=program_text(simulator),
        data={k: np.asarray(v).tolist() for k, v in data.items()}, sampler=asdict(sampler),
        tuning=sampler.tuning_fingerprint(), run=scored, hyper=hyper)
    return {"model": name, "fingerprint": fingerprint, "fingerprints": parts,
            "steps": "auto" if run.auto_steps else list(run.steps), "sampler": asdict(sampler),
            "run": {**scored, "schedule": asdict(run.schedule),
                    **({"budget_minutes": run.budget_minutes} if run.auto_steps else {}),
                    **({"budget_gradients": run.budget_gradients}
                       if run.budget_gradients is not None else {})},
            "hyper": dict(hyper or {})}


def bread(model, simulator=None, data=None, *, sampler: SamplerSettings = SamplerSettings(),
          run: RunSettings = RunSettings(), hyper: Mapping[str, float] | None = None,
          known_log_ml_bounds: Mapping[str, float] | None = None,
          verdict: VerdictSettings | None = None,
          out_dir: str | Path | None = None, name: str | None = None,
          executor: Executor | None = None,
          likelihood: str | Sequence[str] | None = None) -> BreadResult:
    """Bound the Jeffreys divergence between AIS output and the posterior of ``model``.

    ``model`` is a Stan program as it is: a path, program text or a
    ``cmdstanpy.CmdStanModel``.  Without ``prior_only`` it is split into prior and
    likelihood automatically (``likelihood`` names the modelled data, as the command
    line's ``--likelihood``), and without a ``simulator`` (a program following
    ``stan_models/README.md``) one is drafted from it
    (:func:`bread_stan.workflows.programs.prepared`, what ``bread-stan run`` does too):
    the generated programs and the split table are saved in ``out_dir/programs`` and kept
    in ``extra["programs"]``.  ``data`` is the model's data
    (dict or JSON path; the simulator reads it too, and its simulated variables
    replace the observed ones).  ``hyper`` fixes the simulator's hyperparameters.
    ``known_log_ml_bounds`` ({"upper": ..., "lower": ...}) adds one-sided KL
    bounds.  ``verdict`` sets the verdict's levels and its convergence scale
    (:class:`~bread_stan.ais.verdict.VerdictSettings`).  With ``out_dir``, every
    finished step count is saved at once and a rerun with the same settings
    continues where it stopped.  ``executor`` (:class:`~bread_stan.parallel.executor.Executor`)
    runs the AIS chains in shards on a Dask cluster: the same numbers as the local
    default, each finished shard saved in ``out_dir/shards``.
    """
    check_program("model", model)
    if simulator is not None:
        check_program("simulator", simulator)
    check_known_bounds(known_log_ml_bounds)
    out = Path(out_dir) if out_dir is not None else None
    name = name or default_name(model)
    with output_directory(out), prepared([model], simulator, out, [name],
                                         likelihood) as programs:
        result = _bread(programs.models[0], programs.simulator, programs.run_data(data),
                        sampler, run, hyper, known_log_ml_bounds, verdict, out, name, executor)
        attach(result, programs.records[name], out)
        return result


def _bread(model, simulator, data, sampler: SamplerSettings, run: RunSettings, hyper,
           known_log_ml_bounds, verdict: VerdictSettings | None, out: Path | None, name: str,
           executor: Executor | None) -> BreadResult:
    """:func:`bread` on the programs that run (split, with a simulator)."""
    data = load_data(data)
    (compiled,), sim_compiled = compile_with_simulator([model], simulator, hyper=hyper)
    started = time.monotonic()  # a budget (steps="auto") counts from here
    # pilots and checks that would overrun a budget in minutes stop (deadline.OverBudget)
    budget = 60.0 * run.budget_minutes if run.auto_steps and run.budget_minutes else None
    with set_up_by(None if budget is None else started + budget, budget or 0.0):
        sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads
                        ).honour(compiled, data)   # draws the model rejects too: redrawn
        problems = [simulate_problem(name, compiled, sim, data, run.seed, run.threads, truth)
                    for truth in _truth_draws(sim, run)]
        # a failing simulator stops before any pilot; the check reuses these draws
        check_draws = (simulate_check_draws(sim, data, _check_settings(run), run.threads,
                                            compiled) if run.check_simulator else None)
        requested = _header(name, model, simulator, data, sampler, run, hyper)["fingerprint"]

        def attempt(lean: dict | None) -> BreadResult:
            settled = settle(problems, sim, sampler, run, name, out, requested, lean,
                             lambda r: _header(name, model, simulator, data, r.sampler,
                                               r.run, hyper)["fingerprint"])
            header = _header(name, model, simulator, data, settled.sampler, settled.run,
                             hyper)
            return _run_problem(problems, sim, settled.sampler, settled.run, out, header,
                                known_log_ml_bounds, verdict or VerdictSettings(), data,
                                executor, settled.choice, settled.fitted, settled.tuned,
                                check_draws=check_draws, started=started)
        with naming_least_steps((verdict or VerdictSettings()).converged_nats):
            try:
                return attempt(None)
            except OverBudget as over:   # a pilot past the budget: once more, leaner
                return attempt(lean_settings(over, sampler, budget, name))


def _truth_draws(simulator: Simulator, run: RunSettings) -> list[dict]:
    """The exact draws (x*_k, y*_k) of the run's K simulated problems."""
    return [draw_at(simulator.simulate(1, problem_seed(run.seed, Purpose.TRUTH, k)), 0)
            for k in range(run.exact_draws)]


def compare(models: Mapping[str, Any] | Sequence, simulator=None, data=None, *,
            sampler: SamplerSettings = SamplerSettings(), run: RunSettings = RunSettings(),
            hyper: Mapping[str, float] | None = None, out_dir: str | Path | None = None,
            verdict: VerdictSettings | None = None,
            executor: Executor | None = None,
            likelihood: str | Sequence[str] | None = None) -> dict[str, BreadResult]:
    """BREAD on several programs of one model, on one shared simulated data set and
    exact posterior draw.  ``models`` maps labels to programs (or is a list of
    programs, labelled by file name; programs sharing a file name are told apart
    by their folders).  Programs are taken as they are, as by :func:`bread`: each
    without ``prior_only`` is split, and without a ``simulator`` one is drafted from the
    first (its programs in ``out_dir/programs/LABEL``, its record in each result's
    ``extra["programs"]``).  Every program is compiled before any run starts.
    ``executor`` runs each program, whole (tuning, simulator check, every step count),
    as one task on a Dask cluster, with the numbers of the local default; each finished
    program is saved in ``out_dir/LABEL`` as it arrives, and a rerun sends only the step
    counts still missing.  Returns one result per label."""
    if not isinstance(models, Mapping):
        models = dict(zip(_labels(models), models))
    for label, program in models.items():
        check_program(f"model {label!r}", program)
    if simulator is not None:
        check_program("simulator", simulator)
    out = Path(out_dir) if out_dir is not None else None
    with output_directory(out), prepared(list(models.values()), simulator, out, list(models),
                                         likelihood) as programs:
        models = dict(zip(models, programs.models))
        simulator = programs.simulator
        data = programs.run_data(load_data(data))   # one data set that every program reads
        compiled, sim_compiled = compile_with_simulator(list(models.values()), simulator,
                                                        hyper=hyper)
        sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
        truths = _truth_draws(sim, run)
        results = _run_programs(executor or Executor(), models, compiled, sim_compiled, data,
                                hyper, truths, sampler, run, out, simulator,
                                verdict or VerdictSettings())
        for label, result in results.items():
            attach(result, programs.records[label], out / label if out is not None else None)
        return results


@dataclass(frozen=True)
class _ProgramJob:
    """One whole program of a comparison, one task: its problems are rebuilt from the
    shared simulator, data and truths, and the step counts ``run.steps`` run (saved and
    resumed in ``out_dir`` when the task runs in this process)."""

    label: str
    model: CompiledModel
    simulator: CompiledModel
    data: dict
    hyper: dict | None
    truths: list
    sampler: SamplerSettings
    run: RunSettings
    header: dict
    verdict: VerdictSettings
    out_dir: Path | None = None
    choice: PathChoice | None = None
    settled: Resolution | None = None  # in this process: the path choice's pilot, reused


def _run_program(job: _ProgramJob, executor: Executor | None = None) -> BreadResult:
    """Run one program of a comparison (on a worker: threads 1, no output directory);
    ``executor`` is recorded as what ran it (default: here)."""
    threads = job.run.threads
    sim = Simulator(job.simulator, job.data, hyper=job.hyper, threads=threads)
    problems = [simulate_problem(job.label, job.model, sim, job.data, job.run.seed, threads,
                                 truth) for truth in job.truths]
    fitted, tuned = ((job.settled.fitted, job.settled.tuned) if job.settled is not None
                     else (None, None))
    return _run_problem(problems, sim, job.sampler, job.run, job.out_dir, job.header, None,
                        job.verdict, job.data, executor, job.choice, fitted, tuned)


def _run_programs(executor: Executor, models: Mapping, compiled, sim_compiled, data,
                  hyper, truths, sampler: SamplerSettings, run: RunSettings,
                  out: Path | None, simulator, verdict: VerdictSettings
                  ) -> dict[str, BreadResult]:
    """Run every program as one task on ``executor``.  Tasks run in this process save
    and resume each step count in ``out/LABEL`` themselves; tasks sent to a cluster run
    only the step counts missing there, and each is saved in ``out/LABEL`` as it arrives,
    then reloaded with the steps saved before.  Returns one result per label."""
    here = executor.in_process
    tasks, results = {}, {}
    settled = _settle(models, compiled, sim_compiled, data, hyper, truths, sampler, run, out,
                      simulator)
    for (label, program), built in zip(models.items(), compiled):
        own = settled[label]  # this program's concrete path
        header = _header(label, program, simulator, data, own.sampler, own.run, hyper)
        sub = out / label if out is not None else None
        if sub is not None:
            sub.mkdir(exist_ok=True)
        job_run = own.run
        if not here and not run.auto_steps:  # auto: the task chooses its step counts
            done = (resume_steps(BreadResult(label, header, [], {}), sub, header)
                    if sub is not None else set())
            missing = tuple(T for T in run.steps if T not in done)
            if not missing:
                continue
            job_run = replace(own.run, steps=missing, progress=False, threads=1)
        # A task sent to a cluster tunes again (the same seeds, the same kernel): the
        # pilot stays here rather than travel with every task.
        tasks[label] = (_ProgramJob(label, built, sim_compiled, dict(data),
                                    None if hyper is None else dict(hyper), truths,
                                    own.sampler, job_run, header, verdict,
                                    sub if here else None, own.choice,
                                    own if here else None),)

    def arrived(label: str, result: BreadResult) -> None:
        if here or out is None:
            result.extra["executor"] = executor.describe()
            results[label] = result
            return
        log.info("%s: done on Dask", label)
        sub = out / label
        if result.extra["tuning"].get("path") not in ("waypoint", "gaussian"):  # refitted
            TunedKernel.from_dict(result.extra["tuning"]).save(sub / "tuning.json")
        for step in result.steps:
            result.save_step(sub, step)
        result.save_header(sub)

    executor.run(_run_program, tasks, arrived, progress=run.progress,
                 saved_in=str(out) if out is not None else None)
    for label, job in _reloads(models, compiled, sim_compiled, data, hyper, truths, settled,
                               out, simulator, verdict, results):
        results[label] = _run_program(job, executor)  # loads what the cluster saved
    return {label: results[label] for label in models}


def _settle(models: Mapping, compiled, sim_compiled, data, hyper, truths,
            sampler: SamplerSettings, run: RunSettings, out: Path | None, simulator
            ) -> dict[str, Resolution]:
    """Each program's :class:`~bread_stan.workflows.auto_path.Resolution` (concrete
    sampler and run, path choice, and the pilot that decided it), settled here before any
    task runs (:func:`~bread_stan.workflows.saved_choice.settle` on its first problem:
    read from ``out/LABEL`` when saved there)."""
    if run.path != "auto":
        resolved = resolve_path([], None, sampler, run, "")
        return {label: resolved for label in models}
    sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
    settled = {}
    for label, built in zip(models, compiled):
        try:
            problem = simulate_problem(label, built, sim, data, run.seed, run.threads,
                                       truths[0])
        except BreadStanError:  # the program's own task fails with this error, as before
            choice = given("auto", "prior", "not decided: the program's problem could not "
                           "be built")
            settled[label] = Resolution(sampler.for_path("prior"),
                                        replace(run, path="prior"), choice)
            continue
        requested = _header(label, models[label], simulator, data, sampler, run, hyper)
        settled[label] = settle([problem], sim, sampler, run, label,
                                out / label if out is not None else None,
                                requested["fingerprint"])
    return settled


def _reloads(models, compiled, sim_compiled, data, hyper, truths, settled, out,
             simulator, verdict, results):
    """The programs whose results the cluster saved in ``out`` (jobs that load them)."""
    for (label, program), built in zip(models.items(), compiled):
        if label not in results:
            own = settled[label]
            header = _header(label, program, simulator, data, own.sampler, own.run, hyper)
            yield label, _ProgramJob(label, built, sim_compiled, dict(data),
                                     None if hyper is None else dict(hyper), truths,
                                     own.sampler, own.run, header, verdict, out / label,
                                     own.choice)


def _labels(programs: Sequence) -> list[str]:
    """Labels of programs by file name; shared names get their folder's name
    in front, and a number when that is not enough."""
    stems = [default_name(p) for p in programs]
    labels = [f"{Path(str(p)).resolve().parent.name}_{stem}"
              if stems.count(stem) > 1 and str(p).endswith(".stan") else stem
              for stem, p in zip(stems, programs)]
    return [f"{label}_{labels[:i].count(label) + 1}" if labels.count(label) > 1 else label
            for i, label in enumerate(labels)]



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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..ais.results import BreadResult
from ..ais.tuning import TunedKernel
from ..ais.verdict import VerdictSettings
from ..rng import Purpose
from ..stan.data import load_data
from ..parallel.executor import Executor
from ..stan.simulator import Simulator, compile_with_simulator, draw_at, split_draw
from ..stan.tempered import StanTarget
from .common import (check_program, default_name, fingerprints,
                     output_directory, program_text, setup_warnings, warn_if_costly)
from .problem import prior_draws, simulate_problem
from .settings import RunSettings, SamplerSettings
from .data_check import data_check
from .fit import FitResult, FitSettings
from .simulator_check import CheckSettings, SimulatorCheck, check_simulator
from .protocol_result import ProtocolResult, write_header
from ..errors import InputError
from .auto_path import prior_path_only
from .programs import attach, prepared
from .protocol_fitted import fitted_protocol, why_fixed_route
from .protocol_replicates import run_replicates, tuned_kernel
from .protocol_budget import budget_clock
from .protocol_stages import (Context, carry_over, fitted_values, forward_only, previous_result,
                              real_fit, reverse_start_snapshots, simulated_step,
                              steps_within_budget)

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
    ``budget_minutes``: M minutes of wall time after the compiles.  A set-up stage (the
    simulator check, a pilot, the reverse starts' sweep, a replicate's tuning) that would
    end past them stops at once (:class:`~bread_stan.deadline.OverBudget`, naming the
    budget it needs; the fit on the real data once they are spent), and a step count starts only when the pilot's pace
    predicts that it ends within them; those left out are named, with their predicted
    minutes, in ``extra["budget"]``, and the same call with a larger budget and the same
    ``out_dir`` runs them, rerunning nothing.  The budget never changes a number.
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
    budget_minutes: float | None = None

    def __post_init__(self):
        if self.budget_minutes is not None and not (
                isinstance(self.budget_minutes, (int, float))
                and not isinstance(self.budget_minutes, bool) and self.budget_minutes > 0
                and math.isfinite(self.budget_minutes)):
            raise InputError(f"budget_minutes must be a positive number of minutes (or "
                             f"None for no budget); got {self.budget_minutes!r}")
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

def _prior_unconstrained(target: StanTarget, simulator: Simulator, n: int, seed: int
                         ) -> np.ndarray:
    """Unconstrained exact draws of the full prior (hyperparameters drawn too)."""
    params, _ = split_draw(simulator.simulate(n, seed), target.compiled)
    return target.param_unconstrain_batch(params)


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
             likelihood: str | Sequence[str] | None = None,
             hyper: str | Sequence[str] | None = None,
             verdict: VerdictSettings | None = None) -> ProtocolResult:
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

    With no ``simulator``, a program whose parameters cannot all be simulated from the
    prior (a parameter with no proper prior, or prior draws that break the simulation),
    or with ``hyper`` (names, or "a,b") given, runs the route of
    :mod:`bread_stan.workflows.protocol_fitted` instead: those parameters fixed at values
    fitted on the real data, AIS on the Gaussian path, the bound the paper's heuristic.

    ``executor`` (:class:`~bread_stan.parallel.executor.Executor`) runs the
    replicates on a Dask cluster, one whole replicate (simulation, tuning, its
    forward runs) per task, each saved as it arrives: the same numbers as locally.
    ``verdict``: the levels of the verdict on the simulated data (``converged_nats``).
    """
    check_program("model", model)
    if run.exact_draws != 1:
        raise InputError("RunSettings(exact_draws=...) applies to bread and compare: the "
                         "protocol's reverse chains start from its S-sweep's snapshots, not "
                         "from exact draws; leave exact_draws at 1 here")
    if simulator is not None:
        check_program("simulator", simulator)
        if hyper is not None:
            raise InputError("hyper names parameters to fix in a drafted simulator; a given "
                             "simulator takes its hyperparameters through its *_given inputs")
    if simulator is None and (hyper is not None or (reason := why_fixed_route(
            model, real_data, likelihood, seed=run.seed, threads=run.threads))):
        if hyper is None:
            log.info("%s: %s: the protocol fixes parameters at fitted values",
                     name or default_name(model), reason)
        if executor is not None and not executor.in_process:
            log.warning("the protocol with fixed parameters runs its replicates in this "
                        "process, not on %s", executor.kind)
        return fitted_protocol(model, real_data, hyper, sampler=sampler, run=run,
                               settings=settings, out_dir=out_dir, name=name,
                               likelihood=likelihood, verdict=verdict)
    sampler, run = prior_path_only(sampler, run, "protocol")
    if run.algorithm != "ais":
        raise InputError("the real-data protocol runs AIS only; use RunSettings(algorithm="
                         "'ais') here (SMC runs under bread, compare and subjective)")
    out = Path(out_dir) if out_dir is not None else None
    name = name or default_name(model)
    with output_directory(out), prepared([model], simulator, out, [name],
                                         likelihood) as programs:
        result = _protocol(programs.models[0], programs.simulator,
                           programs.run_data(real_data), sampler, run, settings, out, name,
                           executor, verdict or VerdictSettings())
        attach(result, programs.records[name], out, lambda where: write_header(where, result))
        return result


def _protocol(model, simulator, real_data, sampler: SamplerSettings, run: RunSettings,
              settings: ProtocolSettings, out: Path | None, name: str | None,
              executor: Executor | None, verdict: VerdictSettings) -> ProtocolResult:
    data = load_data(real_data)
    name = name or default_name(model)
    header = _header(name, model, simulator, data, sampler, run, settings)
    previous = previous_result(out, header)
    (compiled,), sim_compiled = compile_with_simulator([model], simulator)
    kernel, base = sampler.make()
    ctx = Context(name, out, sampler, run, settings, kernel, verdict)
    with budget_clock(settings.budget_minutes):   # compiles excluded
        return _stages(ctx, model, compiled, sim_compiled, data, header, previous, base,
                       executor)


def _stages(ctx: Context, model, compiled, sim_compiled, data, header, previous, base,
            executor: Executor | None) -> ProtocolResult:
    """The protocol after its compiles: check, fit, simulate, tune, reverse starts,
    replicates, and the step counts that start within the budget."""
    name, out, sampler, run, settings = ctx.name, ctx.out, ctx.sampler, ctx.run, ctx.settings
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
                                         "simulator_check": simulator_check,
                                         "verdict_settings": asdict(ctx.verdict)})
    result = ProtocolResult(name, header, fitted, hyper, sim, {}, {}, extra)
    if previous is not None:
        carry_over(result, previous, ctx)
    result.extra["executor"] = (executor or Executor()).describe()
    if out is not None:
        write_header(out, result)
    # 3. Kernels tuned along beta on each data set (pilot chains from the full prior).
    pilot, tuned_sim, tuned_real = _tune_both(ctx, result, problem, real_target, prior_sim,
                                              base)
    # 4. Reverse starts: S frozen beta = 1 transitions from (eta_hat, theta) on D_sim.
    starts = reverse_start_snapshots(ctx, result, problem, tuned_sim)
    if out is not None:
        write_header(out, result)
        result.sim.save_header(out / "sim")

    def step_inputs(T: int):
        """The betas, increment thinning and forward prior draws of T distributions."""
        every = (None if run.increment_blocks is None
                 else max(1, math.ceil((T - 1) / run.increment_blocks)))
        return (run.schedule.lazy(T, tuned_sim), every,
                prior_draws(problem, prior_sim, run.chains, ctx.seed(Purpose.PRIOR, T)))

    steps = steps_within_budget(ctx, result, tuned_sim)
    run_replicates(executor or Executor(), result, out, name, compiled, sim_compiled, data,
                   hyper, replace(run, steps=tuple(steps)), sampler, settings, pilot,
                   step_inputs)
    # 5. AIS for each number of distributions.
    for T in steps:
        betas, every, prior = step_inputs(T)
        simulated_step(ctx, result, problem, tuned_sim, starts, T, betas, every, prior)
        if T not in result.real_forward:
            result.real_forward[T] = forward_only(
                ctx, real_target, tuned_real, ctx.seed(Purpose.REAL_CHAINS, T),
                out / "real" / f"forward_{T}.npz" if out is not None else None, "real data",
                T, betas, every, prior)
    result.sim.steps.sort(key=lambda s: s.n_steps)
    if out is not None:
        result.save(out)
    for problem_text in result.problems():
        log.warning("%s: %s", name, problem_text)
    return result


def _fit_real(ctx: Context, real_target: StanTarget, prior_sim: Simulator
              ) -> tuple[FitResult, dict, dict[str, float]]:
    """The fit on the real data (loaded when saved), its hyperparameters eta_hat and
    their R-hat."""
    fitted = real_fit(ctx, real_target, lambda n: _prior_unconstrained(
        real_target, prior_sim, n, ctx.seed(Purpose.FIT_INIT)))
    hyper, rhat = fitted_values(ctx, fitted, prior_sim.hyperparameters)
    return fitted, hyper, rhat


def _simulate_at_fit(ctx: Context, model, compiled, sim_compiled, data, hyper):
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


def _tune_both(ctx: Context, result: ProtocolResult, problem, real_target, prior_sim, base
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



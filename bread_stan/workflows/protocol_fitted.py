"""The real-data protocol on a program as it is: parameters fixed at fitted values.

The protocol's own route (:func:`bread_stan.workflows.protocol.protocol` with a
simulator) anneals from exact draws of the *full* prior, so every parameter needs a
proper prior that simulates well.  Many programs have neither: coefficients with no
prior at all (flat, improper), or scales under gamma(0.001, 0.001) whose prior draws
give an ``_rng`` an infinite argument.  The BREAD paper's section 3.2 was written for
them: fix the troublesome hyperparameters at values fitted on the real data.  This
route does, for a program without ``prior_only`` (split as ``run`` splits it):

1. **Fixed parameters** eta: those named (``hyper``, ``--hyper``), every parameter with
   no proper prior (the drafter's :class:`~bread_stan.errors.ImproperPriorError` names
   them all), and, when the simulator drafted with those given still fails at the
   fitted values, the drafter's automatic hyperparameters as well (the scalar
   parameters whose prior uses no parameter but the fixed ones); a simulation that
   still fails is refused in one line.  The drafted simulator takes them as
   ``NAME_given`` inputs; a draw the model rejects too is redrawn
   (:meth:`~bread_stan.stan.simulator.Simulator.honour`), as in ``run``.
2. **Fit**: the toolkit's NUTS (or CmdStan's) on the real data, from Stan's default
   inits (uniform(-2, 2) on the unconstrained space: there are no prior draws to start
   from); eta_hat is the posterior median of each fixed parameter.
3. **Simulate**: theta ~ p(theta | eta_hat), D_sim ~ p(D | eta_hat, theta).
4. **Forward AIS** on D_sim, on the real data and on the replicates, each on the
   Gaussian path of its own data set (:mod:`bread_stan.ais.gaussian_base`: q a Laplace
   fit, or Pathfinder's, started from draws of the real-data fit; AIS from exact draws
   of q to the posterior, which needs no proper prior), with a kernel tuned on that
   path (:func:`~bread_stan.ais.waypoint.tune_base_leg`) and frozen.
5. **Reverse start**: (eta_hat, theta) followed by S frozen transitions at the
   posterior of D_sim, one chain per reverse chain, and reverse AIS from each
   snapshot; the S-sweep test and the agreement score are the protocol's
   (:mod:`.protocol_stages`, :mod:`.sweep`, :mod:`.agreement`).

The estimates are on log Z = log of the integral of the program's density (with a flat
prior: the integral of the likelihood over the flat parameters), not log p(y); the
bound B = mean U - mean L does not depend on the normaliser.  The bound is the paper's
heuristic (:data:`HEURISTIC`), and the result says so (``extra["route"]``).

:func:`bread_stan.workflows.protocol.protocol` takes this route when no simulator is
given and :func:`why_fixed_route` finds a reason, or when ``hyper`` is given.
"""

from __future__ import annotations

import contextlib
import logging
import math
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..ais.gaussian_base import GaussianBase, GaussianBaseTarget
from ..ais.results import BreadResult
from ..ais.verdict import VerdictSettings
from ..ais.waypoint import FitPastBudget, WaypointError, fit_name, tune_base_leg
from ..deadline import OverBudget
from ..errors import ImproperPriorError, InputError, StanDataError
from ..rng import Purpose, derived_seed
from ..stan.compile import CompiledModel
from ..stan.data import load_data
from ..stan.model import StanModel
from ..stan.prepare import prepare_programs
from ..stan.simulator import Simulator, compile_with_simulator, draw_at, split_draw
from ..stan.tempered import JointTarget
from .base_fit import fit_q
from .common import default_name, fingerprints, output_directory, program_text, setup_warnings
from .data_check import data_check
from .fit import stan_inits
from .problem import Problem
from .programs import PROGRAMS_DIR, likelihood_names, record
from .protocol_result import ProtocolResult, replicate_path, write_header
from .protocol_budget import REMEDY, budget_clock
from .protocol_stages import (Context, carry_over, fitted_values, forward_only,
                              previous_result, real_fit, reverse_start_snapshots,
                              simulated_step, steps_within_budget)
from .settings import RunSettings, SamplerSettings
from .simulator_check import SimulatorCheck
from .subjective import full_data

if TYPE_CHECKING:
    from .protocol import ProtocolSettings

__all__ = ["HEURISTIC", "PROBE_DRAWS", "fitted_protocol", "parse_hyper", "why_fixed_route"]

log = logging.getLogger(__name__)

HEURISTIC = (
    "This bound is the BREAD paper's heuristic for real data, not a rigorous bound: the "
    "reverse chains start from the fitted values with theta simulated given them, moved "
    "by S transitions at the posterior of the simulated data, which is not an exact "
    "posterior draw (the fixed parameters were not drawn from a prior; with no proper "
    "prior there is none to draw them from). E[U] - E[L] >= J holds only for exact "
    "reverse starts, so the number is to be trusted only as far as the S-sweep test "
    "finds the reverse curves unmoved by S.")

_NO_CHECK = ("not run: with parameters fixed at fitted values the simulator cannot draw the "
             "model's full prior, so it cannot be checked against the model; the data check "
             "and the forward/reverse consistency checks on the simulated data stand in")


def parse_hyper(text: str | Sequence[str] | None) -> list[str] | None:
    """``--hyper a,b`` (or a list of names) as a list; None when not given."""
    if text is None:
        return None
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    names = [n for n in names if n]
    if isinstance(text, str) and not names:
        raise InputError("--hyper needs at least one parameter name")
    return names


def _draft(model, directory: Path, likelihood, given: list[str], auto: bool, stem):
    """The programs with ``given`` given (with ``auto``, the drafter's automatic
    hyperparameters too), every parameter with no proper prior added; and those added."""
    given, flat = list(given), []
    for _ in range(2):
        try:
            prepared = prepare_programs(model, None, directory, likelihood, name=stem,
                                        hyper=None if auto else given, given=given)
            return prepared, flat
        except ImproperPriorError as error:
            new = [p for p in error.parameters if p not in given]
            if not new:
                raise
            given += new
            flat += new
    raise AssertionError("unreachable: the drafter names every flat parameter at once")


def _fixed_simulator(ctx: Context, prepared, redraft, data: dict, fitted, why: dict):
    """A simulator given the fixed parameters' fitted values, with data simulated there
    (the data check's draws); when that simulation fails, once more with the drafter's
    automatic hyperparameters fixed too (``redraft(names)``: the programs then)."""
    for attempt in range(2):
        (compiled,), sim_compiled = compile_with_simulator([prepared.model],
                                                          prepared.simulator)
        names = Simulator(sim_compiled, data, threads=ctx.run.threads).hyperparameters
        why.update({n: "its prior draws break the simulation" for n in names if n not in why})
        values, rhat = fitted_values(ctx, fitted, names)
        sim = Simulator(sim_compiled, data, hyper=values,
                        threads=ctx.run.threads).honour(compiled, data)
        try:
            draws = sim.simulate(ctx.settings.data_check_draws, ctx.seed(Purpose.DATA_CHECK))
            return prepared, compiled, sim, values, rhat, draws
        except StanDataError as error:
            if attempt == 1:
                raise StanDataError(f"simulation fails with {', '.join(names)} fixed at their "
                                    f"fitted values: {' '.join(str(error).split())[:400]}; "
                                    "name more parameters to fix with --hyper") from None
            log.info("%s: simulation fails with %s fixed (%s); fixing the drafter's "
                     "hyperparameters too", ctx.name, names, str(error)[:200])
            prepared = redraft(names)
    raise AssertionError("unreachable")


def _base_target(ctx: Context, stan: StanModel, starts: np.ndarray, seed: int):
    """The Gaussian path of one data set: q fitted from ``starts``, the path's target
    and its kernel tuned and frozen."""
    try:
        q, fitted = fit_q(JointTarget(stan), starts, seed)
    except FitPastBudget as error:   # a budget's stop, not bad input: exit 4, as for a pilot
        raise OverBudget(f"not converged within the budget: the searches for the Gaussian "
                         f"q on {ctx.name}'s data stopped ({error}); the protocol needs a "
                         f"larger --budget, or {REMEDY}", "the searches for q") from None
    except WaypointError as error:
        raise InputError(f"no Gaussian q for the path on {ctx.name}'s data: {error}") from None
    target = GaussianBaseTarget(stan, q)
    sampler = ctx.sampler
    tuned = tune_base_leg(target, ctx.kernel, sampler.make()[1], q, sampler.pilot_chains,
                          seed=seed, config=sampler.tuning_config(),
                          progress=ctx.run.progress)
    return target, tuned, {"fit": fit_name(fitted), **{k: v for k, v in fitted.items()
                                                      if isinstance(v, (int, float, str))}}


def _dataset(ctx: Context, compiled: CompiledModel, data: dict, draw: dict):
    """The model on ``data`` with the simulator's ``draw`` (parameters and data)."""
    params, overrides = split_draw(draw, compiled)
    values = {**data, **overrides}
    stan = StanModel(compiled, full_data(compiled, values), threads=ctx.run.threads)
    return stan, params, overrides, values


def _header(name, model, data, sampler, run, settings, hyper: list[str]) -> dict:
    """The run's header; its fingerprint hashes what the programs, the fixed parameters
    and every number follow from (the model, the parameters named, the data and the
    settings), so that a rerun can be checked before the fit is read back."""
    scored = run.scored()
    pset = asdict(settings)
    pset["s_sweep"] = list(settings.s_sweep)
    fingerprint, parts = fingerprints(
        kind="protocol-fitted", model=program_text(model), hyper=list(hyper),
        data={k: np.asarray(v).tolist() for k, v in data.items()},
        sampler=asdict(sampler), tuning=sampler.tuning_fingerprint(), run=scored,
        fit=pset["fit"])
    return {"model": name, "fingerprint": fingerprint, "fingerprints": parts,
            "steps": list(run.steps), "fit": pset["fit"], "sampler": asdict(sampler),
            "run": {**scored, "schedule": asdict(run.schedule)}, "protocol": pset,
            "route": "fitted"}


def fitted_protocol(model, real_data, hyper: Sequence[str] | str | None = None, *,
                    sampler: SamplerSettings = SamplerSettings(),
                    run: RunSettings = RunSettings(), settings: "ProtocolSettings",
                    out_dir: str | Path | None = None, name: str | None = None,
                    likelihood: str | Sequence[str] | None = None,
                    verdict: VerdictSettings | None = None) -> ProtocolResult:
    """The protocol with parameters fixed at fitted values (module docstring).

    ``hyper``: parameters to fix besides those with no proper prior (names, or "a,b").
    The result is a :class:`~bread_stan.workflows.protocol_result.ProtocolResult`;
    ``extra["route"]`` names the fixed parameters, why each is fixed, and the heuristic's
    sentence.  With ``out_dir`` the runs are saved as they finish and a rerun resumes
    (the fit and the AIS runs are read back; q and the kernels are fitted again, from the
    same seeds)."""
    if run.algorithm != "ais":
        raise InputError("the real-data protocol runs AIS only; use RunSettings(algorithm="
                         "'ais') here")
    if sampler.kernel == "imh":
        raise InputError("the protocol with fixed parameters runs the Gaussian path, whose "
                         "kernels are HMC or NUTS; use kernel='hmc' or 'nuts'")
    sampler = sampler.for_path("gaussian")
    run = replace(run, path="gaussian")
    out = Path(out_dir) if out_dir is not None else None
    name = name or default_name(model)
    data = load_data(real_data)
    names = likelihood_names(likelihood)
    hyper = parse_hyper(hyper) or []
    with output_directory(out), contextlib.ExitStack() as stack:
        directory = (out / PROGRAMS_DIR if out is not None else Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="bread-programs-"))))
        kernel, _ = sampler.make()
        # the reverse chains start from distinct snapshots, not from one exact draw
        ctx = Context(name, out, sampler, run, settings, kernel,
                      replace(verdict or VerdictSettings(), one_reverse_start=False))
        given_as_file = isinstance(model, (str, Path)) and str(model).endswith(".stan")
        stem = None if given_as_file else name
        result = _run(ctx, model, directory, names, hyper, stem, data)
        result.extra["programs"]["directory"] = str(directory) if out is not None else None
        if out is not None:
            result.save(out)
        return result


def _run(ctx: Context, model, directory, likelihood, hyper, stem, data) -> ProtocolResult:
    header = _header(ctx.name, model, data, ctx.sampler, ctx.run, ctx.settings, hyper)
    previous = previous_result(ctx.out, header)
    prepared, flat = _draft(model, directory, likelihood, hyper, False, stem)
    data = prepared.run_data(data)      # promoted transformed data computed (.promote)
    if prepared.split is not None and prepared.split.promotion is not None:
        log.info("%s: %s", ctx.name, prepared.split.promotion.sentence())
    why = {**{h: "named (--hyper)" for h in hyper}, **{p: "no proper prior" for p in flat}}
    (compiled,), _ = compile_with_simulator([prepared.model], prepared.simulator)
    with budget_clock(ctx.settings.budget_minutes):   # compiles excluded
        return _stages(ctx, model, directory, likelihood, hyper, stem, data, header,
                       previous, prepared, flat, why, compiled)


def _stages(ctx: Context, model, directory, likelihood, hyper, stem, data, header, previous,
            prepared, flat, why, compiled) -> ProtocolResult:
    """The route after its compiles: fit, fixed simulator, q and kernels, reverse starts,
    replicates, and the step counts that start within the budget."""
    stan_real = StanModel(compiled, full_data(compiled, data), threads=ctx.run.threads)
    rng = np.random.default_rng(ctx.seed(Purpose.FIT_INIT))
    target = GaussianBaseTarget(stan_real, GaussianBase.standard(stan_real.dim))
    fitted = real_fit(ctx, target, lambda n: stan_inits(target, n, rng))
    prepared, compiled, sim, values, rhat, checks = _fixed_simulator(
        ctx, prepared, lambda names: _draft(model, directory, likelihood,
                                            [*hyper, *flat, *names], True, stem)[0],
        data, fitted, why)
    truth = draw_at(sim.simulate(1, ctx.seed(Purpose.TRUTH)), 0)
    stan_sim, params, overrides, sim_data = _dataset(ctx, compiled, data, truth)
    x_star = stan_sim.param_unconstrain(params)
    checked = data_check(data, {k: checks[k] for k in overrides},
                         alpha=ctx.settings.data_check_alpha)
    (log.info if checked.passed else log.warning)("%s: %s", ctx.name, checked.message)
    unc = np.asarray(fitted.unconstrained, dtype=float).reshape(-1, stan_sim.dim)
    starts = unc[np.linspace(0, unc.shape[0] - 1, ctx.sampler.pilot_chains).astype(int)]
    target_sim, tuned_sim, q_sim = _base_target(ctx, stan_sim, starts,
                                                ctx.seed(Purpose.PILOT))
    truth_lists = {k: np.asarray(v).tolist() for k, v in params.items()}
    extra = {"route": {"name": "fitted", "fixed": list(values),
                       "why": {k: why[k] for k in values}, "path": "gaussian", "q": q_sim,
                       "heuristic": HEURISTIC,
                       "description": "protocol, hyperparameters fixed at fitted values: "
                                      + ", ".join(values)},
             "truth": truth_lists, "fit_sampler": fitted.sampler,
             "fit_max_rhat": fitted.max_rhat, "fit_min_ess_bulk": fitted.min_ess_bulk,
             "fit_hyper_rhat": rhat, "hyper_summary": ctx.settings.fit.hyper_summary,
             "simulated_data": {k: np.asarray(v).tolist() for k, v in overrides.items()},
             "data_check": checked.to_dict(), "programs": record(prepared, None),
             "simulator_check": SimulatorCheck.skipped(_NO_CHECK).to_dict()}
    sim_result = BreadResult(ctx.name, header, [], {
        "truth": truth_lists, "known_log_ml_bounds": {},
        "verdict_settings": asdict(ctx.verdict)})
    result = ProtocolResult(ctx.name, header, fitted, values, sim_result, {}, {}, extra)
    if previous is not None:
        carry_over(result, previous, ctx)
    result.sim.extra["tuning"] = tuned_sim.to_dict()
    setup_warnings(result.sim.extra, tuned_sim, ctx.name + " (simulated)")
    problem = Problem(ctx.name + " (simulated)", target_sim, x_star, truth_lists,
                      extra["simulated_data"], sim_data)
    reverse = reverse_start_snapshots(ctx, result, problem, tuned_sim)
    real = _base_target(ctx, stan_real, starts, ctx.seed(Purpose.REAL_PILOT))
    result.extra["route"]["q_real"] = real[2]
    setup_warnings(result.extra, real[1], ctx.name + " (real data)")
    if ctx.out is not None:
        write_header(ctx.out, result)
        result.sim.save_header(ctx.out / "sim")
    steps = steps_within_budget(ctx, result, tuned_sim)
    _replicates(ctx, result, compiled, sim, data, starts, steps)
    for T in steps:
        betas, every, prior = _inputs(ctx, tuned_sim, target_sim, T)
        simulated_step(ctx, result, problem, tuned_sim, reverse, T, betas, every, prior)
        if T not in result.real_forward:
            result.real_forward[T] = forward_only(
                ctx, real[0], real[1], ctx.seed(Purpose.REAL_CHAINS, T),
                ctx.out / "real" / f"forward_{T}.npz" if ctx.out is not None else None,
                "real data", T, *_inputs(ctx, real[1], real[0], T))
    result.sim.steps.sort(key=lambda s: s.n_steps)
    for problem_text in result.problems():
        log.warning("%s: %s", ctx.name, problem_text)
    return result


def _inputs(ctx: Context, tuned, target: GaussianBaseTarget, T: int):
    """The betas, increment thinning and forward starts (exact draws of the path's q,
    the same standard normal draws on every data set) of T distributions."""
    run = ctx.run
    every = (None if run.increment_blocks is None
             else max(1, math.ceil((T - 1) / run.increment_blocks)))
    gen = np.random.default_rng(ctx.seed(Purpose.PRIOR, T))
    return run.schedule.lazy(T, tuned), every, target.base.sample(gen, run.chains)


def _replicates(ctx: Context, result: ProtocolResult, compiled, sim: Simulator, data,
                starts, steps_now: Sequence[int]) -> None:
    """Forward AIS on the replicate data sets (each its own q and kernel) at the step
    counts ``steps_now``, for the agreement score's band; what was saved before is kept."""
    settings, run = ctx.settings, ctx.run
    steps = [T for T in steps_now
             if settings.replicate_max_steps is None or T <= settings.replicate_max_steps]
    for k in range(1, settings.replicates + 1):
        missing = [T for T in steps if T not in result.replicate_forward.get(k, {})]
        if not missing:
            continue
        draw = draw_at(sim.simulate(1, derived_seed(run.seed, Purpose.REPLICATE_TRUTH, k)), 0)
        stan_k = _dataset(ctx, compiled, data, draw)[0]
        target, tuned, _ = _base_target(ctx, stan_k, starts,
                                        derived_seed(run.seed, Purpose.REPLICATE_PILOT, k))
        for T in missing:
            result.replicate_forward.setdefault(k, {})[T] = forward_only(
                ctx, target, tuned, derived_seed(run.seed, Purpose.REPLICATE_CHAINS, k, T),
                replicate_path(ctx.out, k, T) if ctx.out is not None else None,
                f"replicate {k}", T, *_inputs(ctx, tuned, target, T))


PROBE_DRAWS = 1000  # prior draws at which a drafted simulator must not fail (irt_2pl's
# lognormal with a half-Cauchy scale first overflows at draw 280 of its probe seed)


def why_fixed_route(model, data, likelihood=None, *, seed: int = 0,
                    threads: int | None = None) -> str | None:
    """Why the protocol on ``model`` (no simulator given) must fix parameters at fitted
    values, or None when the drafted simulator draws the full prior: a parameter with no
    proper prior, or a failure within :data:`PROBE_DRAWS` prior draws that the model does
    not share (the draws it rejects too are redrawn, :meth:`Simulator.honour`), or a
    drawn value that overflows to an infinity (a lognormal with a half-Cauchy scale)."""
    data = load_data(data)
    with tempfile.TemporaryDirectory(prefix="bread-programs-") as tmp:
        try:
            prepared = prepare_programs(model, None, Path(tmp), likelihood_names(likelihood))
        except ImproperPriorError as error:
            return f"no proper prior for {', '.join(error.parameters)}"
        data = prepared.run_data(data)
        (compiled,), sim_compiled = compile_with_simulator([prepared.model],
                                                          prepared.simulator)
        sim = Simulator(sim_compiled, data, threads=threads).honour(compiled, data)
        try:
            split_draw(sim.simulate(PROBE_DRAWS, derived_seed(seed, Purpose.CHECK)), compiled)
        except StanDataError as error:
            return f"prior draws break the simulation ({' '.join(str(error).split())[:200]})"
    return None

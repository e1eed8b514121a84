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

import contextlib
import hashlib
import os
import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..ais import engine, smc
from ..stan.data import load_data
from ..rng import derived_seed
from ..errors import BreadStanError
from ..kernels.hmc import HMC, HMCParams
from ..kernels.nuts import NUTS, NUTSParams
from ..stan.model import unflatten_draws
from ..ais.results import BreadResult, DirectionResult, StepResult, load_steps
from ..ais.verdict import VerdictSettings
from ..parallel.executor import Executor
from ..parallel.shards import Shard, ShardContext, join_problem, plan_shards, run_shard
from ..store import (CorruptFileError, check_writable, clean_temporaries, load_if_sound,
                     load_json, load_unit, lock, save_unit, set_aside)
from ..ais.betas import ScheduleSpec
from ..stan.compile import CompiledModel
from ..stan.simulator import (Simulator, check_data_names, compile_with_simulator, draw_at,
                              split_draw)
from ..stan.tempered import StanTarget, check_split, compile_tempered
from ..ais.tuning import TunedKernel, TuningConfig, tune

__all__ = ["SamplerSettings", "RunSettings", "VerdictSettings", "bread", "compare",
           "ResumeMismatchError"]

log = logging.getLogger(__name__)

_TRUTH, _PILOT, _PRIOR, _CHAINS, _CHECK = 0, 1, 2, 3, 4  # purposes of derived seeds
_SMC_PARTICLES = 16  # particles per SMC run unless RunSettings.particles says
_CHECK_DRAWS = 8  # prior draws at which the model's prior/likelihood split is checked


class ResumeMismatchError(BreadStanError):
    """The output directory holds results of a run with different settings."""


@dataclass(frozen=True)
class SamplerSettings:
    """The Markov kernel used at every temperature, and how it is tuned.

    ``kernel`` is ``"nuts"`` (``max_depth``; the default) or ``"hmc"``
    (``n_leapfrog`` steps).  The step size (and, with ``adapt_metric``, an inverse
    metric: ``metric`` "diag", "dense" as Stan's ``dense_e``, or "auto", dense
    where the pilot draws are strongly correlated; see
    :class:`~bread_stan.ais.tuning.TuningConfig`) is tuned along beta on
    ``pilot_chains`` never-scored chains, then frozen for forward and reverse
    runs alike.  ``pilot_floor`` None lets the pilot reach down to the beta where
    the likelihood starts to matter (see ``beta_floor`` of
    :class:`~bread_stan.ais.tuning.TuningConfig`).  ``step_size_jitter`` and
    ``rescue_prob`` randomise the step size of each transition (see
    :class:`~bread_stan.kernels.hmc.HMCParams`); the default 10% of "rescue"
    transitions with much smaller steps frees chains that start deep in the
    prior's tails, which a fixed step size can leave stranded for the whole run
    (NUTS builds a rescue transition's tree to depth at most 4).

    NUTS is the default because it reached a given bound in less time than HMC
    with 10 leapfrog steps on every model measured (``scripts/bench_defaults.py``
    and ``scripts/bench_schedules.py``): its trajectory length follows the
    posterior's scale at each temperature, which one fixed L cannot.  The metric
    is "auto" with a 20-transition pilot for the same reason: on the models
    measured (NHEFS, Pima and the vague-prior regression, with six, six and three
    simulated problems) it reached a given bound in no more time than "diag" with 40
    pilot transitions, and in far less where the posterior is strongly
    correlated at some temperature (where "diag" forces small steps and deep
    trees); 20 pilot transitions gave the same bounds as 30 there (six seeds
    each on NHEFS and Pima; ``scripts/figures/bench_settings/results.md``).
    """

    kernel: str = "nuts"
    n_leapfrog: int = 10
    step_size_jitter: float = 0.0
    rescue_prob: float = 0.1
    max_depth: int = 8
    steps_per_temperature: int = 1
    target_accept: float | None = None
    adapt_metric: bool = True
    metric: str = "auto"
    pilot_chains: int = 32
    pilot_grid: int = 16
    pilot_steps: int = 20
    pilot_floor: float | None = None

    def __post_init__(self):
        if self.kernel not in ("hmc", "nuts"):
            raise ValueError(f"unknown kernel {self.kernel!r}; use 'hmc' or 'nuts'")
        if self.metric not in ("diag", "dense", "auto"):
            raise ValueError(f"unknown metric {self.metric!r}; use 'diag', 'dense' or 'auto'")
        for name in ("n_leapfrog", "max_depth", "steps_per_temperature", "pilot_steps"):
            _check_whole(name, getattr(self, name), 1)
        _check_whole("pilot_chains", self.pilot_chains, 2)
        _check_whole("pilot_grid", self.pilot_grid, 2)

    def make(self):
        """The kernel object and its base params."""
        if self.kernel == "hmc":
            return HMC(), HMCParams(step_size=0.1, n_leapfrog=self.n_leapfrog,
                                    step_size_jitter=self.step_size_jitter,
                                    rescue_prob=self.rescue_prob)
        return NUTS(), NUTSParams(step_size=0.1, max_depth=self.max_depth,
                                  step_size_jitter=self.step_size_jitter,
                                  rescue_prob=self.rescue_prob)

    def tuning_config(self) -> TuningConfig:
        return TuningConfig(n_grid=self.pilot_grid, adapt_steps=self.pilot_steps,
                            target_accept=self.target_accept, adapt_metric=self.adapt_metric,
                            metric=self.metric, beta_floor=self.pilot_floor)


@dataclass(frozen=True)
class RunSettings:
    """What to run: step counts, chains per direction, schedule, seed, threads.

    The default schedule is the adaptive one (equal thermodynamic length, from
    the pilot; :func:`~bread_stan.ais.betas.thermodynamic`): in
    ``scripts/bench_schedules.py`` it gave NHEFS linear regression a bound 5
    times smaller than the sigmoid schedule at the same T, and took the
    vague-prior regression of issue 15 from 1e10 nats to a few.

    ``exact_draws`` = K > 1 simulates K independent problems (x*_k, y*_k) and
    splits the chains of each direction among them: the bound is then averaged
    over data sets of the model (it bounds the expected Jeffreys divergence) and
    its interval comes from the spread between problems, which covers the
    variation from one exact draw to the next.  With K = 1 (the default, cheapest)
    the interval is conditional on the single exact draw.  The kernel is tuned
    once, on problem 1, and frozen for all.

    ``check_simulator`` runs the simulator check before the AIS runs (its result
    never changes the bounds, so it is not part of the resume fingerprint).

    ``algorithm`` "smc" runs sequential Monte Carlo (:mod:`bread_stan.ais.smc`)
    instead of AIS: ``chains`` runs per direction of ``particles`` particles each
    (default 16), resampled where the pilot says the effective sample size would
    fall below half; the bound is on the Jeffreys divergence of SMC's output.
    """

    steps: tuple[int, ...] = (10, 100, 1000)
    chains: int = 100
    schedule: ScheduleSpec = field(default_factory=lambda: ScheduleSpec("adaptive"))
    seed: int = 0
    threads: int | None = None
    increment_blocks: int | None = 50
    progress: bool = True
    exact_draws: int = 1
    check_simulator: bool = True
    algorithm: str = "ais"
    particles: int | None = None

    def __post_init__(self):
        if self.algorithm not in ("ais", "smc"):
            raise ValueError(f"unknown algorithm {self.algorithm!r}; use 'ais' or 'smc'")
        if self.particles is not None:
            if self.algorithm != "smc":
                raise ValueError("particles are for algorithm='smc'")
            _check_whole("particles", self.particles, 1)
        elif self.algorithm == "smc":
            object.__setattr__(self, "particles", _SMC_PARTICLES)
        steps = (self.steps,) if _is_whole(self.steps) else self.steps
        if isinstance(steps, (str, bytes)) or not all(_is_whole(s) for s in _iterable(steps)):
            raise ValueError(f"steps must be whole numbers of distributions (each at least 2), "
                             f"for example (10, 100, 1000); got {self.steps!r}")
        steps = tuple(int(s) for s in steps)
        if not steps or min(steps) < 2:
            raise ValueError("steps must be numbers of distributions, each at least 2")
        _check_whole("chains", self.chains, 2, "intervals need spread")
        _check_whole("seed", self.seed, 0)
        if self.threads is not None:
            _check_whole("threads", self.threads, 1, "None uses all cores")
        if self.increment_blocks is not None:
            _check_whole("increment_blocks", self.increment_blocks, 1)
        _check_whole("exact_draws", self.exact_draws, 1)
        if self.exact_draws != 1 and not 2 <= self.exact_draws <= self.chains:
            raise ValueError(f"exact_draws must be 1, or between 2 and chains ({self.chains}) "
                             "so that every simulated problem gets a chain in each direction")
        object.__setattr__(self, "steps", tuple(sorted(set(steps))))

    @property
    def particles_per_run(self) -> int:
        """Particles per run: 1 for AIS (one chain), ``particles`` (default 16) for SMC."""
        return 1 if self.algorithm == "ais" else self.particles


def _is_whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _iterable(value) -> tuple:
    try:
        return tuple(value)
    except TypeError:
        return (value,)


def _check_whole(name: str, value, least: int, why: str = "") -> None:
    """Refuse anything but a whole number >= ``least`` (2.5, "3", True, -3)."""
    if not _is_whole(value) or value < least:
        hint = f" ({why})" if why else ""
        raise ValueError(f"{name} must be a whole number >= {least}{hint}; got {value!r}")



def _fingerprint(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _program_text(program) -> str:
    program = getattr(program, "stan_file", None) or program  # a cmdstanpy.CmdStanModel
    path = Path(str(program))
    if str(program).endswith(".stan") and path.exists():
        return path.read_text()
    return str(program)


@dataclass
class _Problem:
    """One model on one simulated data set: its target and its exact draw."""

    name: str
    target: StanTarget
    x_star: np.ndarray  # unconstrained exact posterior draw
    truth: dict[str, Any]
    simulated_data: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)  # the model's data on y*


def _problem_seed(seed: int, purpose: int, *rest_and_k: int) -> int:
    """The seed of one purpose for problem k (the last argument); problem 0 keeps the
    single-draw run's seed, so K = 1 and the first problem of K > 1 agree."""
    *rest, k = rest_and_k
    return derived_seed(seed, purpose, *rest) if k == 0 else derived_seed(seed, purpose,
                                                                            *rest, k)


def _simulate_problem(name, model, simulator: Simulator, data: Mapping, seed: int,
                      threads, truth_draw: Mapping | None = None) -> _Problem:
    compiled = compile_tempered(model)
    check_data_names(simulator, compiled)
    if truth_draw is None:
        truth_draw = draw_at(simulator.simulate(1, _problem_seed(seed, _TRUTH, 0)), 0)
    params, overrides = split_draw(truth_draw, compiled)
    model_data = {**data, **overrides}
    target = StanTarget(compiled, model_data, threads=threads)
    try:
        x_star = target.param_unconstrain(params)
    except BreadStanError as error:
        raise type(error)(f"the simulator drew parameters outside the model's constraints "
                          f"(bounds, ordered, simplex, ...): {error}; its draws must satisfy "
                          "them (sort_asc for an ordered vector, abs for a half-normal)"
                          ) from None
    problem = _Problem(name, target, x_star, _as_lists(params), _as_lists(overrides),
                       model_data)
    check_split(target, _prior_draws(problem, simulator, _CHECK_DRAWS,
                                     derived_seed(seed, _CHECK)))
    return problem


def _as_lists(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in values.items()}


def _prior_draws(problem: _Problem, simulator: Simulator, n: int, seed: int) -> np.ndarray:
    draws = simulator.simulate(n, seed)
    params, _ = split_draw(draws, problem.target.compiled)
    return problem.target.param_unconstrain_batch(params)


def _constrained(problem: _Problem, u: np.ndarray) -> dict[str, np.ndarray]:
    flat = problem.target.param_constrain(u)
    return unflatten_draws(flat, problem.target.param_names())


def _run_problem(problems: list[_Problem], simulator: Simulator, sampler: SamplerSettings,
                 run: RunSettings, out_dir: Path | None, header: dict,
                 known_log_ml_bounds: Mapping[str, float] | None,
                 verdict: VerdictSettings, data: Mapping,
                 executor: Executor | None = None) -> BreadResult:
    """Tune on the first problem, check the simulator with the frozen kernel, then run
    every step count over all problems (here, or in shards on ``executor``'s cluster)."""
    kernel, base_params = sampler.make()
    first = problems[0]
    extra = {"truth": first.truth, "simulated_data": first.simulated_data,
             "known_log_ml_bounds": dict(known_log_ml_bounds or {}),
             "verdict_settings": asdict(verdict)}
    if len(problems) > 1:
        extra["exact_draws"] = len(problems)
        extra["problems"] = [{"truth": p.truth, "simulated_data": p.simulated_data}
                             for p in problems]
    result = BreadResult(first.name, header, [], extra)
    done: set[int] = set()
    if out_dir is not None:
        done = _resume(result, out_dir, header)

    tuned_path = out_dir / "tuning.json" if out_dir is not None else None
    tuned = load_if_sound(tuned_path, TunedKernel.load) if tuned_path is not None else None
    if tuned is None:
        t0 = time.perf_counter()
        pilot = _prior_draws(first, simulator, sampler.pilot_chains,
                             derived_seed(run.seed, _PILOT))
        tuned = tune(first.target, kernel, base_params, pilot,
                     seed=derived_seed(run.seed, _PILOT), config=sampler.tuning_config(),
                     progress=run.progress)
        result.extra["tuning_seconds"] = time.perf_counter() - t0
        log.info("%s: tuned %s along beta in %.1f s (step sizes %.3g .. %.3g)", first.name,
                 sampler.kernel, result.extra["tuning_seconds"], tuned.step_size.min(),
                 tuned.step_size.max())
        if tuned_path is not None:
            tuned.save(tuned_path)
    result.extra["tuning"] = tuned.to_dict()
    result.extra["executor"] = (executor or Executor()).describe()
    setup_warnings(result.extra, tuned, first.name)
    if "simulator_check" not in result.extra:
        result.extra["simulator_check"] = _check(first, simulator, data, sampler, run, tuned)
    if out_dir is not None:
        result.save_header(out_dir)

    todo = [T for T in run.steps if T not in done]
    warn_if_costly(first.name, tuned, todo,
                   2 * run.chains * run.particles_per_run * sampler.steps_per_temperature,
                   first.target.dim)
    for T in sorted(done):
        log.info("%s: %d distributions already done, loaded from %s", first.name, T, out_dir)

    def finish(step: StepResult) -> None:
        result.steps.append(step)
        if out_dir is not None:
            result.save_step(out_dir, step)
        verdict = step.verdict(result.verdict_settings(), n_step_counts=len(run.steps))
        if not verdict.consistent:
            log.warning("%s, %d distributions: %s", first.name, step.n_steps, verdict.message)

    if executor is not None and executor.kind == "dask":
        _run_steps_on_dask(problems, simulator, kernel, tuned, sampler, run, todo, out_dir,
                           header["fingerprint"], executor, finish)
    else:
        for T in todo:
            finish(_run_step(problems, simulator, kernel, tuned, sampler, run, T))
    result.steps.sort(key=lambda s: s.n_steps)
    if out_dir is not None:
        result.save(out_dir)
    return result


def _run_step(problems: list[_Problem], simulator: Simulator, kernel, tuned,
              sampler: SamplerSettings, run: RunSettings, T: int) -> StepResult:
    """Forward and reverse AIS with T distributions; with several problems, the chains
    are split among them and the step records which chain ran on which problem."""
    config = _ais_config(sampler, run, T, run.progress)
    parts = [_engine_run(problem, kernel, prior, run, _problem_seed(run.seed, _CHAINS, T, k),
                         tuned, config)
             for k, (problem, prior) in enumerate(zip(problems,
                                                      _prior_starts(problems, simulator, run, T)))]
    return _join_problems(problems, parts)


def _engine_run(problem: _Problem, kernel, prior: np.ndarray, run: RunSettings, seed: int,
                tuned, config: engine.RunConfig) -> StepResult:
    """One step count on one problem: AIS, or SMC when ``run.algorithm`` says so."""
    if run.algorithm == "smc":
        return smc.run(problem.target, kernel, prior, problem.x_star, seed=seed, tuned=tuned,
                       config=config, model=problem.name,
                       smc=smc.SMCConfig(particles=run.particles_per_run)).steps[0]
    return engine.run(problem.target, kernel, prior, problem.x_star, seed=seed, tuned=tuned,
                      config=config, model=problem.name).steps[0]


def _ais_config(sampler: SamplerSettings, run: RunSettings, T: int,
                progress: bool) -> engine.RunConfig:
    return engine.RunConfig(steps=(T,), schedule=run.schedule,
                            steps_per_temperature=sampler.steps_per_temperature,
                            increment_blocks=run.increment_blocks, progress=progress)


def _prior_starts(problems: list[_Problem], simulator: Simulator, run: RunSettings,
                  T: int) -> list[np.ndarray]:
    """The forward chains' exact prior draws at ``T`` (unconstrained), per problem; for
    SMC, (runs, 2P - 1, d): each run's forward particles and its conditional run's
    free ones."""
    per = 1 if run.algorithm == "ais" else 2 * run.particles_per_run - 1
    draws = simulator.simulate(run.chains * per, derived_seed(run.seed, _PRIOR, T))
    starts = []
    for problem, rows in zip(problems, np.array_split(np.arange(run.chains), len(problems))):
        rows = (rows[:, None] * per + np.arange(per)).ravel()
        params, _ = split_draw({name: v[rows] for name, v in draws.items()},
                               problem.target.compiled)
        u = problem.target.param_unconstrain_batch(params)
        starts.append(u if run.algorithm == "ais" else u.reshape(-1, per, u.shape[1]))
    return starts


def _join_problems(problems: list[_Problem], parts: list[StepResult]) -> StepResult:
    """One step from each problem's step (final forward positions still unconstrained)."""
    for problem, one in zip(problems, parts):
        one.draws = _constrained(problem, one.draws.pop("unconstrained"))
    if len(parts) == 1:
        return parts[0]
    T = parts[0].n_steps
    return StepResult(T, _stack([p.forward for p in parts]), _stack([p.reverse for p in parts]),
                      parts[0].betas, {name: np.concatenate([p.draws[name] for p in parts])
                                       for name in parts[0].draws})


def _run_steps_on_dask(problems: list[_Problem], simulator: Simulator, kernel, tuned,
                       sampler: SamplerSettings, run: RunSettings, steps: Sequence[int],
                       out_dir: Path | None, fingerprint: str, executor: Executor,
                       finish) -> None:
    """Run ``steps`` in shards on ``executor``'s cluster (see :func:`run_steps_in_shards`);
    each step is joined exactly as :func:`_run_step` returns it."""
    config = _ais_config(sampler, run, steps[0] if steps else 2, False)
    smc_config = (smc.SMCConfig(particles=run.particles_per_run) if run.algorithm == "smc"
                  else None)
    contexts = [ShardContext(p.target.compiled, p.data, kernel, tuned, config, smc=smc_config)
                for p in problems]
    # SMC: a reverse shard needs the exact draw and its runs' free prior particles.
    run_steps_in_shards(
        contexts, lambda T: [(prior, p.x_star if smc_config is None else (p.x_star, prior))
                             for p, prior in
                             zip(problems, _prior_starts(problems, simulator, run, T))],
        lambda T, k: _problem_seed(run.seed, _CHAINS, T, k), steps,
        sampler.steps_per_temperature, out_dir, fingerprint, executor,
        lambda parts: finish(_join_problems(problems, parts)), run.progress)


def run_steps_in_shards(contexts: list[ShardContext], starts_at, seed_at, steps: Sequence[int],
                        steps_per_temperature: int, out_dir: Path | None, fingerprint: str,
                        executor: Executor, finish, progress: bool) -> None:
    """Run ``steps`` in shards on ``executor``'s cluster, one :class:`ShardContext` per
    problem.  ``starts_at(T)`` gives each problem's (forward starts (n, d), reverse
    starts (m, d), or one exact draw (d,) repeated for n chains); ``seed_at(T, k)``
    problem k's seed.  Each shard is saved under ``out_dir/shards`` as it arrives (and
    reused by a rerun); ``finish`` gets each step count's per-problem
    :class:`StepResult`, joined exactly as :func:`engine.run <bread_stan.ais.engine.run>`
    returns it (final forward positions unconstrained)."""
    shard_dir = out_dir / "shards" if out_dir is not None else None
    saved = _saved_shards(shard_dir, fingerprint)
    shared = [executor.share(c) for c in contexts] if steps else []
    plans: dict[int, list[Shard]] = {}
    parts: dict[int, dict[Shard, tuple]] = {}
    tasks = {}
    for T in steps:
        starts = starts_at(T)
        forward = [f.shape[0] for f, _ in starts]
        reverse = [r.shape[0] if not isinstance(r, tuple) and np.ndim(r) == 2 else n
                   for (_, r), n in zip(starts, forward)]
        plans[T] = plan_shards(T, forward, executor.block_size(max(forward + reverse)), reverse)
        parts[T] = {}
        for shard in plans[T]:
            if shard.key in saved:
                parts[T][shard] = saved[shard.key]
                continue
            k, first = shard.problem, shard.first_chain
            start = _shard_start(starts[k][0 if shard.direction == "forward" else 1], first,
                                 shard.n_chains)
            tasks[shard.key] = (shared[k], shard, seed_at(T, k), start)
    by_key = {shard.key: shard for plan in plans.values() for shard in plan}

    def join(T: int) -> None:
        config = contexts[0].config
        betas, _, _ = engine.step_schedule(config, contexts[0].tuned, T)
        n_trans = (T - 1) * steps_per_temperature
        finish([join_problem(T, betas, {s: v for s, v in parts[T].items() if s.problem == k},
                             n_trans, shared_batch=config.combined)
                for k in range(len(contexts))])
        if shard_dir is not None:
            for shard in plans[T]:
                (shard_dir / f"{shard.key}.npz").unlink(missing_ok=True)

    def arrived(key: str, value: tuple) -> None:
        shard = by_key[key]
        if shard_dir is not None:
            save_unit(shard_dir / f"{key}.npz", value[0], {**value[1], "fingerprint": fingerprint})
        parts[shard.n_steps][shard] = value
        if len(parts[shard.n_steps]) == len(plans[shard.n_steps]):
            join(shard.n_steps)

    for T in steps:
        if len(parts[T]) == len(plans[T]):  # every shard was saved by an interrupted run
            join(T)
    executor.run(run_shard, tasks, arrived, progress=progress,
                 saved_in=str(shard_dir) if shard_dir is not None else None)


def _shard_start(start, first: int, n: int):
    """A shard's rows of its starts: one exact draw (d,) is shared; (runs, ...) arrays
    are sliced; a tuple (SMC's exact draw and prior particles) slice each part."""
    if isinstance(start, tuple):
        return tuple(_shard_start(part, first, n) for part in start)
    return start[first:first + n] if np.ndim(start) >= 2 else start


def _saved_shards(shard_dir: Path | None, fingerprint: str) -> dict[str, tuple]:
    """Shards saved by an interrupted run with these settings, by key."""
    if shard_dir is None:
        return {}
    shard_dir.mkdir(exist_ok=True)
    saved = {}
    for path in sorted(shard_dir.glob("*.npz")):
        try:
            arrays, meta = load_unit(path)
        except CorruptFileError as error:
            set_aside(error)
            continue
        if meta.get("fingerprint") == fingerprint:
            saved[meta["shard"]] = (arrays, meta)
    return saved


def _stack(directions: list[DirectionResult]) -> DirectionResult:
    """One direction's chains over several problems, labelled by problem."""
    sizes = [d.log_estimates.size for d in directions]
    weights = np.asarray(sizes, dtype=float) / sum(sizes)
    keys = set.intersection(*(set(d.diagnostics) for d in directions))
    additive = {"divergences", "divergent_chains", "non_finite_estimates"}
    diagnostics = {key: float(sum(d.diagnostics[key] for d in directions)) if key in additive
                   else float(np.dot(weights, [d.diagnostics[key] for d in directions]))
                   for key in keys}
    cumulative = (np.concatenate([d.cumulative for d in directions])
                  if all(d.cumulative is not None for d in directions) else None)
    return DirectionResult(
        np.concatenate([d.log_estimates for d in directions]),
        sum(d.wall_time for d in directions), sum(d.n_grad for d in directions), diagnostics,
        cumulative, directions[0].cumulative_at if cumulative is not None else None,
        np.repeat(np.arange(len(directions)), sizes))


_LONG_SECONDS = 600.0        # warn before a run estimated to take longer than this
_LARGE_BYTES = 1 << 30       # or to need more memory than this
_BLOCK_BYTES = 4 << 20       # cached blocks of betas and kernel params, whatever T


def cost_estimate(tuned: TunedKernel, steps: Sequence[int], chains: int, dim: int
                  ) -> tuple[float, float]:
    """Seconds (from the pilot's time per chain and transition) and peak bytes of
    running ``chains`` chains in each direction (all transitions) at each T.

    Memory does not grow with T: betas and kernel params are computed in cached
    blocks of a few MB (:class:`~bread_stan.ais.betas.Betas`,
    :class:`~bread_stan.ais.frozen_kernels.InterpolatedSchedule`); what grows is
    per chain: its state, recorded increments and per-chain metric, about
    ``8 (20 d + 100)`` bytes, ``8 d^2`` more with a dense metric."""
    seconds = sum(T - 1 for T in steps) * chains * tuned.seconds_per_transition
    per_chain = 8.0 * (20 * dim + 100 + (dim * dim if getattr(tuned, "dense", False) else 0))
    peak = _BLOCK_BYTES + 2 * chains * per_chain if steps else 0.0
    return seconds, peak


def warn_if_costly(name: str, tuned: TunedKernel, steps: Sequence[int], chains: int,
                   dim: int) -> None:
    """Log the estimated cost of the coming runs; warn before a long or large one."""
    if not steps:
        return
    seconds, peak = cost_estimate(tuned, steps, chains, dim)
    text = (f"{name}: {', '.join(map(str, steps))} distributions will take about "
            f"{_duration(seconds)} and {peak / 2**30:.2g} GB of memory (estimated from the "
            "pilot)")
    if seconds > _LONG_SECONDS or peak > _LARGE_BYTES:
        log.warning("%s; interrupt now (Ctrl-C) and choose fewer --steps if that is too "
                    "much", text)
    else:
        log.info("%s", text)


def _duration(seconds: float) -> str:
    if not np.isfinite(seconds):
        return "an unknown time"
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.2g} s"


def setup_warnings(extra: dict, tuned: TunedKernel, name: str) -> None:
    """Log the tuned kernel's problems loudly and record them in ``extra``
    (``setup_warnings``)."""
    extra["setup_warnings"] = tuned.problems()
    for text in extra["setup_warnings"]:
        log.warning("%s: SET-UP PROBLEM: %s", name, text)


def _check(problem: _Problem, simulator: Simulator, data: Mapping, sampler: SamplerSettings,
           run: RunSettings, tuned: TunedKernel) -> dict:
    """The simulator check with the run's frozen kernel, as a plain dict."""
    # Imported here: simulator_check builds on this module's settings and helpers.
    from .simulator_check import CheckSettings, SimulatorCheck, check_simulator

    if not run.check_simulator:
        return SimulatorCheck.skipped().to_dict()
    check = check_simulator(problem.target.compiled, simulator, data, sampler=sampler,
                            settings=CheckSettings(seed=derived_seed(run.seed, _CHECK)),
                            tuned=tuned, threads=run.threads)
    return check.to_dict()


def _resume(result: BreadResult, out_dir: Path, header: dict) -> set[int]:
    """Load finished steps from ``out_dir`` if it holds a run with the same settings."""
    saved = load_if_sound(out_dir / "run.json", load_json)
    if saved is not None:
        check_resumable(out_dir, saved.get("settings", {}), header)
        check = saved.get("extra", {}).get("simulator_check")
        if check and check.get("ran"):  # the same simulator and model: no need to rerun it
            result.extra["simulator_check"] = check
    previous = load_steps(out_dir, header["fingerprint"])
    result.steps.extend(s for s in previous if s.n_steps in set(header["steps"]))
    return {s.n_steps for s in result.steps}


def check_resumable(out_dir: Path, saved: Mapping, header: Mapping) -> None:
    """Refuse to resume into ``out_dir`` when its saved settings differ from
    ``header``'s, naming what differs."""
    if saved.get("fingerprint") == header["fingerprint"]:
        return
    old, new = saved.get("fingerprints") or {}, header["fingerprints"]
    differences = []
    for part, digest in new.items():
        if old.get(part) == digest or (part == "tuning" and old.get("sampler") != new["sampler"]):
            continue
        before, after = saved.get(part), header.get(part)
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            differences += [f"{part}.{k}: {before.get(k)!r} then, {after.get(k)!r} now"
                            for k in sorted(set(before) | set(after))
                            if before.get(k) != after.get(k)]
        else:
            differences.append(_PART_NAMES.get(part, part))
    what = "; ".join(differences) if differences else "settings saved by an older version"
    raise ResumeMismatchError(
        f"{out_dir} holds results of a run with different settings ({what}); use a new "
        "output directory, delete this one, or rerun with the settings it was made with")


_PART_NAMES = {"model": "the model program", "simulator": "the simulator program",
               "data": "the data", "tuning": "the tuning settings"}


def fingerprints(**parts: Any) -> tuple[str, dict[str, str]]:
    """The fingerprint of all ``parts`` together and of each part (to say which differs)."""
    return _fingerprint(*parts.values()), {k: _fingerprint(v) for k, v in parts.items()}


@contextlib.contextmanager
def output_directory(out: Path | None):
    """Check ``out`` is a writable directory, hold its lock and clear temporaries
    left by an interrupted run; nothing when ``out`` is None."""
    if out is None:
        yield None
        return
    check_writable(out)
    with lock(out):
        clean_temporaries(out)
        yield out


def _header(name: str, model, simulator, data: Mapping, sampler: SamplerSettings,
            run: RunSettings, hyper) -> dict:
    scored = {k: v for k, v in asdict(run).items() if k not in ("steps", "progress", "threads", "check_simulator")}
    if run.algorithm == "ais":  # AIS results saved before SMC existed keep their fingerprint
        scored = {k: v for k, v in scored.items() if k not in ("algorithm", "particles")}
    fingerprint, parts = fingerprints(
        model=_program_text(model), simulator=_program_text(simulator),
        data={k: np.asarray(v).tolist() for k, v in data.items()}, sampler=asdict(sampler),
        tuning=asdict(sampler.tuning_config()), run=scored, hyper=hyper)
    return {"model": name, "fingerprint": fingerprint, "fingerprints": parts,
            "steps": list(run.steps), "sampler": asdict(sampler),
            "run": {**scored, "schedule": asdict(run.schedule)}, "hyper": dict(hyper or {})}


def bread(model, simulator, data=None, *, sampler: SamplerSettings = SamplerSettings(),
          run: RunSettings = RunSettings(), hyper: Mapping[str, float] | None = None,
          known_log_ml_bounds: Mapping[str, float] | None = None,
          verdict: VerdictSettings | None = None,
          out_dir: str | Path | None = None, name: str | None = None,
          executor: Executor | None = None) -> BreadResult:
    """Bound the Jeffreys divergence between AIS output and the posterior of ``model``.

    ``model`` and ``simulator`` are Stan programs (paths or program text; see
    ``stan_models/README.md`` for the conventions), ``data`` the model's data
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
    check_program("simulator", simulator)
    _check_known_bounds(known_log_ml_bounds)
    out = Path(out_dir) if out_dir is not None else None
    with output_directory(out):
        data = load_data(data)
        name = name or _default_name(model)
        (compiled,), sim_compiled = compile_with_simulator([model], simulator, hyper=hyper)
        sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
        problems = [_simulate_problem(name, compiled, sim, data, run.seed, run.threads, truth)
                    for truth in _truth_draws(sim, run)]
        header = _header(name, model, simulator, data, sampler, run, hyper)
        return _run_problem(problems, sim, sampler, run, out, header, known_log_ml_bounds,
                            verdict or VerdictSettings(), data, executor)


def _check_known_bounds(known: Mapping[str, float] | None) -> None:
    """Refuse trusted bounds on log p(y) that cannot be bounds: other keys than "upper"
    and "lower", values that are not finite, an upper bound below the lower bound."""
    known = dict(known or {})
    unknown = sorted(set(known) - {"upper", "lower"})
    if unknown:
        raise ValueError(f"known_log_ml_bounds takes 'upper' and 'lower', not {unknown}")
    for side, value in known.items():
        if not np.isfinite(value):
            raise ValueError(f"the known {side} bound on log p(y) must be a finite number, "
                             f"not {value}")
    if known.get("upper", np.inf) < known.get("lower", -np.inf):
        raise ValueError(f"the known upper bound {known['upper']:g} on log p(y) lies below "
                         f"the known lower bound {known['lower']:g}: swap them "
                         "(--known-upper takes the larger)")


def _truth_draws(simulator: Simulator, run: RunSettings) -> list[dict]:
    """The exact draws (x*_k, y*_k) of the run's K simulated problems."""
    return [draw_at(simulator.simulate(1, _problem_seed(run.seed, _TRUTH, k)), 0)
            for k in range(run.exact_draws)]


def compare(models: Mapping[str, Any] | Sequence, simulator, data=None, *,
            sampler: SamplerSettings = SamplerSettings(), run: RunSettings = RunSettings(),
            hyper: Mapping[str, float] | None = None, out_dir: str | Path | None = None,
            verdict: VerdictSettings | None = None,
            executor: Executor | None = None) -> dict[str, BreadResult]:
    """BREAD on several programs of one model, on one shared simulated data set and
    exact posterior draw.  ``models`` maps labels to programs (or is a list of
    programs, labelled by file name; programs sharing a file name are told apart
    by their folders).  Every program is compiled before any run starts.
    ``executor`` runs each program, whole (tuning, simulator check, every step count),
    as one task on a Dask cluster, with the numbers of the local default; each finished
    program is saved in ``out_dir/LABEL`` as it arrives, and a rerun sends only the step
    counts still missing.  Returns one result per label."""
    if not isinstance(models, Mapping):
        models = dict(zip(_labels(models), models))
    for label, program in models.items():
        check_program(f"model {label!r}", program)
    check_program("simulator", simulator)
    out = Path(out_dir) if out_dir is not None else None
    with output_directory(out):
        compiled, sim_compiled = compile_with_simulator(list(models.values()), simulator,
                                                        hyper=hyper)
        data = load_data(data)
        sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
        truths = _truth_draws(sim, run)
        remote = {}
        if executor is not None and executor.kind == "dask":
            remote = _programs_on_dask(executor, models, compiled, sim_compiled, data, hyper,
                                       truths, sampler, run, out, simulator,
                                       verdict or VerdictSettings())
        results = {}
        for (label, program), built in zip(models.items(), compiled):
            if label in remote:
                results[label] = remote[label]
                continue
            problems = [_simulate_problem(label, built, sim, data, run.seed, run.threads,
                                          truth) for truth in truths]
            header = _header(label, program, simulator, data, sampler, run, hyper)
            sub = out / label if out is not None else None
            if sub is not None:
                sub.mkdir(exist_ok=True)
            results[label] = _run_problem(problems, sim, sampler, run, sub, header, None,
                                          verdict or VerdictSettings(), data, executor)
        return results


@dataclass(frozen=True)
class _ProgramJob:
    """One whole program of a comparison, for a Dask worker: its problems are rebuilt
    from the shared simulator, data and truths, and the step counts ``run.steps`` run."""

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


def _run_program(job: _ProgramJob) -> BreadResult:
    """Run one program of a comparison on a worker (threads: 1, no output directory)."""
    sim = Simulator(job.simulator, job.data, hyper=job.hyper, threads=1)
    problems = [_simulate_problem(job.label, job.model, sim, job.data, job.run.seed, 1, truth)
                for truth in job.truths]
    return _run_problem(problems, sim, job.sampler, job.run, None, job.header, None,
                        job.verdict, job.data)


def _programs_on_dask(executor: Executor, models: Mapping, compiled, sim_compiled, data,
                      hyper, truths, sampler: SamplerSettings, run: RunSettings,
                      out: Path | None, simulator, verdict: VerdictSettings
                      ) -> dict[str, BreadResult]:
    """Run every program's missing step counts as one task each.  With ``out``, each
    program's tuning, simulator check and steps are saved in ``out/LABEL`` as it
    arrives, and the local pass of :func:`compare` that follows only loads them (returns
    nothing); without, returns the programs' results."""
    tasks, results = {}, {}
    for (label, program), built in zip(models.items(), compiled):
        header = _header(label, program, simulator, data, sampler, run, hyper)
        done: set[int] = set()
        if out is not None:
            (out / label).mkdir(exist_ok=True)
            done = _resume(BreadResult(label, header, [], {}), out / label, header)
        missing = tuple(T for T in run.steps if T not in done)
        if missing:
            tasks[label] = (_ProgramJob(label, built, sim_compiled, dict(data),
                                        None if hyper is None else dict(hyper), truths,
                                        sampler, replace(run, steps=missing, progress=False,
                                                         threads=1), header, verdict),)

    def arrived(label: str, result: BreadResult) -> None:
        log.info("%s: done on Dask", label)
        if out is None:
            result.extra["executor"] = executor.describe()
            results[label] = result
            return
        sub = out / label
        TunedKernel.from_dict(result.extra["tuning"]).save(sub / "tuning.json")
        for step in result.steps:
            result.save_step(sub, step)
        result.save_header(sub)

    executor.run(_run_program, tasks, arrived, progress=run.progress,
                 saved_in=str(out) if out is not None else None)
    return results


def check_program(role: str, program) -> None:
    """Refuse a ``program`` that is neither a path, program text nor a compiled model."""
    if isinstance(program, (CompiledModel, os.PathLike)) or (
            isinstance(program, str) and program.strip()):
        return
    raise ValueError(f"{role} must be a Stan program: the path of a .stan file, the program "
                     f"text, or a compiled model; got {program!r}")


def _labels(programs: Sequence) -> list[str]:
    """Labels of programs by file name; shared names get their folder's name
    in front, and a number when that is not enough."""
    stems = [_default_name(p) for p in programs]
    labels = [f"{Path(str(p)).resolve().parent.name}_{stem}"
              if stems.count(stem) > 1 and str(p).endswith(".stan") else stem
              for stem, p in zip(stems, programs)]
    return [f"{label}_{labels[:i].count(label) + 1}" if labels.count(label) > 1 else label
            for i, label in enumerate(labels)]


def _default_name(program) -> str:
    text = str(getattr(program, "stan_file", None) or program)  # a cmdstanpy.CmdStanModel
    if text.endswith(".stan"):
        return Path(text).stem
    return "model_" + hashlib.sha256(text.encode()).hexdigest()[:8]

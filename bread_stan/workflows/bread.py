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

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..ais import engine
from ..stan.data import load_data
from ..errors import BreadStanError
from ..kernels.hmc import HMC, HMCParams
from ..kernels.nuts import NUTS, NUTSParams
from ..stan.model import unflatten_draws
from ..ais.results import BreadResult
from ..ais.betas import ScheduleSpec
from ..stan.simulator import Simulator, compile_with_simulator, draw_at, split_draw
from ..stan.tempered import StanTarget, compile_tempered
from ..ais.tuning import TunedKernel, TuningConfig, tune

__all__ = ["SamplerSettings", "RunSettings", "bread", "compare", "ResumeMismatchError"]

log = logging.getLogger(__name__)

_TRUTH, _PILOT, _PRIOR, _CHAINS, _CHECK = 0, 1, 2, 3, 4  # purposes of derived seeds


class ResumeMismatchError(BreadStanError):
    """The output directory holds results of a run with different settings."""


@dataclass(frozen=True)
class SamplerSettings:
    """The Markov kernel used at every temperature, and how it is tuned.

    ``kernel`` is ``"hmc"`` (``n_leapfrog`` steps) or ``"nuts"``
    (``max_depth``).  The step size (and, with ``adapt_metric``, a diagonal
    metric) is tuned along beta on ``pilot_chains`` never-scored chains, then
    frozen for forward and reverse runs alike.  For HMC, ``step_size_jitter`` and
    ``rescue_prob`` randomise the step size of each transition (see
    :class:`~bread_stan.kernels.hmc.HMCParams`); the default 10% of "rescue"
    transitions with much smaller steps frees chains that start deep in the
    prior's tails, which a fixed step size can leave stranded for the whole run.
    """

    kernel: str = "hmc"
    n_leapfrog: int = 10
    step_size_jitter: float = 0.0
    rescue_prob: float = 0.1
    max_depth: int = 8
    steps_per_temperature: int = 1
    target_accept: float | None = None
    adapt_metric: bool = True
    pilot_chains: int = 32
    pilot_grid: int = 16
    pilot_steps: int = 40

    def __post_init__(self):
        if self.kernel not in ("hmc", "nuts"):
            raise ValueError(f"unknown kernel {self.kernel!r}; use 'hmc' or 'nuts'")

    def make(self):
        """The kernel object and its base params."""
        if self.kernel == "hmc":
            return HMC(), HMCParams(step_size=0.1, n_leapfrog=self.n_leapfrog,
                                    step_size_jitter=self.step_size_jitter,
                                    rescue_prob=self.rescue_prob)
        return NUTS(), NUTSParams(step_size=0.1, max_depth=self.max_depth)

    def tuning_config(self) -> TuningConfig:
        return TuningConfig(n_grid=self.pilot_grid, adapt_steps=self.pilot_steps,
                            target_accept=self.target_accept, adapt_metric=self.adapt_metric)


@dataclass(frozen=True)
class RunSettings:
    """What to run: step counts, chains per direction, schedule, seed, threads.

    ``check_simulator`` runs the simulator check before the AIS runs (its result
    never changes the bounds, so it is not part of the resume fingerprint).
    """

    steps: tuple[int, ...] = (10, 100, 1000)
    chains: int = 100
    schedule: ScheduleSpec = field(default_factory=ScheduleSpec)
    seed: int = 0
    threads: int | None = None
    increment_blocks: int | None = 50
    progress: bool = True
    check_simulator: bool = True

    def __post_init__(self):
        steps = tuple(int(s) for s in self.steps)
        if not steps or min(steps) < 2:
            raise ValueError("steps must be numbers of distributions, each at least 2")
        if self.chains < 2:
            raise ValueError("chains must be at least 2 per direction (intervals need spread)")
        object.__setattr__(self, "steps", tuple(sorted(set(steps))))


def derived_seed(seed: int, *purpose: int) -> int:
    """A 31-bit seed for one purpose, a pure function of (seed, purpose)."""
    return int(np.random.SeedSequence([int(seed), *map(int, purpose)]).generate_state(1)[0]
               & 0x7FFFFFFF)


def _fingerprint(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _program_text(program) -> str:
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


def _simulate_problem(name, model, simulator: Simulator, data: Mapping, seed: int,
                      threads, truth_draw: Mapping | None = None) -> _Problem:
    compiled = compile_tempered(model)
    if truth_draw is None:
        truth_draw = draw_at(simulator.simulate(1, derived_seed(seed, _TRUTH)), 0)
    params, overrides = split_draw(truth_draw, compiled)
    target = StanTarget(compiled, {**data, **overrides}, threads=threads)
    x_star = target.param_unconstrain(params)
    return _Problem(name, target, x_star, _as_lists(params), _as_lists(overrides))


def _as_lists(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: np.asarray(v).tolist() for k, v in values.items()}


def _prior_draws(problem: _Problem, simulator: Simulator, n: int, seed: int) -> np.ndarray:
    draws = simulator.simulate(n, seed)
    params, _ = split_draw(draws, problem.target.compiled)
    return problem.target.param_unconstrain_batch(params)


def _constrained(problem: _Problem, u: np.ndarray) -> dict[str, np.ndarray]:
    flat = problem.target.param_constrain(u)
    return unflatten_draws(flat, problem.target.param_names())


def _run_problem(problem: _Problem, simulator: Simulator, sampler: SamplerSettings,
                 run: RunSettings, out_dir: Path | None, header: dict,
                 known_log_ml_bounds: Mapping[str, float] | None, data: Mapping
                 ) -> BreadResult:
    kernel, base_params = sampler.make()
    result = BreadResult(problem.name, header, [], {
        "truth": problem.truth, "simulated_data": problem.simulated_data,
        "known_log_ml_bounds": dict(known_log_ml_bounds or {})})
    done: set[int] = set()
    if out_dir is not None:
        done = _resume(result, out_dir, header)

    tuned_path = out_dir / "tuning.json" if out_dir is not None else None
    if tuned_path is not None and tuned_path.exists():
        tuned = TunedKernel.from_json(tuned_path.read_text())
    else:
        t0 = time.perf_counter()
        pilot = _prior_draws(problem, simulator, sampler.pilot_chains,
                             derived_seed(run.seed, _PILOT))
        tuned = tune(problem.target, kernel, base_params, pilot,
                     seed=derived_seed(run.seed, _PILOT), config=sampler.tuning_config())
        result.extra["tuning_seconds"] = time.perf_counter() - t0
        log.info("%s: tuned %s along beta in %.1f s (step sizes %.3g .. %.3g)", problem.name,
                 sampler.kernel, result.extra["tuning_seconds"], tuned.step_size.min(),
                 tuned.step_size.max())
        if tuned_path is not None:
            tuned_path.write_text(tuned.to_json())
    result.extra["tuning"] = tuned.to_dict()
    result.extra["simulator_check"] = _check(problem, simulator, data, sampler, run, tuned)
    if out_dir is not None:
        result.save_header(out_dir)

    for T in run.steps:
        if T in done:
            log.info("%s: %d distributions already done, loaded from %s", problem.name, T, out_dir)
            continue
        prior = _prior_draws(problem, simulator, run.chains, derived_seed(run.seed, _PRIOR, T))
        config = engine.RunConfig(steps=(T,), schedule=run.schedule,
                               steps_per_temperature=sampler.steps_per_temperature,
                               increment_blocks=run.increment_blocks, progress=run.progress)
        one = engine.run(problem.target, kernel, prior, problem.x_star,
                      seed=derived_seed(run.seed, _CHAINS, T), tuned=tuned, config=config,
                      model=problem.name)
        step = one.steps[0]
        step.draws = _constrained(problem, step.draws.pop("unconstrained"))
        result.steps.append(step)
        if out_dir is not None:
            result.save_step(out_dir, step)
        check = step.consistency()
        if not check.passed:
            log.warning("%s, %d distributions: %s", problem.name, T, check.message)
    result.steps.sort(key=lambda s: s.n_steps)
    if out_dir is not None:
        result.save(out_dir)
    return result


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
    run_file = out_dir / "run.json"
    if not run_file.exists():
        return set()
    saved = json.loads(run_file.read_text())
    if saved.get("settings", {}).get("fingerprint") != header["fingerprint"]:
        raise ResumeMismatchError(
            f"{out_dir} holds results of a run with different settings (model, data, "
            "seed, sampler or schedule); use a new output directory or delete it")
    previous = BreadResult.load(out_dir)
    result.steps.extend(s for s in previous.steps if s.n_steps in set(header["steps"]))
    return {s.n_steps for s in result.steps}


def _header(name: str, model, simulator, data: Mapping, sampler: SamplerSettings,
            run: RunSettings, hyper) -> dict:
    scored = {k: v for k, v in asdict(run).items()
              if k not in ("steps", "progress", "threads", "check_simulator")}
    fingerprint = _fingerprint(_program_text(model), _program_text(simulator),
                               {k: np.asarray(v).tolist() for k, v in data.items()},
                               asdict(sampler), asdict(sampler.tuning_config()), scored, hyper)
    return {"model": name, "fingerprint": fingerprint, "steps": list(run.steps),
            "sampler": asdict(sampler), "run": {**scored, "schedule": asdict(run.schedule)},
            "hyper": dict(hyper or {})}


def bread(model, simulator, data=None, *, sampler: SamplerSettings = SamplerSettings(),
          run: RunSettings = RunSettings(), hyper: Mapping[str, float] | None = None,
          known_log_ml_bounds: Mapping[str, float] | None = None,
          out_dir: str | Path | None = None, name: str | None = None) -> BreadResult:
    """Bound the Jeffreys divergence between AIS output and the posterior of ``model``.

    ``model`` and ``simulator`` are Stan programs (paths or program text; see
    ``stan_models/README.md`` for the conventions), ``data`` the model's data
    (dict or JSON path; the simulator reads it too, and its simulated variables
    replace the observed ones).  ``hyper`` fixes the simulator's hyperparameters.
    ``known_log_ml_bounds`` ({"upper": ..., "lower": ...}) adds one-sided KL
    bounds.  With ``out_dir``, every finished step count is saved at once and a
    rerun with the same settings continues where it stopped.
    """
    data = load_data(data)
    name = name or _default_name(model)
    (compiled,), sim_compiled = compile_with_simulator([model], simulator, hyper=hyper)
    sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
    problem = _simulate_problem(name, compiled, sim, data, run.seed, run.threads)
    header = _header(name, model, simulator, data, sampler, run, hyper)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    return _run_problem(problem, sim, sampler, run, out, header, known_log_ml_bounds, data)


def compare(models: Mapping[str, Any] | Sequence, simulator, data=None, *,
            sampler: SamplerSettings = SamplerSettings(), run: RunSettings = RunSettings(),
            hyper: Mapping[str, float] | None = None, out_dir: str | Path | None = None
            ) -> dict[str, BreadResult]:
    """BREAD on several programs of one model, on one shared simulated data set and
    exact posterior draw.  ``models`` maps labels to programs (or is a list of
    programs, labelled by file name).  Returns one result per label."""
    if not isinstance(models, Mapping):
        models = {_default_name(m): m for m in models}
    data = load_data(data)
    compiled, sim_compiled = compile_with_simulator(list(models.values()), simulator,
                                                    hyper=hyper)
    sim = Simulator(sim_compiled, data, hyper=hyper, threads=run.threads)
    truth = draw_at(sim.simulate(1, derived_seed(run.seed, _TRUTH)), 0)
    results = {}
    for (label, program), built in zip(models.items(), compiled):
        problem = _simulate_problem(label, built, sim, data, run.seed, run.threads, truth)
        header = _header(label, program, simulator, data, sampler, run, hyper)
        out = Path(out_dir) / label if out_dir is not None else None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        results[label] = _run_problem(problem, sim, sampler, run, out, header, None, data)
    return results


def _default_name(program) -> str:
    text = str(program)
    if text.endswith(".stan"):
        return Path(text).stem
    return "model_" + hashlib.sha256(text.encode()).hexdigest()[:8]

"""The real-data protocol's replicates: data sets simulated again with the fitted
hyperparameters, each tuned and run forward on its own, one task each on an
:class:`~bread_stan.parallel.executor.Executor` (the reference band of the agreement
score, :mod:`.agreement`); and the tuning and forward runs that the protocol's other
forward-only runs share with them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..ais import engine
from ..ais.results import DirectionResult
from ..ais.tuning import TunedKernel
from ..parallel.executor import Executor
from ..rng import Purpose, derived_seed
from ..stan.compile import CompiledModel
from ..stan.simulator import Simulator, draw_at
from ..ais.path_kinds import read_path
from ..ais.run_directory import RunDirectory
from .common import load_or_tune
from .problem import simulate_problem
from .protocol_result import ProtocolResult, replicate_path, save_direction
from .settings import RunSettings, SamplerSettings

if TYPE_CHECKING:
    from .protocol import ProtocolSettings

__all__ = ["tuned_kernel", "forward_run", "run_replicates"]

log = logging.getLogger(__name__)


def tuned_kernel(path: Path | None, target, kernel, base, pilot, seed, sampler,
                 progress: bool = False) -> TunedKernel:
    """The kernel tuned along beta on ``pilot`` (loaded from ``path`` when saved there)."""
    return load_or_tune(path, target, kernel, base, sampler.tuning_config(), seed,
                        lambda _: pilot, progress=progress)[0]


def forward_run(target, kernel, tuned: TunedKernel, betas, prior, seed: int, every,
                steps_per_temperature: int, progress: bool) -> engine.AISRun:
    """Forward AIS of the protocol's forward-only runs (real data, replicates)."""
    return engine.anneal(target, kernel, tuned.schedule(betas, steps_per_temperature),
                          [engine.Group("forward", prior, seed, 0)],
                          increments_every=every, progress=progress)[0]


def _replicate_problem(name: str, model, fixed_sim: Simulator, data: Mapping, seed: int,
                       threads, k: int):
    """The k-th replicate: a fresh (theta, data) drawn with the fitted hyperparameters."""
    truth_k = draw_at(fixed_sim.simulate(1, derived_seed(seed, Purpose.REPLICATE_TRUTH, k)), 0)
    return simulate_problem(f"{name} (replicate {k})", model, fixed_sim, data, seed,
                             threads, truth_k)


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
    tuned = job.tuned or tuned_kernel(path, problem_k.target, kernel, base, job.pilot,
                                      derived_seed(job.seed, Purpose.REPLICATE_PILOT, job.k),
                                      job.sampler, job.progress)
    forward = {}
    for T, (betas, every, prior) in job.steps.items():
        fwd = forward_run(problem_k.target, kernel, tuned, betas, prior,
                          derived_seed(job.seed, Purpose.REPLICATE_CHAINS, job.k, T), every,
                          job.sampler.steps_per_temperature, job.progress)
        forward[T] = fwd.to_direction_result()
        if job.out is not None:
            save_direction(replicate_path(job.out, job.k, T), forward[T])
            log.info("%s: replicate %d of %d, T=%d: median forward estimate %.4g, %.1f s",
                     job.name, job.k, job.replicates, T, float(np.median(fwd.log_estimates)),
                     fwd.wall_time)
    return tuned.to_dict(), forward


def run_replicates(executor: Executor, result: ProtocolResult, out: Path | None,
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
        tuned = (RunDirectory(path.parent, None).read(path.name, read_path, "a tuned kernel")
                 if path is not None else None)
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

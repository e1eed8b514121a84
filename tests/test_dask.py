"""The Dask executor: identical numbers with any shard size, faults, resume.

Bit-identity is exact equality (``np.array_equal``), not a tolerance: every chain
draws from its own random stream keyed (seed, stream, chain index), so the same
chain computes the same floating-point numbers in any batch, shard or process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bread_stan.ais import engine
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.kernels.hmc import HMC
from bread_stan.kernels.nuts import NUTS
from bread_stan.parallel.executor import DaskClientClosedError, Executor, SchedulerLostError
from bread_stan.stan.compile import compile_many
from bread_stan.stan.tempered import StanTarget
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread, compare
from bread_stan.stan import datasets
from bread_stan.workflows.fit import FitSettings
from bread_stan.workflows.protocol import ProtocolSettings, protocol
from bread_stan.workflows.aide import AIDESettings, aide
from bread_stan.workflows.subjective import BaseSettings, subjective

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402  (installed with distributed)

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = ROOT / "tests" / "stan"
MODEL, SIMULATOR = TEST_STAN / "normal_mean.stan", TEST_STAN / "normal_mean_sim.stan"
LINREG = ROOT / "stan_models" / "linear_regression.stan"
LINREG_SIM = ROOT / "stan_models" / "linear_regression_sim.stan"
DATA = {"N": 20, "sigma": 1.0, "tau": 2.0}
DATA_Y = {**DATA, "y": np.random.default_rng(2).normal(0.5, 1.0, 20)}
SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                          pilot_steps=20)
RUN = RunSettings(steps=(3, 30), chains=20, seed=1, progress=False, check_simulator=False)
UNREACHABLE = "tcp://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(scope="module")
def local():
    compile_many([MODEL, SIMULATOR], workers=2)
    return bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RUN)


@pytest.fixture(scope="module")
def client():
    """This module's cluster of 2 worker processes and its client, closed at the module's
    end.  Not the process's default client: the package must use the client it is given.
    Its HTTP server takes a free port (not 8787, which another cluster may hold)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        yield c


def assert_same_numbers(a, b):
    """Per-chain L, U, running estimates, final positions, gradients, diagnostics."""
    assert [s.n_steps for s in a.steps] == [s.n_steps for s in b.steps]
    for x, y in zip(a.steps, b.steps):
        for direction in ("forward", "reverse"):
            dx, dy = getattr(x, direction), getattr(y, direction)
            assert np.array_equal(dx.log_estimates, dy.log_estimates)
            assert np.array_equal(dx.cumulative, dy.cumulative)
            assert dx.n_grad == dy.n_grad and dx.diagnostics == dy.diagnostics
        assert np.array_equal(x.betas, y.betas)
        assert x.draws.keys() == y.draws.keys()
        assert all(np.array_equal(x.draws[k], y.draws[k]) for k in x.draws)


# -- a block of chains alone computes what it computes in the whole batch ----------

def _schedule(kind: str, metric: str, d: int, T: int = 12) -> KernelSchedule:
    rng = np.random.default_rng(0)
    if metric == "dense":
        a = rng.normal(size=(d, d))
        inv = np.repeat((a @ a.T / d + np.eye(d))[None], T, axis=0)
    else:
        inv = np.exp(rng.normal(size=(T, d)) * 0.3)
    fixed = ({"n_leapfrog": 4, "step_size_jitter": 0.2, "rescue_prob": 0.2} if kind == "hmc"
             else {"max_depth": 5})
    return KernelSchedule(np.linspace(0, 1, T) ** 3, 2, kind, np.full(T, 0.15), inv, fixed)


@pytest.mark.parametrize("kind", ["hmc", "nuts"])
@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_a_block_of_chains_run_alone_matches_the_whole_batch(compiled, linear_data, kind,
                                                            metric):
    target = StanTarget(compiled["linear_regression"], linear_data, threads=1)
    kernel = HMC() if kind == "hmc" else NUTS()
    schedule = _schedule(kind, metric, target.dim)
    start = np.random.default_rng(1).normal(size=(9, target.dim)) * 0.5
    whole = engine.forward(target, kernel, schedule, start, seed=5, increments_every=3)
    blocks = [engine.forward(target, kernel, schedule, start[lo:hi], seed=5,
                             increments_every=3, first_chain=lo)
              for lo, hi in ((0, 4), (4, 5), (5, 9))]
    for name in ("log_estimates", "final_positions", "cumulative"):
        assert np.array_equal(getattr(whole, name),
                              np.concatenate([getattr(b, name) for b in blocks])), name
    for name, value in whole.chain_stats.items():
        assert np.array_equal(value, np.concatenate([b.chain_stats[name] for b in blocks]))
    again = engine.reverse(target, kernel, schedule, start[0], seed=5, n_chains=3,
                           first_chain=6)
    assert np.array_equal(again.log_estimates, engine.reverse(
        target, kernel, schedule, start[0], seed=5, n_chains=9).log_estimates[6:])


# -- BREAD on a cluster of 2 worker processes ---------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("chains_per_shard", [None, 20, 7])
def test_dask_gives_the_local_numbers_for_any_shard_size(local, client, chains_per_shard,
                                                         tmp_path):
    executor = Executor(client=client, chains_per_shard=chains_per_shard)
    result = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RUN, executor=executor,
                   out_dir=tmp_path)
    assert_same_numbers(local, result)
    assert result.extra["executor"]["kind"] == "dask"
    assert result.extra["executor"]["workers"] == 2
    assert not list((tmp_path / "shards").glob("*.npz"))  # joined into steps_T.npz


@pytest.mark.slow
def test_dask_gives_the_local_numbers_with_several_exact_draws(client):
    run = replace(RUN, exact_draws=3, steps=(3,))
    here = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run)
    there = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run,
                  executor=Executor(client=client, chains_per_shard=4))
    assert_same_numbers(here, there)
    assert np.array_equal(here.steps[0].forward.problems, there.steps[0].forward.problems)


@pytest.mark.slow
def test_a_killed_worker_has_its_shards_rerun_and_the_numbers_do_not_change(local, client):
    executor = Executor(client=client, chains_per_shard=2)
    run = executor.run
    killed = []

    def run_and_kill(function, tasks, on_result, **kw):
        def arrived(key, value):
            busy = [w for w, keys in client.processing().items() if keys]
            if not killed and busy:  # kill a worker process busy with a shard, once
                pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            on_result(key, value)
        run(function, tasks, arrived, **kw)

    executor.run = run_and_kill
    result = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RUN, executor=executor)
    assert killed
    assert_same_numbers(local, result)
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it


@pytest.mark.slow
def test_an_interrupted_client_resumes_from_the_saved_shards(local, client, tmp_path):
    executor = Executor(client=client, chains_per_shard=5)
    run = executor.run
    seen = []

    def interrupted_after_three(function, tasks, on_result, **kw):
        seen.append(len(tasks))

        def arrived(key, value):
            on_result(key, value)
            if len(seen) == 1 and sum(1 for _ in (tmp_path / "shards").glob("*.npz")) >= 3:
                raise KeyboardInterrupt
        run(function, tasks, arrived, **kw)

    executor.run = interrupted_after_three
    with pytest.raises(KeyboardInterrupt):
        bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RUN, executor=executor,
              out_dir=tmp_path)
    assert len(list((tmp_path / "shards").glob("*.npz"))) == 3
    result = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RUN, executor=executor,
                   out_dir=tmp_path)
    total = 2 * 2 * 4  # step counts x directions x blocks of 5 chains
    assert seen == [total, total - 3]  # the rerun ran only what was missing
    assert_same_numbers(local, result)


@pytest.mark.slow
def test_protocol_replicates_on_dask_give_the_local_numbers(client, tmp_path):
    nhefs = datasets.load("nhefs")
    data = {"N": 60, "K": nhefs["K"], "X": nhefs["X"][:60], "y": nhefs["y"][:60]}
    compile_many([LINREG, LINREG_SIM], workers=2)
    run = RunSettings(steps=(5,), chains=8, seed=4, progress=False, check_simulator=False)
    settings = ProtocolSettings(s_sweep=(0,), replicates=2,
                                fit=FitSettings(chains=2, warmup=100, draws=50))
    kw = dict(sampler=SAMPLER, run=run, settings=settings)
    here = protocol(LINREG, LINREG_SIM, data, **kw)
    there = protocol(LINREG, LINREG_SIM, data, **kw, out_dir=tmp_path,
                     executor=Executor(client=client))
    assert sorted(there.replicate_forward) == [1, 2]
    for k, by_steps in here.replicate_forward.items():
        for T, d in by_steps.items():
            assert np.array_equal(d.log_estimates, there.replicate_forward[k][T].log_estimates)
            assert np.array_equal(d.cumulative, there.replicate_forward[k][T].cumulative)
    assert there.extra["executor"]["kind"] == "dask"
    assert (tmp_path / "replicates" / "r2" / "forward_5.npz").exists()


# -- an unreachable or vanished scheduler -------------------------------------------

def test_an_unreachable_scheduler_is_one_clear_line():
    with pytest.raises(SchedulerLostError) as error:
        Executor(UNREACHABLE, connect_timeout=0.5)
    text = str(error.value)
    assert UNREACHABLE in text and "\n" not in text
    with pytest.raises(ValueError, match="connect timeout must be a positive"):
        Executor(UNREACHABLE, connect_timeout=0)


@pytest.mark.parametrize("command", ["run", *(pytest.param(c, marks=pytest.mark.slow)
                                             for c in ("subjective", "aide"))])
def test_the_cli_reports_an_unreachable_scheduler_without_a_traceback(tmp_path, command):
    options = {"run": ["--simulator", str(SIMULATOR), "--steps", "3", "--chains", "4"],
               "subjective": ["--steps", "3", "--chains", "4"], "aide": []}[command]
    out = subprocess.run(
        [sys.executable, "-m", "bread_stan.cli", command, str(MODEL), *options,
         "--data", json_file(tmp_path), "--scheduler", UNREACHABLE, "--connect-timeout", "1",
         "--quiet", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert UNREACHABLE in out.stderr and "cannot reach the Dask scheduler" in out.stderr


@pytest.mark.slow
def test_a_scheduler_that_goes_away_stops_the_run_with_one_line_and_the_shards_saved(
        tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{free.getsockname()[1]}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                  "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                                  "--no-dashboard"], **quiet)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                               "--nthreads", "1", "--no-dashboard"], **quiet)
    try:
        executor = Executor(address, chains_per_shard=2, connect_timeout=30)
        executor.client.wait_for_workers(1, timeout=30)
        # its client is not made the process's default: Dask's global settings stay put
        assert dask.config.get("scheduler", None) is None
        with pytest.raises(ValueError, match="No clients found"):
            distributed.default_client()
        run = executor.run

        def run_and_stop_scheduler(function, tasks, on_result, **kw):
            def arrived(key, value):
                on_result(key, value)
                scheduler.kill()
            run(function, tasks, arrived, **kw)

        executor.run = run_and_stop_scheduler
        # T = 300 shards take a few tenths of a second each, so the scheduler is gone
        # before they are all done, however late the client sees the first arrival.
        # Depending on timing the loss shows as a closed comm or as futures the client
        # cancelled (FutureCancelledError); both must give the one line.
        with pytest.raises(SchedulerLostError) as error:
            bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=replace(RUN, steps=(3, 300)),
                  executor=executor, out_dir=tmp_path)
        saved = list((tmp_path / "shards").glob("*.npz"))
        text = str(error.value)
        assert "\n" not in text and address in text and str(tmp_path / "shards") in text
        assert f"{len(saved)} shards finished" in text and saved
        executor.close()
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()


def test_futures_cancelled_by_a_lost_connection_count_as_a_lost_scheduler():
    """Seen in CI on a loaded machine: the client cancels the pending futures
    (reason "scheduler-connection-lost") while its status still reads "running"."""
    from types import SimpleNamespace

    from distributed.client import FutureCancelledError

    running = SimpleNamespace(client=SimpleNamespace(status="running"))
    lost = FutureCancelledError("bread-T3-p0-forward-2-2", "scheduler-connection-lost")
    assert Executor._scheduler_lost(running, lost)
    assert not Executor._scheduler_lost(running, ValueError("a task's own error"))


@pytest.mark.slow
def test_a_closed_client_is_one_clear_line(client):
    """A client closed after it was given, or before: every use of the cluster stops with
    one line naming the fix before anything is sent (Dask itself: "IOLoop is closed")."""
    given = distributed.Client(client.scheduler.address, set_as_default=False)
    executor = Executor(client=given)
    given.close()
    for use in (executor.describe, lambda: executor.share(1),
                lambda: executor.run(abs, {"a": (-1,)}, lambda key, value: None)):
        with pytest.raises(DaskClientClosedError) as error:
            use()
        text = str(error.value)
        assert "\n" not in text and "is closed" in text and "running distributed.Client" in text
    with pytest.raises(DaskClientClosedError):
        Executor(client=given)


def json_file(directory: Path) -> str:
    path = directory / "data.json"
    path.write_text('{"N": 20, "sigma": 1.0, "tau": 2.0}')
    return str(path)


# -- subjective divergence on a cluster ----------------------------------------------

SUBJECTIVE_RUN = replace(RUN, steps=(3, 20), chains=24)


@pytest.fixture(scope="module")
def reference():
    """Posterior-like draws of mu (2 chains x 10): thinned to fewer reverse chains (about
    ESS, at most 20) than the 24 forward chains, so the directions' shards differ."""
    return {"mu": np.random.default_rng(3).normal(0.5, 0.3, size=(2, 10))}


@pytest.mark.slow
@pytest.mark.parametrize("base", ["gaussian", "prior"])
def test_subjective_on_dask_gives_the_local_numbers(client, reference, base):
    kw = dict(reference=reference, sampler=SAMPLER, run=SUBJECTIVE_RUN,
              base=BaseSettings(base), simulator=SIMULATOR if base == "prior" else None)
    here = subjective(MODEL, DATA_Y, **kw)
    there = subjective(MODEL, DATA_Y, **kw, executor=Executor(client=client, chains_per_shard=5))
    assert (here.extra["subjective"]["reverse_chains"]
            < here.steps[0].forward.log_estimates.size)
    assert_same_numbers(here, there)
    assert there.extra["executor"]["kind"] == "dask"


@pytest.mark.slow
def test_subjective_on_dask_resumes_from_the_saved_shards(client, reference, tmp_path):
    kw = dict(reference=reference, sampler=SAMPLER, run=SUBJECTIVE_RUN)
    here = subjective(MODEL, DATA_Y, **kw)
    executor = Executor(client=client, chains_per_shard=4)
    run = executor.run
    seen = []

    def interrupted_after_two(function, tasks, on_result, **kw):
        seen.append(len(tasks))

        def arrived(key, value):
            on_result(key, value)
            if len(seen) == 1 and sum(1 for _ in (tmp_path / "shards").glob("*.npz")) >= 2:
                raise KeyboardInterrupt
        run(function, tasks, arrived, **kw)

    executor.run = interrupted_after_two
    with pytest.raises(KeyboardInterrupt):
        subjective(MODEL, DATA_Y, **kw, executor=executor, out_dir=tmp_path)
    there = subjective(MODEL, DATA_Y, **kw, executor=executor, out_dir=tmp_path)
    assert seen[1] == seen[0] - 2  # the rerun ran only what was missing
    assert_same_numbers(here, there)


# -- AIDE on a cluster ------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("base", ["gaussian", "prior"])
def test_aide_on_dask_gives_the_local_numbers(client, base):
    """AIS gold and target, each with a meta-inference trace besides its own: the AIS runs
    and the reversals run in blocks of 3 chains (the last block shorter)."""
    kw = dict(gold="ais:8", target="ais:3",
              settings=AIDESettings(n_gold=10, n_target=7, m_gold=2, m_target=2),
              run=RunSettings(seed=5, threads=1, progress=False), sampler=SAMPLER,
              base=BaseSettings(base),
              simulator=SIMULATOR if base == "prior" else None)
    here = aide(MODEL, DATA_Y, **kw)
    there = aide(MODEL, DATA_Y, **kw, executor=Executor(client=client, chains_per_shard=3))
    assert np.array_equal(here.per_run_gold, there.per_run_gold)
    assert np.array_equal(here.per_run_target, there.per_run_target)
    assert here.estimate == there.estimate
    assert [c.gradients for c in here.cost.values()] == [c.gradients for c in
                                                         there.cost.values()]
    assert there.settings["executor"]["kind"] == "dask"


# -- compare: whole programs as tasks ---------------------------------------------------

@pytest.mark.slow
def test_compare_sends_whole_programs_and_resumes_with_the_local_numbers(client, tmp_path):
    run = replace(RUN, steps=(3, 10), chains=12)
    models = {"a": MODEL, "b": str(MODEL)}
    kw = dict(sampler=SAMPLER, run=run)
    here = compare(models, SIMULATOR, DATA, **kw)
    executor = Executor(client=client)
    run_tasks = executor.run
    sent = []

    def recording(function, tasks, on_result, **kw):
        sent.append((function.__name__, sorted(tasks)))
        run_tasks(function, tasks, on_result, **kw)

    executor.run = recording
    for out in (None, tmp_path):
        there = compare(models, SIMULATOR, DATA, **kw, executor=executor, out_dir=out)
        for label in models:
            assert_same_numbers(here[label], there[label])
            assert there[label].extra["executor"]["kind"] == "dask"
    assert sent[0] == sent[1] == ("_run_program", ["a", "b"])
    (tmp_path / "b" / "steps_10.npz").unlink()
    sent.clear()
    again = compare(models, SIMULATOR, DATA, **kw, executor=executor, out_dir=tmp_path)
    assert sent[0] == ("_run_program", ["b"])  # only the missing step count's program
    for label in models:
        assert_same_numbers(here[label], again[label])

"""The local executor runs the shard path with the engine's own batch (issue 25).

Every workflow sends its AIS step counts through ``parallel.steps.run_steps_in_shards``;
locally a step count's shard per problem holds both directions in one batch, so the
joined step must equal ``runs.run``'s bit for bit (same chains, same random streams,
same batch).  An executor that splits the chains into blocks (as Dask does, here run
in this process) must give the same numbers too, since every chain's stream is keyed
by its global index and nothing reduces across chains.  Exact equality, no tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.ais import engine
from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.parallel.executor import Executor
from bread_stan.parallel.local import LocalExecutor
from bread_stan.parallel.shards import ShardContext, plan_shards
from bread_stan.parallel.steps import run_steps_in_shards

STEPS = (12, 30)
CONFIG = engine.RunConfig(steps=STEPS, schedule=ScheduleSpec("linear"), increment_blocks=4)
PARAMS = HMCParams(0.2, 5)


@pytest.fixture(scope="module")
def problem():
    model, w_true = simulate_regression(20, 3, correlation=0.6, noise_sd=0.7, seed=11)
    prior = model.sample_prior(np.random.default_rng(12), 40)
    return model, prior, w_true


class _SplittingExecutor(LocalExecutor):
    """Runs here, but cuts each direction's chains into blocks of 7, as Dask would."""

    in_process = False

    def block_size(self, chains):
        return 7


def _by_engine(problem, T):
    model, prior, w_true = problem
    return runs.run(model, HMC(), prior, w_true, seed=T, path=PARAMS,
                      config=engine.RunConfig(steps=(T,), schedule=CONFIG.schedule,
                                              increment_blocks=CONFIG.increment_blocks)
                      ).steps[0]


def _by_shards(problem, executor, out_dir=None):
    model, prior, w_true = problem
    context = ShardContext(None, {}, HMC(), PARAMS, CONFIG, target=model)
    steps = {}
    run_steps_in_shards([context], lambda T: [(prior, w_true)], lambda T, k: T, STEPS, 1,
                        out_dir, "fp", executor, lambda parts: steps.setdefault(
                            parts[0].n_steps, parts[0]), progress=False)
    return steps


def _assert_same_step(a, b):
    np.testing.assert_array_equal(a.betas, b.betas)
    np.testing.assert_array_equal(a.draws["unconstrained"], b.draws["unconstrained"])
    for x, y in ((a.forward, b.forward), (a.reverse, b.reverse)):
        np.testing.assert_array_equal(x.log_estimates, y.log_estimates)
        np.testing.assert_array_equal(x.cumulative, y.cumulative)
        np.testing.assert_array_equal(x.cumulative_at, y.cumulative_at)
        assert x.n_grad == y.n_grad
        assert x.diagnostics == y.diagnostics


@pytest.mark.parametrize("executor", [LocalExecutor(), Executor(), _SplittingExecutor()],
                         ids=["local", "default", "split"])
def test_the_shard_path_gives_the_engines_numbers(problem, executor):
    steps = _by_shards(problem, executor)
    assert sorted(steps) == list(STEPS)
    for T in STEPS:
        _assert_same_step(steps[T], _by_engine(problem, T))


def test_the_local_plan_is_one_shard_per_problem_holding_both_directions():
    assert Executor().block_size(40) is None and Executor().in_process
    plan = plan_shards(12, [40, 25], LocalExecutor().block_size(40))
    assert [(s.problem, s.direction, s.first_chain, s.n_chains) for s in plan] == [
        (0, "both", 0, 40), (1, "both", 0, 25)]
    value = object()
    assert Executor().share(value) is value


def test_a_saved_local_shard_is_reused_and_the_shard_folder_left_empty(problem, tmp_path):
    first = _by_shards(problem, LocalExecutor(), tmp_path)
    assert not (tmp_path / "shards").exists()  # joined shards are removed

    class _Saving(LocalExecutor):  # an interrupted run: shards saved, none joined
        def run(self, function, tasks, on_result, **kw):
            from bread_stan.store import save_unit
            (tmp_path / "shards").mkdir()
            for key, args in tasks.items():
                arrays, meta = function(*args)
                save_unit(tmp_path / "shards" / f"{key}.npz", arrays, {**meta,
                                                                       "fingerprint": "fp"})

    _by_shards(problem, _Saving(), tmp_path)

    class _Refusing(LocalExecutor):
        def run(self, function, tasks, on_result, **kw):
            assert not tasks, "saved shards were run again"

    resumed = _by_shards(problem, _Refusing(), tmp_path)
    for T in STEPS:
        _assert_same_step(resumed[T], first[T])

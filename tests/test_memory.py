"""Memory flat in T: lazy betas and interpolated kernel params equal the arrays bit for bit,
and a run's peak memory does not grow with the number of temperatures."""

import tracemalloc

import numpy as np
import pytest

from bread_stan.ais import engine as ais
from bread_stan.ais import runs
from bread_stan.ais.betas import Betas, ScheduleError, ScheduleSpec, thermodynamic, validate
from bread_stan.ais.frozen_kernels import InterpolatedSchedule, KernelSchedule
from bread_stan.ais.results import StepResult
from bread_stan.ais.tuning import TuningConfig, tune
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.workflows.common import cost_estimate


# The whole-array schedules as they were before they became lazy (commit e0df00b),
# frozen here as the oracle: the lazy blocks must reproduce them bit for bit.
def _old_sigmoidal(n, sharpness=4.0):
    s = 1.0 / (1.0 + np.exp(-sharpness * np.linspace(-1.0, 1.0, n)))
    b = (s - s[0]) / (s[-1] - s[0])
    b[0], b[-1] = 0.0, 1.0
    return b


def _old_geometric(n, start=1e-4):
    b = np.concatenate([[0.0], np.geomspace(start, 1.0, n - 1)]) if n > 2 else np.array([0., 1.])
    b[-1] = 1.0
    return b


def _old_thermodynamic(n, g, s):
    from bread_stan.ais.betas import _segment_lengths
    s = np.maximum(s, 1e-6 * s[s > 0].min())
    lengths, crossover = _segment_lengths(g, s)
    edges = np.concatenate([[0.0], np.cumsum(lengths)])
    targets = edges[-1] * np.arange(1, n - 1) / (n - 1)
    seg = np.clip(np.searchsorted(edges, targets, side="right") - 1, 0, g.size - 2)
    r = targets - edges[seg]
    b = np.empty(targets.size)
    first = seg == 0
    if np.isfinite(crossover):
        b[first] = crossover * np.expm1(r[first] / (s[0] * crossover))
    else:
        c = (s[1] - s[0]) / g[1]
        rf = r[first]
        b[first] = (2.0 * rf / (s[0] + np.sqrt(s[0] ** 2 + 2.0 * c * rf)) if c > 0
                    else rf / s[0])
    i = seg[~first]
    gi, si = g[i], s[i]
    k = np.log(s[i + 1] / si) / np.log(g[i + 1] / gi)
    x = r[~first] / (si * gi)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        b[~first] = np.where(np.abs(k + 1.0) < 1e-9, gi * np.exp(x),
                             gi * np.maximum(1.0 + x * (k + 1.0), 0.0) ** (1.0 / (k + 1.0)))
    out = np.concatenate([[0.0], np.clip(b, 0.0, 1.0), [1.0]])
    out[1:-1] = np.maximum.accumulate(out[1:-1])
    return out


def _curves(seed=0, count=4):
    """Random sd curves on random grids: falling, rising and mixed."""
    rng = np.random.default_rng(seed)
    for rep in range(count):
        g = np.concatenate([[0.0], np.sort(rng.uniform(0, 1, 9)), [1.0]])
        s = np.exp(rng.normal(0, 3, g.size))
        yield g, (np.sort(s)[::-1] if rep == 0 else np.sort(s) if rep == 1 else s)


SIZES = [2, 3, 5, 1000, Betas.BLOCK - 1, Betas.BLOCK, Betas.BLOCK + 1, 3 * Betas.BLOCK + 17]


@pytest.mark.parametrize("T", SIZES)
def test_lazy_betas_equal_the_whole_array_schedules_bit_for_bit(T):
    cases = [(Betas("linear", T), np.linspace(0.0, 1.0, T)),
             (Betas("sigmoid", T), _old_sigmoidal(T)),
             (Betas("sigmoid", T, sharpness=11.0), _old_sigmoidal(T, 11.0)),
             (Betas("geometric", T), _old_geometric(T)),
             (Betas("geometric", T, start=0.03), _old_geometric(T, 0.03))]
    cases += [(Betas("adaptive", T, grid_betas=g, loglik_sd=s), _old_thermodynamic(T, g, s))
              for g, s in _curves()]
    rng = np.random.default_rng(T)
    for lazy, whole in cases:
        assert len(lazy) == T
        np.testing.assert_array_equal(np.asarray(lazy), whole, err_msg=repr(lazy))
        at = rng.integers(0, T, 40)
        np.testing.assert_array_equal(lazy[at], whole[at])
        assert [lazy[int(i)] for i in at] == whole[at].tolist()
        assert lazy[-1] == 1.0 and np.array_equal(lazy[1:3], whole[1:3])


@pytest.mark.parametrize("where", [5, Betas.BLOCK])
def test_coinciding_or_falling_adaptive_betas_are_refused_in_any_block(monkeypatch, where):
    """Where rounding makes the inverted length fall or repeat (here forced at
    ``where``, inside the first block or at the start of the second), the
    schedule is refused as before (the old running maximum turned a fall into a
    tie, and ties were refused)."""
    from bread_stan.ais import betas as module

    def interior(self, n, index):
        b = index / (n - 1)
        return np.where(index == where, b - 3.0 / (n - 1), b)
    monkeypatch.setattr(module._LengthCurve, "interior", interior)
    g, s = next(_curves())
    with pytest.raises(ScheduleError, match="coinciding betas"):
        Betas("adaptive", 2 * Betas.BLOCK, grid_betas=g, loglik_sd=s)


def test_lazy_betas_save_and_rebuild_from_their_description(tmp_path):
    g, s = next(_curves())
    lazy = ScheduleSpec("adaptive").lazy(5000, type("Tuned", (), {"grid_betas": g,
                                                                   "loglik_sd": s}))
    again = Betas.from_dict(lazy.to_dict())
    np.testing.assert_array_equal(np.asarray(again), np.asarray(lazy))
    step = StepResult(5000, *(ais.AISRun("forward", np.zeros(3), np.zeros((3, 1)), 0, 0.0,
                                         {}, {}, log_weights=np.zeros(3)).to_direction_result(),) * 2, lazy)
    step.save(tmp_path / "step.npz")
    loaded = StepResult.load(tmp_path / "step.npz")
    assert isinstance(loaded.betas, Betas)
    np.testing.assert_array_equal(np.asarray(loaded.betas), np.asarray(lazy))


@pytest.fixture(scope="module")
def tuned_pair():
    """A diagonal- and a dense-metric tuned kernel on a 6-parameter regression."""
    model, _ = simulate_regression(60, 6, correlation=0.7, seed=4)
    prior = model.sample_prior(np.random.default_rng(1), 16)
    out = {}
    for metric in ("diag", "dense"):
        out[metric] = tune(model, HMC(), HMCParams(0.3, 3), prior, seed=2,
                           config=TuningConfig(pilot_grid=6, pilot_steps=6, adapt_metric=True,
                                               metric=metric, pilot_floor=1e-3))
    assert out["dense"].dense and not out["diag"].dense
    return model, out


@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_interpolated_params_equal_the_per_temperature_arrays_bit_for_bit(tuned_pair, metric):
    """Every temperature's params, read block by block in the engine's orders
    (forward up, reverse down, interleaved), equal the whole-array interpolation
    of today's KernelSchedule entry for entry."""
    tuned = tuned_pair[1][metric]
    T = 9000  # several blocks of params (4096 diagonal, 1771 dense) and of betas
    lazy = tuned.schedule(ScheduleSpec("adaptive").lazy(T, tuned), 2)
    assert isinstance(lazy, InterpolatedSchedule) and lazy.block < T
    whole = lazy.materialise()
    assert isinstance(whole, KernelSchedule) and whole.step_size.shape == (T,)
    assert np.unique(whole.step_size).size > T // 2  # entries differ: a shift would show
    order = np.ravel(np.column_stack([np.arange(1, T), np.arange(T - 2, -1, -1)]))
    for t in order:
        a, b = lazy.params_at(t), whole.params_at(t)
        assert a.step_size == b.step_size and a.n_leapfrog == b.n_leapfrog
        assert np.array_equal(a.inv_metric, b.inv_metric)
    again = KernelSchedule.from_json(lazy.to_json())
    np.testing.assert_array_equal(again.inv_metric, whole.inv_metric)


def test_constant_params_schedule_stores_nothing_per_temperature():
    params = HMCParams(0.25, 4, np.array([1.0, 2.0]))
    lazy = KernelSchedule.constant(Betas("sigmoid", 10**6), params)
    assert lazy.params_at(123_456).step_size == 0.25
    np.testing.assert_array_equal(lazy.params_at(999_999).inv_metric, [1.0, 2.0])
    assert sum(block[0].nbytes + block[1].nbytes for block in lazy._cache.values()) < 2**20


def _peak_bytes(model, tuned, prior, post, T):
    config = ais.RunConfig(steps=(T,), schedule=ScheduleSpec("adaptive"), increment_blocks=50)
    tracemalloc.start()
    try:
        runs.run(model, HMC(), prior, post, seed=5, path=tuned, config=config)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_peak_memory_of_a_run_does_not_grow_with_T():
    """A 250-parameter regression (diagonal metric, 2 + 2 chains, one leapfrog step):
    per-temperature arrays would need about 16 d = 4 kB per temperature, 40 MB
    more at T = 10,001 than at T = 1,001; the traced peak may grow by at most 0.5 MB
    (the cached blocks of betas fill up only beyond 4 x 4096 temperatures)."""
    model, w = simulate_regression(100, 250, seed=6)
    rng = np.random.default_rng(7)
    tuned = tune(model, HMC(), HMCParams(0.1, 1), model.sample_prior(rng, 8), seed=8,
                 config=TuningConfig(pilot_grid=5, pilot_steps=4, adapt_metric=True,
                                     pilot_floor=1e-3, metric="diag"))
    prior, post = model.sample_prior(rng, 2), model.sample_posterior(rng, 2)
    small = _peak_bytes(model, tuned, prior, post, 1_001)
    large = _peak_bytes(model, tuned, prior, post, 10_001)
    assert large < small + 2**19, (small, large)


def test_cost_estimate_memory_does_not_grow_with_T():
    tuned = type("Tuned", (), {"seconds_per_transition": 1e-4})
    _, small = cost_estimate(tuned, [1000], 100, 50)
    _, large = cost_estimate(tuned, [10**7], 100, 50)
    assert small == large and small < 2**30
    _, more_chains = cost_estimate(tuned, [1000], 10_000, 50)
    assert more_chains > small


def test_validate_still_refuses_bad_arrays():
    with pytest.raises(ScheduleError, match="strictly increasing"):
        validate([0.0, 0.5, 0.5, 1.0])

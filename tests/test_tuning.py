"""Pilot tuning: reaches the target acceptance, freezes, serialises, and is used as is."""

import numpy as np
import pytest

from bread_stan.conjugate import simulate_regression
from bread_stan.kernel_schedule import KernelSchedule
from bread_stan.kernels.base import initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.rng import ChainRandom
from bread_stan.schedules import sigmoidal
from bread_stan.tuning import TunedKernel, TuningConfig, tune


@pytest.mark.parametrize("kernel, base, metric", [(HMC(), HMCParams(1.0, 8), False),
                                                   (NUTS(), NUTSParams(1.0, max_depth=8), True)])
def test_tuned_step_sizes_hit_the_target_acceptance(kernel, base, metric):
    model, _ = simulate_regression(40, 3, correlation=0.7, noise_sd=0.5, seed=1)
    rng = np.random.default_rng(0)
    config = TuningConfig(n_grid=8, adapt_steps=30, adapt_metric=metric)
    tuned = tune(model, kernel, base, model.sample_prior(rng, 32), seed=3, config=config)
    target = 0.65 if isinstance(kernel, HMC) else 0.8
    # the pilot's mean acceptance over the late adaptation steps, 32 chains
    assert np.all(np.abs(tuned.accept - target) < 0.1), tuned.accept
    assert tuned.step_size[-1] < tuned.step_size[0]  # the posterior is narrower than the prior
    ks = tuned.schedule(sigmoidal(50))
    assert ks.kind == tuned.kind and ks.step_size.shape == (50,)
    assert (ks.inv_metric is not None) == metric
    # On exact posterior draws the frozen step size accepts at least about as
    # often as targeted (pilot chains lag behind the annealing, so tuning errs
    # towards smaller steps; HMC's acceptance is not monotone in the step size).
    n = 400
    state = initial_state(model, model.sample_posterior(rng, n))
    _, info = kernel.step(ChainRandom.from_seed(1, n), state, model, np.ones(n), ks.params_at(49))
    assert info.accept_stat.mean() > target - 0.1


def test_tuned_kernel_round_trip_gives_identical_schedules():
    tk = TunedKernel("nuts", np.array([0.0, 0.1, 1.0]), np.array([1.0, 0.5, 0.2]),
                     np.array([[1.0, 2.0], [0.5, 1.0], [0.1, 0.2]]), {"max_depth": 7}, 1e-3,
                     np.array([0.8, 0.8, 0.8]))
    back = TunedKernel.from_json(tk.to_json())
    a, b = tk.schedule(sigmoidal(30)), back.schedule(sigmoidal(30))
    np.testing.assert_array_equal(a.step_size, b.step_size)
    np.testing.assert_array_equal(a.inv_metric, b.inv_metric)
    assert a.params_at(3).max_depth == 7
    # interpolation passes through the grid values
    at_grid = tk.schedule(np.array([0.0, 0.1, 1.0]))
    np.testing.assert_allclose(at_grid.step_size, tk.step_size)
    back2 = KernelSchedule.from_dict(a.to_dict())
    p, q = back2.params_at(10), a.params_at(10)
    assert p.step_size == q.step_size and p.max_depth == q.max_depth
    np.testing.assert_array_equal(p.inv_metric, q.inv_metric)

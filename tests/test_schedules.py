"""Beta schedules and the frozen kernel schedule: shapes, validation, round trips."""

import pickle

import numpy as np
import pytest

from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.kernels.hmc import HMCParams
from bread_stan.kernels.nuts import NUTSParams
from bread_stan.ais.betas import (ScheduleError, ScheduleSpec, geometric, linear, sigmoidal,
                                  validate)


@pytest.mark.parametrize("make", [linear, sigmoidal, geometric,
                                  lambda T: sigmoidal(T, sharpness=10.0)])
@pytest.mark.parametrize("T", [2, 3, 10, 1000])
def test_schedules_run_from_zero_to_one_strictly(make, T):
    b = make(T)
    assert b.shape == (T,) and b[0] == 0.0 and b[-1] == 1.0
    assert np.all(np.diff(b) > 0)


def test_sigmoid_is_denser_at_the_ends_and_symmetric():
    b = sigmoidal(101, sharpness=6.0)
    steps = np.diff(b)
    assert steps[0] < steps[50] and steps[-1] < steps[50]
    np.testing.assert_allclose(b, 1 - b[::-1], atol=1e-12)


def test_geometric_spacing():
    b = geometric(5, start=1e-3)
    np.testing.assert_allclose(b[1:], np.geomspace(1e-3, 1, 4))


@pytest.mark.parametrize("bad, message", [
    ([0.0], "at least 2"),
    ([[0.0, 1.0]], "1-d"),
    ([0.1, 1.0], "start at beta = 0"),
    ([0.0, 0.9], "end at beta = 1"),
    ([0.0, 0.5, 0.5, 1.0], "strictly increasing"),
    ([0.0, 0.7, 0.3, 1.0], "strictly increasing"),
    ([0.0, np.nan, 1.0], "non-finite"),
])
def test_validation_errors_are_clear(bad, message):
    with pytest.raises(ScheduleError, match=message):
        validate(bad)


def test_spec_and_bad_arguments():
    assert ScheduleSpec("linear").betas(3).tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(ScheduleError, match="unknown schedule kind"):
        ScheduleSpec("cosine").betas(10)
    with pytest.raises(ScheduleError, match="at least 2"):
        linear(1)
    with pytest.raises(ScheduleError, match="sharpness"):
        sigmoidal(10, sharpness=0)


@pytest.mark.parametrize("params", [HMCParams(0.2, 7, np.array([1.0, 2.0])),
                                    NUTSParams(0.3, None, 6), None])
def test_kernel_schedule_round_trip(params):
    ks = KernelSchedule.constant(sigmoidal(20), params, steps_per_temperature=2)
    back = KernelSchedule.from_json(ks.to_json())
    np.testing.assert_array_equal(back.betas, ks.betas)
    assert back.steps_per_temperature == 2
    for t in (0, 7, 19):
        a, b = ks.params_at(t), back.params_at(t)
        if params is None:
            assert a is None and b is None
            continue
        assert type(a) is type(params) and a.step_size == b.step_size
        np.testing.assert_array_equal(a.inv_metric if a.inv_metric is not None else 0,
                                      b.inv_metric if b.inv_metric is not None else 0)


@pytest.mark.parametrize("params", [HMCParams(0.2, 7, np.array([1.0, 2.0])),
                                    NUTSParams(0.3, np.array([[[2.0, 0.5], [0.5, 1.0]]]), 6),
                                    NUTSParams(0.3, None, 6), None])
def test_constant_kernel_schedule_pickles(params):
    # Dask sends schedules to its workers by pickle: the copy (lazy betas and all)
    # gives the same params at every temperature.
    ks = KernelSchedule.constant(ScheduleSpec("sigmoid").lazy(50), params)
    back = pickle.loads(pickle.dumps(ks))
    np.testing.assert_array_equal(np.asarray(back.betas), np.asarray(ks.betas))
    for t in (0, 17, 49):
        a, b = ks.params_at(t), back.params_at(t)
        if params is None:
            assert a is None and b is None
            continue
        assert type(b) is type(params) and a.step_size == b.step_size == params.step_size
        if params.inv_metric is not None:
            np.testing.assert_array_equal(b.inv_metric, params.inv_metric)


def test_kernel_schedule_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="step_size"):
        KernelSchedule(linear(5), 1, "hmc", np.ones(4), None, {"n_leapfrog": 3})
    with pytest.raises(ValueError, match="unknown kernel kind"):
        KernelSchedule(linear(5), 1, "slice", np.ones(5))
    with pytest.raises(ScheduleError):
        KernelSchedule([0.0, 1.2])

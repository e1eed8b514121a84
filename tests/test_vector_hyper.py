"""Vector hyperparameters: ``hyper`` values of the hyperparameter's shape reach the
simulator, the fit summarises them elementwise, and the protocol runs end to end
(checking the simulator first).

Model ``tests/stan/group_scales.stan``: per-group scales tau[g] ~ inv_gamma(3, 2) (the
hyperparameter, a vector), mu[g] ~ normal(0, tau[g]), y_n ~ normal(mu[group[n]], 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bread_stan.errors import StanDataError
from bread_stan.reporting.protocol_report import protocol_verdict
from bread_stan.stan.compile import compile_many
from bread_stan.stan.simulator import Simulator
from bread_stan.workflows.bread import RunSettings, SamplerSettings
from bread_stan.workflows.fit import FitSettings
from bread_stan.workflows.protocol import ProtocolSettings, protocol

TEST_STAN = Path(__file__).resolve().parent / "stan"
MODEL = TEST_STAN / "group_scales.stan"
SIMULATOR = TEST_STAN / "group_scales_sim.stan"
GROUP = np.repeat([1, 2, 3], 10)
DATA = {"N": 30, "G": 3, "group": GROUP}


@pytest.fixture(scope="module")
def compiled():
    return dict(zip(("model", "sim"), compile_many([MODEL, SIMULATOR], workers=2)))


def test_given_vector_hyperparameter_reaches_the_simulator(compiled):
    tau = np.array([0.5, 1.0, 3.0])
    sim = Simulator(compiled["sim"], DATA, hyper={"tau": tau})
    assert sim.hyperparameters == ["tau"]
    draws = sim.simulate(4000, seed=1)
    np.testing.assert_array_equal(draws["tau"], np.tile(tau, (4000, 1)))
    # mu[g] ~ normal(0, tau[g]): the sample sd has relative error about 1 / sqrt(2 n)
    # (1.1% at n = 4000); allow 4 of those.
    sd = draws["mu"].std(axis=0, ddof=1)
    np.testing.assert_array_less(np.abs(sd / tau - 1), 4 / np.sqrt(2 * 4000))


def test_vector_hyperparameter_of_the_wrong_shape_is_refused(compiled):
    with pytest.raises(StanDataError, match=r"hyper\['tau'\] has shape \(\), but tau has 1"):
        Simulator(compiled["sim"], DATA, hyper={"tau": 1.0})
    with pytest.raises(StanDataError, match=r"shape \(2, 3\)"):
        Simulator(compiled["sim"], DATA, hyper={"tau": np.ones((2, 3))})


def test_protocol_fits_and_uses_a_vector_hyperparameter(compiled):
    rng = np.random.default_rng(3)
    tau = np.array([0.5, 1.0, 3.0])
    mu = tau * rng.normal(size=3)
    data = {**DATA, "y": mu[GROUP - 1] + rng.normal(size=30)}
    result = protocol(MODEL, SIMULATOR, data,
                      sampler=SamplerSettings(n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                                              pilot_steps=20),
                      run=RunSettings(steps=(5,), chains=16, seed=2, progress=False),
                      settings=ProtocolSettings(s_sweep=(0, 5), replicates=1,
                                                fit=FitSettings(chains=2, warmup=100,
                                                                draws=100)))
    fitted = result.hyper["tau"]
    # The fitted value is the elementwise posterior median of the fit's draws.
    np.testing.assert_allclose(fitted, np.median(result.fit.draws["tau"], axis=(0, 1)))
    assert len(fitted) == 3
    # The simulated truth uses it: tau is given, not drawn.
    np.testing.assert_allclose(result.extra["truth"]["tau"], fitted)
    assert set(result.extra["fit_hyper_rhat"]) == {"tau"}
    assert "tau = [" in protocol_verdict(result)[0]
    # The protocol checked the simulator first (hyperparameters drawn), and it passed.
    check = result.extra["simulator_check"]
    assert check["ran"] and check["passed"], check["message"]
    assert {t["quantity"] for t in check["tests"]} >= {"tau[1]", "tau[3]", "mu[2]"}

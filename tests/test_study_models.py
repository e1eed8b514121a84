"""Each model of the study compiles, simulates and completes a short BREAD run on
its bundled real data set, and the representation pair runs through ``compare``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bread_stan.stan import datasets
from bread_stan.stan.compile import compile_many
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread, compare

MODELS = Path(__file__).resolve().parent.parent / "stan_models"
STUDY = {  # model program -> bundled data set
    "linear_regression": "nhefs",
    "logistic_regression": "pima",
    "ar1": "goog",
    "gaussian_mixture": "faithful",
    "matrix_factorisation": "movielens",
}
SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=4, pilot_chains=8, pilot_grid=3,
                          pilot_steps=5)
RUN = RunSettings(steps=(3, 6), chains=6, seed=0, progress=False)


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    programs = [MODELS / f"{m}{suffix}.stan" for m in STUDY for suffix in ("", "_sim")]
    programs += [MODELS / f"{m}.stan" for m in ("mf_uncollapsed", "mf_collapsed", "mf_pair_sim")]
    compile_many(programs, workers=2)


@pytest.mark.parametrize("model", list(STUDY))
def test_short_bread_run_on_the_real_data(model):
    data = datasets.load(STUDY[model])
    result = bread(MODELS / f"{model}.stan", MODELS / f"{model}_sim.stan", data,
                   sampler=SAMPLER, run=RUN)
    assert [s.n_steps for s in result.steps] == [3, 6]
    for s in result.steps:
        assert np.isfinite(s.forward.log_estimates).all()
        assert np.isfinite(s.reverse.log_estimates).all()
        assert s.forward.n_grad > 0 and s.reverse.n_grad > 0
    # The simulated data replace the observed ones, with the observed shapes.
    for name, value in result.extra["simulated_data"].items():
        assert np.shape(value) == np.shape(data[name]), name
    assert set(result.extra["truth"]) == set(result.step(6).draws)


def test_collapsed_and_uncollapsed_share_data_and_truth():
    results = compare({"uncollapsed": MODELS / "mf_uncollapsed.stan",
                       "collapsed": MODELS / "mf_collapsed.stan"},
                      MODELS / "mf_pair_sim.stan", datasets.load("mf_pair"),
                      sampler=SAMPLER, run=RUN)
    unc, col = results["uncollapsed"], results["collapsed"]
    assert unc.extra["simulated_data"] == col.extra["simulated_data"]
    assert set(unc.extra["truth"]) == {"U", "V"} and set(col.extra["truth"]) == {"V"}
    assert unc.extra["truth"]["V"] == col.extra["truth"]["V"]
    assert np.shape(unc.extra["simulated_data"]["Y"]) == (50, 25)
    for result in results.values():
        assert all(np.isfinite(s.forward.log_estimates).all() for s in result.steps)

"""The model's own rejections honoured (issue 45, :mod:`bread_stan.stan.redraw`).

``tests/stan/redraw_signed_scale.stan`` gives sigma an unbounded normal(0, 1) prior and
``y ~ normal(mu, sigma)``: normal_lpdf throws at sigma <= 0 for every data set, so the
model's joint distribution is the prior conditioned on sigma > 0 (prior mass exactly
1/2): sigma half-normal, mu normal(0, 1), y given both.  The drafted simulator's
normal_rng refuses the same draws, which are redrawn.
``tests/stan/redraw_poisson_log_limit.stan`` (eta ~ normal(0, 30), y ~ poisson_log(eta)):
poisson_log_rng refuses eta > 20.79, which poisson_log_lpmf accepts, so no redraw is
exact and the simulation is refused in one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bread_stan.errors import StanDataError
from bread_stan.rng import Purpose, derived_seed
from bread_stan.stan.compile import Program, compile_many
from bread_stan.stan.draft import draft_program
from bread_stan.stan.simulator import Simulator, compile_with_simulator
from bread_stan.stan.tempered import compile_tempered
from bread_stan.workflows.settings import SamplerSettings
from bread_stan.workflows.simulator_check import CheckSettings, check_simulator

pytestmark = pytest.mark.stan

TEST_STAN = Path(__file__).resolve().parent / "stan"
SIGNED = TEST_STAN / "redraw_signed_scale.stan"
POISSON = TEST_STAN / "redraw_poisson_log_limit.stan"
SIGNED_DATA = {"N": 5, "y": [0.1, -0.3, 0.5, 1.2, 0.0]}
POISSON_DATA = {"N": 4, "y": [0, 3, 1, 2]}


def _pair(model: Path, data: dict):
    drafted = draft_program(model)
    (compiled,), sim = compile_with_simulator([model], drafted.text)
    return compile_tempered(compiled), sim, drafted


@pytest.fixture(scope="module")
def signed():
    return _pair(SIGNED, SIGNED_DATA)


def test_share_redrawn_is_the_prior_mass_where_the_model_rejects(signed):
    model, sim, _ = signed
    n = 4000
    honoured = Simulator(sim, SIGNED_DATA).honour(model, SIGNED_DATA)
    draws = honoured.simulate(n, seed=3)
    count = honoured.redraws
    # every draw tried is a prior draw; it is redrawn when sigma <= 0 (mass 1/2); the
    # share over `tried` draws has binomial standard error sqrt(p(1 - p) / tried)
    se = np.sqrt(0.25 / count.tried)
    assert count.tried == n + count.rejected
    assert abs(count.share - 0.5) < 4 * se, (count.to_dict(), se)
    # the draws follow the conditioned prior: sigma half-normal, mu normal(0, 1)
    assert draws["sigma"].min() > 0
    assert stats.kstest(draws["sigma"], stats.halfnorm.cdf).pvalue > 1e-3
    assert stats.kstest(draws["mu"], stats.norm.cdf).pvalue > 1e-3
    # redrawn draws come from their own stream: the same numbers at another batch size
    again = Simulator(sim, SIGNED_DATA, batch_size=77).honour(model, SIGNED_DATA)
    np.testing.assert_array_equal(again.simulate(n, seed=3)["y"], draws["y"])


def test_prior_draws_keep_the_failed_draws_parameters(signed):
    """The parameter part draws what the simulator drew up to its failing data draw; the
    prior draws (where the tempered path starts, at beta = 0) are not conditioned."""
    model, sim, _ = signed
    plain = Simulator(sim, SIGNED_DATA)
    with pytest.raises(StanDataError) as refused:     # not honoured: refused as before
        plain.simulate(50, seed=1)
    honoured = Simulator(sim, SIGNED_DATA).honour(model, SIGNED_DATA)
    prior = honoured.simulate_prior(4000, seed=1)
    # the first failure's message quotes the failed draw's sigma (6 significant digits)
    found = re.search(r"draw (\d+): .*Scale parameter is (\S+),", str(refused.value))
    index, quoted = int(found[1]), float(found[2])
    assert prior["sigma"][index] == pytest.approx(quoted, rel=1e-5)
    assert abs((prior["sigma"] < 0).mean() - 0.5) < 4 * np.sqrt(0.25 / 4000)
    assert stats.kstest(prior["sigma"], stats.norm.cdf).pvalue > 1e-3
    joint = honoured.simulate(4000, seed=1)
    kept = prior["sigma"] > 0                  # draws that did not fail: the same numbers
    np.testing.assert_array_equal(joint["sigma"][kept], prior["sigma"][kept])
    np.testing.assert_array_equal(joint["mu"][kept], prior["mu"][kept])


def test_check_passes_on_the_redrawn_joint(signed):
    model, sim, drafted = signed
    settings = CheckSettings(prior_draws=1000, datasets=60, seed=2)
    result = check_simulator(SIGNED, drafted.text, SIGNED_DATA,
                             sampler=SamplerSettings(pilot_chains=16, pilot_grid=6,
                                                     pilot_steps=20),
                             settings=settings)
    assert result.passed, result.message
    redraws = result.to_dict()["redraws"]
    assert redraws["rejected"] > 0 and "redrawn" in result.message
    se = np.sqrt(0.25 / redraws["tried"])
    assert abs(redraws["share"] - 0.5) < 4 * se, redraws


def test_a_failure_the_model_does_not_share_is_refused_in_one_line():
    model, sim, _ = _pair(POISSON, POISSON_DATA)
    honoured = Simulator(sim, POISSON_DATA).honour(model, POISSON_DATA)
    with pytest.raises(StanDataError) as refused:
        honoured.simulate(200, seed=derived_seed(0, Purpose.TRUTH))
    text = str(refused.value)
    assert "\n" not in text
    assert "poisson_log_rng" in text and "the model's likelihood evaluates" in text
    assert "no redraw samples the model" in text


@pytest.mark.parametrize("name, data", [
    ("bounded_scales", None),                          # half distributions, bounded rates
    ("truncated_location", {"N": 3, "y": [0.5, 1.0, 2.0]}),   # a rejection loop
])
def test_parameter_part_draws_the_simulators_parameters(name, data):
    """The parameter part makes the simulator's RNG calls up to its first data draw: on
    draws that do not fail, the same parameters bit for bit."""
    program = TEST_STAN / "draft" / f"{name}.stan"
    data = data or json.loads(program.with_suffix(".json").read_text())
    drafted = draft_program(program)
    assert drafted.parameter_part is not None
    sim, part = compile_many([Program(drafted.text, f"{name}_sim"),
                              Program(drafted.parameter_part, f"{name}_part")], workers=2)
    full = Simulator(sim, data).simulate(300, seed=5)
    parameters = Simulator(part, data).simulate(300, seed=5)
    assert set(parameters) < set(full)
    for key, values in parameters.items():
        np.testing.assert_array_equal(values, full[key])

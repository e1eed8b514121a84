"""The prior normaliser c from the drafted simulator (bread_stan.stan.draft.normaliser,
bread_stan.ais.known_normaliser, bread_stan.workflows.simulator_normaliser).

Known answers: on drafted test programs with bounded parameters the simulator's exact
log c equals the closed form (eight schools' half-Cauchy or half-normal tau, centred or
not: log 1/2; brms's half-t written with its own lccdf normaliser: 0; two half
distributions and a uniform on its bounds: log 1/4; three half-normal scales beside an
LKJ Cholesky factor: 3 log 1/2; a Dirichlet simplex: 0; an ordered vector, a simplex and
a bounded vector without densities, a half-normal stated with T[0, ] and half-t scales:
-log 3! - log 2! + 2 log 3 + 3 log 1/2) to 1e-12, and the importance-sampling estimate on
the same prior (the program's own density, Stan's Jacobians) agrees within 4 of its
standard errors (a false failure is a 6e-5 event per program when the standard error
is right; in these dimensions, 2 to 11, its Pareto k is below 0.7), except on eight
schools (d = 10), where its weights' Pareto k exceeds 0.7 and it is not compared.  A
truncation whose mass depends on the parameters (theta ~ normal(mu, kappa) on
theta > 0, drawn by rejection) has c = 1/2 E[Phi(mu / kappa)] by quadrature (log c =
-1.1194): the estimate from the loop's tries (-1.1116, se 0.010, 3,219 draws) agrees
within 4 of its standard errors.  A radon-like centred hierarchical prior in d = 123 has
c = 1/4 exactly (log -1.3863); importance sampling there gives -4.62 (se 0.76, Pareto k
13), off by more than 4 of its standard errors or flagged (the test accepts either).

Statistical: the acceptance probability's estimator (n - 1) / (S - 1) is unbiased
(mean over 20,000 replications within 4 Monte Carlo standard errors of p; the biased
n / S is 16 such errors away, the negative case) and its standard error is calibrated
(the spread of log p_hat across replications within 10% of the mean stated se).

Deliberate breaks, each done once: the half distribution's factor log(0.5) changed to
log(1) made ``test_the_exact_normaliser_is_the_closed_form_and_agrees_with_importance_
sampling`` fail on both eight schools, bounded_scales, multi_normal and normaliser_shapes
(5 of the 6 programs then; dirichlet_categorical has no half distribution;
brms_regression was added after the break was tried); the ordered factor's
lgamma(K + 1) changed to lgamma(K) made it fail on normaliser_shapes; p_hat = n / S in
known_log_normaliser made ``test_the_acceptance_estimator_is_unbiased_and_its_se_
calibrated`` fail (mean 0.3040 for p = 0.3, 16 Monte Carlo se away), while the
truncated-location test, whose one estimate has se 0.01, did not notice it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from bread_stan.ais import gaussian_path
from bread_stan.ais.known_normaliser import known_log_normaliser, tries_needed
from bread_stan.ais.prior_normaliser import estimate_log_normaliser, fit_draws
from bread_stan.stan.compile import Program, compile_many
from bread_stan.errors import ToolchainError
from bread_stan.stan.toolchain import find_toolchain
from bread_stan.stan.draft import LOG_C_EXACT, PRIOR_TRIES, draft_program, split_model
from bread_stan.stan.simulator import Simulator, split_draw
from bread_stan.stan.tempered import StanTarget
from bread_stan.workflows.simulator_normaliser import simulator_normaliser

N_SE = 4.0
DRAFT = Path(__file__).resolve().parent / "stan" / "draft"
SPLIT = Path(__file__).resolve().parent / "stan" / "split"
HALF = float(np.log(0.5))

# program -> (data, closed-form log c)
KNOWN = {
    "eight_schools_centred": (None, HALF),
    "eight_schools_noncentred": (None, HALF),
    "bounded_scales": (None, 2 * HALF),
    "multi_normal": (None, 3 * HALF),
    "dirichlet_categorical": (None, 0.0),
    "normaliser_shapes": ({"K": 3, "N": 5, "y": [0.1, -0.3, 1.2, 0.4, 0.0]},
                          -np.log(6) - np.log(2) + 2 * np.log(3) + 3 * HALF),
    # brms: target += student_t_lpdf(sigma | 3, 0, 10) - 1 * student_t_lccdf(0 | 3, 0, 10)
    # on a positive sigma, a half-t normalised by its own constant term: 0
    "brms_regression": (json.loads((SPLIT / "brms_regression.json").read_text()), 0.0),
}
# Where importance sampling's weights are too heavy-tailed to compare with (its standard
# error not trusted, Pareto k > 0.7, with these seeds): centred eight schools, a funnel
# under a half-Cauchy scale (k 0.87, log c_hat -0.34 for log 1/2), and non-centred eight
# schools (k 0.97, though its log c_hat -0.6875 is 0.6 se from log 1/2).
FUNNELS = {"eight_schools_centred", "eight_schools_noncentred"}
# Stan 2.37+ puts a simplex in isometric log-ratio coordinates, where the Dirichlet's
# weights are heavier-tailed too (Pareto k 0.79 at this seed under Stan 2.39; log c_hat
# -0.014, se 0.008, for 0): the exact c is still checked against the closed form.
# Asked when a test runs, never at import (the fast tier's guard refuses that).
ISOMETRIC_SIMPLEX = {"dirichlet_categorical"}


def _heavy_tailed(name: str) -> bool:
    """Whether importance sampling's cross-check of ``name`` is left out."""
    if name in FUNNELS:
        return True
    if name not in ISOMETRIC_SIMPLEX:
        return False
    try:
        return tuple(int(p) for p in find_toolchain().stan_version.split(".")[:2]) >= (2, 37)
    except ToolchainError:       # no compiler: the tests here cannot run anyway
        return False


def _data(name: str, data):
    return data if data is not None else json.loads((DRAFT / f"{name}.json").read_text())


def _source(name: str):
    if name == "brms_regression":   # no prior_only: its automatic split
        return Program(split_model(SPLIT / f"{name}.stan").program, f"{name}_split")
    return DRAFT / f"{name}.stan"


def _compiled(names: list[str]):
    """(model, drafted simulator) compiled, per program name."""
    programs = []
    for name in names:
        drafted = draft_program(_source(name))
        programs += [_source(name), Program(drafted.text, f"{name}_drafted_sim")]
    compiled = compile_many(programs, workers=2)
    return {n: (compiled[2 * i], compiled[2 * i + 1]) for i, n in enumerate(names)}


@pytest.fixture(scope="module")
def programs():
    return _compiled([*KNOWN, "truncated_location", "radon_like"])


def _setup(programs, name: str, data, n: int, seed: int):
    """The simulator, n of its draws and the model's target on draw 0's data."""
    model, sim_program = programs[name]
    sim = Simulator(sim_program, data)
    draws = sim.simulate(n, seed)
    params, overrides = split_draw(draws, model)
    target = StanTarget(model, {**data, **{k: np.asarray(v)[0].tolist()
                                         for k, v in overrides.items()}}, threads=1)
    return sim, draws, target, target.param_unconstrain_batch(params)


def _code(target) -> str:
    return target.compiled.program.code


def _importance(target, unconstrained, seed: int, n_draws=None):
    return estimate_log_normaliser(gaussian_path.prior_log_density(target), unconstrained,
                                   np.random.default_rng(seed), n_draws)


@pytest.mark.stan
@pytest.mark.parametrize("name", list(KNOWN))
def test_the_exact_normaliser_is_the_closed_form_and_agrees_with_importance_sampling(
        programs, name):
    data, truth = KNOWN[name]
    data = _data(name, data)
    sim, draws, target, u = _setup(programs, name, data, 2048, 1)
    assert PRIOR_TRIES not in draws          # no rejection loop in these programs
    known = simulator_normaliser(sim, draws, 2, _code(target))
    assert known.method == "exact" and known.se == 0 and known.trustworthy
    assert known.log_c == pytest.approx(truth, abs=1e-12)
    if _heavy_tailed(name):
        return
    est = _importance(target, u, 3)
    assert est.trustworthy, est.message
    assert abs(est.log_c - truth) < N_SE * est.se, est.message


def _truncated_location_log_c() -> float:
    """log of 1/2 E[Phi(mu / kappa)], mu ~ normal(0.5, 1), kappa ~ half-normal(0, 1)."""
    def inner(kappa):
        value, _ = integrate.quad(lambda mu: stats.norm.pdf(mu, 0.5, 1)
                                  * stats.norm.cdf(mu / kappa), -np.inf, np.inf,
                                  epsabs=1e-13)
        return 2 * stats.norm.pdf(kappa) * value
    mass, err = integrate.quad(inner, 0, np.inf, epsabs=1e-12, limit=200)
    assert err < 1e-7       # far below the estimates' standard errors (about 0.01)
    return float(np.log(0.5 * mass))


@pytest.mark.stan
def test_a_rejection_loop_estimates_the_truncated_mass(programs):
    truth = _truncated_location_log_c()
    data = {"N": 3, "y": [0.2, 1.1, 0.5]}
    sim, draws, target, u = _setup(programs, "truncated_location", data, 512, 4)
    assert np.all(draws[PRIOR_TRIES] >= 1) and np.max(draws[PRIOR_TRIES]) > 1
    np.testing.assert_allclose(draws[LOG_C_EXACT], HALF, atol=1e-12)
    known = simulator_normaliser(sim, draws, 5, _code(target))
    assert known.method == "exact and rejection" and known.trustworthy
    assert known.n_draws == tries_needed(draws[PRIOR_TRIES]) >= 512
    assert 0 < known.se < 0.02
    assert abs(known.log_c - truth) < N_SE * known.se, (known.log_c, truth, known.se)
    est = _importance(target, u, 6)
    assert abs(est.log_c - truth) < N_SE * est.se, est.message


def test_the_acceptance_estimator_is_unbiased_and_its_se_calibrated():
    rng = np.random.default_rng(8)
    p, n, reps = 0.3, 50, 20_000
    tries = rng.geometric(p, size=(reps, n))
    estimates = [known_log_normaliser(np.full(n, 0.5), t) for t in tries]
    p_hat = np.exp(np.array([e.log_c for e in estimates]) - 0.5)
    assert abs(p_hat.mean() - p) < N_SE * p_hat.std() / np.sqrt(reps)
    biased = n / tries.sum(axis=1)             # the negative case: n / S is biased up
    assert biased.mean() - p > N_SE * biased.std() / np.sqrt(reps)
    se = np.mean([e.se for e in estimates])
    assert abs(np.std(np.log(p_hat)) / se - 1) < 0.1


@pytest.mark.stan
def test_a_high_dimensional_hierarchical_prior_is_exact_where_importance_fails(programs):
    J = 120
    rng = np.random.default_rng(9)
    data = {"J": J, "N": 2 * J, "g": np.repeat(np.arange(1, J + 1), 2).tolist(),
            "y": rng.normal(size=2 * J).tolist()}
    sim, draws, target, u = _setup(programs, "radon_like", data, fit_draws(J + 3), 10)
    assert target.dim == J + 3
    known = simulator_normaliser(sim, draws, 11, _code(target))
    assert known.method == "exact" and known.log_c == pytest.approx(2 * HALF, abs=1e-12)
    est = _importance(target, u, 12, n_draws=8192)
    # importance sampling in d = 123 under a funnel: off by many of its own standard
    # errors, or its weights' tail says its standard error cannot be trusted
    assert abs(est.log_c - 2 * HALF) > N_SE * est.se or not est.trustworthy, est.message


@pytest.mark.stan
def test_the_drafter_leaves_c_out_where_it_cannot_prove_it():
    source = """
    data { int<lower=0> N; vector[N] y; int<lower=0, upper=1> prior_only; }
    parameters { corr_matrix[2] S; real<lower=0> s; }
    model { s ~ normal(0, 1); if (!prior_only) y ~ normal(S[1, 2], s); }
    """
    text = draft_program(source).text
    assert not [x for x in text.splitlines() if LOG_C_EXACT in x and not x.startswith("//")]
    assert "corr_matrix S has no density" in text
    clash = source.replace("real<lower=0> s;", "real<lower=0> s; real bread_log_c_exact_;")
    clash = clash.replace("s ~ normal(0, 1);", "s ~ normal(0, 1); bread_log_c_exact_ ~ "
                          "normal(0, 1);").replace("corr_matrix[2] S;", "")
    clash = clash.replace("S[1, 2]", "0")
    assert "uses the name bread_log_c_exact_" in draft_program(clash).text


@pytest.mark.stan
def test_a_hand_written_simulator_another_program_or_given_hyperparameters_keep_is(
        programs):
    """Importance sampling stays for a simulator without the account, one drafted from
    another program (compare runs the first program's simulator beside the others), and
    given hyperparameters."""
    data = _data("eight_schools_centred", None)
    model, sim_program = programs["eight_schools_centred"]
    code = model.program.code
    plain = Simulator(sim_program, data)
    assert simulator_normaliser(plain, plain.simulate(4, 1), 2, code).method == "exact"
    given = Simulator(sim_program, data, hyper={"mu": 0.0, "tau": 1.0})
    assert simulator_normaliser(given, given.simulate(4, 1), 2, code) is None
    draws = plain.simulate(4, 1)
    del draws[LOG_C_EXACT]
    assert simulator_normaliser(plain, draws, 2, code) is None
    other = programs["eight_schools_noncentred"][0].program.code
    assert simulator_normaliser(plain, plain.simulate(4, 1), 2, other) is None
    relaxed = code.replace("array[J] real y;", "array[J] real<lower=-100> y;")
    assert relaxed != code      # a data block's bounds do not change the prior
    assert simulator_normaliser(plain, plain.simulate(4, 1), 2, relaxed).method == "exact"


def test_the_known_normaliser_refuses_bad_input_and_never_claims_certainty():
    from bread_stan.errors import InputError

    with pytest.raises(InputError, match="differs between draws"):
        known_log_normaliser(np.array([0.0, 0.1]))
    with pytest.raises(InputError, match="at least 1"):
        known_log_normaliser(np.zeros(3), np.array([1, 0, 2]))
    never = known_log_normaliser(np.zeros(100), np.ones(100))   # never rejected
    assert never.log_c == 0 and never.se == pytest.approx(np.sqrt(1 / 100 / 100))
    assert known_log_normaliser(np.full(5, -2.0)).log_c == -2.0

"""AIDE (SPEC 7.3) against known answers: Gaussians in closed form, the BREAD bound, the
meta-inference monotonicity in M, and the missed-mode example of the paper's Figure 3.

Tolerances are stated in Monte Carlo standard errors of the estimate (its CLT se).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import bread_stan

from bread_stan.ais import engine
from bread_stan.ais import runs
from bread_stan.ais.betas import sigmoidal
from bread_stan.ais.estimators import jeffreys_bound
from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.ais.gaussian_base import GaussianBase
from bread_stan.meta import (AISAlgorithm, ReferenceAlgorithm, SIRAlgorithm, TractableAlgorithm,
                             estimate_aide, gold_side)
from bread_stan.approx import advi, laplace
from bread_stan.exact.conjugate import simulate_regression
from bread_stan.kernels.base import StepInfo, initial_state
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.cli.main import main
from bread_stan.rng import derived_seed
from bread_stan.target import Evaluation
from bread_stan.workflows.aide import AIDESettings
from bread_stan.workflows.bread import ResumeMismatchError, RunSettings, SamplerSettings


def gaussian_kl(m0, s0, m1, s1) -> float:
    """KL(N(m0, s0) || N(m1, s1)) in closed form."""
    d = m0.size
    p1 = np.linalg.inv(s1)
    diff = m1 - m0
    return 0.5 * (np.trace(p1 @ s0) + diff @ p1 @ diff - d
                  + np.linalg.slogdet(s1)[1] - np.linalg.slogdet(s0)[1])


def symmetrised_kl(m0, s0, m1, s1) -> float:
    return gaussian_kl(m0, s0, m1, s1) + gaussian_kl(m1, s1, m0, s0)


@pytest.fixture(scope="module")
def problem():
    model, _ = simulate_regression(20, 2, correlation=0.6, noise_sd=0.7, seed=11)
    mean, cov = model.tempered_posterior(1.0)
    return model, mean, cov, TractableAlgorithm(GaussianBase(mean, cov), "exact")


def ais(model, T: int) -> AISAlgorithm:
    schedule = KernelSchedule.constant(sigmoidal(T), HMCParams(step_size=0.3, n_leapfrog=5))
    return AISAlgorithm(model, HMC(), schedule,
                        lambda n, seed: model.sample_prior(np.random.default_rng(seed), n))


def test_two_gaussians_give_the_closed_form_symmetrised_kl(problem):
    _, mean, cov, exact = problem
    shifted = GaussianBase(mean + np.array([0.3, -0.2]), np.diag([1.5, 0.7]) * np.diag(cov))
    result = estimate_aide(exact, TractableAlgorithm(shifted, "shifted"), n_gold=4000,
                           n_target=4000, seed=3)
    truth = symmetrised_kl(mean, cov, shifted.mean, shifted.cov)
    assert truth > 0.5
    assert abs(result.estimate - truth) < 4 * result.se
    assert result.se < 0.1 * truth  # the check has power
    assert result.estimate == pytest.approx(result.gold_term + result.target_term)
    assert result.lower < result.estimate < result.upper
    assert result.m_gold == result.m_target == 1  # tractable: one "trace" is enough
    summary = result.summary()
    assert summary["aide_nats"] == result.estimate and summary["target"] == "shifted"


def test_mean_field_optimum_of_a_correlated_gaussian(problem):
    """The mean-field optimum of KL(q || p) for p = N(m, S) is N(m, diag(1 / diag(S^-1)));
    mean-field ADVI lands near it, and AIDE of what ADVI returned equals that Gaussian's
    closed-form symmetrised KL."""
    model, mean, cov, exact = problem
    assert abs(cov[0, 1]) / np.sqrt(cov[0, 0] * cov[1, 1]) > 0.3  # correlated posterior
    optimum = symmetrised_kl(mean, cov, mean, np.diag(1 / np.diag(np.linalg.inv(cov))))
    fitted = advi(model, family="meanfield", seed=1, tol_rel_obj=1e-3, grad_samples=10)
    truth = symmetrised_kl(mean, cov, fitted.mean, fitted.cov)
    # ADVI's stochastic optimisation stops near the optimum, not at it: 0.05 nats allowed.
    assert truth == pytest.approx(optimum, abs=0.05)
    result = estimate_aide(exact, TractableAlgorithm(fitted, "advi-meanfield"), n_gold=4000,
                           n_target=4000, seed=4)
    assert abs(result.estimate - truth) < 4 * result.se
    assert abs(result.estimate - optimum) < 4 * result.se + 0.05
    assert result.se < 0.05 * optimum


def test_laplace_of_a_gaussian_posterior_is_exact(problem):
    model, _, _, exact = problem
    result = estimate_aide(exact, TractableAlgorithm(laplace(model, seed=2), "laplace"),
                           n_gold=500, n_target=500, seed=5)
    assert abs(result.estimate) < 4 * result.se + 1e-6
    exact_vs_itself = estimate_aide(exact, exact, n_gold=50, n_target=50, seed=4)
    assert exact_vs_itself.estimate == pytest.approx(0.0, abs=1e-9)


def test_ais_target_with_exact_gold_is_the_bread_bound(problem):
    """M_t = 1: per gold output U - log Z, per target run log Z - L; log Z cancels, so D is
    mean U - mean L of the same chains (float precision), and matches in distribution the
    engine's own BREAD run from exact posterior draws."""
    model, _, _, exact = problem
    target = ais(model, 10)
    seed, n = 5, 200
    result = estimate_aide(exact, target, n_gold=n, n_target=n, seed=seed)
    gold_outputs = exact.run(n, derived_seed(seed, 1)).outputs
    upper = (model.evaluate(gold_outputs).log_prior + model.evaluate(gold_outputs).log_lik
             - target.meta_log_xi(gold_outputs, 1, derived_seed(seed, 4)).log_xi[:, 0])
    own = target.run(n, derived_seed(seed, 3))
    ev = model.evaluate(own.outputs)
    lower = ev.log_prior + ev.log_lik - own.log_xi
    bound = jeffreys_bound(lower, upper)
    assert result.estimate == pytest.approx(bound.estimate, abs=1e-8)
    assert result.se == pytest.approx(bound.std_error, rel=1e-8)
    assert result.cost["target_runs"].gradients == n * 9 * 5

    rng = np.random.default_rng(6)
    bread = runs.run(model, HMC(), model.sample_prior(rng, 400), model.sample_posterior(rng, 400),
                       seed=7, path=HMCParams(step_size=0.3, n_leapfrog=5),
                       config=engine.RunConfig(steps=(10,), schedule=_Sigmoid(),
                                               increment_blocks=None))
    step = bread.steps[0]
    engine_bound = jeffreys_bound(step.forward.log_estimates, step.reverse.log_estimates)
    assert abs(result.estimate - engine_bound.estimate) < 4 * np.hypot(result.se,
                                                                        engine_bound.std_error)


class _Sigmoid:
    kind = "sigmoid"

    def betas(self, T):
        return sigmoidal(T)


def test_ais_estimate_does_not_grow_with_m_and_falls_with_t(problem):
    model, _, _, exact = problem
    gold = gold_side(exact, 300, seed=8)
    by_m = {m: estimate_aide(gold, ais(model, 30), gold_algorithm=exact, n_target=300,
                             m_target=m, seed=8) for m in (1, 2, 5)}
    # Non-increasing within error, and M = 5 clearly below M = 1 (the check has power).
    assert by_m[2].estimate < by_m[1].estimate + 2 * by_m[1].se
    assert by_m[5].estimate < by_m[2].estimate + 2 * by_m[2].se
    assert by_m[5].estimate < by_m[1].estimate - 3 * by_m[1].se
    by_t = [estimate_aide(gold, ais(model, T), gold_algorithm=exact, n_target=300, seed=8)
            for T in (10, 100, 1000)]
    assert by_t[0].estimate > by_t[1].estimate + 3 * by_t[0].se
    assert by_t[1].estimate > by_t[2].estimate + 3 * by_t[1].se
    assert by_t[2].estimate < 0.1 * by_t[0].estimate  # measured: 5.7, 0.91, 0.26 nats
    assert all(r.estimate > -3 * r.se for r in by_t)  # an upper bound of a divergence


class Bimodal:
    """0.5 N(-4, 1) + 0.5 N(4, 1) in one dimension: a Target (log prior = the mixture,
    normalised, so log Z = 0) and an exact sampler with its log density."""

    dim = 1
    centres = np.array([-4.0, 4.0])

    def log_density(self, points):
        x = np.asarray(points, float)[:, 0]
        parts = -0.5 * (x[:, None] - self.centres) ** 2 - 0.5 * np.log(2 * np.pi) + np.log(0.5)
        return np.logaddexp(parts[:, 0], parts[:, 1])

    def evaluate(self, points, *, gradient=True):
        lp = self.log_density(points)
        return Evaluation(lp, np.zeros_like(lp))

    def sample(self, rng, n):
        return (self.centres[rng.integers(0, 2, n)] + rng.standard_normal(n))[:, None]


def test_sir_that_misses_a_mode_has_a_large_aide_while_log_z_looks_converged():
    target = Bimodal()
    gold = TractableAlgorithm(target, "exact")
    proposal = GaussianBase(np.array([-4.0]), np.array([[1.2]]))  # covers only the left mode
    log_z = {}
    for P in (100, 1000):
        runs = SIRAlgorithm(target, proposal, P).run(200, 9)
        log_z[P] = target.log_density(runs.outputs) - runs.log_xi
    # The log Z estimates look converged: tight across runs and stable in P ...
    assert np.std(log_z[1000]) < 0.1
    assert abs(np.mean(log_z[1000]) - np.mean(log_z[100])) < 0.05
    # ... at log(1/2), not at the true log Z = 0, and AIDE says the output is far off.
    assert np.mean(log_z[1000]) == pytest.approx(np.log(0.5), abs=0.05)
    result = estimate_aide(gold, SIRAlgorithm(target, proposal, 1000), n_gold=200,
                           n_target=200, m_target=2, seed=10)
    assert result.estimate - 3 * result.se > 2.0
    # The same SIR with a proposal covering both modes is close to the gold.
    wide = SIRAlgorithm(target, GaussianBase(np.array([0.0]), np.array([[25.0]])), 1000)
    good = estimate_aide(gold, wide, n_gold=200, n_target=200, m_target=2, seed=10)
    assert good.estimate < 0.1


def test_reference_draws_as_gold_cancel_log_z(problem):
    """Exact posterior draws as an unnormalised gold give the exact gold's estimate."""
    model, mean, cov, exact = problem
    draws = model.sample_posterior(np.random.default_rng(12), 500)
    reference = ReferenceAlgorithm(draws, model)
    shifted = TractableAlgorithm(GaussianBase(mean + 0.2, cov), "shifted")
    by_reference = estimate_aide(reference, shifted, n_gold=400, n_target=400, seed=13)
    by_exact = estimate_aide(exact, shifted, n_gold=400, n_target=400, seed=13)
    truth = symmetrised_kl(mean, cov, mean + 0.2, cov)
    assert abs(by_reference.estimate - truth) < 4 * by_reference.se
    assert not by_reference.terms_meaningful and by_exact.terms_meaningful
    with pytest.raises(ValueError, match="only be the gold"):
        estimate_aide(exact, reference, n_gold=10, n_target=10)
    with pytest.raises(ValueError, match="only 500 reference draws"):
        estimate_aide(reference, shifted, n_gold=501, n_target=10)


def test_bad_arguments_are_refused(problem):
    _, _, _, exact = problem
    with pytest.raises(ValueError, match="n_target must be a whole number"):
        estimate_aide(exact, exact, n_gold=10, n_target=1)
    with pytest.raises(ValueError, match="different spaces"):
        estimate_aide(exact, TractableAlgorithm(GaussianBase.standard(3)), n_gold=10,
                      n_target=10)
    with pytest.raises(ValueError, match="gold_algorithm"):
        estimate_aide(gold_side(exact, 10), exact, n_target=10)


# --- On a Stan program: the workflow, the command line, resume ---------------------------

@pytest.fixture(scope="module")
def stan_regression(compiled):
    regression, _ = simulate_regression(20, 3, correlation=0.6, prior_sd=1.2, noise_sd=0.7,
                                        seed=11)
    data = {"N": 20, "K": 3, "X": regression.X, "y": regression.y,
            "prior_sd": regression.prior_sd, "noise_sd": regression.noise_sd, "prior_only": 0}
    exact = TractableAlgorithm(GaussianBase(*regression.tempered_posterior(1.0)), "exact")
    return compiled["conjugate_regression"], data, exact, regression.log_marginal_likelihood()


SMALL_PILOT = SamplerSettings(pilot_chains=8, pilot_grid=4, pilot_steps=10)


def test_workflow_on_a_stan_program_matches_the_numpy_model_and_resumes(stan_regression,
                                                                         tmp_path):
    """Exact gold against AIS through the bridge: a small divergence at T = 10 that falls
    at T = 200; the saved results reload without recomputing."""
    program, data, exact, _ = stan_regression
    out = tmp_path / "aide"
    kw = dict(gold=exact, settings=AIDESettings(n_gold=100, n_target=100),
              sampler=SMALL_PILOT, run=RunSettings(threads=1, progress=False), out_dir=out)
    short = bread_stan.aide(program, data, target="ais:10", **kw)
    long = bread_stan.aide(program, data, target="ais:200", **kw)
    assert short.estimate > long.estimate + 2 * short.se
    assert abs(long.estimate) < 4 * long.se + 0.05
    saved = json.loads((out / "aide-ais-10.json").read_text())
    assert saved["aide_nats"] == short.estimate and saved["gold"] == "exact"
    before = (out / "gold.npz").stat().st_mtime
    again = bread_stan.aide(program, data, target="ais:10", **kw)
    assert again.estimate == short.estimate
    sir = bread_stan.aide(program, data, target="sir:50", **kw)  # a new target, the same gold
    assert sir.gold_term != short.gold_term
    assert (out / "gold.npz").stat().st_mtime == before
    laplace_fit = bread_stan.aide(program, data, target="laplace", **kw)
    assert abs(laplace_fit.estimate) < 4 * laplace_fit.se + 1e-3
    assert laplace_fit.cost["target_fit"].gradients > 0
    with pytest.raises(ResumeMismatchError, match="gold"):
        bread_stan.aide(program, data, target="ais:10",
                        **{**kw, "settings": AIDESettings(n_gold=50, n_target=100)})


def test_command_line_runs_targets_against_one_gold_and_refuses_bad_input(stan_regression,
                                                                          tmp_path, capsys):
    program, data, _, _ = stan_regression
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    out = tmp_path / "cli"
    args = ["aide", str(program.program.path), "--data", str(data_file), "--gold", "ais:50",
            "--target", "ais:5", "sir:20", "--n-gold", "20", "--n-target", "20",
            "--threads", "1", "--quiet", "--out", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["aide_nats"]) == {"ais:5", "sir:20"}
    assert all(np.isfinite(v) for v in summary["aide_nats"].values())
    assert (out / "aide.png").stat().st_size > 0 and "ais:50" in (out / "report.md").read_text()
    capsys.readouterr()
    assert main(args[:7] + ["reference"] + args[9:]) == 2
    assert "only be the gold" in capsys.readouterr().err
    assert main(args[:7] + ["advi-halfrank"] + args[9:]) == 2
    assert "unknown algorithm 'advi-halfrank'" in capsys.readouterr().err


def test_reference_draws_as_gold_through_the_workflow(stan_regression):
    """Exact posterior draws given as a reference (name -> (chains, draws, K)): against
    Laplace, which is exact on this conjugate model, AIDE is 0 within error, and each term
    is the unknown log Z = log p(y) (with its sign), which cancels."""
    program, data, exact, log_z = stan_regression
    draws = exact.approximation.sample(np.random.default_rng(14), 400).reshape(2, 200, 3)
    result = bread_stan.aide(program, data, gold="reference", target="laplace",
                             reference={"w": draws},
                             settings=AIDESettings(n_gold=200, n_target=200),
                             run=RunSettings(threads=1, progress=False))
    assert abs(result.estimate) < 4 * result.se + 1e-3
    assert not result.terms_meaningful and result.gold == "reference"
    assert result.gold_term == pytest.approx(log_z, abs=1e-4)
    assert result.target_term == pytest.approx(-log_z, abs=1e-4)


def test_an_output_where_the_gold_has_no_density_gives_an_infinite_divergence():
    """A target that puts mass where the model has none: the gold's meta-inference there
    gives log xi = -inf (no reverse chain is started), so AIDE is +inf, not an error."""

    class HalfLine:  # density on x > 0 only (an exponential in a 1-d "unconstrained" space)
        dim = 1

        def evaluate(self, points, *, gradient=True):
            x = np.asarray(points, float)[:, 0]
            lp = np.where(x > 0, -x, -np.inf)
            grad = np.full((x.size, 1), -1.0)
            return Evaluation(lp, np.zeros_like(lp), grad, np.zeros((x.size, 1)))

    model = HalfLine()
    schedule = KernelSchedule.constant(sigmoidal(3), HMCParams(step_size=0.3, n_leapfrog=2))
    gold = AISAlgorithm(model, HMC(), schedule,
                        lambda n, seed: np.random.default_rng(seed).exponential(size=(n, 1)))
    wide = TractableAlgorithm(GaussianBase(np.array([1.0]), np.array([[1.0]])), "wide")
    result = estimate_aide(gold, wide, n_gold=20, n_target=20, seed=15)
    assert result.estimate == np.inf and result.upper == np.inf


class ExactTemperedDraw:
    """A kernel that draws afresh from the tempered posterior of a LinearRegression
    (reversible with respect to it), so that AIS with T = 2 outputs exact posterior draws."""

    needs_gradient = False

    def __init__(self, model):
        self.model = model

    def step(self, rng, state, target, beta, params=None, chains=None):
        beta = float(np.asarray(beta).ravel()[0])
        mean, cov = self.model.tempered_posterior(beta)
        n = state.position.shape[0]
        position = mean + rng.normal(self.model.dim) @ np.linalg.cholesky(cov).T
        zeros = np.zeros(n)
        info = StepInfo(np.ones(n), zeros.astype(bool), zeros, zeros.astype(np.int64),
                        zeros.astype(np.int64))
        return initial_state(target, position, gradient=False), info


def test_ais_meta_inference_reverses_the_last_transition():
    """Meta-inference traces give unbiased estimates of the output density: E_r[xi] = q(x).
    AIS with T = 2 whose kernel draws exactly from the posterior outputs exact posterior
    draws, so q(x) = p(x | y) in closed form.  Meta-inference must undo the forward chain's
    last transition K_T before reversing the increments; reverse AIS started at the output
    itself would give xi = prior(x) exactly.  (A weak likelihood, so that 1 / lik has a
    finite variance under the posterior and the mean of xi / q has a standard error.)"""
    model, _ = simulate_regression(20, 2, correlation=0.6, noise_sd=5.0, seed=11)
    posterior = GaussianBase(*model.tempered_posterior(1.0))
    target = AISAlgorithm(model, ExactTemperedDraw(model), KernelSchedule(np.array([0.0, 1.0])),
                          lambda n, seed: model.sample_prior(np.random.default_rng(seed), n))
    x = posterior.sample(np.random.default_rng(16), 5)
    log_q = posterior.log_density(x)[0]
    ratio = np.exp(target.meta_log_xi(x, 1000, 17).log_xi - log_q[:, None])  # xi / q, (5, M)
    se = ratio.std(axis=1, ddof=1) / np.sqrt(ratio.shape[1])
    assert np.all(np.abs(ratio.mean(axis=1) - 1) < 4 * se)
    assert np.all(se < 0.1)
    ev = model.evaluate(x)
    assert np.max(np.abs(ev.log_prior - log_q)) > 0.5  # the wrong reversal would be caught

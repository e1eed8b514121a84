"""The drafted simulator (``bread_stan.stan.draft``): drafts of programs of many shapes
type-check and follow the conventions of ``stan_models/README.md``, every refusal names
its statement, and drafted simulators pass the simulator check (a few here; all the
study models and test programs in ``scripts/studies/draft_all.py``, output in
``scripts/studies/draft_all.txt``).

Deliberate break, done once: the translator emitting each ``normal_rng`` with its scale
doubled made ``test_drafted_simulator_passes_the_check`` fail on both programs (flagged
``mu drifts inward after 10 prior transitions, p = 7e-107`` and ``alpha drifts inward
after 10 prior transitions, p = 3e-105``) and
``test_drafts_match_the_hand_written_simulators_in_distribution`` fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bread_stan.cli import main as cli
from bread_stan.stan.compile import Program, compile_many, stanc_info
from bread_stan.stan.draft import DraftError, draft_program, draft_simulator
from bread_stan.stan.simulator import check_conventions
from bread_stan.workflows.bread import SamplerSettings
from bread_stan.workflows.simulator_check import CheckSettings, check_simulator

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = ROOT / "tests" / "stan"
DRAFT = TEST_STAN / "draft"
MODELS = ROOT / "stan_models"

# Program -> lines its draft must contain (the translation of its ~ statements).
SHAPES = {
    TEST_STAN / "normal_mean.stan": [
        "mu = normal_rng(0, tau);",
        "y = to_vector(normal_rng(rep_array(mu, num_elements(y)), sigma));"],
    MODELS / "linear_regression.stan": [
        "beta = to_vector(normal_rng(rep_array(0, num_elements(beta)), sqrt(scale_sq)));",
        "y = to_vector(normal_rng(alpha + X * beta, sqrt(sigma_sq)));"],
    MODELS / "logistic_regression.stan": [
        "y = bernoulli_rng(bread_inv_logit_(alpha + X * beta));"],
    TEST_STAN / "poisson_regression.stan": ["y = poisson_log_rng(alpha + X * beta);"],
    DRAFT / "eight_schools_centred.stan": [
        "tau = abs(cauchy_rng(0, 5));", "theta[j] = normal_rng(mu, tau);",
        "y = normal_rng(theta, sigma);"],
    DRAFT / "eight_schools_noncentred.stan": [
        "vector[J] theta = mu + tau * theta_tilde;", "y[j] = normal_rng(theta[j], sigma[j]);"],
    DRAFT / "array_of_vectors.stan": [
        "z[g] = to_vector(normal_rng(m, s));", "y[g] = to_vector(normal_rng(z[g], 1));"],
    DRAFT / "bounded_scales.stan": [
        "sigma_half_normal = abs(normal_rng(0, 1));", "rate = exponential_rng(2);",
        "sigma_half_cauchy = abs(cauchy_rng(0, 0.5));", "p = beta_rng(2, 3);",
        "shift = uniform_rng(-2, 2);", "hit = bernoulli_rng(rep_array(p, num_elements(hit)));"],
    DRAFT / "dirichlet_categorical.stan": [
        "theta = dirichlet_rng(concentration);", "y[n] = categorical_rng(theta);"],
    DRAFT / "multi_normal.stan": [
        "mu = multi_normal_rng(rep_vector(0, D), prior_cov);",
        "L = lkj_corr_cholesky_rng(rows(L), 2);",
        "tau = to_vector(abs(normal_rng(rep_array(0, num_elements(tau)), 1)));",
        "y = multi_normal_cholesky_rng(rep_array(mu, size(y)), diag_pre_multiply(tau, L));"],
    TEST_STAN / "group_scales.stan": [
        "tau = to_vector(inv_gamma_rng(rep_array(3, num_elements(tau)), 2));",
        "mu = to_vector(normal_rng(0, tau));"],
    DRAFT / "includes_and_locals.stan": [
        "real twice(real x) {", "sigma = abs(normal_rng(0, 1));", "s2 = abs(normal_rng(0, 1));",
        "real b = twice(a);", "vector[N] mu = b + x;", "y[i, j] = normal_rng(mu[i], sigma + s2);"],
    DRAFT / "hierarchical_logistic.stan": [
        "sigma_a = abs(student_t_rng(3, 0, 2.5));",
        "a = to_vector(normal_rng(rep_array(0, num_elements(a)), sigma_a));",
        "s = gamma_rng(rep_array(2, num_elements(s)), 2);",
        "real eta = a[g[n]] + beta * x[n] + Z[1, g[n]];",
        "y[n] = bernoulli_rng(bread_inv_logit_(eta));",
        "k = binomial_rng(trials, inv_logit(a[g] * s[1]));"],
    TEST_STAN / "trial" / "surgical.stan": [  # Stan 2.35 has no binomial_logit_rng
        "r = binomial_rng(n, inv_logit(b));"],
    MODELS / "matrix_factorisation.stan": [
        "U = to_matrix(normal_rng(rep_array(0, num_elements(to_vector(U))), "
        "sqrt(sigma_u_sq)), rows(U), cols(U));",
        "y = to_vector(normal_rng(to_vector(U * V)[obs_cell], sqrt(sigma_sq)));"],
}


@pytest.mark.parametrize("model", list(SHAPES), ids=lambda p: p.stem)
def test_draft_translates_each_statement_and_follows_the_conventions(model):
    text = draft_simulator(model)
    lines = {line.strip() for line in text.splitlines()}
    for expected in SHAPES[model]:
        assert expected in lines, f"{expected!r} not in\n{text}"
    model_info = stanc_info(model)
    sim_info = stanc_info(Program(text, f"{model.stem}_drafted"))
    check_conventions(model_info, sim_info)
    assert "hyper_given" in sim_info["inputs"] and "prior_only" not in sim_info["inputs"]
    simulated = set(model_info["inputs"]) - set(sim_info["inputs"]) - {"prior_only"}
    assert simulated and simulated <= set(sim_info["generated quantities"])
    assert draft_simulator(model) == text            # deterministic


def test_statements_are_drawn_after_what_they_use():
    # The model block states mu after tau and theta_tilde; theta (a transformed
    # parameter) must be recomputed after all three are drawn, y after theta.
    text = draft_simulator(DRAFT / "eight_schools_noncentred.stan")
    at = {key: text.index(key) for key in ("theta_tilde = ", "tau = abs", "mu = normal_rng",
                                           "vector[J] theta =", "y[j] =")}
    assert max(at["theta_tilde = "], at["tau = abs"], at["mu = normal_rng"]) \
        < at["vector[J] theta ="] < at["y[j] ="]
    reordered = (MODELS / "linear_regression.stan").read_text().replace(
        "  sigma_sq ~ inv_gamma(1, 1);\n  scale_sq ~ inv_gamma(1, 1);\n", "").replace(
        "beta ~ normal(0, sqrt(scale_sq));",
        "beta ~ normal(0, sqrt(scale_sq));\n  scale_sq ~ inv_gamma(1, 1);\n"
        "  sigma_sq ~ inv_gamma(1, 1);")
    text = draft_simulator(reordered)
    assert text.index("scale_sq = inv_gamma_rng") < text.index("alpha = normal_rng")


def test_hyperparameters_follow_the_hyper_given_convention():
    for name in ("linear_regression", "logistic_regression", "matrix_factorisation"):
        drafted = stanc_info(Program(draft_simulator(MODELS / f"{name}.stan"), "d"))
        by_hand = stanc_info(MODELS / f"{name}_sim.stan")
        assert drafted["inputs"] == by_hand["inputs"], name
    text = draft_simulator(TEST_STAN / "group_scales.stan", hyper=["tau"])
    assert "array[hyper_given] vector<lower=0>[G] tau_given;" in text
    assert "tau = tau_given[1];" in text
    assert "tau_given" not in draft_simulator(TEST_STAN / "group_scales.stan", hyper=[])
    with pytest.raises(DraftError, match=r"line 20 `beta ~ normal\(0, sqrt\(scale_sq\)\);`: "
                       "hyperparameter beta's prior uses scale_sq"):
        draft_simulator(MODELS / "linear_regression.stan", hyper=["beta"])
    with pytest.raises(DraftError, match="'gamma' is not a parameter"):
        draft_simulator(MODELS / "linear_regression.stan", hyper=["gamma"])


_BASE = """
data {{
  int<lower=0> N;
  vector[N] y;
  int<lower=0, upper=1> prior_only;
}}
{extra}parameters {{
  real mu;
  real<lower=0> sigma;
}}
model {{
  {prior}
  if (!prior_only) {{
    {likelihood}
  }}
}}
"""
_PRIOR = "mu ~ normal(0, 1);\n  sigma ~ exponential(1);"

REFUSALS = {
    "target +=": (dict(likelihood="target += -0.5 * dot_self((y - mu) / sigma) - N * log(sigma);"),
                  r"line 15 `target \+= -0.5 \* dot_self\(\(y - mu\) / sigma\) - N \* log\(sigma\);`: "
                  r"target \+= has no _rng counterpart"),
    "scaled density": (dict(likelihood="target += 2 * normal_lpdf(y | mu, sigma);"),
                       r"line 15 `target \+= 2 \* normal_lpdf\(y \| mu, sigma\);`: "
                       r"target \+= has no _rng counterpart"),
    "cdf of a parameter": (dict(likelihood="target += normal_lpdf(y | mu, sigma) "
                                           "- normal_lccdf(0 | mu, sigma);"),
                           "target \\+= has no _rng counterpart"),
    "truncation": (dict(likelihood="for (n in 1:N) y[n] ~ normal(mu, sigma) T[0, ];"),
                   r"`y\[n\] ~ normal\(mu, sigma\) T\[0, \];`: truncation T\[...\] is not "
                   "translated"),
    "improper prior": (dict(prior="mu ~ normal(0, 1);"),
                       r"line 9: parameter sigma has no density statement: its prior is flat "
                       r"\(improper\), so nothing can be simulated from it; add a proper "
                       r"prior, e.g. `sigma ~ normal\(0, 10\);` \(a half-normal on "
                       r"<lower=0>\)"),
    "improper unbounded prior": (dict(prior="sigma ~ normal(0, 1);"),
                                 r"parameter mu has no density statement.*`mu ~ "
                                 r"normal\(0, 10\);`"),
    "no _rng": (dict(likelihood="y ~ von_mises(mu, sigma);"),
                "the distribution von_mises has no _rng the drafter knows"),
    "data twice": (dict(likelihood="y ~ normal(mu, sigma);\n    y ~ normal(0, 10);"),
                   r"line 16 `y ~ normal\(0, 10\);`: y is on the left of ~ more than once "
                   r"\(also on line 15\)"),
    "partial loop of a parameter": (
        dict(extra="", prior="for (n in 2:N) mu[n] ~ normal(0, 1);\n  sigma ~ exponential(1);"),
        r"line 12 `mu\[n\] ~ normal\(0, 1\);`: the drafter cannot tell that this draws "
        "every element of mu once"),
    "prior in a conditional": (
        dict(prior="if (N > 3) mu ~ normal(0, 1); else mu ~ normal(0, 2);\n"
                   "  sigma ~ exponential(1);"),
        "a ~ inside a conditional is not translated"),
    "conditional on a parameter": (
        dict(likelihood="if (mu > 0) y ~ normal(mu, sigma); else y ~ normal(0, sigma);"),
        "a conditional on a parameter"),
    "support": (dict(prior="mu ~ normal(0, 1);\n  sigma ~ von_mises(1, 1);"),
                r"`sigma ~ von_mises\(1, 1\);`: von_mises is not a prior the drafter "
                "translates for a real parameter"),
    "jacobian": (dict(prior="mu ~ normal(0, 1);\n  log(sigma) ~ normal(0, 1);"),
                 "the left of ~ is an expression"),
    "prior inside the likelihood": (dict(prior="mu ~ normal(0, 1);",
                                         likelihood="sigma ~ exponential(1);\n"
                                                    "    y ~ normal(mu, sigma);"),
                                    r"the prior of parameter sigma is inside if \(!prior_only\)"),
    "data outside the likelihood": (dict(prior=_PRIOR + "\n  y ~ normal(mu, sigma);",
                                         likelihood=""),
                                    "data y is on the left of ~ outside if"),
    "prior uses the data": (dict(prior="mu ~ normal(mean(y), 1);\n  sigma ~ exponential(1);"),
                            "the prior uses the data y that the simulator draws"),
    "transformed data use the data": (
        dict(extra="transformed data {\n  real y_bar = mean(y);\n}\n",
             likelihood="y ~ normal(mu + y_bar, sigma);"),
        "transformed data use y, which the simulator draws"),
    "transformed parameter on the left": (
        dict(extra="", prior=_PRIOR + "\n  mu2 ~ normal(0, 1);"),
        "mu2 is a transformed parameter"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_name_the_statement(case):
    parts, message = REFUSALS[case]
    fields = dict(extra="", prior=_PRIOR, likelihood="y ~ normal(mu, sigma);", **{})
    fields.update(parts)
    program = _BASE.format(**fields)
    if case == "partial loop of a parameter":
        program = program.replace("real mu;", "vector[N] mu;").replace(
            "y ~ normal(mu, sigma)", "y ~ normal(mu[1], sigma)")
    if case == "transformed parameter on the left":
        program = program.replace("model {", "transformed parameters {\n  real mu2 = 2 * mu;\n"
                                  "}\nmodel {")
    with pytest.raises(DraftError, match=message) as caught:
        draft_simulator(program)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("cannot draft")


def test_refusals_of_study_models():
    for name, message in [("ar1", "line 17 .*transformed data use y"),
                          ("gaussian_mixture", r"line 39 `target \+= "),
                          ("mf_collapsed", "Y_rows is transformed data")]:
        with pytest.raises(DraftError, match=message):
            draft_simulator(MODELS / f"{name}.stan")
    no_prior_only = _BASE.replace("  int<lower=0, upper=1> prior_only;\n", "").replace(
        "if (!prior_only) {", "{")
    with pytest.raises(DraftError, match="does not declare `int<lower=0, upper=1> prior_only"):
        draft_simulator(no_prior_only.format(extra="", prior=_PRIOR,
                                             likelihood="y ~ normal(mu, sigma);"))


def test_cli_draft_simulator(tmp_path, capsys):
    out = tmp_path / "sim.stan"
    assert cli.main(["draft-simulator", str(TEST_STAN / "group_scales.stan"), "--out", str(out),
                     "--hyper", "tau"]) == 0
    assert out.read_text() == draft_simulator(TEST_STAN / "group_scales.stan", hyper=["tau"])
    assert cli.main(["draft-simulator", str(TEST_STAN / "normal_mean.stan")]) == 0
    assert capsys.readouterr().out == draft_simulator(TEST_STAN / "normal_mean.stan")
    assert cli.main(["draft-simulator", str(MODELS / "ar1.stan")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 17" in err and "Traceback" not in err
    # a program without prior_only is split first (issue 26)
    assert cli.main(["draft-simulator", str(TEST_STAN / "no_prior_only.stan")]) == 0
    assert "y = to_vector(normal_rng(rep_array(mu, num_elements(y)), 1));" in \
        capsys.readouterr().out


# Drafts against the simulator check (the check's default sizes; cheap pilot tuning).

SAMPLER = SamplerSettings(pilot_chains=16, pilot_grid=6, pilot_steps=20)
CHECKED = [TEST_STAN / "normal_mean.stan", TEST_STAN / "poisson_regression.stan"]
CHECKED_SLOW = [DRAFT / "eight_schools_noncentred.stan", DRAFT / "multi_normal.stan",
                DRAFT / "bounded_scales.stan", DRAFT / "includes_and_locals.stan",
                MODELS / "linear_regression.stan"]


def _data(model: Path):
    if model.parent == MODELS:
        from bread_stan.stan import datasets
        return datasets.load({"linear_regression": "nhefs"}[model.stem])
    return json.loads((DRAFT / f"{model.stem}.json").read_text())


def _check(model: Path, pool: list[Path], seed: int = 0):
    programs = [p for m in pool for p in (m, Program(draft_simulator(m), f"{m.stem}_drafted"))]
    compile_many(programs, workers=2)
    return check_simulator(model, Program(draft_simulator(model), f"{model.stem}_drafted"),
                           _data(model), sampler=SAMPLER, settings=CheckSettings(seed=seed))


def _passes(model: Path, pool: list[Path]):
    """The check of a right draft at seed 0, and at seed 1 if seed 0 flagged it.

    A right simulator is flagged with probability at most alpha = 0.01 at one seed,
    and a fixed seed's numbers can still differ between numpy builds (its SIMD
    ``exp``), so one seed is a 1% lottery across machines.  Two
    independent seeds both flag a right draft with probability at most 1e-4; a wrong
    draft is flagged at both (the check's power on planted bugs is 10 of 10 seeds,
    ``scripts/figures/simulator_check_power/power.md``)."""
    result = _check(model, pool)
    return result if result.passed else _check(model, pool, seed=1)


@pytest.mark.parametrize("model", CHECKED, ids=lambda p: p.stem)
def test_drafted_simulator_passes_the_check(model):
    result = _passes(model, CHECKED)
    assert result.ran and result.passed, result.message
    assert result.min_p > 0.01


@pytest.mark.slow
@pytest.mark.parametrize("model", CHECKED_SLOW, ids=lambda p: p.stem)
def test_drafted_simulator_passes_the_check_slow(model):
    result = _passes(model, CHECKED_SLOW)
    assert result.ran and result.passed, result.message


# Drafts against the hand-written simulators of the study models: the same joint
# distribution (two-sample KS on every parameter's first element, the scalar
# hyperparameters and the mean of the simulated data; 2000 draws each, Bonferroni at
# alpha = 0.001 over all quantities of all models).

HAND_WRITTEN = {"linear_regression": "nhefs", "logistic_regression": "pima",
                "vague_regression": None}


@pytest.mark.slow
def test_drafts_match_the_hand_written_simulators_in_distribution():
    import numpy as np
    from scipy import stats

    from bread_stan.stan import datasets
    from bread_stan.stan.simulator import Simulator

    rng = np.random.default_rng(1)
    vague = {"N": 40, "x": rng.uniform(70, 140, 40), "z": rng.integers(0, 2, 40) * 1.0}
    pairs = [(MODELS / f"{name}_sim.stan",
              Program(draft_simulator(MODELS / f"{name}.stan"), f"{name}_drafted"))
             for name in HAND_WRITTEN]
    compile_many([p for pair in pairs for p in pair], workers=2)
    p_values = {}
    for (name, data_name), pair in zip(HAND_WRITTEN.items(), pairs):
        data = datasets.load(data_name) if data_name else vague
        by_hand, drafted = (Simulator(p, data).simulate(2000, seed=k)
                            for k, p in enumerate(pair))
        for key, values in by_hand.items():
            summary = (lambda v: v.reshape(len(v), -1).mean(axis=1)) if key == "y" else (
                lambda v: v.reshape(len(v), -1)[:, 0])
            p_values[f"{name}: {key}"] = stats.ks_2samp(summary(values),
                                                        summary(drafted[key])).pvalue
    assert min(p_values.values()) > 0.001 / len(p_values), p_values


# -- target += densities, glm likelihoods, uniform priors (issue 26)

SPLIT = TEST_STAN / "split"


def test_target_densities_are_read_as_tildes():
    """brms's priors: target += foo_lpdf(x | ...), the constant lccdf normaliser dropped
    and the <lower=0> scale drawn as a half distribution; the glm likelihood drawn from
    its linear predictor."""
    from bread_stan.stan.draft import split_model
    text = draft_simulator(Program(split_model(SPLIT / "brms_regression.stan").program,
                                   "brms_regression"))
    assert "b = to_vector(normal_rng(rep_array(0, num_elements(b)), 1));" in text
    assert "Intercept = student_t_rng(3, 8, 10);" in text
    assert "sigma = abs(student_t_rng(3, 0, 10));" in text
    assert "Y = to_vector(normal_rng((Intercept) + (Xc) * (b), sigma));" in text


@pytest.mark.parametrize("likelihood, draw", [
    ("y ~ bernoulli_logit_glm(x, alpha, beta);",
     "y = bernoulli_rng(bread_inv_logit_((alpha) + (x) * (beta)));"),
    ("target += poisson_log_glm_lpmf(y | x, alpha, beta);",
     "y = poisson_log_rng((alpha) + (x) * (beta));"),
])
def test_glm_likelihoods(likelihood, draw):
    bound = "upper=1" if "bernoulli" in likelihood else "upper=1000"
    program = (f"data {{ int N; int K; matrix[N, K] x; array[N] int<lower=0, {bound}> y;\n"
               "int<lower=0, upper=1> prior_only; }\n"
               "parameters { real alpha; vector[K] beta; }\n"
               "model { alpha ~ normal(0, 1); beta ~ normal(0, 1);\n"
               f"if (!prior_only) {{ {likelihood} }} }}\n")
    if "poisson" in likelihood:     # a Poisson count can exceed any upper bound
        relaxed = draft_program(program).relaxed_bounds
        assert "poisson_log can draw y above y's declared upper=1000" in relaxed["y"]
        assert "array[N] int y;" in draft_program(program).text
    else:
        assert draft_program(program).relaxed_bounds == {}
    assert draw in draft_simulator(program)


def test_bounded_parameter_without_density_is_uniform():
    program = ("data { int N; vector[N] y; int<lower=0, upper=1> prior_only; }\n"
               "parameters { real<lower=-2, upper=3> mu; vector<lower=0, upper=N>[2] s; }\n"
               "model { if (!prior_only) { y ~ normal(mu, s[1] + s[2]); } }\n")
    text = draft_simulator(program)
    assert "mu = uniform_rng(-2, 3);" in text
    assert "for (s_i_ in 1:num_elements(s)) s[s_i_] = uniform_rng(0, N);" in text


def test_log_mix_of_two_densities_is_a_mixture_draw():
    program = ("data { int N; array[N] real y; int<lower=0, upper=1> prior_only; }\n"
               "parameters { real<lower=0, upper=1> theta; array[2] real mu; }\n"
               "model { theta ~ beta(2, 2); mu ~ normal(0, 10);\n"
               "if (!prior_only) { for (n in 1:N) target += log_mix(theta, "
               "normal_lpdf(y[n] | mu[1], 1), normal_lpdf(y[n] | mu[2], 1)); } }\n")
    text = draft_simulator(program)
    assert "y[n] = bernoulli_rng(theta) ? normal_rng(mu[1], 1) : normal_rng(mu[2], 1);" in text
    with pytest.raises(DraftError, match="log_mix over a part of y that is not one element"):
        draft_simulator(program.replace("array[N] real y", "array[N, 2] real y").replace(
            "1:N)", "1:N) for (m in 1:2)"))


def test_uniform_prior_inside_wider_bounds():
    program = ("data { int N; vector[N] y; int<lower=0, upper=1> prior_only; }\n"
               "parameters { real<lower=-20, upper=20> b; real c; }\n"
               "model { b ~ uniform(-10, 10); c ~ uniform(0, 1);\n"
               "if (!prior_only) { y ~ normal(b + c, 1); } }\n")
    text = draft_simulator(program)
    assert "b = uniform_rng(-10, 10);" in text and "c = uniform_rng(0, 1);" in text
    for outside in ("uniform(-30, 10)", "uniform(-10, 30)"):   # truncated by the bounds
        text = draft_simulator(program.replace("uniform(-10, 10)", outside))
        assert "if (!((hyper_given || (b > -20 && b < 20)))) continue;" in text
    with pytest.raises(DraftError, match=r"needs b declared"):
        draft_simulator(program.replace("uniform(-10, 10)", "uniform(-30, 10)").replace(
            "upper=20", "upper=u[1]").replace("int N;", "int N; vector[2] u;"))


# -- priors restricted by the declared constraint (bread_stan.stan.draft.restrict)

_RESTRICTED = """
data { int N; vector[N] y; int<lower=0, upper=1> prior_only; }
parameters { real<lower=0> tau; real<lower=0> mu; array[2] real<lower=-1, upper=N> b;
             ordered[3] c; simplex[3] w; }
model { tau ~ exponential(1); mu ~ normal(1, tau); b ~ normal(mu, 1); c ~ normal(0, 1);
if (!prior_only) { y ~ normal(mu + b[1] + c[3] + w[1], 1); } }
"""


def test_restricted_priors_are_drawn_exactly():
    """A prior truncated by declared bounds is drawn by rejection of the whole draw (the
    lost mass of mu depends on tau); an ordered vector with an iid prior as sorted iid
    draws; a simplex without a density from dirichlet(1)."""
    text = draft_simulator(_RESTRICTED)
    assert "for (try_ in 1:100001) {" in text
    assert "if (!((mu > 0) && (min(b) > -1 && max(b) < N))) continue;" in text
    assert "tau = exponential_rng(1);" in text          # support matches: not tested
    assert "c = sort_asc(to_vector(normal_rng(rep_array(0, num_elements(c)), 1)));" in text
    assert "w = dirichlet_rng(rep_vector(1, 3));" in text
    with pytest.raises(DraftError, match="c is ordered: only an iid prior with real support"):
        draft_simulator(_RESTRICTED.replace("c ~ normal(0, 1)", "c ~ normal([0, 1, 2]', 1)"))
    with pytest.raises(DraftError, match="the bound of b depends on a parameter"):
        draft_simulator(_RESTRICTED.replace("upper=N>", "upper=tau>"))


@pytest.mark.slow
def test_restricted_priors_match_their_densities():
    """The drafted draws of ``_RESTRICTED`` (N = 2) against the model's prior (4000 draws,
    KS at alpha = 0.001 each).  The joint prior keeps only mu > 0 and -1 < b[i] < 2, so
    tau has density proportional to exp(-t) E[(Phi(2 - mu) - Phi(-1 - mu))^2 ; mu > 0]
    with mu ~ normal(1, t) (integrated numerically); c[1] is the smallest of three
    N(0, 1); w[1] is beta(1, 2).  Deliberate break, done once: redrawing mu alone until
    it is positive (its truncated conditional given tau, which leaves tau exponential(1))
    gave p = 2e-7 for tau and failed this test; dropping the rejection or sort_asc
    altogether makes Stan reject the out-of-bounds or unordered outputs."""
    import numpy as np
    from scipy import integrate, stats

    from bread_stan.stan.simulator import Simulator

    program = Program(draft_simulator(_RESTRICTED), "restricted_drafted")
    draws = Simulator(program, {"N": 2, "y": [0.0, 0.0]}).simulate(4000, seed=3)
    kept = lambda m: (stats.norm.cdf(2 - m) - stats.norm.cdf(-1 - m)) ** 2
    grid = np.linspace(1e-6, 30, 3000)
    density = [np.exp(-t) * integrate.quad(lambda m: stats.norm.pdf(m, 1, t) * kept(m),
                                           0, np.inf)[0] for t in grid]
    cdf = integrate.cumulative_trapezoid(density, grid, initial=0)
    p = {"tau": stats.kstest(draws["tau"].ravel(),
                             lambda x: np.interp(x, grid, cdf / cdf[-1])).pvalue,
         "c[1]": stats.kstest(draws["c"][:, 0], lambda x: 1 - stats.norm.sf(x) ** 3).pvalue,
         "w[1]": stats.kstest(draws["w"][:, 0], stats.beta(1, 2).cdf).pvalue}
    assert np.all(draws["mu"] > 0) and np.all(np.diff(draws["c"], axis=1) > 0)
    assert min(p.values()) > 0.001, p


_PIECES = """
data { int N; array[N] int k; int<lower=0, upper=1> prior_only; }
parameters { array[4] real<lower=0> theta; }
model { theta[{1, 3}] ~ normal(1, 0.5); theta[{2, 4}] ~ exponential(1);
if (!prior_only) { k[1] ~ poisson(theta[1]); for (n in 2:N) k[n] ~ poisson(theta[2]); } }
"""


@pytest.mark.parametrize("change, message", [
    (("{2, 4}", "{2, 3}"), r"`theta\[\{2, 3\}\] ~ exponential\(1\);`: the drafter cannot tell "
                           r"that this draws every element of theta once: the pieces"),
    (("{2, 4}", "2"), r"the pieces drawn by indexed ~ end at 3, not at its size 4"),
    (("{1, 3}", "{1}"), r"`theta\[\{2, 4\}\] ~ exponential\(1\);`: the drafter cannot "
                        r"tell that this draws every element of theta once: the pieces"),
    (("for (n in 2:N) k[n]", "for (n in 2:N) k"), r"this ~ sits in the loop over n, which "
                                                  r"does not index k"),
])
def test_indexed_pieces_must_chain(change, message):
    """Constant indices, lists of them and loops from a number draw a variable of one
    dimension in pieces, checked to chain from 1 to its size.  Deliberate break, done
    once: Coverage.finish returning at once let the overlap {1, 3} + {2, 3} and the gap
    {1} + {2, 4} through (the first three cases failed).  A gap in the data (k[1]
    and k[3:N]) is no longer refused: k[2] keeps its observed value
    (tests/test_draft_replay.py)."""
    text = draft_simulator(_PIECES)
    assert "theta[{1, 3}] = normal_rng(rep_array(1, num_elements(theta[{1, 3}])), 0.5);" in text
    assert "k[1] = poisson_rng(theta[1]);" in text and "k[n] = poisson_rng(theta[2]);" in text
    assert "if (!((min(theta) > 0))) continue;" in text
    with pytest.raises(DraftError, match=message):
        draft_simulator(_PIECES.replace(*change))


_MIXTURE = """
data { int K; int N; array[N] real y; int<lower=0, upper=1> prior_only; }
parameters { simplex[K] theta; array[K] real mu; }
model { array[K] real lp; mu ~ normal(0, 10);
  for (n in 1:N) {
    for (k in 1:K) { lp[k] = log(theta[k]) + normal_lpdf(y[n] | mu[k], 1); }
    if (!prior_only) { target += log_sum_exp(lp); } } }
"""


def test_k_component_mixture_is_a_categorical_draw():
    """The User's Guide's mixture, lp[k] = log(theta[k]) + foo_lpdf(y[n] | ...) summed by
    log_sum_exp, is drawn as a component from categorical(theta), then y[n].  Deliberate
    break, done once: fold_mixtures returning at once made the draft fail on the
    target += (the first assertion)."""
    text = draft_simulator(_MIXTURE)
    assert "{ int k = categorical_rng(theta); y[n] = normal_rng(mu[k], 1); }" in text
    for change, message in [
            (("array[K] real lp", "array[K + 1] real lp"), r"target \+= has no _rng"),
            (("simplex[K] theta", "vector<lower=0>[K] theta"), r"target \+= has no _rng"),
            (("y[n] | mu[k], 1", "y[n] | mu[k], y[1]"), "y appears on both sides"),
            (("if (!prior_only) { target += log_sum_exp(lp); }",
              "target += log_sum_exp(lp);"), "data y is in a mixture outside")]:
        with pytest.raises(DraftError, match=message):
            draft_simulator(_MIXTURE.replace(*change))


def test_an_infinite_logit_is_a_certain_outcome():
    """bernoulli_logit is drafted as bernoulli_rng(inv_logit(.)) (inv_logit through a
    function of the simulator's, since stanc rewrites the plain call as
    bernoulli_logit_rng), what Stan's bernoulli_logit_rng computes draw for draw, except
    that an infinite logit (a prior draw that overflows it, as posteriordb's irt_2pl's
    lognormal discriminations with half-Cauchy scales do) gives the certain outcome
    instead of an error.  Here a is lognormal with a half-Cauchy(200) scale, infinite in
    about one prior draw in six: every such draw has y = 1 where x > 0 and 0 where
    x < 0, and the finite draws match bernoulli_logit_rng's from the same seed exactly.  Break tried: drafting
    bernoulli_logit_rng again fails the simulation ("is inf, but must be finite")."""
    import numpy as np

    from bread_stan.errors import StanDataError
    from bread_stan.stan.simulator import Simulator

    program = ("data { int N; vector[N] x; array[N] int<lower=0, upper=1> y;\n"
               "int<lower=0, upper=1> prior_only; }\n"
               "parameters { real<lower=0> s; real<lower=0> a; }\n"
               "model { s ~ cauchy(0, 200); a ~ lognormal(0, s);\n"
               "if (!prior_only) { y ~ bernoulli_logit(a * x); } }\n")
    text = draft_simulator(program)
    assert "y = bernoulli_rng(bread_inv_logit_(a * x));" in text
    data = {"N": 4, "x": [1.0, -1.0, 0.5, -2.0], "y": [0, 0, 0, 0]}
    drafted = Program(text, "infinite_logit_drafted")
    stan_own = Program(text.replace("bernoulli_rng(bread_inv_logit_(a * x))",
                                    "bernoulli_logit_rng(a * x)"), "infinite_logit_stan")
    compile_many([drafted, stan_own], workers=2)
    draws = Simulator(drafted, data).simulate(600, seed=5)
    infinite = np.isinf(draws["a"].ravel())
    assert 40 < infinite.sum() < 200  # P(a = inf) = P(s |z| > 709.8) is about 0.18
    np.testing.assert_array_equal(draws["y"][infinite],
                                  np.tile([1, 0, 1, 0], (infinite.sum(), 1)))
    compared = 0
    for seed in range(20):  # Stan's own draws, where they are finite, are the drafted ones
        try:
            own = Simulator(stan_own, data).simulate(1, seed=seed)
        except StanDataError:
            continue
        compared += 1
        np.testing.assert_array_equal(
            own["y"], Simulator(drafted, data).simulate(1, seed=seed)["y"])
    assert compared >= 10


def test_a_prior_draw_beyond_double_precision_stops_the_run_before_any_pilot(monkeypatch):
    """Where the prior itself reaches inf (a lognormal with a half-Cauchy(2) scale: about
    one draw in 700, as in posteriordb's irt_2pl, so the split check's and the pilot's
    few draws miss it and the simulator check's 2,000 meet it), the run is refused with
    the cause and the fix before any pilot runs: the check's draws are checked for
    finite parameters and data along with their simulation.
    Break tried: simulate_check_draws without the model lets the run reach the fit of
    q (the patched fit raises "piloted")."""
    from bread_stan.errors import StanDataError
    from bread_stan.workflows.bread import RunSettings, bread

    program = ("data { int N; vector[N] x; array[N] int<lower=0, upper=1> y;\n"
               "int<lower=0, upper=1> prior_only; }\n"
               "parameters { real<lower=0> s; real<lower=0> a; }\n"
               "model { s ~ cauchy(0, 2); a ~ lognormal(0, s);\n"
               "if (!prior_only) { y ~ bernoulli_logit(a * x); } }\n")
    data = {"N": 4, "x": [1.0, -1.0, 0.5, -2.0], "y": [0, 0, 0, 0]}

    def piloted(*args, **kwargs):
        raise AssertionError("piloted")
    for pilot in ("auto_path.fit_q", "auto_path.tune", "common.tune_kernel"):
        monkeypatch.setattr(f"bread_stan.workflows.{pilot}", piloted)
    with pytest.raises(StanDataError, match=r"non-finite values: a is inf in draw \d+.*"
                                            r"beyond double precision.*weakly informative"):
        bread(program, draft_simulator(program), data,
              run=RunSettings(steps=(4,), chains=4, seed=0, progress=False))

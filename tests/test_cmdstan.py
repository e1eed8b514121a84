"""A real CmdStan 2.35 beside the toolkit: its toolchain, its NUTS, its output files.

CmdStan comes from the session fixture ``cmdstan_path`` (tests/conftest.py): ``$CMDSTAN``
when set, otherwise built once offline into ``~/.cache/bread-stan/cmdstan-2.35.0``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bread_stan.stan.compile import compile_many, read_program
from bread_stan.stan.draws import read_draws, summarise, unconstrain_draws
from bread_stan.stan.model import StanModel
from bread_stan.stan.tempered import StanTarget
from bread_stan.stan.toolchain import find_toolchain
from bread_stan.workflows.common import default_name, program_text
from bread_stan.workflows.fit import FitSettings, _cmdstan_model, fit

ROOT = Path(__file__).resolve().parent.parent
LINREG = ROOT / "stan_models" / "linear_regression.stan"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cmdstan(cmdstan_path):
    """The CmdStan folder, with CMDSTAN set and cmdstanpy pointed at it (this module only)."""
    import cmdstanpy

    path = str(cmdstan_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CMDSTAN", path)
        cmdstanpy.set_cmdstan_path(path)
        find_toolchain.cache_clear()
        yield Path(path)
    find_toolchain.cache_clear()


def test_cmdstan_toolchain_compiles_a_model_that_agrees_with_httpstans(cmdstan, compiled,
                                                                        linear_data):
    toolchain = find_toolchain("cmdstan")
    assert toolchain.source == "cmdstan" and toolchain.stanc == cmdstan / "bin" / "stanc"
    assert toolchain.stan_version == "2.35.0"
    assert find_toolchain().source == "httpstan"  # CMDSTAN alone switches nothing
    ours, = compile_many([LINREG], toolchain="cmdstan")  # the bridge object alongside
    assert ours.library != compiled["linear_regression"].library
    data = {**linear_data, "prior_only": 0}
    a, b = StanModel(ours, data), StanModel(compiled["linear_regression"], data)
    points = np.random.default_rng(0).normal(size=(20, a.dim))
    np.testing.assert_allclose(a.log_density_batch(points), b.log_density_batch(points),
                               rtol=1e-13)
    np.testing.assert_allclose(a.log_density_gradient_batch(points)[1],
                               b.log_density_gradient_batch(points)[1], rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def two_fits(cmdstan, linear_data):
    """The study's linear regression fitted by CmdStan's NUTS and by the toolkit's."""
    target = StanTarget(LINREG, linear_data)
    inits = np.random.default_rng(1).normal(scale=0.5, size=(4, target.dim))
    settings = {"chains": 4, "warmup": 500, "draws": 1000}
    return (target,
            fit(target, inits, settings=FitSettings(sampler="cmdstan", **settings), seed=2),
            fit(target, inits, settings=FitSettings(sampler="toolkit", **settings), seed=2))


def test_a_study_model_runs_unchanged_in_cmdstan(two_fits):
    # The program file goes to CmdStan as it is, with prior_only = 0 in the data.
    target, by_cmdstan, _ = two_fits
    assert by_cmdstan.sampler == "cmdstan" and by_cmdstan.draws["beta"].shape == (4, 1000, 3)
    assert by_cmdstan.unconstrained.shape == (4, 1000, target.dim)
    assert by_cmdstan.max_rhat < 1.02
    assert {"divergences", "max_tree_depth_hits", "transitions"} <= set(by_cmdstan.diagnostics)
    assert by_cmdstan.diagnostics["transitions"] == 4000
    assert list(by_cmdstan.summary.index) == [
        "sigma_sq", "scale_sq", "alpha", "beta[1]", "beta[2]", "beta[3]"]
    # unconstrained draws map back to CmdStan's constrained ones
    back = target.param_constrain(by_cmdstan.unconstrained.reshape(4000, -1))
    np.testing.assert_allclose(back[:, 0], by_cmdstan.draws["sigma_sq"].ravel(), rtol=1e-10)


def test_the_cmdstan_fit_is_built_with_stancs_O1_as_the_toolkits_library_is(two_fits):
    # stanc --O1 turns the regression's likelihood into normal_id_glm (gradients about
    # 7x faster), whose code shows in the executable; built without it, none does.
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    target, _, _ = two_fits
    assert target.compiled.stanc_args == ("--O1",)
    exe = _cmdstan_model(target.compiled.program, target.compiled.stanc_args).exe_file
    symbols = subprocess.run([nm, "-C", str(exe)], capture_output=True, text=True,
                             check=True).stdout
    assert "normal_id_glm" in symbols


def test_cmdstan_and_toolkit_nuts_agree_on_a_posterior(two_fits):
    # On the unconstrained scale (log sigma_sq, log scale_sq, alpha, beta: all moments
    # finite, unlike the inverse-gamma variances), for each coordinate the difference of
    # the two posterior means is compared with sqrt(mcse_mean_a^2 + mcse_mean_b^2) and
    # the difference of the two sds with sqrt(mcse_sd_a^2 + mcse_sd_b^2) (ArviZ's Monte
    # Carlo standard errors, from the effective sample sizes).  Bonferroni over 2 x 6
    # comparisons at a family-wise 1%: |z| < 3.34.
    _, a, b = two_fits
    sa, sb = summarise({"u": a.unconstrained}), summarise({"u": b.unconstrained})
    limit = stats.norm.isf(0.01 / 2 / 12)
    for name in sa.index:
        ra, rb = sa.loc[name], sb.loc[name]
        z_mean = (ra["mean"] - rb["mean"]) / np.hypot(ra["mcse_mean"], rb["mcse_mean"])
        z_sd = (ra["sd"] - rb["sd"]) / np.hypot(ra["mcse_sd"], rb["mcse_sd"])
        assert abs(z_mean) < limit and abs(z_sd) < limit, (name, z_mean, z_sd)


def test_draws_are_read_from_cmdstan_csv_files_and_cmdstanpy_fits(two_fits, linear_data,
                                                                 tmp_path):
    import cmdstanpy

    data = tmp_path / "data.json"
    cmdstanpy.write_stan_json(str(data), {**linear_data, "prior_only": 0})
    # the executable the fit built and cached (no second CmdStan compile)
    model = _cmdstan_model(read_program(LINREG))
    sampled = model.sample(data=str(data), chains=2, iter_warmup=100, iter_sampling=50,
                           seed=1, save_warmup=True, show_progress=False,
                           output_dir=str(tmp_path))
    from_fit = read_draws(sampled)
    from_files = read_draws(sampled.runset.csv_files)
    assert sorted(from_fit) == ["alpha", "beta", "scale_sq", "sigma_sq"]  # no lp__ etc.
    for name, value in from_fit.items():
        np.testing.assert_array_equal(value, from_files[name])
    # beta[k] of chain 2, draw 7 (warmup dropped) is the CSV's column "beta.k"
    assert from_files["beta"].shape == (2, 50, 3)
    np.testing.assert_array_equal(from_files["beta"][1, 6],
                                  sampled.stan_variable("beta")[50 + 6])
    # a CmdStanModel is accepted where a program is; the draws unconstrain through it
    target = StanTarget(model, linear_data)
    assert target.compiled.program.code == LINREG.read_text()
    assert default_name(model) == "linear_regression"  # names and resume fingerprints
    assert program_text(model) == LINREG.read_text()
    unc = unconstrain_draws(from_fit, target)
    np.testing.assert_allclose(unc[0, :, 0], np.log(from_fit["sigma_sq"][0]), rtol=1e-12)

"""Draws in Stan's shapes: CmdStan CSV, ArviZ of both generations, Stan-named summaries."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import xarray as xr

from bread_stan.stan.draws import (_datatree, _inference_data, _summarise, arviz_generation,
                                   read_draws, stan_name, to_arviz)
from bread_stan.stan.tempered import StanTarget
from bread_stan.workflows.fit import FitSettings, fit

# A CmdStan 2.35 sampler file, cut down: 2 warmup draws saved, then 3 draws of a scalar
# mu and a 2 x 3 matrix theta, whose column "theta.i.j" holds 10 * i + j (+ 100 * draw).
CSV_HEADER = """# stan_version_major = 2
# model = m_model
# method = sample (Default)
#   sample
#     num_samples = 3
#     num_warmup = 2
#     save_warmup = true
#     thin = 1 (Default)
lp__,accept_stat__,treedepth__,mu,theta.1.1,theta.2.1,theta.1.2,theta.2.2,theta.1.3,theta.2.3
"""


def _csv(path, chain: int):
    rows = []
    for draw in range(-2, 3):  # two warmup draws first
        if draw == 0:
            rows.append("# Adaptation terminated\n# Step size = 0.9\n# Diagonal elements:\n# 1")
        cells = [-1.5, 0.9, 2, chain + 0.5 * draw]
        cells += [10 * i + j + 100 * draw for j in (1, 2, 3) for i in (1, 2)]  # column-major
        rows.append(",".join(map(str, cells)))
    path.write_text(CSV_HEADER + "\n".join(rows) + "\n# Elapsed Time: 0.1 seconds\n")
    return path


def test_stan_names_are_one_based_with_commas():
    assert stan_name("theta.2.1") == "theta[2,1]" == stan_name("theta[2,1]")
    assert stan_name("mu") == "mu"


def test_cmdstan_csv_files_give_stan_shaped_post_warmup_draws(tmp_path):
    files = [_csv(tmp_path / f"m-{c}.csv", c) for c in (1, 2)]
    draws = read_draws(files)
    assert sorted(draws) == ["mu", "theta"]  # lp__, accept_stat__, treedepth__ dropped
    assert draws["theta"].shape == (2, 3, 2, 3) and draws["mu"].shape == (2, 3)
    np.testing.assert_array_equal(draws["mu"], [[1, 1.5, 2], [2, 2.5, 3]])
    for i in (1, 2):
        for j in (1, 2, 3):
            np.testing.assert_array_equal(draws["theta"][:, :, i - 1, j - 1],
                                          [[10 * i + j + 100 * d for d in range(3)]] * 2)
    np.testing.assert_array_equal(read_draws(files[0])["mu"], draws["mu"][:1])


def test_bad_draw_sources_are_refused_with_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_draws(tmp_path / "none.csv")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="no lp__ column"):
        read_draws(tmp_path / "x.csv")
    with pytest.raises(TypeError, match="CmdStan CSV files, a cmdstanpy fit"):
        read_draws(3.0)
    with pytest.raises(ValueError, match=r"\(chains, draws, \*Stan shape\)"):
        read_draws({"mu": np.zeros(5)})


def test_arviz_data_of_both_generations_read_back_and_cross_read_netcdf(tmp_path):
    # ArviZ 1.x is a DataTree (arviz_base); ArviZ 0.x an InferenceData.  Each writes a
    # NetCDF file that the other generation's reader opens with the same values.
    # (ArviZ 0.x and 1.x cannot be installed together: with 1.x only the DataTree half runs.)
    pytest.importorskip("arviz_base", reason="arviz-base is in the test extra")
    rng = np.random.default_rng(0)
    groups = {"posterior": {"mu": rng.normal(size=(2, 5)), "theta": rng.normal(size=(2, 5, 3))},
              "sample_stats": {"log_ml_lower": rng.normal(size=(1, 5))}}
    attrs = {"n_steps": 100, "model": "m"}
    tree = _datatree(groups, attrs)
    assert isinstance(tree, xr.DataTree)
    tree.to_netcdf(tmp_path / "tree.nc")
    written = [tree, groups["posterior"], xr.open_datatree(tmp_path / "tree.nc")]
    if arviz_generation() == 0:
        import arviz as az

        idata = _inference_data(groups, attrs)
        assert isinstance(to_arviz(groups, attrs), az.InferenceData)
        idata.to_netcdf(str(tmp_path / "idata.nc"))
        written += [idata, az.from_netcdf(tmp_path / "tree.nc"),  # 0.x reads 1.x's file
                    xr.open_datatree(tmp_path / "idata.nc")]      # 1.x reads 0.x's file
    else:
        assert isinstance(to_arviz(groups, attrs), xr.DataTree)
    for data in written:
        back = read_draws(data)
        for name, value in groups["posterior"].items():
            np.testing.assert_array_equal(back[name], value)
        if not isinstance(data, dict):
            assert data["posterior"].attrs["n_steps"] == 100
            assert data["sample_stats"]["log_ml_lower"].shape == (1, 5)


@pytest.mark.parametrize("generation", [0, 1])
def test_summaries_name_elements_as_stan_does_in_stans_order(generation):
    # generation 1: the DataTree path of ArviZ 1.x, through arviz-base / arviz-stats (their
    # 0.8 releases on Python 3.11); generation 0: ArviZ 0.x's InferenceData.
    if generation == 1:
        pytest.importorskip("arviz_stats", reason="arviz-stats is in the test extra")
    elif arviz_generation() >= 1:
        pytest.skip("ArviZ 1.x is installed: its 0.x API is gone")
    rng = np.random.default_rng(1)
    theta = rng.normal(size=(2, 50, 2, 3)) + 10 * np.arange(6).reshape(2, 3)
    mu = rng.normal(size=(2, 50))
    table = _summarise({"mu": mu, "theta": theta}, generation)
    assert list(table.index) == ["mu", "theta[1,1]", "theta[2,1]", "theta[1,2]",
                                 "theta[2,2]", "theta[1,3]", "theta[2,3]"]
    for i in (1, 2):
        for j in (1, 2, 3):
            row = table.loc[f"theta[{i},{j}]"]
            assert row["mean"] == pytest.approx(theta[:, :, i - 1, j - 1].mean())
            # Stan's sd divides by n - 1; ArviZ 0.x and 1.x do too, arviz-stats 0.8 by n
            # (a relative difference of 1/(2n) = 0.5% here, 5000 times the tolerance)
            assert row["sd"] == pytest.approx(theta[:, :, i - 1, j - 1].std(ddof=1), rel=1e-6)
    assert {"r_hat", "ess_bulk", "mcse_mean", "mcse_sd"} <= set(table.columns)
    if generation == 1 and arviz_generation() == 0:  # both APIs here: same R-hat, bulk
        other = _summarise({"mu": mu, "theta": theta}, 0)  # ESS and MCSE (mcse_sd and
        for column in ("r_hat", "ess_bulk", "mcse_mean"):  # ess_tail changed methods)
            np.testing.assert_allclose(table[column], other[column], rtol=1e-6)


def test_fit_reports_transformed_parameters_generated_quantities_and_tree_depth(
        compiled, caplog):
    # conjugate_regression has w[K], the transformed parameter w_norm_sq = |w|^2 and the
    # generated quantities y_rep[N].  max_depth = 1 saturates every transition.
    rng = np.random.default_rng(3)
    data = {"N": 6, "K": 2, "X": rng.normal(size=(6, 2)), "y": rng.normal(size=6),
            "prior_sd": 1.0, "noise_sd": 0.5}
    target = StanTarget(compiled["conjugate_regression"], data)
    settings = FitSettings(chains=2, warmup=30, draws=20, max_depth=1)
    with caplog.at_level(logging.WARNING, logger="bread_stan"):
        result = fit(target, rng.normal(size=(2, 2)), settings=settings, seed=1)
    assert list(result.summary.index) == ["w[1]", "w[2]", "w_norm_sq",
                                          *(f"y_rep[{i}]" for i in range(1, 7))]
    np.testing.assert_allclose(result.draws["w_norm_sq"],
                               (result.draws["w"] ** 2).sum(axis=-1), rtol=1e-12)
    assert result.draws["y_rep"].shape == (2, 20, 6)
    assert result.diagnostics["max_tree_depth_hits"] == result.diagnostics["transitions"] == 40
    assert "40 of 40 transitions (100.0%) hit the maximum tree depth of 1" in caplog.text

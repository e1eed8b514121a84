"""Subjective divergence on a program with no prior_only and no simulator: eight schools,
non-centred, written as in Stan's documentation (tests/stan/eight_schools.stan).

End to end through the command line with the Gaussian base and the toolkit's own NUTS
reference, and with CSV files written by a real CmdStan 2.35 as the reference; ArviZ
NetCDF files, cmdstanpy fits and CSV files give the unconstrained draws they hold; draws
outside the support are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from bread_stan.cli.main import main
from bread_stan.stan.compile import compile_model, read_program
from bread_stan.stan.draws import to_arviz
from bread_stan.stan.model import StanModel
from bread_stan.workflows.fit import FitResult, _cmdstan_model
from bread_stan.workflows.subjective import ReferenceDrawsError, load_reference

pytestmark = pytest.mark.slow  # compiles eight schools (about 40 s cold)

HERE = Path(__file__).resolve().parent / "stan"
PROGRAM, DATA = HERE / "eight_schools.stan", HERE / "eight_schools.json"


@pytest.fixture(scope="module")
def schools():
    return StanModel(compile_model(PROGRAM), json.loads(DATA.read_text()), threads=1)


@pytest.mark.slow
def test_eight_schools_runs_end_to_end_with_gaussian_base_and_own_nuts(tmp_path, capsys):
    out = tmp_path / "schools"
    code = main(["subjective", str(PROGRAM), "--data", str(DATA), "--steps", "10,100",
                 "--chains", "40", "--out", str(out), "--threads", "1", "--quiet",
                 "--fit-warmup", "300", "--fit-draws", "300"])
    assert code in (0, 4)  # converged or not, but every check passed
    summary = json.loads((out / "summary.json").read_text())
    info = summary["extra"]["subjective"]
    assert info["reference_source"] == "toolkit NUTS fit" and info["reference_chains"] == 4
    assert info["reference_max_rhat"] < 1.05 and info["reverse_chains"] == 40
    rows = summary["summary"]
    assert all(np.isfinite(r["raw_bound"]) for r in rows)
    # The Gaussian base's sandwich is on log Z of the program's density: `tau ~ cauchy(0, 5)`
    # on <lower=0> is a half-Cauchy at half its density, so log Z = log p(y) - log 2, and
    # the output must not call it log p(y) (it once did: 0.69 nats, about 8 standard errors).
    log_z = _schools_log_ml(json.loads(DATA.read_text())) - np.log(2)
    last = rows[-1]
    se = np.hypot(last["log_ml_lower_se"], last["log_ml_upper_se"])
    assert last["log_ml_lower"] - 3.5 * se < log_z < last["log_ml_upper"] + 3.5 * se
    assert last["log_ml_upper"] + 3.5 * se < log_z + np.log(2)  # power: log p(y) is out
    printed = capsys.readouterr().out
    assert "| log Z >= | log Z <= |" in printed and "log p(y) >=" not in printed
    assert "simulator check: none with this result (a run without a simulator" in printed
    assert "log Z = log p(y) - log 2" in summary["headline"]
    assert "subjective divergence" in (out / "report.md").read_text()
    assert FitResult.exists(out / "reference_fit")
    # Resume: the same command loads the fit and every step count instead of rerunning.
    fit_time = (out / "reference_fit" / "fit.npz").stat().st_mtime
    assert main(["subjective", str(PROGRAM), "--data", str(DATA), "--steps", "10,100",
                 "--chains", "40", "--out", str(out), "--threads", "1", "--quiet",
                 "--fit-warmup", "300", "--fit-draws", "300"]) == code
    assert (out / "reference_fit" / "fit.npz").stat().st_mtime == fit_time
    again = json.loads((out / "summary.json").read_text())["summary"]
    assert [r["raw_bound"] for r in again] == [r["raw_bound"] for r in rows]

def _schools_log_ml(data) -> float:
    """Exact log p(y) of eight schools with a normalised half-Cauchy(0, 5) on tau: theta
    and mu integrated in closed form, tau by quadrature."""
    y, sigma = np.asarray(data["y"], float), np.asarray(data["sigma"], float)

    def log_f(tau):
        cov = np.diag(sigma ** 2 + tau ** 2) + 5.0 ** 2
        return (stats.multivariate_normal(np.zeros(y.size), cov).logpdf(y)
                + np.log(2) + stats.cauchy(0, 5).logpdf(tau))

    peak = log_f(5.0)
    value, _ = integrate.quad(lambda t: np.exp(log_f(t) - peak), 0, np.inf, epsrel=1e-10)
    return peak + np.log(value)


def test_netcdf_reference_gives_the_draws_it_holds(schools, tmp_path):
    rng = np.random.default_rng(0)
    draws = {"mu": rng.normal(4, 3, (2, 50)), "tau": rng.gamma(2, 2, (2, 50)),
             "theta_tilde": rng.normal(size=(2, 50, 8))}
    path = tmp_path / "ref.nc"
    to_arviz({"posterior": draws}).to_netcdf(str(path))
    ref = load_reference(path, schools)
    assert ref.unconstrained.shape == (2, 50, 10)
    np.testing.assert_allclose(ref.unconstrained[..., 1], np.log(draws["tau"]))
    np.testing.assert_allclose(ref.unconstrained[..., 2:], draws["theta_tilde"])
    np.testing.assert_allclose(load_reference(draws, schools).unconstrained, ref.unconstrained)
    assert ref.source == "file ref.nc"
    with pytest.raises(ReferenceDrawsError, match="lack the model parameter 'tau'"):
        load_reference({k: v for k, v in draws.items() if k != "tau"}, schools)


def test_a_reference_draw_outside_the_support_is_named(schools, tmp_path):
    rng = np.random.default_rng(1)
    tau = rng.gamma(2, 2, 30)
    tau[7] = -1.0
    with pytest.raises(ReferenceDrawsError, match="outside the model's support"):
        load_reference({"mu": rng.normal(size=(1, 30)), "tau": tau[None],
                        "theta_tilde": rng.normal(size=(1, 30, 8))}, schools)
    code = main(["subjective", str(PROGRAM), "--data", str(DATA),
                 "--reference", str(tmp_path / "missing.nc"), "--out", str(tmp_path / "o")])
    assert code == 2 and not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def cmdstan_fit(tmp_path_factory, cmdstan_path):
    """Eight schools sampled by a real CmdStan 2.35 (the session's build: tests/conftest.py)."""
    import cmdstanpy

    cmdstanpy.set_cmdstan_path(str(cmdstan_path))
    out = tmp_path_factory.mktemp("cmdstan")
    model = _cmdstan_model(read_program(PROGRAM))
    return model.sample(data=str(DATA), chains=2, iter_warmup=300, iter_sampling=300, seed=3,
                        show_progress=False, output_dir=str(out), adapt_delta=0.9)


def test_cmdstan_csv_files_and_cmdstanpy_fits_serve_as_references(schools, cmdstan_fit,
                                                                  tmp_path):
    files = cmdstan_fit.runset.csv_files
    from_files, from_fit = load_reference(files, schools), load_reference(cmdstan_fit, schools)
    np.testing.assert_array_equal(from_files.unconstrained, from_fit.unconstrained)
    assert from_files.unconstrained.shape == (2, 300, 10)
    assert from_fit.source == "cmdstanpy fit" and from_files.source == "2 CmdStan CSV files"
    np.testing.assert_allclose(from_fit.unconstrained[1, :, 1],
                               np.log(cmdstan_fit.stan_variable("tau")[300:]), rtol=1e-10)
    out = tmp_path / "csv"
    code = main(["subjective", str(PROGRAM), "--data", str(DATA), "--steps", "10,30",
                 "--chains", "20", "--out", str(out), "--threads", "1", "--quiet",
                 "--reference", *files])
    assert code in (0, 4)
    info = json.loads((out / "summary.json").read_text())["extra"]["subjective"]
    assert info["reference_source"] == "2 CmdStan CSV files" and info["reference_draws"] == 600

"""The real-data protocol (SPEC section 4) and the NUTS fit behind it.

Models: ``tests/stan/noise_scale.stan`` (y ~ normal(mu, sigma), mu ~ normal(0, tau),
hyperparameter tau_sq, and sigma ~ lognormal(0, 0.1) a *parameter*, so the prior
pins the noise near 1), the conjugate ``normal_mean.stan`` for the fit, and the
study's linear regression on 60 rows of NHEFS for the end-to-end run.

Misspecification used on purpose: real data with noise sd 20 under a prior that
allows sd 1 +- 10%.  The fitted hyperparameter cannot absorb it (sigma is not a
hyperparameter), so the simulated data have noise ~1 and the real data's forward
AIS curve lags far behind the simulated ones.  The agreement flag asks whether
the real curve lies outside the prediction band of 6 simulated data sets by more
than 10% of the deficit (see ``bread_stan/protocol.py``).
``scripts/studies/agreement_calibration.py`` measured: noise sd 1 (well specified)
flagged 0 of 10 times with HMC and 0 of 30 with NUTS, every score 0; sd 2
flagged 3 of 10 with either; sd 20 flagged 10 of 10 with scores 0.95-1.00.  The
well-specified and misspecified cases below run with both kernels.  The
synthetic tests check the band's false-alarm rate and power directly.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bread_stan.errors import ToolchainError
from bread_stan.cli import main as cli
from bread_stan.stan.compile import compile_many
from bread_stan.workflows.fit import FitSettings, fit, warmup_windows
from bread_stan.workflows.agreement import agreement_score
from bread_stan.workflows.data_check import data_check
from bread_stan.workflows.protocol import ProtocolSettings, protocol
from bread_stan.workflows.protocol_result import ProtocolResult
from bread_stan.workflows.sweep import s_sweep_test
from bread_stan.reporting.protocol_report import write_protocol_report
from bread_stan.stan.tempered import StanTarget
from bread_stan.workflows.bread import ResumeMismatchError, RunSettings, SamplerSettings

from resume_guard import forbid_recomputing

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = Path(__file__).resolve().parent / "stan"
NOISE = TEST_STAN / "noise_scale.stan"
NOISE_SIM = TEST_STAN / "noise_scale_sim.stan"
NORMAL_MEAN = TEST_STAN / "normal_mean.stan"
LINREG = ROOT / "stan_models" / "linear_regression.stan"
LINREG_SIM = ROOT / "stan_models" / "linear_regression_sim.stan"

SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                          pilot_steps=20)
FIT = FitSettings(chains=4, warmup=200, draws=200)


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    compile_many([NOISE, NOISE_SIM, NORMAL_MEAN, LINREG, LINREG_SIM], workers=2)


def _noise_data(noise: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"N": 100, "y": 1.0 + noise * rng.normal(size=100)}


def _noise_protocol(noise: float, seed: int, sampler: SamplerSettings = SAMPLER,
                    **kw) -> ProtocolResult:
    return protocol(NOISE, NOISE_SIM, _noise_data(noise, seed), sampler=sampler,
                    run=RunSettings(steps=(3, 10, 30, 100), chains=64, seed=seed,
                                    progress=False),
                    settings=ProtocolSettings(s_sweep=(10, 100, 1000), fit=FIT), **kw)


# The agreement flag was calibrated with both kernels; NUTS is the default one.
KERNELS = {"hmc": SAMPLER, "nuts": replace(SAMPLER, kernel="nuts")}


@pytest.fixture(scope="module", params=sorted(KERNELS))
def well(request):
    return _noise_protocol(1.0, 1, KERNELS[request.param])


@pytest.fixture(scope="module", params=sorted(KERNELS))
def misspecified(request):
    return _noise_protocol(20.0, 2, KERNELS[request.param])


# --------------------------------------------------------------------------- #
# The fit.

def test_warmup_windows_are_stans():
    # Stan's defaults for 1000 warmup iterations: buffers 75 / 50, windows 25, 50, 100, 200, 500.
    assert warmup_windows(1000) == [(75, 100), (100, 150), (150, 250), (250, 450), (450, 950)]
    assert warmup_windows(100) == [(15, 90)]  # 15% / 75% / 10% when the buffers do not fit
    assert warmup_windows(10) == []


def test_nuts_fit_matches_the_conjugate_posterior():
    # mu ~ normal(0, tau), y_i ~ normal(mu, sigma): posterior normal(m, s) exactly.
    rng = np.random.default_rng(5)
    y = 1.3 + rng.normal(size=20)
    data = {"N": 20, "y": y, "sigma": 1.0, "tau": 2.0}
    prec = 1 / 2.0 ** 2 + 20 / 1.0 ** 2
    m, s = y.sum() / prec, prec ** -0.5
    target = StanTarget(NORMAL_MEAN, data)
    inits = rng.normal(scale=2.0, size=(4, 1))
    res = fit(target, inits, settings=FitSettings(chains=4, warmup=300, draws=500, sampler="toolkit"),
              seed=3)
    row = res.summary.loc["mu"]
    assert res.sampler == "toolkit" and res.draws["mu"].shape == (4, 500)
    assert row["r_hat"] < 1.01
    # 4 Monte Carlo standard errors of the mean (MCSE from ArviZ's ESS).
    assert abs(row["mean"] - m) < 4 * s / np.sqrt(row["ess_bulk"])
    # sd: relative error of a sd estimate is about 1 / sqrt(2 ESS) (~2.5% here); allow 4x.
    assert abs(row["sd"] / s - 1) < 4 / np.sqrt(2 * row["ess_bulk"])
    assert res.diagnostics["divergences"] == 0
    assert res.hyperparameters(["mu"]) == {"mu": pytest.approx(np.median(res.draws["mu"]))}


def test_cmdstan_fit_without_cmdstan_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cmdstanpy", None)
    target = StanTarget(NORMAL_MEAN, {"N": 2, "y": [0.1, 0.2], "sigma": 1.0, "tau": 1.0})
    with pytest.raises(ToolchainError, match=r"pip install 'bread-stan\[cmdstan\]'"):
        fit(target, np.zeros((4, 1)), settings=FitSettings(sampler="cmdstan"))


# --------------------------------------------------------------------------- #
# Validation statistics on synthetic estimates (these must be able to fail).

DEFICIT = {3: 40.0, 10: 8.0, 30: 2.0, 100: 0.0}


def _synthetic_curve(rng, scale: float = 1.0, spread: float = 0.1, chains: int = 100) -> dict:
    """Per-chain forward estimates of one data set: the deficit varies between data
    sets by a factor exp(spread * N(0, 1)) at each T, chains add N(0, 1) noise."""
    return {T: -scale * d * np.exp(spread * rng.normal()) + rng.normal(size=chains)
            for T, d in DEFICIT.items()}


def test_agreement_score_on_synthetic_curves():
    rng = np.random.default_rng(0)
    sims = [_synthetic_curve(rng) for _ in range(6)]
    a = agreement_score(_synthetic_curve(rng), sims)
    assert not a.flagged and a.n_simulated == 6
    # Real deficits 4 times the simulated ones: far outside a band ~10% wide.
    b = agreement_score(_synthetic_curve(rng, scale=4.0), sims)
    assert b.flagged and b.score > 0.6 and "disagree" in b.message
    # The same factor of 4 when deficits vary by exp(N(0, 1)) between data sets is
    # within what the model produces, and is not flagged.
    wild = [_synthetic_curve(rng, spread=1.0) for _ in range(6)]
    assert not agreement_score(_synthetic_curve(rng, scale=4.0, spread=1.0), wild).flagged
    with pytest.raises(ValueError, match="replicates"):
        agreement_score(sims[0], sims[:1])


def test_agreement_band_has_its_nominal_false_alarm_rate():
    # Null: the real curve is one more draw like the 6 simulated ones.  The band is
    # left (score > 0) with probability <= alpha = 0.05 (Bonferroni over 4 T, so at
    # most 0.05); over 400 trials the rate's sd is 0.011, so allow 0.05 + 3 sd.  A
    # normal quantile instead of Student's t (df 5) would leave it ~3 times as often.
    rng = np.random.default_rng(11)
    trials = 400
    left = flagged = 0
    for _ in range(trials):
        curves = [_synthetic_curve(rng, chains=50) for _ in range(7)]
        a = agreement_score(curves[0], curves[1:])
        left += a.score > 0
        flagged += a.flagged
    assert left / trials < 0.05 + 3 * np.sqrt(0.05 * 0.95 / trials)
    assert flagged <= left
    # Power: real deficits twice the simulated ones are flagged almost always.
    hits = sum(agreement_score(_synthetic_curve(rng, scale=2.0, chains=50),
                               [_synthetic_curve(rng, chains=50) for _ in range(6)]).flagged
               for _ in range(100))
    assert hits >= 90


def test_data_check_false_alarms_and_power():
    # The real data set is one more draw of the simulator: its statistics are
    # exchangeable with the simulated ones, so each p-value is super-uniform and the
    # Bonferroni check fails with probability at most alpha = 0.05.  200 trials:
    # at most 10 expected; allow 10 + 3 sd (9.2).
    rng = np.random.default_rng(0)
    failed = 0
    for _ in range(200):
        sims = 1.0 + rng.normal(size=(1001, 50))
        failed += not data_check({"y": sims[0]}, {"y": sims[1:]}).passed
    assert failed <= 19
    # Power: a real data set on another scale or location fails, naming the statistic.
    sims = rng.normal(size=(1000, 50))
    assert not (c := data_check({"y": 3 * rng.normal(size=50)}, {"y": sims})).passed
    assert "y sd" in c.message
    assert not data_check({"y": 80 + rng.normal(size=50)}, {"y": sims}).passed
    # Variables the simulator does not generate (covariates) are not compared.
    assert data_check({"x": [1.0, 2.0]}, {"y": sims}).table.empty


def test_sweep_test_on_synthetic_reverse_estimates():
    rng = np.random.default_rng(1)
    base = {(S, T): 10.0 / T + rng.normal(size=100) for S in (10, 100, 1000) for T in (10, 100)}
    assert s_sweep_test(base).passed
    moved = dict(base)
    moved[(10, 10)] = base[(10, 10)] + 3.0  # 3 nats: ~21 standard errors, above 0.5 nats
    test = s_sweep_test(moved)
    assert not test.passed and "S=10 at 10 steps" in test.message
    # Significant but smaller than the practical tolerance (10% of a 20-nat gap).
    small = dict(base)
    small[(10, 10)] = base[(10, 10)] + 1.0
    assert not s_sweep_test(small).passed
    assert s_sweep_test(small, {10: 20.0, 100: 20.0}).passed


# --------------------------------------------------------------------------- #
# The protocol on a well-specified and a misspecified case.

def test_well_specified_curves_agree_and_sweep_passes(well):
    assert well.hyper.keys() == {"tau_sq"}
    assert well.fit.max_rhat < 1.05
    a = well.agreement()
    assert not a.flagged, a.table
    assert well.sweep_test().passed, well.sweep_test().table
    assert well.sim.consistent
    assert well.data_check().passed, well.data_check().table
    assert well.ok and well.problems() == []
    # The log-ML sandwich on the simulated data closes with 100 distributions.  (The
    # bound itself need not shrink monotonically here: a forward chain started at a
    # prior draw with huge tau_sq, hence huge |mu|, can stay stuck and drag mean(L).)
    # Both ends are Monte Carlo estimates, so "closes" means within 1 nat plus 3
    # combined standard errors either way (the upper end can fall below the lower).
    row = well.bound_table().set_index("steps").loc[100]
    se = np.hypot(row["log_ml_upper_se"], row["log_ml_lower_se"])
    assert abs(row["log_ml_upper"] - row["log_ml_lower"]) < 1.0 + 3 * se
    table = well.bound_table()
    assert np.isfinite(table["bound"]).all()


def test_misspecified_real_data_fire_the_flag(misspecified):
    a = misspecified.agreement()
    assert a.flagged and a.score > 0.6, a.table
    assert not misspecified.ok
    assert any("misspecification" in p for p in misspecified.problems())
    # Noise sd 20 against a prior that allows about 1: the data check sees it directly.
    checked = misspecified.data_check()
    assert not checked.passed and "y sd" in checked.message
    assert any("DATA CHECK FAILED" in p for p in misspecified.problems())
    # The simulated side is fine: the fault is in the real data, not the sampler.
    assert misspecified.sim.consistent and misspecified.sweep_test().passed
    # The fitted noise is far outside the prior (sigma ~ lognormal(0, 0.1)).
    assert np.median(misspecified.fit.draws["sigma"]) > 2.0


def test_curves_are_shifted_by_the_largest_forward_median(well):
    curves = well.curves()
    for name in ("real forward", "simulated forward"):
        part = curves[curves["curve"] == name]
        assert part["median"].max() == pytest.approx(0.0, abs=1e-12)
    rev = curves[curves["curve"] == "simulated reverse"]
    fwd = curves[curves["curve"] == "simulated forward"]
    assert np.allclose(rev["shift"], fwd["shift"].iloc[0])
    assert set(curves["curve"]) >= {f"simulated reverse S={S}" for S in (10, 100, 1000)}


# --------------------------------------------------------------------------- #
# End to end on a study model: save, resume, export, report, command line.

def _linreg_data(n: int = 60) -> dict:
    from bread_stan.stan import datasets
    d = datasets.load("nhefs")
    return {"N": n, "K": d["K"], "X": d["X"][:n], "y": d["y"][:n]}


LIN_RUN = RunSettings(steps=(5, 20), chains=24, seed=4, progress=False)
LIN_SETTINGS = ProtocolSettings(s_sweep=(0, 10, 50), replicates=2,
                                fit=FitSettings(chains=3, warmup=150, draws=100))


def test_end_to_end_saves_resumes_and_exports(tmp_path, monkeypatch):
    data = _linreg_data()
    full = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER, run=LIN_RUN,
                    settings=LIN_SETTINGS, out_dir=tmp_path / "full")
    assert full.steps == [5, 20] and full.s_sweep == [0, 10, 50]
    assert set(full.hyper) == {"sigma_sq", "scale_sq"}
    assert np.asarray(full.extra["simulated_data"]["y"]).shape == (60,)
    # The exact start is (eta_hat, theta): the simulated truth carries the fitted values.
    assert full.extra["truth"]["sigma_sq"] == pytest.approx(full.hyper["sigma_sq"])

    # The replicates are fresh data sets drawn with the fitted hyperparameters.
    assert sorted(full.replicate_forward) == [1, 2]
    assert all(sorted(r) == [5, 20] for r in full.replicate_forward.values())
    assert full.has_agreement and full.agreement().n_simulated == 3
    assert not np.array_equal(full.replicate_forward[1][20].log_estimates,
                              full.sim.step(20).forward.log_estimates)

    # Interrupted after the first step count (with one replicate, run only up to 5
    # distributions: too little for a score), then resumed: the same numbers.
    part_dir = tmp_path / "part"
    part = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER,
                    run=RunSettings(steps=(5,), chains=24, seed=4, progress=False),
                    settings=replace(LIN_SETTINGS, replicates=1, replicate_max_steps=5),
                    out_dir=part_dir)
    assert not part.has_agreement and part.ok
    resumed = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER, run=LIN_RUN,
                       settings=LIN_SETTINGS, out_dir=part_dir)
    assert resumed.agreement().score == full.agreement().score
    for T in (5, 20):
        for k in (1, 2):
            np.testing.assert_array_equal(resumed.replicate_forward[k][T].log_estimates,
                                          full.replicate_forward[k][T].log_estimates)
        np.testing.assert_array_equal(resumed.sim.step(T).forward.log_estimates,
                                      full.sim.step(T).forward.log_estimates)
        np.testing.assert_array_equal(resumed.real_forward[T].log_estimates,
                                      full.real_forward[T].log_estimates)
        for S in (0, 10, 50):
            np.testing.assert_array_equal(resumed.reverse_sweep[(S, T)].log_estimates,
                                          full.reverse_sweep[(S, T)].log_estimates)

    # A finished run reruns nothing (no fit, no AIS).
    forbid_recomputing(monkeypatch)
    again = protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER, run=LIN_RUN,
                     settings=LIN_SETTINGS, out_dir=tmp_path / "full")
    np.testing.assert_array_equal(again.real_forward[20].log_estimates,
                                  full.real_forward[20].log_estimates)
    monkeypatch.undo()

    # Different settings in the same directory are refused.
    with pytest.raises(ResumeMismatchError):
        protocol(LINREG, LINREG_SIM, data, sampler=SAMPLER,
                 run=RunSettings(steps=(5, 20), chains=24, seed=5, progress=False),
                 settings=LIN_SETTINGS, out_dir=tmp_path / "full")

    # Load and export.
    loaded = ProtocolResult.load(tmp_path / "full")
    pd.testing.assert_frame_equal(loaded.summary(), full.summary())
    assert loaded.agreement().score == full.agreement().score
    frame = loaded.to_dataframe()
    assert set(frame["dataset"]) == {"real", "simulated", "replicate 1", "replicate 2"}
    # (real fwd, sim fwd, 3 reverse, 2 replicate fwd) x 2 step counts x 24 chains
    assert len(frame) == 24 * 2 * (2 + 3 + 2)
    summary = json.loads((tmp_path / "full" / "summary.json").read_text())
    assert {"agreement", "sweep_test", "fit", "hyper"} <= summary.keys()
    html = write_protocol_report(loaded, tmp_path / "full")
    for name in ("report.md", "curves.csv", "shifted_curves.png", "s_sweep.png", "bound.png"):
        assert (tmp_path / "full" / name).exists()
    assert "Real-data protocol" in html.read_text()


def test_cli_protocol_and_report(tmp_path, capsys):
    data = tmp_path / "real.json"
    d = _linreg_data(40)
    data.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in d.items()}))
    out = tmp_path / "cli"
    args = ["protocol", str(LINREG), "--simulator", str(LINREG_SIM), "--data", str(data),
            "--steps", "5,15", "--chains", "16", "--sweep", "0,10", "--fit-chains", "2",
            "--fit-warmup", "100", "--fit-draws", "50", "--leapfrog", "5", "--replicates", "2",
            "--fit-sampler", "toolkit", "--out", str(out),
            "--quiet"]
    code = cli.main(args)
    assert code in (0, 3)
    assert (out / "report.html").exists() and (out / "protocol.json").exists()
    report = (out / "report.md").read_text()  # which NUTS ran, and its diagnostics
    assert re.search(r"with the toolkit's NUTS \(2 chains x 50 draws\).* \d+ of 100 "
                     r"transitions divergent, \d+ at the maximum tree depth 10", report)
    assert json.loads((out / "summary.json").read_text())["fit"]["sampler"] == "toolkit"
    printed = capsys.readouterr().out
    assert "real-data protocol" in printed
    assert "curves agree" in printed or "curves disagree" in printed
    assert cli.main(["report", str(out)]) == 0
    assert "real-data protocol" in capsys.readouterr().out


def test_protocol_is_a_plain_function_of_the_package():
    import bread_stan
    assert bread_stan.protocol is protocol


def test_bad_protocol_settings_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="use 'toolkit' or 'cmdstan'"):
        FitSettings(sampler="auto")
    with pytest.raises(ValueError, match="replicates must be >= 0"):
        ProtocolSettings(replicates=-1)
    with pytest.raises(ValueError, match="replicate_max_steps"):
        ProtocolSettings(replicate_max_steps=0)
    with pytest.raises(ValueError, match="agreement_alpha"):
        ProtocolSettings(agreement_alpha=1.5)

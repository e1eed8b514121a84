"""SMC in the BREAD workflow (``RunSettings(algorithm="smc")``, ``--algorithm smc``) on
the conjugate Stan model of test_workflow.py, whose log p(y) is closed-form.

Tolerances: 4 Monte Carlo standard errors (run-to-run sd / sqrt(runs)).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from bread_stan.ais.results import BreadResult
from bread_stan.cli import main as cli
from bread_stan.cli.arguments import build_parser
from bread_stan.stan.compile import compile_many
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread
from bread_stan.workflows.protocol import protocol

TEST_STAN = Path(__file__).resolve().parent / "stan"
MODEL = TEST_STAN / "normal_mean.stan"
SIMULATOR = TEST_STAN / "normal_mean_sim.stan"
DATA = {"N": 20, "sigma": 1.0, "tau": 2.0}
SAMPLER = SamplerSettings(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6,
                          pilot_steps=20)


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    compile_many([MODEL, SIMULATOR], workers=2)


def _exact_log_ml(y: np.ndarray) -> float:
    n = y.size
    cov = DATA["sigma"] ** 2 * np.eye(n) + DATA["tau"] ** 2 * np.ones((n, n))
    return stats.multivariate_normal(np.zeros(n), cov).logpdf(y)


def test_smc_run_sandwiches_log_ml_and_resumes(tmp_path):
    run = RunSettings(steps=(3, 30), chains=40, seed=1, progress=False, algorithm="smc",
                      particles=4)
    result = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run, out_dir=tmp_path)
    exact = _exact_log_ml(np.asarray(result.extra["simulated_data"]["y"]))
    assert result.settings["run"]["algorithm"] == "smc"
    for s in result.steps:
        L, U = s.forward.log_estimates, s.reverse.log_estimates
        se = lambda x: x.std(ddof=1) / np.sqrt(x.size)  # noqa: E731
        assert L.size == U.size == 40 and s.draws["mu"].shape[0] == 40
        assert L.mean() <= exact + 4 * se(L) and U.mean() >= exact - 4 * se(U)
        assert s.verdict(result.verdict_settings()).consistent
    again = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run, out_dir=tmp_path)
    for a, b in zip(result.steps, again.steps):  # loaded, not rerun
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)


def test_smc_with_one_particle_is_the_ais_workflow_bit_for_bit():
    common = dict(steps=(5,), chains=10, seed=2, progress=False, check_simulator=False)
    ais = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=RunSettings(**common,
                                                                     path="prior"))
    one = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER,
                run=RunSettings(**common, algorithm="smc", particles=1))
    for d in ("forward", "reverse"):
        np.testing.assert_array_equal(getattr(ais.steps[0], d).log_estimates,
                                      getattr(one.steps[0], d).log_estimates)
    np.testing.assert_array_equal(ais.steps[0].draws["mu"], one.steps[0].draws["mu"])


def test_settings_refuse_bad_input_and_cli_passes_the_algorithm():
    with pytest.raises(ValueError, match="algorithm"):
        RunSettings(algorithm="pmc")
    with pytest.raises(ValueError, match="particles are for"):
        RunSettings(particles=4)
    with pytest.raises(ValueError, match="particles"):
        RunSettings(algorithm="smc", particles=0)
    parser = build_parser()
    for command in (["compare", "a.stan", "b.stan"], ["subjective", "a.stan"]):
        args = parser.parse_args(command + ["--algorithm", "smc", "--particles", "5"])
        assert (args.algorithm, args.particles) == ("smc", 5)
    with pytest.raises(SystemExit):  # the protocol runs AIS only: no such option
        parser.parse_args(["protocol", "a.stan", "--algorithm", "smc"])
    with pytest.raises(ValueError, match="runs AIS only"):
        protocol(MODEL, SIMULATOR, DATA, run=RunSettings(algorithm="smc"))


def test_cli_runs_smc_and_reports(tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps(DATA))
    out = tmp_path / "run"
    code = cli.main(["run", str(MODEL), "--simulator", str(SIMULATOR), "--data", str(data),
                     "--steps", "3", "--chains", "12", "--seed", "3", "--kernel", "hmc",
                     "--leapfrog", "5", "--algorithm", "smc", "--particles", "3",
                     "--out", str(out), "--quiet", "--no-check"])
    assert code in (0, 4)  # converged or not: the run finished and passed its checks
    saved = BreadResult.load(out)
    assert saved.settings["run"]["algorithm"] == "smc" and saved.settings["run"]["particles"] == 3
    assert (out / "report.html").exists()
    assert cli.main(["run", str(MODEL), "--simulator", str(SIMULATOR), "--data", str(data),
                     "--particles", "3", "--out", str(tmp_path / "bad"), "--quiet"]) == 2


def test_aide_takes_an_smc_target(compiled):
    """AIDE of SMC (meta-inference by conditional SMC) against the exact posterior of the
    conjugate regression program: 16 particles at T = 10 are closer than AIS at T = 10."""
    import bread_stan
    from bread_stan.meta import TractableAlgorithm
    from bread_stan.ais.gaussian_base import GaussianBase
    from bread_stan.exact.conjugate import simulate_regression
    from bread_stan.workflows.aide import AIDESettings, AIDESpecError, parse_algorithm

    assert parse_algorithm("smc:16:100") == ("smc", (16, 100))
    with pytest.raises(AIDESpecError, match="2 distributions"):
        parse_algorithm("smc:4:1")
    regression, _ = simulate_regression(20, 3, correlation=0.6, prior_sd=1.2, noise_sd=0.7,
                                        seed=11)
    data = {"N": 20, "K": 3, "X": regression.X, "y": regression.y,
            "prior_sd": regression.prior_sd, "noise_sd": regression.noise_sd, "prior_only": 0}
    exact = TractableAlgorithm(GaussianBase(*regression.tempered_posterior(1.0)), "exact")
    kw = dict(gold=exact, settings=AIDESettings(n_gold=100, n_target=100),
              run=RunSettings(threads=1, progress=False),
              sampler=SamplerSettings(pilot_chains=8, pilot_grid=4, pilot_steps=10))
    ais = bread_stan.aide(compiled["conjugate_regression"], data, target="ais:10", **kw)
    smc16 = bread_stan.aide(compiled["conjugate_regression"], data, target="smc:16:10", **kw)
    assert smc16.target == "smc:16:10"
    assert smc16.estimate < ais.estimate - 2 * np.hypot(ais.se, smc16.se), (ais, smc16)


def test_smc_on_dask_gives_the_local_numbers(tmp_path):
    """Shards of SMC runs (forward, and conditional with their free particles) rebuild
    the local step exactly: every run draws from streams keyed by its index."""
    distributed = pytest.importorskip("distributed")
    from bread_stan.parallel.executor import Executor

    run = RunSettings(steps=(3, 20), chains=10, seed=4, progress=False, check_simulator=False,
                      algorithm="smc", particles=3)
    local = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        there = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run, out_dir=tmp_path,
                      executor=Executor(client=client, chains_per_shard=4))
    assert there.extra["executor"]["kind"] == "dask"
    for x, y in zip(local.steps, there.steps, strict=True):
        for d in ("forward", "reverse"):
            dx, dy = getattr(x, d), getattr(y, d)
            assert np.array_equal(dx.log_estimates, dy.log_estimates)
            assert np.array_equal(dx.cumulative, dy.cumulative)
            assert dx.n_grad == dy.n_grad and dx.diagnostics == dy.diagnostics
        assert all(np.array_equal(x.draws[k], y.draws[k]) for k in x.draws)


def test_default_particles_and_the_report_names_smc(tmp_path):
    assert RunSettings(algorithm="smc").particles == 16
    run = RunSettings(steps=(3,), chains=6, seed=5, progress=False, check_simulator=False,
                      algorithm="smc", particles=2)
    result = bread(MODEL, SIMULATOR, DATA, sampler=SAMPLER, run=run, out_dir=tmp_path)
    assert result.steps[0].forward.diagnostics["particles"] == 2.0
    assert cli.main(["report", str(tmp_path)]) in (0, 4)  # converged or not
    text = " ".join(p.read_text() for p in tmp_path.glob("report.*")
                    if p.suffix in (".md", ".html"))
    assert "SMC with 2 particles" in text


def test_smc_with_the_imh_kernel_sandwiches_log_ml_checks_and_resumes(tmp_path):
    """kernel="imh": the SMC pilot's proposals frozen and saved (tuning.json), the
    simulator check run with the frozen IMH kernel, the sandwich around the closed form,
    and a rerun that loads everything (no new numbers)."""
    sampler = SamplerSettings(kernel="imh", pilot_chains=64)
    run = RunSettings(steps=(20,), chains=30, seed=5, progress=False, algorithm="smc",
                      particles=8)
    result = bread(MODEL, SIMULATOR, DATA, sampler=sampler, run=run, out_dir=tmp_path)
    exact = _exact_log_ml(np.asarray(result.extra["simulated_data"]["y"]))
    assert result.extra["tuning"]["kind"] == "imh"
    check = result.extra["simulator_check"]
    assert check["ran"] and check["passed"], check["message"]
    s = result.steps[0]
    L, U = s.forward.log_estimates, s.reverse.log_estimates
    se = lambda x: x.std(ddof=1) / np.sqrt(x.size)  # noqa: E731
    assert L.mean() <= exact + 4 * se(L) and U.mean() >= exact - 4 * se(U)
    assert s.forward.n_grad == 0 and s.forward.wall_time > 0
    again = bread(MODEL, SIMULATOR, DATA, sampler=sampler, run=run, out_dir=tmp_path)
    np.testing.assert_array_equal(L, again.steps[0].forward.log_estimates)
    with pytest.raises(ValueError, match="waypoint"):
        bread(MODEL, SIMULATOR, DATA, sampler=sampler,
              run=RunSettings(steps=(5,), chains=4, progress=False, path="waypoint"))
    args = build_parser().parse_args(["run", "a.stan", "--kernel", "imh", "--pilot-chains",
                                      "300"])
    assert cli._sampler(args) == SamplerSettings(kernel="imh", pilot_chains=300)


def test_smc_with_the_imh_kernel_gives_the_same_numbers_in_shards():
    """Runs cut into shards of 3 (as Dask would cut them) rebuild the one-batch step:
    the IMH kernel draws from each run's keyed streams, and each lane's proposal is a
    function of its temperature alone."""
    from bread_stan.parallel.local import LocalExecutor

    class Splitting(LocalExecutor):
        in_process = False

        def block_size(self, chains):
            return 3

    sampler = SamplerSettings(kernel="imh", pilot_chains=64)
    run = RunSettings(steps=(12,), chains=7, seed=6, progress=False, check_simulator=False,
                      algorithm="smc", particles=5)
    whole = bread(MODEL, SIMULATOR, DATA, sampler=sampler, run=run)
    split = bread(MODEL, SIMULATOR, DATA, sampler=sampler, run=run, executor=Splitting())
    for d in ("forward", "reverse"):
        a, b = getattr(whole.steps[0], d), getattr(split.steps[0], d)
        np.testing.assert_array_equal(a.log_estimates, b.log_estimates)
        np.testing.assert_array_equal(a.cumulative, b.cumulative)

"""Faults and careless input (issue 12): each case reproduced, each with a clear outcome.

The fixture is the conjugate normal model of the issue: ``normal_mean.stan`` with
sigma = tau = 1 (``mu ~ normal(0, 1)``, ``y ~ normal(mu, 1)`` inside
``if (!prior_only)``, N = 20; data ``norm.json``), its simulator
``normal_mean_sim.stan``, and careless variants of both.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bread_stan import store
from bread_stan.ais import engine
from bread_stan.ais.results import BreadResult, DirectionResult, StepResult
from bread_stan.ais.tuning import TunedKernel
from bread_stan.errors import StanDataError
from bread_stan.kernels.hmc import HMC
from bread_stan.cli import main as cli
from bread_stan.stan import compile as compile_module
from bread_stan.stan.compile import compile_many, compile_model, stanc_info
from bread_stan.stan.model import StanModel
from bread_stan.stan.simulator import check_data_names, split_draw
from bread_stan.stan.tempered import StanTarget, compile_tempered
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

ROOT = Path(__file__).resolve().parent.parent
TEST_STAN = ROOT / "tests" / "stan"
MODEL = TEST_STAN / "normal_mean.stan"
SIMULATOR = TEST_STAN / "normal_mean_sim.stan"
DATA = TEST_STAN / "norm.json"
UNWRAPPED = TEST_STAN / "norm_unwrapped.stan"
IMPROPER = TEST_STAN / "norm_improper.stan"
SIM_YY = TEST_STAN / "norm_sim_yy.stan"
MODELS = ROOT / "stan_models"
FINISHED = (cli.EXIT_CODES["converged"], cli.EXIT_CODES["not converged"])  # a run that went well


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    compile_many([MODEL, SIMULATOR, UNWRAPPED, IMPROPER, SIM_YY], workers=2)


def _run(out: Path, *extra: str, model: Path = MODEL, simulator: Path = SIMULATOR) -> list:
    return ["run", str(model), "--simulator", str(simulator), "--data", str(DATA),
            "--chains", "10", "--steps", "3,10", "--quiet", "--out", str(out), *extra]


def _cli(capsys, argv) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the CLI; argparse's own errors exit with 2."""
    try:
        rc = cli.main(argv)
    except SystemExit as stop:
        rc = stop.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


# --------------------------------------------------------------------------- store


def test_units_are_atomic_and_corruption_is_named(tmp_path):
    path = tmp_path / "unit.npz"
    store.save_unit(path, {"x": np.arange(5.0)}, {"T": 3})
    arrays, meta = store.load_unit(path)
    np.testing.assert_array_equal(arrays["x"], np.arange(5.0))
    assert meta == {"T": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["unit.npz"]  # no temporary left

    path.write_bytes(path.read_bytes()[:40])  # truncated, as by a full disk
    with pytest.raises(store.CorruptFileError, match="unit.npz.*not a readable .npz"):
        store.load_unit(path)
    (tmp_path / "run.json").write_text("{garbage")
    with pytest.raises(store.CorruptFileError, match="run.json.*not valid JSON"):
        store.load_json(tmp_path / "run.json")
    (tmp_path / "tuning.json").write_text("")
    with pytest.raises(store.CorruptFileError, match="tuning.json.*empty.*recomputes"):
        store.load_json(tmp_path / "tuning.json")


def test_an_interrupted_write_leaves_the_old_file_and_a_hidden_temporary(tmp_path, monkeypatch):
    path = tmp_path / "steps_3.npz"
    store.save_unit(path, {"x": np.zeros(2)}, {})
    before = path.read_bytes()

    temporaries = []

    def killed(tmp, final):  # SIGKILL between writing and renaming
        temporaries.append(Path(tmp))
        shutil.copy(tmp, tmp_path / "left_behind")
        raise KeyboardInterrupt

    monkeypatch.setattr(store.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        store.save_unit(path, {"x": np.ones(2)}, {})
    monkeypatch.undo()
    assert path.read_bytes() == before
    # What a kill leaves behind is hidden from every load pattern, and cleaned.
    stale = temporaries[0]
    os.replace(tmp_path / "left_behind", stale)
    assert stale.name.startswith(".") and not stale.match("steps_*.npz")
    assert [p.name for p in tmp_path.glob("steps_*.npz")] == ["steps_3.npz"]
    foreign = tmp_path / ".notes.tmp"  # not ours: kept
    foreign.write_text("x")
    assert store.clean_temporaries(tmp_path) == 1 and not stale.exists() and foreign.exists()


def test_lock_names_the_process_that_holds_the_directory(tmp_path):
    with store.lock(tmp_path):
        with pytest.raises(store.DirectoryBusyError,
                           match=rf"another run \(pid {os.getpid()}\) is using {tmp_path}"):
            with store.lock(tmp_path):
                pass
    with store.lock(tmp_path):  # released
        pass


def _step(T: int) -> StepResult:
    rng = np.random.default_rng(T)
    d = lambda: DirectionResult(rng.normal(size=4), 0.1, 10)  # noqa: E731
    return StepResult(T, d(), d(), np.linspace(0, 1, T))


def test_a_corrupt_step_is_set_aside_and_the_others_load(tmp_path, caplog):
    result = BreadResult("m", {"fingerprint": "abc"}, [_step(3), _step(10)])
    result.save(tmp_path)
    target = tmp_path / "steps_10.npz"
    target.write_bytes(target.read_bytes()[:100])
    loaded = BreadResult.load(tmp_path)
    assert [s.n_steps for s in loaded.steps] == [3]
    assert (tmp_path / "steps_10.npz.corrupt").exists() and not target.exists()
    assert "steps_10.npz is corrupt" in caplog.text and "recomputed" in caplog.text
    # A step saved under other settings is not mixed in.
    BreadResult("m", {"fingerprint": "other"}).save_step(tmp_path, _step(30))
    assert [s.n_steps for s in BreadResult.load(tmp_path).steps] == [3]


# ------------------------------------------------------------ argument validation


@pytest.mark.parametrize("kwargs, match", [
    ({"chains": 2.5}, "chains must be a whole number"),
    ({"chains": True}, "chains must be a whole number"),
    ({"steps": "abc"}, "steps must be whole numbers"),
    ({"steps": (10, 2.5)}, "steps must be whole numbers"),
    ({"threads": -3}, "threads must be a whole number >= 1"),
    ({"seed": -1}, "seed must be a whole number >= 0"),
])
def test_run_settings_refuse_careless_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RunSettings(**kwargs)
    assert RunSettings(steps=100, chains=np.int64(4)).steps == (100,)


def test_bread_refuses_a_missing_program():
    with pytest.raises(ValueError, match="model must be a Stan program.*got None"):
        bread(None, SIMULATOR, DATA)


# ------------------------------------------------------------------- CLI walk


def _file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    return f


CLI_CASES = {
    "threads negative": (lambda t: _run(t / "o", "--threads", "-3"), 2,
                         "--threads: must be at least 1"),
    "chains fractional": (lambda t: _run(t / "o", "--chains", "2.5"), 2,
                          "--chains: expected a whole number"),
    "steps not numbers": (lambda t: _run(t / "o", "--steps", "abc"), 2,
                          "--steps takes comma-separated integers"),
    "out is a file": (lambda t: _run(_file(t)), 2, "afile is a file, not a directory"),
    "out under a file": (lambda t: _run(_file(t) / "sub"), 2, "is under"),
    "missing data": (lambda t: _run(t / "o")[:5] + ["nope.json", "--out", str(t / "o")], 2,
                     "--data nope.json: no such file"),
    "missing model": (lambda t: ["run", str(t / "none.stan"), "--simulator", str(SIMULATOR),
                                 "--data", str(DATA), "--out", str(t / "o")], 2,
                      "none.stan does not exist"),
    "report of nothing": (lambda t: ["report", str(t)], 2, "holds no BREAD results"),
    "known bounds swapped": (lambda t: _run(t / "o", "--known-upper", "-190",
                                            "--known-lower", "-180"), 2,
                             "known upper bound -190 on log p(y) lies below the known lower "
                             "bound -180: swap them"),
    "known bound not finite": (lambda t: _run(t / "o", "--known-upper", "nan"), 2,
                               "known upper bound on log p(y) must be a finite number"),
    "likelihood not wrapped": (lambda t: _run(t / "o", model=UNWRAPPED), 2,
                               "likelihood is not inside `if (!prior_only)"),
    "improper prior": (lambda t: _run(t / "o", model=IMPROPER), 2,
                       "log prior does not depend on mu"),
    "simulator names": (lambda t: _run(t / "o", simulator=SIM_YY), 2,
                        "simulator generates none of the model's data variables (y)"),
    "syntax error in compare": (lambda t: ["compare", str(MODEL),
                                           str(TEST_STAN / "syntax_error.stan"),
                                           "--simulator", str(SIMULATOR), "--data", str(DATA),
                                           "--out", str(t / "c")], 2, "stanc could not"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_errors_are_one_line_messages_with_exit_code_2(case, tmp_path, capsys):
    argv, code, message = CLI_CASES[case]
    rc, _, err = _cli(capsys, argv(tmp_path))
    assert rc == code
    assert message in err


def test_compare_compiles_every_program_before_running_any(tmp_path, capsys):
    _cli(capsys, CLI_CASES["syntax error in compare"][0](tmp_path))
    assert not list((tmp_path / "c").rglob("steps_*.npz"))


def test_cli_subprocess_shows_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "bread_stan.cli",
                           *_run(_file(tmp_path))], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "is a file, not a directory" in done.stderr


def test_a_read_only_output_directory_is_refused_before_any_work(tmp_path, capsys,
                                                                   monkeypatch):
    def read_only(dir, prefix, suffix):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dir))

    monkeypatch.setattr(store.tempfile, "mkstemp", read_only)  # root ignores chmod
    monkeypatch.setattr("bread_stan.workflows.problem.compile_tempered",
                        lambda *a: pytest.fail("work started before the check"))
    rc, _, err = _cli(capsys, _run(tmp_path / "o"))
    assert rc == 2 and f"cannot write to output directory {tmp_path / 'o'}" in err


def test_a_full_disk_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(store, "write_atomic", full)
    rc, _, err = _cli(capsys, _run(tmp_path / "o", "--path", "prior"))
    assert rc == 2 and "No space left on device" in err and "tuning.json" in err


# ------------------------------------------------------- results on disk, resume


def test_resume_recovers_from_corrupt_and_half_written_files(tmp_path, capsys, caplog):
    out = tmp_path / "o"
    assert _cli(capsys, _run(out, "--path", "prior"))[0] in FINISHED  # writes tuning.json
    whole = BreadResult.load(out)

    (out / "steps_10.npz").write_bytes((out / "steps_10.npz").read_bytes()[:200])
    (out / "tuning.json").write_text("")
    (out / ".steps_3.npz.99999.tmp").write_bytes(b"half")
    rc, _, err = _cli(capsys, ["report", str(out)])
    assert rc in FINISHED and "steps_10.npz is corrupt" in caplog.text

    (out / "run.json").write_text("{not json")
    rc, _, err = _cli(capsys, ["report", str(out)])
    assert rc == 2 and "run.json is corrupt or half-written (not valid JSON" in err

    caplog.clear()
    rc, _, err = _cli(capsys, _run(out, "--path", "prior"))
    assert rc in FINISHED
    assert "run.json is corrupt" in caplog.text and "tuning.json is corrupt" in caplog.text
    again = BreadResult.load(out)
    for a, b in zip(whole.steps, again.steps):  # recomputed: the same numbers
        np.testing.assert_array_equal(a.forward.log_estimates, b.forward.log_estimates)
        np.testing.assert_array_equal(a.reverse.log_estimates, b.reverse.log_estimates)
    assert [s.n_steps for s in again.steps] == [3, 10]
    assert not list(out.glob(".*.tmp"))


def test_a_second_run_on_one_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "o"
    with store.lock(out):
        rc, _, err = _cli(capsys, _run(out))
    assert rc == 2 and f"another run (pid {os.getpid()}) is using {out}" in err


def test_resume_with_other_settings_says_which_differ(tmp_path, capsys):
    out = tmp_path / "o"
    assert _cli(capsys, _run(out))[0] in FINISHED
    rc, _, err = _cli(capsys, _run(out, "--seed", "1", "--leapfrog", "4"))
    assert rc == 2
    assert "run.seed: 0 then, 1 now" in err and "sampler.n_leapfrog: 10 then, 4 now" in err
    data = json.loads(DATA.read_text())
    data["y"][0] += 1.0
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    argv = _run(out)
    argv[argv.index(str(DATA))] = str(other)
    rc, _, err = _cli(capsys, argv)
    assert rc == 2 and "(the data)" in err


def test_a_failed_compare_still_compares_what_finished(tmp_path, capsys):
    out = tmp_path / "c"
    rc, _, err = _cli(capsys, ["compare", str(MODEL), str(IMPROPER), "--simulator",
                               str(SIMULATOR), "--data", str(DATA), "--chains", "10",
                               "--steps", "3", "--quiet", "--out", str(out)])
    assert rc == 2 and "log prior does not depend on mu" in err
    assert "comparison of the programs that finished (normal_mean)" in err
    assert (out / "comparison.csv").read_text().count("normal_mean") == 1


def test_compare_keeps_programs_that_share_a_file_name(tmp_path, capsys):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(MODEL, tmp_path / folder / "norm.stan")
    out = tmp_path / "c"
    rc, _, _ = _cli(capsys, ["compare", str(tmp_path / "a" / "norm.stan"),
                             str(tmp_path / "b" / "norm.stan"), "--simulator", str(SIMULATOR),
                             "--data", str(DATA), "--chains", "10", "--steps", "3",
                             "--quiet", "--out", str(out)])
    assert rc in FINISHED
    assert (out / "a_norm" / "steps_3.npz").exists() and (out / "b_norm" / "steps_3.npz").exists()


# --------------------------------------------------------------- broken set-ups


def test_missing_data_names_are_warned_about(compiled, caplog):
    model = compile_tempered(MODEL)
    sim = SimpleNamespace(compiled=SimpleNamespace(
        info={"generated quantities": {"mu": {}, "y": {}}}, data_variables={"N": {}}))
    assert check_data_names(sim, model) == ["sigma", "tau"]
    assert "does not generate the model's data variable(s) sigma, tau" in caplog.text
    sim.compiled.info = {"generated quantities": {"mu": {}, "yy": {}}}
    with pytest.raises(StanDataError, match=r"none of the model's data variables \(sigma, tau, y\)"
                                            r".*it generates mu, yy"):
        check_data_names(sim, model)


def test_nan_from_the_simulator_is_named():
    model = compile_tempered(MODEL)
    y = np.zeros((2, 20))
    y[1, 3] = np.nan
    with pytest.raises(StanDataError, match=r"non-finite values: y\[4\] is NaN in draw 1"):
        split_draw({"mu": np.zeros(2), "y": y}, model)
    with pytest.raises(StanDataError, match=r"mu is inf"):
        split_draw({"mu": np.inf, "y": np.zeros(20)}, model)


def test_nan_covariate_is_named_and_json_nonfinite_strings_are_read(tmp_path, capsys):
    rng = np.random.default_rng(0)
    data = {"N": 6, "K": 2, "X": rng.normal(size=(6, 2)).tolist(), "y": [0.0] * 6}
    data["X"][3][1] = "NaN"
    path = tmp_path / "d.json"
    path.write_text(json.dumps(data))
    rc, _, err = _cli(capsys, ["run", str(MODELS / "linear_regression.stan"), "--simulator",
                               str(MODELS / "linear_regression_sim.stan"), "--data", str(path),
                               "--chains", "4", "--steps", "3", "--quiet",
                               "--out", str(tmp_path / "o")])
    assert rc == 2 and "X[4, 2] is NaN" in err


def test_reject_in_the_prior_shows_stans_message(compiled):
    target = StanTarget(compiled["throws"], {})
    start = np.array([[0.0], [4.0]])
    with pytest.raises(ValueError, match="1 of 2 start points.*chain 1; Stan says: .*x is far "
                                         "too big"):
        engine.forward(target, HMC(), np.linspace(0, 1, 3), start, seed=0)


def test_absurd_tuned_step_sizes_are_flagged():
    grid = np.array([0.0, 0.5, 1.0])
    sane = TunedKernel("hmc", grid, np.array([0.5, 0.3, 0.2]), None, {}, 1e-3,
                       np.full(3, 0.65))
    assert sane.problems() == []
    absurd = TunedKernel("hmc", grid, np.array([8.6e13, 1.0, 6e-26]), None, {}, 1e-3,
                         np.full(3, 0.65))
    assert "range from 6e-26 to 8.6e+13" in " ".join(absurd.problems())
    varied = TunedKernel("hmc", grid, np.array([10.0, 1.0, 1e-6]), None, {}, 1e-3,
                         np.full(3, 0.65))
    assert varied.problems()  # within the sane range, but 1e7 apart


# ------------------------------------------------------------------ compile cache


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A copy of the cache entries of normal_mean.stan in a private cache."""
    real = compile_model(MODEL)
    root = tmp_path / "cache"
    entry = real.library.parent
    shutil.copytree(entry, root / "models" / entry.name)
    shutil.copytree(compile_module.cache_dir() / "bridge", root / "bridge")
    monkeypatch.setenv("BREAD_STAN_CACHE", str(root))
    return root / "models" / entry.name / real.library.name


@pytest.mark.parametrize("damage", ["truncate", "empty", "no info.json", "no manifest"])
def test_a_damaged_cache_entry_is_rebuilt(private_cache, damage, caplog):
    library = private_cache
    if damage == "truncate":
        library.write_bytes(library.read_bytes()[: library.stat().st_size // 3])
    elif damage == "empty":
        library.write_bytes(b"")
    elif damage == "no info.json":
        (library.parent / "info.json").unlink()
    else:
        library.with_name(library.name + ".json").unlink()
    compiled = compile_model(MODEL)
    assert compiled.library == library
    model = StanModel(compiled, {"N": 0, "y": [], "sigma": 1, "tau": 1, "prior_only": 1})
    assert model.log_density(np.array([0.0]), propto=False) == pytest.approx(
        -0.5 * np.log(2 * np.pi))
    if damage != "no manifest":
        assert "damaged or incomplete" in caplog.text


def test_an_unusable_cache_falls_back_to_a_private_one(tmp_path, monkeypatch, caplog):
    blocker = _file(tmp_path)
    monkeypatch.setenv("BREAD_STAN_CACHE", str(blocker))
    root = compile_module.cache_dir()
    assert root != blocker and root.is_dir() and "bread_stan_cache_" in root.name
    assert f"compile cache {blocker} is unusable (cache directory" in caplog.text


def test_stanc_info_takes_the_compile_stanc_args(tmp_path, monkeypatch):
    program = tmp_path / "undef.stan"
    program.write_text("functions { real foo(real x); }\n"
                       "data { int<lower=0, upper=1> prior_only; }\nparameters { real y; }\n"
                       "model { y ~ normal(foo(1.0), 1); }\n")
    info = stanc_info(program, stanc_args=("--O1", "--allow-undefined"))
    assert "prior_only" in info["inputs"]
    calls = []
    monkeypatch.setattr("bread_stan.stan.tempered.compile_model",
                        lambda program, **kw: calls.append(kw))
    compile_tempered(program, stanc_args=("--allow-undefined",))
    assert calls and calls[0]["stanc_args"] == ("--allow-undefined",)


@pytest.mark.slow
def test_user_header_with_allow_undefined_compiles_and_evaluates():
    target = StanTarget(TEST_STAN / "twice_undefined.stan", {},
                        stanc_args=("--O1", "--allow-undefined"),
                        user_header=TEST_STAN / "twice_undefined.hpp")
    ev = target.evaluate(np.array([[0.5]]))
    assert ev.log_lik[0] == pytest.approx(-0.5 * np.log(2 * np.pi) - 0.5 * 1.0**2)


# --------------------------------------------------------------------- long runs


def test_a_long_run_is_announced_before_it_starts(tmp_path, caplog, monkeypatch):
    import bread_stan.workflows.bread as workflow

    caplog.set_level("INFO", logger="bread_stan")
    started = []
    monkeypatch.setattr(workflow.engine, "forward_and_reverse",
                        lambda *a, **k: started.append(1) or 1 / 0)
    sampler = SamplerSettings(pilot_chains=4, pilot_grid=3, pilot_steps=4)
    with pytest.raises(ZeroDivisionError):
        bread(MODEL, SIMULATOR, DATA, sampler=sampler,
              run=RunSettings(steps=(10, 100_000_000), chains=10, progress=False))
    warning = [r.message for r in caplog.records if r.levelname == "WARNING"
               and "will take about" in r.getMessage()]
    assert warning and started
    text = caplog.text
    assert "GB of memory (estimated from the pilot)" in text and "interrupt now" in text
    assert "tuning nuts along beta: 3 betas x 9 transitions x 4 pilot chains" in text


def test_cost_estimate_scales_with_steps_chains_and_dimension():
    from bread_stan.workflows.common import cost_estimate

    tuned = TunedKernel("hmc", np.array([0.0, 1.0]), np.ones(2), None, {}, 1e-3, np.ones(2),
                        seconds_per_transition=1e-3)
    seconds, peak = cost_estimate(tuned, [11, 101], chains=4, dim=3)
    assert seconds == pytest.approx((10 + 100) * 4 * 1e-3)
    # Memory no longer grows with T (lazy schedules): cached blocks plus per chain.
    assert peak == (4 << 20) + 2 * 4 * 8 * (20 * 3 + 100)


@pytest.mark.parametrize("scale, message", [
    ("1e100", r"the data set simulated for this run reaches \|y\| = \S+ \(the prior "
              r"predictive overflows"),
    ("1e200", r"the pilot chains' draws reach \|x\| = \S+e\+\d{3} in the unconstrained "
              r"space, too far apart for a variance in double precision"),
])
def test_a_prior_too_vague_for_double_precision_is_named(tmp_path, capsys, scale, message):
    """mu ~ normal(0, 1e100) simulates data of size 1e99 (the log likelihood's sd along
    beta overflows), normal(0, 1e200) draws whose variance overflows: each run stops with
    one line naming the cause, exit 2 (both were once 'the pilot did not measure it' or
    an internal error).  Break tried: removing the pilot's overflow check turns the
    second case into an internal error (exit 1)."""
    (tmp_path / "vague.stan").write_text(
        f"data {{ int N; vector[N] y; }}\nparameters {{ real mu; }}\n"
        f"model {{ mu ~ normal(0, {scale});\n y ~ normal(mu, 1); }}\n")
    (tmp_path / "d.json").write_text('{"N": 5, "y": [1, 2, 3, 4, 5]}')
    code = cli.main(["run", str(tmp_path / "vague.stan"), "--data", str(tmp_path / "d.json"),
                     "--steps", "10", "--chains", "4", "--out", str(tmp_path / "out"),
                     "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert code == 2 and len(err) == 1, err
    assert re.search(message, err[0]), err[0]


def test_a_uniform_prior_on_an_unbounded_parameter_is_proper(tmp_path, capsys):
    """mu ~ uniform(-10, 10) on a `real mu` has a zero prior gradient inside (-10, 10), as
    a missing prior has, but a log prior of -inf beyond it: the run goes ahead (posteriordb's
    dogs_log was refused as improper).  A truly flat mu is still refused (the IMPROPER case
    above).  Break tried: making _bounded_by_the_prior return all False refuses this run."""
    (tmp_path / "unif.stan").write_text(
        "data { int N; vector[N] y; }\nparameters { real mu; }\n"
        "model { mu ~ uniform(-10, 10);\n y ~ normal(mu, 1); }\n")
    (tmp_path / "d.json").write_text('{"N": 5, "y": [1, 2, 3, 4, 5]}')
    rc, _, err = _cli(capsys, ["run", str(tmp_path / "unif.stan"), "--data",
                               str(tmp_path / "d.json"), "--steps", "3", "--chains", "4",
                               "--quiet", "--out", str(tmp_path / "o")])
    assert rc in (0, 4), err

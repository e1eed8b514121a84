"""The path interface (bread_stan/ais/path.py, path_kinds.py) and the run directory
(ais/run_directory.py): what every path gives the rest of the toolkit, the one reader of
saved paths, and the run directory's fingerprint and corruption rules.  Exact checks on
small objects; nothing is compiled."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bread_stan.ais import runs
from bread_stan.ais.imh_tuning import TunedIMH
from bread_stan.ais.path import FixedKernel, Path
from bread_stan.ais.path_kinds import KINDS, read_path
from bread_stan.ais.run_config import RunConfig
from bread_stan.ais.run_directory import RunDirectory
from bread_stan.ais.tuning import TunedKernel
from bread_stan.kernels.hmc import HMCParams


def _tuned() -> TunedKernel:
    grid = np.array([0.0, 1e-3, 0.1, 1.0])
    return TunedKernel("hmc", grid, np.array([0.5, 0.4, 0.2, 0.1]), None, {"n_leapfrog": 5},
                       1e-3, np.array([0.8, 0.8, 0.8, 0.8]), 1e-4,
                       np.array([0.0, 1.0, 10.0, 3.0]))


def test_the_prior_paths_give_one_leg_on_the_model_itself():
    model = object()  # the prior path hands the model on as it is
    for path in (_tuned(), FixedKernel(HMCParams(0.1, 5)), FixedKernel(None)):
        assert isinstance(path, Path)
        assert path.name == "prior" and path.log_c == 0.0 and not path.needs_prior_end
        (leg,) = path.legs(model, RunConfig(increment_blocks=4), 25)
        assert leg.target is model and leg.stream_offset == 0
        assert len(leg.schedule.betas) == 25 and leg.every == 6  # ceil(24 / 4)
        np.testing.assert_array_equal(np.asarray(path.betas(RunConfig(), 25)),
                                      np.asarray(leg.schedule.betas))
        assert path.forward_starts(3, 10) is None and path.check_kernel() is path


def test_as_path_wraps_what_is_not_a_path_and_keeps_what_is():
    tuned, params = _tuned(), HMCParams(0.1, 5)
    assert runs.as_path(tuned) is tuned
    assert runs.as_path(None) == FixedKernel(None)
    assert runs.as_path(params) == FixedKernel(params)


def test_one_reader_reads_every_kind_of_path_back_bit_for_bit():
    assert tuple(KINDS) == ("prior", "gaussian", "waypoint")
    tuned = _tuned()
    back = read_path(json.loads(json.dumps(tuned.to_dict())))
    assert isinstance(back, TunedKernel)
    for field in ("grid_betas", "step_size", "accept", "loglik_sd"):
        np.testing.assert_array_equal(getattr(back, field), getattr(tuned, field))
    # an IMH pilot's record (kind "imh") is read as one, by the same reader
    imh = TunedIMH(np.array([0.0, 1.0]), np.zeros((2, 2)), np.stack([np.eye(2)] * 2),
                   np.array([1.0, 0.5]), np.array([np.nan, 0.9]), np.array([0, 3]), None, 1.2)
    assert isinstance(read_path(json.loads(json.dumps(imh.to_dict(), default=float))),
                      TunedIMH)


def test_the_run_directory_reads_a_path_only_for_its_own_fingerprint(tmp_path):
    tuned = _tuned()
    mine = RunDirectory(tmp_path, "run-a")
    assert mine.load_or_fit("prior", lambda: tuned)[1] is not None  # fitted, then saved
    saved = json.loads((tmp_path / "tuning.json").read_text())
    assert saved["fingerprint"] == "run-a"
    np.testing.assert_array_equal(mine.load_path("prior").step_size, tuned.step_size)
    assert RunDirectory(tmp_path, "run-b").load_path("prior") is None  # another run's
    # a tuning.json written before runs kept fingerprints is read by its directory's run
    del saved["fingerprint"]
    (tmp_path / "tuning.json").write_text(json.dumps(saved))
    assert RunDirectory(tmp_path, "run-b").load_path("prior") is not None

    def no_fit():
        raise AssertionError("a saved path was fitted again")
    path, seconds = RunDirectory(tmp_path, "run-b").load_or_fit("prior", no_fit)
    assert seconds is None and path.name == "prior"


def test_a_damaged_path_file_is_set_aside_and_fitted_again(tmp_path, caplog):
    (tmp_path / "gaussian_path.json").write_text('{"path": "gaussian", "base": ')
    directory = RunDirectory(tmp_path, "run-a")
    assert directory.load_path("gaussian") is None
    assert not (tmp_path / "gaussian_path.json").exists()
    assert any(p.name.startswith("gaussian_path.json") for p in tmp_path.iterdir())


def test_a_run_that_keeps_nothing_reads_and_writes_nothing():
    directory = RunDirectory(None, "run-a")
    assert directory.load_path("prior") is None and directory.header() is None
    path, seconds = directory.load_or_fit("prior", _tuned)
    assert path.name == "prior" and seconds is not None
    assert directory.saved_shards() == {}


@pytest.mark.parametrize("name", ["prior", "gaussian", "waypoint"])
def test_every_kind_names_its_file_reader_and_fit(name):
    kind = KINDS[name]
    assert kind.name == name and kind.file.endswith(".json")
    assert callable(kind.read) and callable(kind.fit)

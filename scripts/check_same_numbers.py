"""Rerun small seeded jobs of every workflow and compare their numbers bit for bit.

Proof of "no behaviour change" for refactors (issue 25).  Five jobs, at small settings:

- ``bread``: the README main job (linear regression on NHEFS) with ``--steps 10,100
  --chains 20``;
- ``compare``: two copies of the conjugate normal-mean model under one simulator;
- ``protocol``: the noise-scale model, 2 replicates, a short S sweep;
- ``subjective``: the normal-mean model from the Gaussian base, the toolkit's NUTS
  reference fit;
- ``aide``: an AIS gold against an AIS target on the normal-mean model.

Every number a result holds (arrays, floats, ints, walked through dataclasses, dicts and
lists) is flattened to ``path -> array`` and saved in ``DIR/JOB.npz``; values under a key
naming a time (``seconds``, ``wall``, ``time``, ``elapsed``) are skipped, since they change
from run to run.

    python scripts/check_same_numbers.py save /tmp/refactor-baseline      # once, before
    python scripts/check_same_numbers.py check /tmp/refactor-baseline     # after a change
    python scripts/check_same_numbers.py check /tmp/refactor-baseline --only aide protocol

``check`` exits 0 when every saved number is equal (NaN equal to NaN) and 1 otherwise,
listing the first differing paths.  ``--ignore TEXT`` leaves out paths containing
TEXT (e.g. the simulator check's numbers when its stream purpose was renumbered).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEST_STAN = ROOT / "tests" / "stan"
MODELS = ROOT / "stan_models"
_TIME_WORDS = ("second", "wall", "time", "elapsed", "duration")


def _skip(key: str) -> bool:
    key = key.lower()
    return any(w in key for w in _TIME_WORDS)


def flatten(obj, path: str = "", out: dict | None = None, depth: int = 0) -> dict:
    """Every number in ``obj`` as ``path -> numpy array``."""
    out = {} if out is None else out
    if depth > 12:
        return out
    if isinstance(obj, enum.Enum):
        out[path] = np.asarray(str(obj.value))
    elif isinstance(obj, (bool, int, float, np.number, np.bool_)):
        out[path] = np.asarray(obj)
    elif isinstance(obj, str):
        out[path] = np.asarray(obj)
    elif isinstance(obj, np.ndarray):
        if obj.dtype != object:
            out[path] = obj
        else:
            for i, v in enumerate(obj.ravel()):
                flatten(v, f"{path}[{i}]", out, depth + 1)
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            if not _skip(str(k)):
                flatten(obj[k], f"{path}.{k}", out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, f"{path}[{i}]", out, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            if not _skip(f.name):
                flatten(getattr(obj, f.name), f"{path}.{f.name}", out, depth + 1)
    elif hasattr(obj, "to_dict") and callable(obj.to_dict):
        flatten(obj.to_dict(), path, out, depth + 1)
    return out


def _bread():
    import bread_stan
    from bread_stan.stan import datasets
    from bread_stan.workflows.bread import RunSettings
    return bread_stan.bread(MODELS / "linear_regression.stan",
                            MODELS / "linear_regression_sim.stan", datasets.load("nhefs"),
                            run=RunSettings(steps=(10, 100), chains=20, progress=False))


_SAMPLER = dict(kernel="hmc", n_leapfrog=5, pilot_chains=16, pilot_grid=6, pilot_steps=20)
_NORMAL_MEAN = {"N": 20, "sigma": 1.0, "tau": 2.0}


def _compare():
    import bread_stan
    from bread_stan.workflows.bread import RunSettings, SamplerSettings
    return bread_stan.compare({"a": TEST_STAN / "normal_mean.stan",
                               "b": str(TEST_STAN / "normal_mean.stan")},
                              TEST_STAN / "normal_mean_sim.stan", _NORMAL_MEAN,
                              sampler=SamplerSettings(**_SAMPLER),
                              run=RunSettings(steps=(3, 30), chains=20, seed=1, progress=False))


def _protocol():
    import bread_stan
    from bread_stan.workflows.bread import RunSettings, SamplerSettings
    from bread_stan.workflows.fit import FitSettings
    from bread_stan.workflows.protocol import ProtocolSettings
    rng = np.random.default_rng(1)
    data = {"N": 100, "y": 1.0 + rng.normal(size=100)}
    return bread_stan.protocol(TEST_STAN / "noise_scale.stan", TEST_STAN / "noise_scale_sim.stan",
                               data, sampler=SamplerSettings(**_SAMPLER),
                               run=RunSettings(steps=(3, 10), chains=16, seed=1, progress=False),
                               settings=ProtocolSettings(s_sweep=(10, 100), replicates=2,
                                                         fit=FitSettings(chains=2, warmup=100,
                                                                         draws=100)))


def _data_y():
    return {**_NORMAL_MEAN, "y": np.random.default_rng(2).normal(0.5, 1.0, 20)}


def _subjective():
    import bread_stan
    from bread_stan.workflows.bread import RunSettings, SamplerSettings
    from bread_stan.workflows.fit import FitSettings
    return bread_stan.subjective(TEST_STAN / "normal_mean.stan", _data_y(),
                                 sampler=SamplerSettings(**_SAMPLER),
                                 run=RunSettings(steps=(3, 30), chains=20, seed=1,
                                                 progress=False),
                                 fit_settings=FitSettings(chains=2, warmup=100, draws=200))


def _aide():
    import bread_stan
    from bread_stan.workflows.bread import RunSettings, SamplerSettings
    from bread_stan.workflows.aide import AIDESettings
    return bread_stan.aide(TEST_STAN / "normal_mean.stan", _data_y(), gold="ais:8",
                           target="ais:3",
                           settings=AIDESettings(n_gold=10, n_target=7, m_gold=2, m_target=2),
                           sampler=SamplerSettings(**_SAMPLER),
                           run=RunSettings(seed=5, threads=1, progress=False))


JOBS = {"bread": _bread, "compare": _compare, "protocol": _protocol,
        "subjective": _subjective, "aide": _aide}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return False
    if a.dtype.kind == "f" or a.dtype.kind == "c":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("save", "check"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--only", nargs="+", choices=sorted(JOBS), default=list(JOBS))
    parser.add_argument("--ignore", nargs="*", default=[], metavar="TEXT")
    args = parser.parse_args(argv)
    args.directory.mkdir(parents=True, exist_ok=True)
    failed = False
    for job in args.only:
        numbers = flatten(JOBS[job]())
        path = args.directory / f"{job}.npz"
        if args.mode == "save":
            np.savez(path, **{k or "<root>": v for k, v in numbers.items()})
            print(f"{job}: saved {len(numbers)} values in {path}")
            continue
        saved = dict(np.load(path, allow_pickle=False))
        numbers = {k or "<root>": v for k, v in numbers.items()}
        keep = [k for k in sorted(set(saved) | set(numbers))
                if not any(p in k for p in args.ignore)]
        missing = [k for k in keep if k not in numbers]
        new = [k for k in keep if k not in saved]
        differ = [k for k in keep if k in saved and k in numbers
                  and not _same(saved[k], np.asarray(numbers[k]))]
        if missing or new or differ:
            failed = True
            print(f"{job}: DIFFERENT ({len(differ)} values differ, {len(missing)} missing, "
                  f"{len(new)} new, of {len(keep)})")
            for k in (differ[:10] + missing[:5] + new[:5]):
                print("   ", k)
        else:
            print(f"{job}: same ({len(keep)} values)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

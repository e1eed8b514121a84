"""Same seed, same numbers, whatever kernels OpenBLAS picks.

OpenBLAS chooses its kernels by processor; ``OPENBLAS_CORETYPE`` overrides the
choice (and ``OPENBLAS_L2_SIZE`` the cache size it assumes).  Different kernels
round differently, and before ``bread_stan.linalg`` a dense metric's tuning
(covariance, matrix logarithm, Cholesky) went through them, so one seed gave
different chains (a simulator-check p-value of 0.45 under one kernel, 0.0049
under another).  This script runs three jobs with small settings:

- the README's main job (linear regression on NHEFS) with ``--metric auto``,
- the same with ``--metric dense``,
- logistic regression on Pima with ``--metric auto`` (which picks dense there),

each under three environments, every command in a fresh process:

- ``machine``: the environment as this machine sets it;
- ``unset``: ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` removed, for that
  command alone;
- ``forced``: ``OPENBLAS_CORETYPE`` set to a kernel other than the one the
  machine's choice loads (so that two different kernels run even where the
  machine sets neither variable),

records which kernel each process ran (``threadpoolctl``), and compares every
number the runs save (the per-chain estimates and weights of every step count,
the exact draws, the tuned step sizes and metrics, the simulator check's p-values
and the summaries; wall times excluded) bit for bit against the ``machine`` run.
The tests and CI leave both variables as the machine sets them: this script, not
a test, is the proof.

``--checkout DIR`` runs another checkout's code (e.g. a ``git archive`` of a
commit before ``bread_stan.linalg``) to see the difference it makes.  ``--cost``
adds timings of the new linear algebra against numpy's (LAPACK) routines.

Usage: ``PYTHONPATH=$PWD python scripts/studies/blas_determinism.py [--cost]``
(writes ``scripts/figures/blas_determinism/results.md`` and ``results.json``).
Needs ``threadpoolctl`` (``pip install threadpoolctl``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "blas_determinism"
VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
OTHER_KERNELS = ("Haswell", "SandyBridge", "Nehalem", "Prescott")
SMALL = ["--steps", "10,100,1000", "--chains", "20", "--seed", "0"]
JOBS = {
    "nhefs_auto": ["stan_models/linear_regression.stan", "--simulator",
                   "stan_models/linear_regression_sim.stan", "--data", "nhefs",
                   "--metric", "auto"],
    "nhefs_dense": ["stan_models/linear_regression.stan", "--simulator",
                    "stan_models/linear_regression_sim.stan", "--data", "nhefs",
                    "--metric", "dense"],
    "pima_auto": ["stan_models/logistic_regression.stan", "--simulator",
                  "stan_models/logistic_regression_sim.stan", "--data", "pima",
                  "--metric", "auto"],
}
# Saved values that are measurements of time, not results.
TIMING = re.compile(r"wall_time|seconds|elapsed|^time$|_time$")
TIME_IN_TEXT = re.compile(r"\d+(\.\d+)? ?(s|ms|min)\b")


def child(info_path: str, argv: list[str]) -> int:
    """Run the CLI in this process, then record the BLAS libraries it loaded."""
    import scipy.linalg  # noqa: F401  (load scipy's OpenBLAS too, to report it)
    from threadpoolctl import threadpool_info

    from bread_stan.cli.main import main
    status = main(argv)
    libraries = [{k: lib.get(k) for k in ("internal_api", "prefix", "version", "architecture")}
                 for lib in threadpool_info()]
    env = {v: os.environ.get(v) for v in VARIABLES}
    Path(info_path).write_text(json.dumps({"status": status, "blas": libraries, "env": env}))
    return 0


def machine_kernel() -> str:
    """The kernel OpenBLAS picks with the machine's environment (numpy's library)."""
    code = ("import numpy, threadpoolctl; print([l['architecture'] for l in "
            "threadpoolctl.threadpool_info() if l['internal_api'] == 'openblas'][0])")
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()


def environments() -> dict[str, dict]:
    machine = dict(os.environ)
    unset = {k: v for k, v in machine.items() if k not in VARIABLES}
    current = machine_kernel()
    other = next(k for k in OTHER_KERNELS if k.lower() != current.lower())
    return {"machine": machine, "unset": unset,
            "forced": {**unset, "OPENBLAS_CORETYPE": other}}


def run(job: str, env: dict, checkout: Path, out: Path) -> dict:
    """One CLI run in a fresh process; its BLAS report and wall time."""
    info = out / "blas.json"
    args = ["run", *JOBS[job], *SMALL, "--out", str(out / "run")]
    env = {**env, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(info),
                           "--", *args], cwd=checkout, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not info.exists():
        raise RuntimeError(f"{job} failed:\n{proc.stderr[-3000:]}")
    report = json.loads(info.read_text())
    report["seconds"] = time.perf_counter() - start
    return report


def flatten(value, prefix: str, out: dict) -> None:
    """Every leaf of a JSON value as path -> value (times dropped, times in text masked)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not TIMING.search(str(key)):
                flatten(item, f"{prefix}.{key}", out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            flatten(item, f"{prefix}[{i}]", out)
    elif isinstance(value, str):
        out[prefix] = TIME_IN_TEXT.sub("<time>", value)
    else:
        out[prefix] = value


def saved_numbers(run_dir: Path) -> dict:
    """Everything a run saved that is a result: npz arrays (as bytes) and JSON leaves."""
    values: dict = {}
    for path in sorted(run_dir.glob("*.npz")):
        with np.load(path, allow_pickle=False) as arrays:
            for name in arrays.files:
                if name == "__meta__":
                    flatten(json.loads(bytes(arrays[name]).decode()), f"{path.name}:meta", values)
                else:
                    a = arrays[name]
                    values[f"{path.name}:{name}"] = (str(a.dtype), a.shape, a.tobytes().hex())
    for path in sorted(run_dir.glob("*.json")):
        flatten(json.loads(path.read_text()), path.name, values)
    return values


def differences(a: dict, b: dict) -> list[str]:
    keys = sorted(set(a) | set(b))
    return [k for k in keys if a.get(k, "<missing>") != b.get(k, "<missing>")]


def headline(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    tuning = json.loads((run_dir / "tuning.json").read_text())
    dense = np.ndim(tuning.get("inv_metric")) == 3
    check = (summary.get("extra") or {}).get("simulator_check") or {}
    rows = summary.get("summary") or [{}]
    return {"status": summary.get("status"), "dense": dense, "check_min_p": check.get("min_p"),
            "last_bound": rows[-1].get("bound")}


def _best_ms(fn, *args, repeats: int = 3) -> float:
    times = []  # CPU time of this process (all its threads): less at the mercy of a busy machine
    for _ in range(repeats):
        start = time.process_time()
        fn(*args)
        times.append(time.process_time() - start)
    return 1e3 * min(times)


def _eigh_exp(m: np.ndarray) -> np.ndarray:
    """The matrix exponential as before bread_stan.linalg (LAPACK's eigh)."""
    w, v = np.linalg.eigh(m)
    return np.einsum("...ij,...j,...kj->...ik", v, np.exp(w), v)


def _eigh_log(m: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(m)
    return np.einsum("...ij,...j,...kj->...ik", v, np.log(w), v)


def cost() -> list[dict]:
    """Milliseconds of the new linear algebra and of numpy's (BLAS/LAPACK) for the same
    work: a transition's metric check and momenta (one factorisation, cached, against
    LAPACK's eigenvalues and Cholesky factor), one covariance of pilot draws, one
    Cholesky factor, the matrix logarithm of 25 tuned metrics (once per run), and the
    interpolated metrics of 10,000 temperatures (one direction; in blocks, as the runs
    compute them)."""
    from bread_stan import linalg
    from bread_stan.ais.frozen_kernels import InterpolatedSchedule
    from bread_stan.ais.tuning import TunedKernel

    rng = np.random.default_rng(0)
    rows = []
    for d in (8, 20, 50):
        x = rng.standard_normal((20 * d, d)) @ rng.standard_normal((d, d))
        a = np.cov(x, rowvar=False)
        grid = np.concatenate([[0.0], np.geomspace(1e-3, 1.0, 24)])
        metrics = np.stack([a * (1 + 0.5 * np.sin(i)) + np.eye(d) * 0.1 * i
                            for i in range(grid.size)])
        tuned = TunedKernel("nuts", grid, np.full(grid.size, 0.1), metrics, {"max_depth": 8},
                            1e-3, np.full(grid.size, 0.8))
        block = InterpolatedSchedule(grid, tuned.interpolate, "nuts", {}, d * d).block
        betas = np.linspace(0.0, 1.0, 10_000)
        chunks = [betas[i:i + block] for i in range(0, betas.size, block)]
        logs = linalg.spd_log(metrics)
        coord = np.log(grid + 1e-3)

        def interpolate_all(exp):
            for chunk in chunks:
                pos = np.interp(np.log(chunk + 1e-3), coord, np.arange(grid.size, dtype=float))
                lo = np.minimum(np.floor(pos).astype(int), grid.size - 2)
                frac = (pos - lo)[:, None, None]
                exp((1.0 - frac) * logs[lo] + frac * logs[lo + 1])

        def transition(check, factor):  # per_chain_metric's check, draw_momentum's factor
            check(a[None])
            chol = factor(a[None])
            z = rng.standard_normal((100, d))
            for j in range(d - 1, -1, -1):  # the back substitution of draw_momentum
                z[:, j] /= chol[0, j, j]
                z[:, :j] -= z[:, j, None] * chol[0, j, :j]

        rows.append({"d": d,
                     "metric check + momenta of 100 chains (per transition)": (
                         _best_ms(transition, lambda m: None, linalg.cholesky, repeats=20),
                         _best_ms(transition, np.linalg.eigvalsh, np.linalg.cholesky,
                                  repeats=20)),
                     "covariance (20d draws)": (_best_ms(linalg.covariance, x),
                                                _best_ms(np.cov, x.T)),
                     "Cholesky (1 matrix)": (_best_ms(linalg.cholesky, a[None], repeats=20),
                                             _best_ms(np.linalg.cholesky, a[None], repeats=20)),
                     "log of 25 metrics": (_best_ms(linalg.spd_log, metrics),
                                           _best_ms(_eigh_log, metrics)),
                     "10,000 interpolated metrics": (
                         _best_ms(interpolate_all, linalg.symmetric_exp, repeats=1),
                         _best_ms(interpolate_all, _eigh_exp, repeats=1))})
    return rows


def fingerprint() -> str:
    """A hash of the helpers' outputs on fixed inputs: equal on two installations
    means the helpers give the same bits there."""
    import hashlib

    from bread_stan import linalg
    rng = np.random.default_rng(12345)
    x = rng.standard_normal((200, 12)) @ rng.standard_normal((12, 12))
    cov = linalg.covariance(x)
    out = [cov, linalg.cholesky(cov), *linalg.symmetric_eigen(cov), linalg.spd_log(cov),
           linalg.symmetric_exp(linalg.spd_log(cov) * 0.7)]
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in out)).hexdigest()


def markdown(results: dict) -> str:
    lines = ["# Same seed, same numbers whatever kernels OpenBLAS picks", "",
             f"Made by `scripts/studies/blas_determinism.py` on {results['date']} "
             f"({results['python']}, numpy {results['numpy']}; checkout: "
             f"{results['checkout_label']}).", "",
             "Three small runs (`" + " ".join(SMALL) + "`), each in a fresh process under "
             "three environments; every saved number (per-chain estimates and weights, exact "
             "draws, tuned step sizes and metrics, simulator-check p-values, summaries; wall "
             "times excluded) compared bit for bit with the `machine` run.", "",
             "Environment as the machine sets it: " + ", ".join(
                 f"`{k}`={results['machine_env'].get(k)!r}" for k in VARIABLES) + ".", "",
             "| job | environment | OpenBLAS kernel (numpy; scipy) | dense metric | status | "
             "check min p | bound at T=1000 | values compared | values differing | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for job, envs in results["jobs"].items():
        for env, r in envs.items():
            kernels = "; ".join(str(b["architecture"]) for b in r["blas"]
                                if b["internal_api"] == "openblas")
            lines.append(f"| {job} | {env} | {kernels} | {r['headline']['dense']} | "
                         f"{r['headline']['status']} | {r['headline']['check_min_p']} | "
                         f"{r['headline']['last_bound']!r} | "
                         f"{r['compared']} | {r['differing']} | {r['seconds']:.0f} |")
    lines += ["", f"**{results['verdict']}**", ""]
    for job, envs in results["jobs"].items():
        for env, r in envs.items():
            if r["examples"]:
                lines.append(f"- {job}, {env}: first differing values: "
                             + ", ".join(f"`{k}`" for k in r["examples"]))
    lines += ["", "Hash of `bread_stan.linalg`'s outputs on fixed inputs (equal on two "
              f"installations: the same bits there): `{results.get('linalg_fingerprint')}`"]
    if results.get("cost"):
        lines += ["", "## Cost of the fixed-order linear algebra (CPU ms, new vs numpy's "
                  "BLAS/LAPACK; best of 3 or 20 calls, the 10,000 metrics once)",
                  "", "| d | " + " | ".join(k for k in results["cost"][0] if k != "d") + " |",
                  "|---" * len(results["cost"][0]) + "|"]
        for row in results["cost"]:
            lines.append(f"| {row['d']} | " + " | ".join(
                f"{v[0]:.2f} vs {v[1]:.2f}" for k, v in row.items() if k != "d") + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT,
                        help="the checkout whose code runs (default: this one)")
    parser.add_argument("--label", default=None, help="name of the checkout in the output")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    parser.add_argument("--cost", action="store_true", help="also time the linear algebra")
    args = parser.parse_args()
    import platform
    envs = environments()
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "python": f"Python {platform.python_version()}", "numpy": np.__version__,
               "checkout_label": args.label or str(args.checkout),
               "machine_env": {k: os.environ.get(k) for k in VARIABLES}, "jobs": {}}
    all_same = True
    with tempfile.TemporaryDirectory() as tmp:
        for job in args.jobs:
            results["jobs"][job] = {}
            reference = None
            for name, env in envs.items():
                out = Path(tmp) / job / name
                out.mkdir(parents=True)
                r = run(job, env, args.checkout.resolve(), out)
                values = saved_numbers(out / "run")
                reference = values if reference is None else reference
                diff = differences(reference, values)
                all_same &= not diff
                r.update(headline=headline(out / "run"), compared=len(values),
                         differing=len(diff), examples=diff[:4])
                results["jobs"][job][name] = r
                print(f"{job:12s} {name:8s} kernels "
                      f"{[b['architecture'] for b in r['blas']]} {r['headline']} "
                      f"{len(diff)} of {len(values)} values differ ({r['seconds']:.0f} s)",
                      flush=True)
    results["verdict"] = ("All saved numbers are bit-identical across the environments."
                          if all_same else "Some saved numbers differ between environments.")
    results["linalg_fingerprint"] = fingerprint()
    if args.cost:
        results["cost"] = cost()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "results" if args.checkout.resolve() == ROOT else f"results_{args.label or 'other'}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(results))
    print(results["verdict"])


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], sys.argv[4:]))
    main()

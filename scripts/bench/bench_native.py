"""Native HMC/NUTS transitions against the Python kernels and CmdStan, in one run.

NHEFS linear regression (``stan_models/linear_regression.stan`` with the bundled
data, d = 8), measured side by side:

1. The fit (NUTS at beta = 1, 4 chains, Stan's warmup): CPU microseconds per
   gradient over warmup and sampling, toolkit native / toolkit Python kernel /
   CmdStan 2.35 NUTS on the same ``--O1`` program (one chain at a time, one thread
   each; CmdStan's CPU time includes writing its CSV files).
2. AIS, 100 forward + 100 reverse chains, HMC (10 leapfrog steps) and NUTS: wall
   time and the share of it spent in Stan gradient code, native on 1 and 2
   threads and the Python kernels on 1 thread.  The share is (gradients used) x
   (mean CPU time per point of batched prior/likelihood evaluations of 200
   points on 1 thread, measured just before the run) / CPU time of the run: inside a native transition
   the gradient calls cannot be timed from Python, and CPU time (not wall time)
   keeps the share meaningful on a shared machine.  Speed-ups are wall-time ratios.

Prints the load average before and after (the machine is shared).
Usage: ``python scripts/bench/bench_native.py [--temperatures 200] [--no-cmdstan]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np

from bread_stan.ais import engine as ais

from bread_stan.ais import runs
from bread_stan.ais.betas import ScheduleSpec
from bread_stan.ais.tuning import TuningConfig, tune
from bread_stan.kernels.hmc import HMC, HMCParams
from bread_stan.kernels.nuts import NUTS, NUTSParams
from bread_stan.stan import datasets
from bread_stan.stan.tempered import StanTarget
from bread_stan.workflows.fit import FitSettings, _own_nuts

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "stan_models" / "linear_regression.stan"
CMDSTAN_HOME = Path.home() / ".cache" / "bread-stan" / "cmdstan-2.35.0"


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def prior_draws(rng, n: int, k: int) -> np.ndarray:
    """Exact prior draws, unconstrained: log sigma_sq, log scale_sq, alpha, beta."""
    sigma_sq = 1.0 / rng.gamma(1.0, 1.0, n)
    scale_sq = 1.0 / rng.gamma(1.0, 1.0, n)
    coef = rng.normal(size=(n, k + 1)) * np.sqrt(scale_sq)[:, None]
    return np.column_stack([np.log(sigma_sq), np.log(scale_sq), coef])


def with_native(flag: bool, fn):
    """Run ``fn`` with kernels built under BREAD_STAN_NATIVE = flag."""
    old = os.environ.get("BREAD_STAN_NATIVE")
    os.environ["BREAD_STAN_NATIVE"] = "1" if flag else "0"
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["BREAD_STAN_NATIVE"]
        else:
            os.environ["BREAD_STAN_NATIVE"] = old


def bench_fit(data, inits, settings, use_cmdstan: bool) -> tuple[dict, np.ndarray]:
    """us per gradient over warmup and sampling, in CPU time (ours: the process; CmdStan:
    its child processes), so that other users' load does not enter."""
    target = StanTarget(PROGRAM, data, threads=1)
    rows = {}
    draws = None
    for name, native in (("toolkit native", True), ("toolkit Python kernel", False)):
        start = time.process_time()
        unc, dg = with_native(native, lambda: _own_nuts(target, inits, settings, seed=1))
        cpu = time.process_time() - start
        grads = dg["gradients_warmup"] + dg["gradients_sampling"]
        rows[name] = (1e6 * cpu / grads, grads, cpu)
        if native:
            draws = unc.reshape(-1, inits.shape[1])
    if use_cmdstan:
        rows["CmdStan 2.35 (--O1)"] = cmdstan_fit(data, inits.shape[0], settings)
    return rows, draws


def cmdstan_fit(data, chains: int, settings) -> tuple:
    import cmdstanpy

    path = os.environ.get("CMDSTAN") or str(CMDSTAN_HOME)
    cmdstanpy.set_cmdstan_path(path)
    out = Path.home() / ".cache" / "bread-stan" / "bench_native"
    out.mkdir(parents=True, exist_ok=True)
    stan_file = out / "linear_regression.stan"
    stan_file.write_text(PROGRAM.read_text())
    model = cmdstanpy.CmdStanModel(stan_file=str(stan_file), stanc_options={"O1": True})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampled = model.sample(data={**data, "prior_only": 0}, chains=chains, parallel_chains=1,
                           iter_warmup=settings.warmup, iter_sampling=settings.draws, seed=1,
                           max_treedepth=settings.max_depth, show_progress=False,
                           save_warmup=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    grads = float(sampled.draws_pd(inc_warmup=True)["n_leapfrog__"].sum())
    return 1e6 * cpu / grads, grads, cpu


def split_seconds_per_point(target, points, batches=200) -> float:
    """Mean CPU time per point of batched evaluations (prior and likelihood, gradients),
    over as many batches as take about as long as a run's gradients (so that a shared
    machine slows both alike)."""
    start = time.process_time()
    for _ in range(batches):
        target.evaluate(points)
    return (time.process_time() - start) / (batches * points.shape[0])


def bench_ais(data, posterior, temperatures, nuts_temperatures):
    rng = np.random.default_rng(0)
    k = int(data["K"])
    one = StanTarget(PROGRAM, data, threads=1)
    two = StanTarget(PROGRAM, data, threads=2)
    prior = prior_draws(rng, 100, k)
    post = posterior[rng.choice(posterior.shape[0], 100, replace=False)]
    points = np.concatenate([prior, post])
    rows = []
    for name, kernel_class, base, T in (("HMC(10)", HMC, HMCParams(0.1, 10), temperatures),
                                        ("NUTS", NUTS, NUTSParams(0.1), nuts_temperatures)):
        tuned = tune(one, kernel_class(), base, prior_draws(rng, 32, k), seed=1,
                     config=TuningConfig(pilot_grid=6, pilot_steps=20, adapt_metric=False,
                                         pilot_floor=1e-3, metric="diag"))
        config = ais.RunConfig(steps=(T,), schedule=ScheduleSpec("sigmoid"), increment_blocks=None)
        walls = {}
        for label, target, native in (("native, 1 thread", one, True),
                                      ("native, 2 threads", two, True),
                                      ("Python kernel, 1 thread", one, False)):
            kernel = kernel_class(native=native)
            per_point = split_seconds_per_point(one, points)
            start, cpu = time.perf_counter(), time.process_time()
            result = runs.run(target, kernel, prior, post, seed=2, path=tuned, config=config)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            step = result.steps[0]
            grads = int(step.forward.n_grad + step.reverse.n_grad)
            walls[label] = wall
            share = grads * per_point / cpu
            rows.append((f"{name} T={T}", label, wall, grads,
                         share if target is one else None, per_point))
        rows.append((f"{name} T={T}", "2 threads / 1 thread speed-up",
                     walls["native, 1 thread"] / walls["native, 2 threads"], None, None, None))
        rows.append((f"{name} T={T}", "native / Python speed-up (1 thread)",
                     walls["Python kernel, 1 thread"] / walls["native, 1 thread"], None, None, None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperatures", type=int, default=500)
    parser.add_argument("--nuts-temperatures", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--no-cmdstan", action="store_true")
    args = parser.parse_args()
    print("before:", load())
    data = datasets.load("nhefs")
    d = 3 + int(data["K"])
    inits = np.random.default_rng(3).normal(scale=0.5, size=(4, d))
    settings = FitSettings(chains=4, warmup=args.warmup, draws=args.draws)
    rows, posterior = bench_fit(data, inits, settings, not args.no_cmdstan)
    print(f"\nFit, NHEFS linear regression (d = {d}), 4 chains, {args.warmup} warmup + "
          f"{args.draws} draws, CPU time:")
    print(f"{'sampler':<24} {'us/gradient':>12} {'gradients':>10} {'CPU s':>8}")
    for name, (us, grads, seconds) in rows.items():
        print(f"{name:<24} {us:12.2f} {grads:10.0f} {seconds:8.2f}")
    if "CmdStan 2.35 (--O1)" in rows:
        ratio = rows["toolkit native"][0] / rows["CmdStan 2.35 (--O1)"][0]
        print(f"toolkit native / CmdStan time per gradient: {ratio:.2f}x (target <= 1.3x)")
    print("\nAIS, 100 forward + 100 reverse chains, NHEFS:")
    print(f"{'case':<14} {'run':<36} {'wall s / ratio':>14} {'gradients':>10} {'grad share':>10}"
          f" {'us/eval':>8}")
    for case, label, wall, grads, share, per_point in bench_ais(data, posterior, args.temperatures,
                                                         args.nuts_temperatures):
        if grads is None:
            print(f"{case:<14} {label:<36} {wall:13.2f}x")
        else:
            shown = "-" if share is None else f"{100 * share:.1f}%"
            print(f"{case:<14} {label:<36} {wall:14.2f} {grads:10d} {shown:>10} "
                  f"{1e6 * per_point:8.2f}")
    print("\nafter:", load())


if __name__ == "__main__":
    main()

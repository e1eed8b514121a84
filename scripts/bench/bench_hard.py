"""AIS and SMC bounds on a hard posterior: a half-Cauchy regression with an uncentred predictor.

The model (``scripts/bench/hard_regression/``): y_i ~ normal(alpha + beta x_i, sigma), alpha,
beta ~ normal(0, 100), sigma ~ half-Cauchy(0, 2.5), N = 50 predictors x uniform on
[1000, 10000] (fixed), data simulated from the prior at a run seed whose simulated sigma
is small (the first seed >= 0 with sigma in [0.05, 0.15]), so that each coefficient's
posterior is about 1e5 times narrower than its prior.  It is kept out of the tests on
purpose: the held-out case for choosing defaults.

Exact log p(y): given sigma, y ~ N(0, sigma^2 I + 100^2 X X') with X = [1, x], computed
stably by least squares (QR) on the augmented system; then a 1-D quadrature over log sigma
(4,001 points over +-12 posterior sds around the mode of p(y | sigma) p(sigma) on the
log scale, trapezoid rule in log space).

Each setting is one ``bread()`` call (its own pilot) at the given numbers of
distributions; the cost column counts transitions per direction (runs x particles x T).

Results (``scripts/figures/bench_hard/results.md``, seed 8, simulated sigma 0.133, exact
log p(y) 8.94, 50 runs): no setting reaches 1 nat.  Adaptive schedule: AIS 2.4e5 nats
at T = 10,000; SMC with 16 particles 1.4e4 at T = 1,000 (more transitions, 8e5).
Geometric schedule from 1e-10: SMC 16 particles 2.2e3 at T = 300 against 6.1e4 with the
adaptive schedule, which leaves few betas in the decades where the posterior forms; SMC
64 particles 319 nats at T = 300 (9.6e5 transitions).  The waypoint path (issue 28:
``RunSettings(path="waypoint")``, prior -> Laplace Gaussian -> posterior, with
``SamplerSettings(metric_ridge="relative")``): AIS 1.02 nats at T = 3,000 and 0.064 at
T = 10,000 (5e5 transitions); on N = 100, 1.06 at T = 3,000 and 0.142 at T = 10,000; with
simulated sigma 0.69 (``--sigma 0.5 2.0``), 0.59 at T = 3,000.

Usage: ``PYTHONPATH=$PWD nice python scripts/bench/bench_hard.py [--chains 50]
[--settings ais:1000,10000 smc16:300,1000 ...] [--schedule adaptive|geometric] [--start 1e-10]
[--path auto|prior|waypoint] [--ridge auto|stan|relative] [--n 50] [--sigma 0.05 0.15]
[--out FILE]``.  Without ``--path`` and ``--ridge`` a run takes today's defaults (path
"auto", which chooses the waypoint here); the tables before path "auto" were made with
``--path prior --ridge stan`` (the prior path) or ``--path waypoint --ridge relative``.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from bread_stan.ais.betas import ScheduleSpec
from bread_stan.rng import derived_seed
from bread_stan.stan.simulator import Simulator, compile_with_simulator, draw_at
from bread_stan.stan.tempered import compile_tempered
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

HERE = Path(__file__).resolve().parent / "hard_regression"
MODEL = HERE / "halfcauchy_regression.stan"
SIMULATOR = HERE / "halfcauchy_regression_sim.stan"
N = 50
PRIOR_SD = 100.0
CAUCHY_SCALE = 2.5


def data(n: int = N) -> dict:
    x = np.random.default_rng(2024).uniform(1000.0, 10000.0, n)
    return {"N": n, "x": x.tolist()}


def log_lik_given_sigma(y: np.ndarray, x: np.ndarray, sigma: float) -> float:
    """log N(y; 0, sigma^2 I + s^2 X X'), the coefficients integrated out."""
    X = np.column_stack([np.ones_like(x), x])
    s2 = PRIOR_SD ** 2
    A = np.vstack([X, (sigma / PRIOR_SD) * np.eye(2)])
    b = np.concatenate([y, np.zeros(2)])
    w = np.linalg.lstsq(A, b, rcond=None)[0]
    quad = (np.sum((y - X @ w) ** 2) + sigma ** 2 * np.sum(w ** 2) / s2) / sigma ** 2
    R = np.linalg.qr(A, mode="r")  # A'A = X'X + sigma^2/s^2 I
    logdet_small = (2 * np.sum(np.log(np.abs(np.diag(R))))
                    - 2 * X.shape[1] * np.log(sigma / PRIOR_SD))
    logdet = y.size * np.log(sigma ** 2) + logdet_small  # det(I + s^2 X'X / sigma^2) lemma
    return float(-0.5 * (quad + logdet + y.size * np.log(2 * np.pi)))


def exact_log_ml(y: np.ndarray, x: np.ndarray) -> float:
    """log p(y) by quadrature over log sigma with the half-Cauchy prior."""
    def log_joint(t):  # t = log sigma; the prior density on t includes the Jacobian sigma
        s = np.exp(t)
        lp = np.log(2 / (np.pi * CAUCHY_SCALE)) - np.log1p((s / CAUCHY_SCALE) ** 2) + t
        return log_lik_given_sigma(y, x, s) + lp
    coarse = np.linspace(np.log(1e-4), np.log(1e3), 2001)
    values = np.array([log_joint(t) for t in coarse])
    mode = coarse[np.argmax(values)]
    grid = np.linspace(mode - 3.0, mode + 3.0, 4001)
    v = np.array([log_joint(t) for t in grid])
    assert v[0] < v.max() - 40 and v[-1] < v.max() - 40, "quadrature window too narrow"
    weights = np.ones_like(v)
    weights[[0, -1]] = 0.5  # trapezoid rule
    return float(logsumexp(v, b=weights) + np.log(grid[1] - grid[0]))


def pick_seed(lo=0.05, hi=0.15, n: int = N) -> tuple[int, float]:
    """The first run seed whose simulated sigma lies in [lo, hi] (as bread() draws it)."""
    compiled = compile_tempered(MODEL)
    (_,), sim_compiled = compile_with_simulator([compiled], SIMULATOR)
    sim = Simulator(sim_compiled, data(n))
    for seed in range(1000):
        truth = draw_at(sim.simulate(1, derived_seed(seed, 0)), 0)  # the workflow's truth
        if lo <= float(truth["sigma"]) <= hi:
            return seed, float(truth["sigma"])
    raise RuntimeError("no seed gave a small sigma")


def _path_line(choice: dict) -> str:
    return (f"path {choice['path']} (requested {choice['requested']}, log lik sd over "
            f"prior draws {choice['loglik_sd'] or float('nan'):.3g})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=50)
    ap.add_argument("--settings", nargs="+", default=["ais:1000,10000", "smc16:300,1000"],
                    help="ais:T1,T2 or smcP:T1,T2 (P particles per run)")
    ap.add_argument("--schedule", choices=("adaptive", "geometric"), default="adaptive",
                    help="the schedule of betas (geometric: from --start to 1)")
    ap.add_argument("--start", type=float, default=1e-10, help="first nonzero beta, geometric")
    ap.add_argument("--path", choices=("auto", "prior", "waypoint"), default="auto",
                    help="RunSettings.path: temper the likelihood from the prior, go "
                    "through a Gaussian waypoint (AIS only), or auto (the default's choice)")
    ap.add_argument("--ridge", choices=("auto", "stan", "relative"), default="auto",
                    help="SamplerSettings.metric_ridge")
    ap.add_argument("--n", type=int, default=N, help="number of observations")
    ap.add_argument("--sigma", type=float, nargs=2, default=(0.05, 0.15),
                    help="the data set: the first run seed whose simulated sigma is in range")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    seed, sigma = pick_seed(*args.sigma, n=args.n)
    print(f"seed {seed}: simulated sigma {sigma:.4g}, N = {args.n}, path {args.path}, "
          f"ridge {args.ridge}", flush=True)
    rows = []
    for spec in args.settings:
        name, steps = spec.split(":")
        steps = tuple(int(s) for s in steps.split(","))
        P = int(name[3:]) if name.startswith("smc") else 1
        smc = {"algorithm": "smc", "particles": P} if name.startswith("smc") else {}
        run = RunSettings(steps=steps, chains=args.chains, seed=seed, progress=False,
                          check_simulator=False, schedule=ScheduleSpec(args.schedule,
                                                                       start=args.start),
                          path=args.path, **smc)
        t0 = time.perf_counter()
        res = bread(MODEL, SIMULATOR, data(args.n), run=run,
                    sampler=SamplerSettings(metric_ridge=args.ridge))
        total = time.perf_counter() - t0
        print(f"  {name}: {_path_line(res.extra['path_choice'])}", flush=True)
        y = np.asarray(res.extra["simulated_data"]["y"])
        exact = exact_log_ml(y, np.asarray(data(args.n)["x"]))
        for s in res.steps:
            L, U = s.forward.log_estimates, s.reverse.log_estimates
            lower = float(logsumexp(L) - np.log(L.size))
            upper = float(-(logsumexp(-U) - np.log(U.size)))
            B = float(np.mean(U) - np.mean(L))
            verdict = s.verdict(res.verdict_settings())
            row = (f"| {name} | {s.n_steps} | {args.chains * P * s.n_steps:.3g} | "
                   f"{B:.4g} | [{lower:.2f}, {upper:.2f}] | {exact:.2f} | "
                   f"{s.forward.wall_time + s.reverse.wall_time:.0f} | {verdict.status} | "
                   f"{int(s.forward.diagnostics.get('resampling_steps', 0))} |")
            print(row, flush=True)
            rows.append(row)
        print(f"  ({name}: {total:.0f} s in all, pilot included)", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        head = ("| setting | T | transitions per direction | bound B (nats) | sandwich | "
                "exact log p(y) | seconds | verdict | resamplings |\n"
                "|---|---|---|---|---|---|---|---|---|\n")
        args.out.write_text(f"seed {seed}, simulated sigma {sigma:.4g}, N = {args.n}, "
                            f"{args.chains} runs per direction, schedule {args.schedule}, "
                            f"path {args.path}, ridge {args.ridge}\n\n" + head
                            + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

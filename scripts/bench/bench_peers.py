"""Peer benchmark: PyMC's ``sample_smc`` against the toolkit's AIS and SMC, side by side.

Issue 28.  Four problems, each a data set simulated by the toolkit's simulator at
run seeds 0, 1, 2 (exactly the data :func:`bread_stan.bread` simulates at that
seed), given to both sides:

- ``nhefs``: linear regression on the NHEFS covariates (``stan_models/
  linear_regression.stan``, d = 8);
- ``pima``: logistic regression on the Pima covariates (``stan_models/
  logistic_regression.stan``, d = 10);
- ``halfcauchy``: the hard regression of ``scripts/bench/bench_hard.py`` (uncentred
  predictor, normal(0, 100) coefficients, half-Cauchy(0, 2.5) scale, d = 3), at the
  first run seeds whose simulated sigma lies in [0.05, 0.15] (8, 37 and 206);
- ``eight_schools``: the non-centred eight-schools model (``scripts/bench/peers/``, d = 10)
  with the schools' standard errors and simulated y.

**Best-known log p(y)** per data set: ``nhefs``, closed form given (sigma_sq,
scale_sq) (y is Gaussian with covariance sigma_sq I + scale_sq Z Z', Z = [1, X]),
then a 2-D quadrature over their logs; ``halfcauchy``, ``bench_hard.exact_log_ml``
(closed form given sigma, 1-D quadrature); ``eight_schools``, closed form given tau
(y ~ N(0, diag(sigma^2 + tau^2) + 25 11')), 1-D quadrature over log tau; ``pima``,
importance sampling from a multivariate t (5 degrees of freedom) at the Laplace
approximation of the posterior on the unconstrained scale, 200,000 draws (its
standard error, from the spread of the weights, is a few thousandths of a nat; a t(3)
twice as wide agrees within 0.011 nats on all three data sets).

**The estimate** compared is, for both sides, the forward one: PyMC's
``log_marginal_likelihood`` (the product over SMC stages of mean incremental
weights) and our log-mean-exp of the forward runs' log weights (AIS) or of the SMC
runs' log Z estimates.  Both are unbiased for p(y) itself, so the comparison is like
for like; our sandwich [lower, upper] (upper: -log-mean-exp of minus the reverse
estimates) and the Jeffreys bound B = mean(U) - mean(L) with its verdict come from
the same run, and PyMC has no counterpart to them.  Each of our runs also gives a
second row, "BAR estimate": Bennett's acceptance-ratio estimate from its forward and
reverse estimates together (:func:`bread_stan.ais.estimators.bidirectional_log_ml`),
consistent but not unbiased for p(y); it needs the reverse runs, which our sampling
time counts anyway.

**Wall time.**  Both sides run one after the other on one core (our ``threads=1``;
PyMC ``chains=1, cores=1``), under whatever load the machine has, in the same run.
Compilation is left out of both sampling times and reported apart (ours: the Stan
model and simulator, from the disk cache after the first run; PyMC: pytensor's
compilation of the log density functions, timed inside ``sample_smc``, after a
warm-up call whose time is in the JSON).  Our sampling time counts everything else a user waits for: the
pilot tuning, the forward runs and the reverse runs (the bound's cost).

The PyMC side runs as a subprocess in its own virtual environment
(``scripts/bench/peers_pymc.py``; set it up with ``python -m venv /work/peers-venv &&
/work/peers-venv/bin/pip install pymc``).  Before sampling, the PyMC model's log
likelihood and log prior are compared with the Stan program's at two points
(likelihoods equal; prior differences between the points equal, since Stan's
``cauchy`` on a positive parameter omits the log 2 of the half-Cauchy).

Results (``scripts/figures/bench_peers/results.md``, one invocation of nhefs, pima and
eight_schools with ``--seeds 5 --keep-others``, half-Cauchy rows from the earlier
three-seed run; PyMC 5.28.5, pytensor 2.38.3; load average about 10 on two cores; RMSE
over the data sets, seconds of sampling): NHEFS, PyMC 0.057 (7.6 s) against our SMC
with NUTS 0.099 (6.1 s; 32 particles, T = 100, 4 runs, cheap pilot) and with the IMH
kernel 0.078 (12.6 s, of which 6.7 s for the estimate; 128 particles, T = 100, 8 runs,
512-particle pilot): PyMC still 1.4 times as accurate in less time.  Pima, PyMC 8.0
(10.9 s; 17.9 nats off on one nearly separable data set) against our SMC with NUTS 0.24
(16.6 s) and with IMH 0.74 (18.4 s; 1.6 nats off on that data set, "not converged").
Half-Cauchy, PyMC 159, 159, 149 nats at 2,000, 8,000, 16,000 particles (4, 18, 25 s)
against 1.7 nats for AIS on the waypoint path (19 s, T = 300) and 0.44 (66 s, T =
1,000), all "not converged"; the prior path is off by thousands.  Eight schools, PyMC
0.032 (0.70 s) against our AIS 0.035 (0.32 s), SMC with NUTS 0.032 (0.68 s) and with
IMH 0.047 (0.60 s).

The Gaussian base (``path=gaussian``: Laplace q, then AIS from q; the prior's normaliser
estimated by importance sampling, its seconds and the Laplace fit's counted in the
sampling time; ``scripts/figures/bench_peers/gaussian/results.md``, one invocation of
nhefs and eight_schools with ``--seeds 5``, load average 7.1 at the start and 8.1 at the
end, one BLAS thread; the errors are the same at any load, the seconds are not): NHEFS,
PyMC 0.057 (6.05 s in that run) against 0.028 (T = 100, 30 chains, forward estimate,
1.54 s of which 1.04 s for the estimate) and 0.020 (T = 200, BAR estimate, 2.59 s):
ahead at a quarter to half the time.  Eight schools: the Gaussian base is poor (0.12 to
0.22), its posterior being far from Gaussian in log tau; the prior path's AIS T = 200
BAR estimate stays ahead (0.019 in 0.55 s against PyMC's 0.032 in 0.74 s).
The command::

    PYTHONPATH=$PWD nice python scripts/bench/bench_peers.py --problems nhefs,eight_schools \
      --seeds 5 --out scripts/figures/bench_peers/gaussian --ours \
      nhefs=ais:100:30:P:path=gaussian,ais:200:30:P:path=gaussian,ais:400:30:P:path=gaussian,ais:600:30:P \
      eight_schools=ais:100:20:P:path=gaussian,ais:200:20:P:path=gaussian,ais:200:20:P

with ``P`` written out as ``pilot_chains=8:pilot_grid=8:pilot_steps=10``.

Usage: ``PYTHONPATH=$PWD nice python scripts/bench/bench_peers.py [--problems nhefs,pima,
halfcauchy,eight_schools] [--seeds 3] [--draws 2000] [--python /work/peers-venv/bin/python]
[--ours nhefs=ais:1000:50,smc16:100:8 ...] [--out scripts/figures/bench_peers]
[--keep-others]`` (``--keep-others`` reruns only ``--problems`` and keeps the other
problems' rows of ``OUT/results.json``).  One invocation of all four problems takes
about 25 minutes on a loaded two-core machine; nhefs, pima and eight_schools with
``--seeds 5``, about 25 minutes at a load of 10.
"""

from __future__ import annotations

import os

# One core for both sides means one BLAS thread too (set before numpy loads; the PyMC
# subprocess inherits it).  On a loaded two-core machine OpenBLAS's threads contend even
# in tiny products: L-BFGS-B's d = 8 mode search took 0.4 s instead of 0.008 s.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

from bread_stan.ais.estimators import bidirectional_log_ml
from bread_stan.rng import derived_seed
from bread_stan.stan import datasets
from bread_stan.stan.model import unflatten_draws
from bread_stan.stan.simulator import Simulator, compile_with_simulator, draw_at
from bread_stan.stan.tempered import StanTarget, compile_tempered
from bread_stan.workflows.bread import RunSettings, SamplerSettings, bread

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_hard  # noqa: E402  (the half-Cauchy problem and its exact log p(y))

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {
    "nhefs": ROOT / "stan_models" / "linear_regression",
    "pima": ROOT / "stan_models" / "logistic_regression",
    "halfcauchy": bench_hard.HERE / "halfcauchy_regression",
    "eight_schools": ROOT / "scripts" / "bench" / "peers" / "eight_schools",
}
# Our settings per problem (algorithm[particles]:T:runs[:field=value...]): a cheap pilot
# (8 chains, 8 grid betas, 10 transitions; the default pilot alone takes longer than
# PyMC's whole run on NHEFS) and sizes whose sampling time stayed near or below PyMC's in
# trial runs.  The half-Cauchy rows: the prior path (the old default, fails) and the
# Gaussian waypoint path with the scale-free metric ridge (branch ``hard``).
PILOT = "pilot_chains=8:pilot_grid=8:pilot_steps=10"
WAYPOINT = "path=waypoint:metric_ridge=relative"
# SMC with the IMH kernel (issue 28): its SMC pilot's particles are pilot_chains; sizes
# chosen on run seeds 3 and 4 (not the table's), before this table was run.
IMH = "kernel=imh:pilot_chains"
OURS = {
    "nhefs": [f"smc32:50:4:{PILOT}", f"smc32:100:4:{PILOT}", f"ais:300:30:{PILOT}",
              "smc32:100:4",  # the default pilot, for its cost
              f"smc256:100:4:{IMH}=512", f"smc128:100:8:{IMH}=512"],
    "pima": [f"smc16:100:4:{PILOT}", f"smc64:30:4:{PILOT}", f"ais:200:30:{PILOT}",
             f"smc128:50:4:{IMH}=512", f"smc256:50:4:{IMH}=512"],
    "halfcauchy": ["ais:1000:20", f"ais:300:20:{WAYPOINT}:pilot_chains=16:pilot_grid=8:"
                   "pilot_steps=10", f"ais:1000:20:{WAYPOINT}"],
    "eight_schools": [f"ais:100:20:{PILOT}", f"ais:100:40:{PILOT}", f"smc32:30:8:{PILOT}",
                      f"smc64:10:4:{PILOT}", f"smc64:30:4:{IMH}=256",
                      f"smc128:20:4:{IMH}=256"],
}
PYMC_DRAWS = {"halfcauchy": [2000, 8000, 16000]}  # PyMC's particles, where not just --draws


def base_data(problem: str) -> dict:
    if problem == "nhefs":
        return datasets.load("nhefs")
    if problem == "pima":
        return datasets.load("pima")
    if problem == "halfcauchy":
        return bench_hard.data()
    schools = json.loads((ROOT / "tests" / "stan" / "eight_schools.json").read_text())
    return {"J": schools["J"], "sigma": schools["sigma"], "y": schools["y"]}


def run_seeds(problem: str, n: int) -> list[int]:
    """The run seeds: 0..n-1, or for ``halfcauchy`` the first n whose simulated sigma is
    in [0.05, 0.15] (as bread() draws it)."""
    if problem != "halfcauchy":
        return list(range(n))
    compiled = compile_tempered(bench_hard.MODEL)
    (_,), sim_compiled = compile_with_simulator([compiled], bench_hard.SIMULATOR)
    sim = Simulator(sim_compiled, bench_hard.data())
    seeds = [s for s in range(1000)
             if 0.05 <= float(draw_at(sim.simulate(1, derived_seed(s, 0)), 0)["sigma"]) <= 0.15]
    return seeds[:n]


# ----- best-known log p(y) ---------------------------------------------------------------

def _log_normal_marginal(y: np.ndarray, Z: np.ndarray, s2: float, t2: float) -> float:
    """log N(y; 0, s2 I + t2 Z Z') by the matrix determinant and inversion lemmas."""
    G, b = Z.T @ Z, Z.T @ y
    M = np.eye(Z.shape[1]) + (t2 / s2) * G
    _, logdet_m = np.linalg.slogdet(M)
    quad = (y @ y - (t2 / s2) * b @ np.linalg.solve(M, b)) / s2
    return float(-0.5 * (quad + y.size * np.log(s2) + logdet_m + y.size * np.log(2 * np.pi)))


def _log_inv_gamma_11(t: np.ndarray) -> np.ndarray:
    """Log density of inv_gamma(1, 1) on the log scale t = log x (Jacobian included)."""
    return -t - np.exp(-t)


def exact_nhefs(data: dict) -> float:
    y = np.asarray(data["y"], dtype=float)
    Z = np.column_stack([np.ones(len(y)), np.asarray(data["X"], dtype=float)])

    def grid(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.array([[_log_normal_marginal(y, Z, np.exp(u), np.exp(v))
                          + _log_inv_gamma_11(u) + _log_inv_gamma_11(v) for v in b] for u in a])

    coarse_u, coarse_v = np.linspace(-12, 8, 81), np.linspace(-12, 28, 161)
    c = grid(coarse_u, coarse_v)
    iu, iv = np.nonzero(c > c.max() - 40)
    a = np.linspace(coarse_u[max(iu.min() - 1, 0)], coarse_u[min(iu.max() + 1, 80)], 241)
    b = np.linspace(coarse_v[max(iv.min() - 1, 0)], coarse_v[min(iv.max() + 1, 160)], 241)
    v = grid(a, b)
    edge = max(v[0].max(), v[-1].max(), v[:, 0].max(), v[:, -1].max())
    assert edge < v.max() - 25, "nhefs quadrature window too narrow"
    return float(special.logsumexp(v) + np.log((a[1] - a[0]) * (b[1] - b[0])))


def exact_eight_schools(data: dict) -> float:
    y, sigma = np.asarray(data["y"], dtype=float), np.asarray(data["sigma"], dtype=float)
    t = np.linspace(-30.0, 20.0, 20001)
    vals = np.empty_like(t)
    for i, ti in enumerate(t):
        tau = np.exp(ti)
        cov = np.diag(sigma ** 2 + tau ** 2) + 25.0
        vals[i] = (stats.multivariate_normal.logpdf(y, np.zeros(y.size), cov)
                   + np.log(2 / (np.pi * 5)) - np.log1p((tau / 5) ** 2) + ti)
    assert vals[0] < vals.max() - 25 and vals[-1] < vals.max() - 25
    return float(special.logsumexp(vals) + np.log(t[1] - t[0]))


def _pima_log_joint(u: np.ndarray, Z: np.ndarray, y: np.ndarray):
    """Log joint (n,) and gradient (n, d) of the logistic regression at unconstrained u
    (log scale_sq, alpha, beta), Jacobian included; u is (n, d)."""
    t, c = u[:, 0], u[:, 1:]
    s2 = np.exp(t)
    eta = c @ Z.T
    k = c.shape[1]
    lp = (_log_inv_gamma_11(t) - 0.5 * k * (np.log(2 * np.pi) + t)
          - 0.5 * np.sum(c ** 2, axis=1) / s2)
    ll = eta @ y - np.sum(np.logaddexp(0.0, eta), axis=1)
    grad = np.empty_like(u)
    grad[:, 0] = -1 + np.exp(-t) - 0.5 * k + 0.5 * np.sum(c ** 2, axis=1) / s2
    grad[:, 1:] = -c / s2[:, None] + (y - special.expit(eta)) @ Z
    return lp + ll, grad


def exact_pima(data: dict, draws: int = 200_000, seed: int = 0, widen: float = 1.0,
               df: float = 5.0) -> tuple[float, float, float]:
    """(log p(y), its standard error, effective sample size fraction) by importance
    sampling from a multivariate t(5) at the Laplace approximation."""
    y = np.asarray(data["y"], dtype=float)
    Z = np.column_stack([np.ones(len(y)), np.asarray(data["X"], dtype=float)])
    d = Z.shape[1] + 1

    def neg(u):
        f, g = _pima_log_joint(u[None, :], Z, y)
        return -f[0], -g[0]

    mode = optimize.minimize(neg, np.zeros(d), jac=True, method="BFGS",
                             options={"gtol": 1e-8}).x
    h = 1e-5
    H = np.array([(neg(mode + h * e)[1] - neg(mode - h * e)[1]) / (2 * h) for e in np.eye(d)])
    cov = np.linalg.inv(0.5 * (H + H.T))
    proposal = stats.multivariate_t(loc=mode, shape=widen ** 2 * cov, df=df)
    rng = np.random.default_rng(seed)
    logw = []
    for _ in range(draws // 20_000):
        u = proposal.rvs(size=20_000, random_state=rng)
        logw.append(_pima_log_joint(u, Z, y)[0] - proposal.logpdf(u))
    logw = np.concatenate(logw)
    est = special.logsumexp(logw) - np.log(logw.size)
    w = np.exp(logw - logw.max())
    se = float(np.std(w) / np.mean(w) / np.sqrt(w.size))  # delta method on the log scale
    ess = float(w.sum() ** 2 / np.sum(w ** 2) / w.size)
    return float(est), se, ess


def best_known(problem: str, data: dict) -> dict:
    if problem == "nhefs":
        return {"value": exact_nhefs(data), "how": "closed form given the two variances, "
                "2-D quadrature over their logs (241 x 241 grid)"}
    if problem == "halfcauchy":
        return {"value": bench_hard.exact_log_ml(np.asarray(data["y"], dtype=float),
                                                 np.asarray(data["x"], dtype=float)),
                "how": "closed form given sigma, 1-D quadrature over log sigma (bench_hard)"}
    if problem == "eight_schools":
        return {"value": exact_eight_schools(data), "how": "closed form given tau, 1-D "
                "quadrature over log tau (20,001 points)"}
    value, se, ess = exact_pima(data)
    wide = exact_pima(data, seed=1, widen=2.0, df=3.0)[0]
    return {"value": value, "se": se, "ess_fraction": ess, "wide_proposal": wide,
            "how": "importance sampling, multivariate t(5) at the Laplace approximation, "
                   f"200,000 draws (a t(3) twice as wide gives {wide:.3f})"}


# ----- our side --------------------------------------------------------------------------

RUN_FIELDS = ("path",)  # setting fields that belong to RunSettings, not SamplerSettings
TEXT_FIELDS = ("kernel", "metric", "metric_ridge", "path")


def parse_setting(spec: str) -> tuple[SamplerSettings, RunSettings]:
    """'ais:T:runs' or 'smcP:T:runs', optionally followed by ':field=value' pairs of
    :class:`SamplerSettings` (e.g. ':pilot_chains=8:kernel=hmc') or of the ``RUN_FIELDS``
    of :class:`RunSettings` (':path=waypoint') -> (sampler, run settings at seed 0)."""
    name, T, runs, *fields = spec.split(":")
    sampler_fields, run_fields = {}, {}
    for item in fields:
        key, value = item.split("=")
        value = value if key in TEXT_FIELDS else int(value)
        (run_fields if key in RUN_FIELDS else sampler_fields)[key] = value
    if name != "ais":
        run_fields.update(algorithm="smc", particles=int(name[3:]))
    return SamplerSettings(**sampler_fields), RunSettings(
        steps=(int(T),), chains=int(runs), threads=1, progress=False, check_simulator=False,
        **run_fields)


def run_ours(problem: str, spec: str, seed: int) -> dict:
    sampler, run = parse_setting(spec)
    run = replace(run, seed=seed)
    program = PROGRAMS[problem]
    t0 = time.perf_counter()
    res = bread(f"{program}.stan", f"{program}_sim.stan", base_data(problem),
                sampler=sampler, run=run)
    total = time.perf_counter() - t0
    step = res.steps[0]
    L, U = step.forward.log_estimates, step.reverse.log_estimates
    bound = step.bound()
    sampling = res.extra["tuning_seconds"] + step.forward.wall_time + step.reverse.wall_time
    method = f"toolkit {run.algorithm.upper()}"
    if run.path == "waypoint":
        method += f" ({run.path})"
    extra = {}
    if run.path == "gaussian":  # Laplace then AIS; the prior's normaliser subtracted
        method += ", Gaussian base"
        c = res.extra["tuning"]["normaliser"]
        extra = {"log_c": c["log_c"], "log_c_se": c["se"], "log_c_pareto_k": c["pareto_k"],
                 "log_c_seconds": c["seconds"], "laplace_s": res.extra["tuning"]["fit"]["seconds"]}
    return {**extra, "problem": problem, "method": method, "setting": spec,
            "seed": seed, "estimate": float(special.logsumexp(L) - np.log(L.size)),
            "bar": bidirectional_log_ml(L, U),
            "upper": float(-(special.logsumexp(-U) - np.log(U.size))),
            "bound": float(bound.estimate), "bound_ci_high": float(bound.ci_high),
            "verdict": step.verdict(res.verdict_settings()).status,
            "sampling_s": float(sampling), "tuning_s": float(res.extra["tuning_seconds"]),
            "forward_s": float(res.extra["tuning_seconds"] + step.forward.wall_time),
            "compile_s": float(total - sampling),
            "data": {k: np.asarray(v).tolist()
                     for k, v in {**base_data(problem), **res.extra["simulated_data"]}.items()},
            "truth": {k: np.asarray(v).tolist() for k, v in res.extra["truth"].items()}}


# ----- PyMC side -------------------------------------------------------------------------

def pymc_job(python: str, job: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        out = subprocess.run([python, str(ROOT / "scripts" / "bench" / "peers_pymc.py"), f.name],
                             capture_output=True, text=True, check=False)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(f"the PyMC side failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def equivalence(problem: str, data: dict, truth: dict, python: str) -> dict:
    """Stan's and PyMC's log likelihood and log prior at the simulated truth and at a
    second point (the truth moved by 0.3 on every unconstrained coordinate)."""
    program = PROGRAMS[problem]
    target = StanTarget(compile_tempered(f"{program}.stan"), data)
    names = target.param_names()
    params = {k: np.asarray(v) for k, v in truth.items()
              if k in {n.split(".")[0] for n in names}}
    u0 = target.param_unconstrain(params)
    u = np.vstack([u0, u0 + 0.3])
    ev = target.evaluate(u, gradient=False)
    points = [{k: np.asarray(v)[0].tolist()
               for k, v in unflatten_draws(target.param_constrain(ui)[None, :], names).items()}
              for ui in u]
    py = pymc_job(python, {"problem": problem, "mode": "check", "data": [data],
                           "points": points})
    stan_ll, py_ll = ev.log_lik.tolist(), py["log_lik"]
    stan_dp = float(ev.log_prior[1] - ev.log_prior[0])
    py_dp = py["log_prior"][1] - py["log_prior"][0]
    return {"stan_log_lik": stan_ll, "pymc_log_lik": py_ll,
            "stan_prior_difference": stan_dp, "pymc_prior_difference": py_dp,
            "max_abs_difference": float(max(np.max(np.abs(np.subtract(stan_ll, py_ll))),
                                            abs(stan_dp - py_dp)))}


# ----- the table -------------------------------------------------------------------------

def summarise(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["problem"], r["method"], r["setting"]), []).append(r)
    out = []
    for (problem, method, setting), rs in groups.items():
        err = np.array([r["estimate"] - r["best_known"] for r in rs])
        s = {"problem": problem, "method": method, "setting": setting, "seeds": len(rs),
             "sampling_s": float(np.mean([r["sampling_s"] for r in rs])),
             "compile_s": float(np.mean([r["compile_s"] for r in rs])),
             "forward_s": float(np.mean([r.get("forward_s", r["sampling_s"]) for r in rs])),
             "errors": err.tolist(), "rmse": float(np.sqrt(np.mean(err ** 2))),
             "max_abs_error": float(np.max(np.abs(err)))}
        if "bound" in rs[0]:
            s["bounds"] = [r["bound"] for r in rs]
            s["sandwich_errors"] = [[r["estimate"] - r["best_known"], r["upper"] - r["best_known"]]
                                    for r in rs]
            s["verdicts"] = [r["verdict"] for r in rs]
        out.append(s)
    return out


def done_when(summary: list[dict]) -> list[str]:
    """Per problem and PyMC setting: our settings that ran in no more time, against it."""
    lines = []
    for p in (s for s in summary if s["method"] == "PyMC SMC"):
        ours = [s for s in summary if s["problem"] == p["problem"] and s["method"] != "PyMC SMC"]
        head = f"- {p['problem']}, PyMC {p['setting']} ({p['sampling_s']:.2f} s, RMSE {p['rmse']:.3g}):"
        fair = [s for s in ours if s["sampling_s"] <= p["sampling_s"]]
        if not fair:
            quickest = min(ours, key=lambda s: s["sampling_s"])
            lines.append(f"{head} none of our settings ran in that time (quickest: "
                         f"{quickest['setting']}, {quickest['sampling_s']:.2f} s, RMSE "
                         f"{quickest['rmse']:.3g}).")
            continue
        parts = [f"{s['setting']} ({s['sampling_s']:.2f} s) RMSE {s['rmse']:.3g}: "
                 f"{'as accurate or more' if s['rmse'] <= p['rmse'] else 'LESS accurate'}"
                 for s in fair]
        line = f"{head} ours at no more time: " + "; ".join(parts) + "."
        if p["max_abs_error"] > 1:
            for s in fair:
                honest = all(v != "converged" or abs(e) <= 1
                             for v, e in zip(s["verdicts"], s["errors"]))
                line += (f" PyMC is off by up to {p['max_abs_error']:.3g} nats; {s['setting']} "
                         f"{'says not converged wherever it is off by more than 1 nat' if honest else 'CLAIMS convergence while off by more than 1 nat'}"
                         f" ({', '.join(s['verdicts'])}).")
        quick = [s for s in ours if s["forward_s"] <= p["sampling_s"] and s not in fair]
        if quick:
            q = min(quick, key=lambda s: s["rmse"])
            line += (f" Counting only the estimate's own time (pilot + forward): also "
                     f"{q['setting']} ({q['forward_s']:.2f} s), RMSE {q['rmse']:.3g}.")
        lines.append(line)
    return lines


def write(out: Path, rows: list[dict], best: dict, checks: dict, meta: dict) -> None:
    order = list(PROGRAMS)
    rows = sorted(rows, key=lambda r: order.index(r["problem"]))
    best = {k: best[k] for k in order if k in best}
    summary = summarise(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(
        {"meta": meta, "best_known": best, "equivalence": checks, "summary": summary,
         "runs": [{k: v for k, v in r.items() if k not in ("data", "truth")} for r in rows]},
        indent=1))
    lines = ["# scripts/bench/bench_peers.py: PyMC's sample_smc against the toolkit", "",
             f"PyMC {meta.get('pymc')}, pytensor {meta.get('pytensor')}; one core for both "
             f"sides (BLAS threads: {meta.get('blas_threads', 'not set')}), run one after "
             f"the other; load average {meta['load_start']:.2f} at the "
             f"start, {meta.get('load_end', float('nan')):.2f} at the end.  Estimate: the "
             "forward one (PyMC's log_marginal_likelihood; our log-mean-exp of the forward "
             "log weights; rows marked 'BAR estimate': Bennett's acceptance-ratio estimate from "
             "the same runs' forward and reverse log weights, which needs the reverse runs, "
             "so compare it at the full sampling time).  Error = estimate - best-known "
             "log p(y) per data set; RMSE over "
             "the seeds.  Sampling s excludes compilation (ours: pilot + forward + reverse; "
             "'of which estimate s' is the pilot and forward runs alone, all the estimate "
             "needs; the reverse runs buy the bound).",
             ] + (["", f"Rows of {', '.join(meta['kept_from_earlier_run']['problems'])} come "
                   "from an earlier invocation (--keep-others; each problem's two sides always "
                   "run in one invocation; its load averages are in results.json)."]
                  if "kept_from_earlier_run" in meta else []) + [
             "", "| problem | method | settings | sampling s | of which estimate s | compile s "
             "| errors per seed (nats) | RMSE | sandwich - best-known per seed | bound B per "
             "seed | verdicts |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        errs = ", ".join(f"{e:+.3g}" for e in s["errors"])
        sand = ("; ".join(f"[{a:+.2f}, {b:+.2f}]" for a, b in s["sandwich_errors"])
                if "bounds" in s else "none")
        bounds = ", ".join(f"{b:.3g}" for b in s["bounds"]) if "bounds" in s else "none"
        verdicts = ", ".join(s["verdicts"]) if "verdicts" in s else "none"
        lines.append(f"| {s['problem']} | {s['method']} | {s['setting']} | "
                     f"{s['sampling_s']:.2f} | {s['forward_s']:.2f} | {s['compile_s']:.2f} | "
                     f"{errs} | "
                     f"{s['rmse']:.3g} | {sand} | {bounds} | {verdicts} |")
    gauss = [r for r in rows if "log_c" in r and not r["method"].endswith("BAR estimate")]
    if gauss:
        lines += ["", "Gaussian base (Laplace q, sds times 1.5, then AIS from q; a different "
                  "sampler from AIS from the prior): the program prior's normaliser, "
                  "estimated by importance sampling and subtracted from every estimate "
                  "(true log c: nhefs 0, inverse-gamma priors are normalised; eight_schools "
                  "log 1/2 = -0.6931, the half-Cauchy on tau), per setting and seed: "
                  "log c_hat (se; Pareto k; seconds, included in the sampling time; "
                  "Laplace fit seconds, also included):", ""]
        lines += [f"- {r['problem']} {r['setting']} seed {r['seed']}: {r['log_c']:+.4f} "
                  f"(se {r['log_c_se']:.3f}; k {r['log_c_pareto_k']:.2f}; "
                  f"{r['log_c_seconds']:.2f} s; Laplace {r['laplace_s']:.3f} s)" for r in gauss]
    lines += ["", "Best-known log p(y) per data set:", ""]
    for problem, entries in best.items():
        for e in entries:
            extra = (f" (se {e['se']:.2g}, ESS fraction {e['ess_fraction']:.2f})"
                     if "se" in e else "")
            lines.append(f"- {problem}, seed {e['seed']}: {e['value']:.4f}{extra}; {e['how']}")
    lines += ["", "Model equivalence (Stan vs PyMC, largest absolute difference in log "
              "likelihood at two points and in the log prior's difference between them):", ""]
    lines += [f"- {p}: {c['max_abs_difference']:.2g} nats" for p, c in checks.items()]
    lines += ["", "Done-when, per problem:", ""] + done_when(summary)
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="nhefs,pima,halfcauchy,eight_schools")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--draws", type=int, default=2000, help="PyMC's particles")
    ap.add_argument("--python", default="/work/peers-venv/bin/python",
                    help="the benchmark venv's Python, with pymc installed")
    ap.add_argument("--ours", nargs="*", default=[],
                    help="PROBLEM=SETTING,SETTING (SETTING: ais:T:runs or smcP:T:runs)")
    ap.add_argument("--out", type=Path, default=ROOT / "scripts" / "figures" / "bench_peers")
    ap.add_argument("--keep-others", action="store_true",
                    help="keep the rows of problems not rerun from OUT/results.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ours = dict(OURS)
    for item in args.ours:
        problem, specs = item.split("=", 1)
        ours[problem] = specs.split(",")
    meta = {"load_start": os.getloadavg()[0], "draws": args.draws, "seeds": args.seeds,
            "ours": ours, "blas_threads": {k: os.environ[k] for k in (
                "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    rows, best, checks = [], {}, {}
    problems = args.problems.split(",")
    if args.keep_others and (args.out / "results.json").exists():
        old = json.loads((args.out / "results.json").read_text())
        rows = [r for r in old["runs"] if r["problem"] not in problems]
        best = {k: v for k, v in old["best_known"].items() if k not in problems}
        checks = {k: v for k, v in old["equivalence"].items() if k not in problems}
        meta["kept_from_earlier_run"] = {"problems": sorted(best), "meta": old["meta"]}
    for problem in problems:
        seeds = run_seeds(problem, args.seeds)
        datas = []
        best[problem] = []
        for seed in seeds:
            first = None
            for spec in ours[problem]:
                r = run_ours(problem, spec, seed)
                first = first or r
                # the same runs' bidirectional (BAR) estimate: it needs the reverse runs,
                # which the sampling time already counts
                rows += [r, {**r, "method": r["method"] + ", BAR estimate",
                             "estimate": r["bar"]}]
            datas.append(first["data"])
            known = best_known(problem, first["data"])
            best[problem].append({"seed": seed, **known})
            for r in rows:
                if r["problem"] == problem and r["seed"] == seed:
                    r["best_known"] = known["value"]
                    print(f"{problem} seed {seed} {r['setting']}: error "
                          f"{r['estimate'] - known['value']:+.3f}, sandwich "
                          f"[{r['estimate'] - known['value']:+.2f}, "
                          f"{r['upper'] - known['value']:+.2f}], B {r['bound']:.3g}, "
                          f"{r['verdict']}, {r['sampling_s']:.2f} s", flush=True)
        checks[problem] = equivalence(problem, datas[0], first["truth"], args.python)
        for draws in PYMC_DRAWS.get(problem, [args.draws]):
            peer = pymc_job(args.python, {"problem": problem, "mode": "smc", "data": datas,
                                          "seeds": seeds, "draws": draws})
            meta.update(pymc=peer["pymc"], pytensor=peer["pytensor"])
            meta.setdefault("pymc_warmup_s", {})[f"{problem} {draws}"] = peer["warmup_s"]
            for p, known in zip(peer["runs"], best[problem]):
                rows.append({"problem": problem, "method": "PyMC SMC",
                             "setting": f"{draws} particles, IMH", "seed": p["seed"],
                             "estimate": p["estimate"], "best_known": known["value"],
                             "sampling_s": p["sampling_s"], "compile_s": p["compile_s"],
                             "stages": p["stages"]})
                print(f"{problem} seed {p['seed']} PyMC {draws}: error "
                      f"{p['estimate'] - known['value']:+.3f}, {p['sampling_s']:.2f} s "
                      f"({p['stages']} stages)", flush=True)
        meta["load_end"] = os.getloadavg()[0]
        write(args.out, rows, best, checks, meta)


if __name__ == "__main__":
    main()

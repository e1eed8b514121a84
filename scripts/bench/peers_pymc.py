"""The PyMC side of ``scripts/bench/bench_peers.py``: ``pymc.sample_smc`` on its data sets.

Runs in the benchmark's own environment, never the toolkit's (PyMC is not a
dependency of bread_stan)::

    python -m venv /work/peers-venv
    /work/peers-venv/bin/pip install pymc      # measured with pymc 5.28.5, pytensor 2.38.3

(pytensor compiles C with the machine's g++.)  ``bench_peers.py`` writes a JSON job
and runs ``/work/peers-venv/bin/python scripts/bench/peers_pymc.py JOB.json`` as a
subprocess; this prints one JSON object on its last line of standard output.

The job: ``{"problem": NAME, "mode": "smc" | "check", "data": [one data dict per
seed], "seeds": [...], "draws": 2000, "points": [...]}``.  The PyMC models state the
Stan programs' priors and likelihoods exactly (``MODELS``); ``mode="check"`` returns
PyMC's log likelihood and log prior (on the unconstrained scale, with the
log-Jacobian, as Stan's ``log_density(jacobian=True)``) at given points, for the
equivalence check.

``mode="smc"``: one warm-up call (``draws=100``, its wall time is the "compile"
column: pytensor's C compilation on a cold cache), then per seed one call of
``sample_smc(draws, chains=1, cores=1)`` with the default kernel (independent
Metropolis-Hastings, ``IMH``).  The kernel's construction (where pytensor
compiles the log density functions; cached after the warm-up) is timed
separately and left out of the sampling seconds.  The estimate is the chain's
``log_marginal_likelihood`` at its last stage (beta = 1), the sum over stages of
the log mean weights.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import numpy as np


def _model(problem: str, data: dict):
    import pymc as pm
    with pm.Model() as model:
        if problem == "nhefs":  # stan_models/linear_regression.stan
            X = np.asarray(data["X"], dtype=float)
            sigma_sq = pm.InverseGamma("sigma_sq", alpha=1.0, beta=1.0)
            scale_sq = pm.InverseGamma("scale_sq", alpha=1.0, beta=1.0)
            alpha = pm.Normal("alpha", 0.0, pm.math.sqrt(scale_sq))
            beta = pm.Normal("beta", 0.0, pm.math.sqrt(scale_sq), shape=X.shape[1])
            pm.Normal("y", alpha + pm.math.dot(X, beta), pm.math.sqrt(sigma_sq),
                      observed=np.asarray(data["y"], dtype=float))
        elif problem == "pima":  # stan_models/logistic_regression.stan
            X = np.asarray(data["X"], dtype=float)
            scale_sq = pm.InverseGamma("scale_sq", alpha=1.0, beta=1.0)
            alpha = pm.Normal("alpha", 0.0, pm.math.sqrt(scale_sq))
            beta = pm.Normal("beta", 0.0, pm.math.sqrt(scale_sq), shape=X.shape[1])
            pm.Bernoulli("y", logit_p=alpha + pm.math.dot(X, beta),
                         observed=np.asarray(data["y"], dtype=int))
        elif problem == "halfcauchy":  # scripts/bench/hard_regression/halfcauchy_regression.stan
            x = np.asarray(data["x"], dtype=float)
            alpha = pm.Normal("alpha", 0.0, 100.0)
            beta = pm.Normal("beta", 0.0, 100.0)
            sigma = pm.HalfCauchy("sigma", beta=2.5)
            pm.Normal("y", alpha + beta * x, sigma, observed=np.asarray(data["y"], dtype=float))
        elif problem == "eight_schools":  # scripts/bench/peers/eight_schools.stan
            J = int(data["J"])
            mu = pm.Normal("mu", 0.0, 5.0)
            tau = pm.HalfCauchy("tau", beta=5.0)
            theta_tilde = pm.Normal("theta_tilde", 0.0, 1.0, shape=J)
            pm.Normal("y", mu + tau * theta_tilde, np.asarray(data["sigma"], dtype=float),
                      observed=np.asarray(data["y"], dtype=float))
        else:
            raise SystemExit(f"unknown problem {problem!r}")
    return model


def _check(problem: str, data: dict, points: list[dict]) -> dict:
    """PyMC's log likelihood and log prior (unconstrained, with Jacobian) at ``points``
    (constrained values by Stan name)."""
    model = _model(problem, data)
    loglik = model.compile_logp(vars=model.observed_RVs, jacobian=True)
    logprior = model.compile_logp(vars=model.free_RVs, jacobian=True)
    out = {"log_lik": [], "log_prior": []}
    for point in points:
        values = {}
        for rv in model.free_RVs:
            value = model.rvs_to_values[rv]
            x = np.asarray(point[rv.name], dtype=float)
            values[value.name] = np.log(x) if value.name.endswith("_log__") else x
        out["log_lik"].append(float(loglik(values)))
        out["log_prior"].append(float(logprior(values)))
    return out


def _smc(problem: str, data: dict, draws: int, seed: int) -> dict:
    import pymc as pm
    from pymc.smc.kernels import IMH

    built = []

    class TimedIMH(IMH):
        """IMH whose construction (pytensor's compilation) is timed."""

        def __init__(self, *args, **kwargs):
            t0 = time.perf_counter()
            super().__init__(*args, **kwargs)
            built.append(time.perf_counter() - t0)

    model = _model(problem, data)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample_smc(draws=draws, kernel=TimedIMH, chains=1, cores=1,
                              random_seed=seed, progressbar=False, model=model,
                              compute_convergence_checks=False)
    total = time.perf_counter() - t0
    lml = np.asarray(idata.sample_stats["log_marginal_likelihood"].values,
                     dtype=float).ravel()
    finite = lml[np.isfinite(lml)]
    betas = np.asarray(idata.sample_stats["beta"].values, dtype=float).ravel()
    return {"seed": seed, "estimate": float(finite[-1]) if finite.size else float("nan"),
            "compile_s": built[0], "sampling_s": total - built[0], "stages": int(betas.size)}


def main() -> None:
    job = json.loads(open(sys.argv[1]).read())
    import pymc
    import pytensor
    out = {"pymc": pymc.__version__, "pytensor": pytensor.__version__}
    if job["mode"] == "check":
        out.update(_check(job["problem"], job["data"][0], job["points"]))
    else:
        t0 = time.perf_counter()
        _smc(job["problem"], job["data"][0], 100, 0)
        out["warmup_s"] = time.perf_counter() - t0
        out["runs"] = [_smc(job["problem"], data, job["draws"], seed)
                       for data, seed in zip(job["data"], job["seeds"])]
    print(json.dumps(out))


if __name__ == "__main__":
    main()

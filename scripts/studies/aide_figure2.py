"""The AIDE paper's figure 2 (Cusumano-Towner & Mansinghka 2017) on a Bayesian linear
regression with a conjugate Gaussian posterior, the exact posterior as the gold standard.

Panels:

1. SMC over the number of particles P (HMC moves on a tempering path of 10 distributions,
   resampling at every step; meta-inference by conditional SMC, M_t = 1);
2. Metropolis-Hastings over the number of iterations T with M_t = 1, 10, 100 traces, and
   the chain's exact symmetrised KL beside them.  The chain runs on a fine discretisation
   of the same posterior (the posterior density at the centres of a 25 x 25 lattice over
   mean +- 4.5 sd, nearest-neighbour proposals, :class:`~bread_stan.kernels.grid_mh.
   GridMetropolis`), started from a discretised Gaussian with the posterior's correlation,
   0.6 times its scale, displaced 1.5 sd along its ridge (lighter-tailed than the
   posterior, so the reverse chains' weights q0 / p stay bounded; the discretised prior,
   as wide as the lattice, leaves them so heavy-tailed that M_t = 100 traces do not
   reduce the estimate at all); its T-step law is the start's
   times the exact transition matrix (:class:`~bread_stan.exact.oracle.NeighbourMetropolis`)
   to the power T, so the true KL is known exactly.  AIDE uses the same lattice chain
   (:class:`~bread_stan.meta.mcmc.MCMCAlgorithm`, the toolkit's mh:T code path) and the
   discretised posterior as gold;
3. mean-field variational inference over coordinate-ascent iterations (variances at the
   optimum 1 / Lambda_ii, means updated one coordinate at a time from the prior mean), with
   the exact KL of every iterate and the family's asymptote, both in closed form.

Writes ``scripts/figures/aide_figure2/figure2.png``, ``results.md`` (the tables) and
``results.json``.  Python targets only (no Stan): a few minutes on one core.

    python scripts/studies/aide_figure2.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from bread_stan.ais.frozen_kernels import KernelSchedule
from bread_stan.ais.gaussian_base import GaussianBase
from bread_stan.exact.conjugate import LinearRegression
from bread_stan.exact.grid import GridLaw, GridTarget
from bread_stan.exact.oracle import NeighbourMetropolis
from bread_stan.kernels.grid_mh import GridMetropolis
from bread_stan.kernels.hmc import HMC
from bread_stan.meta import (MCMCAlgorithm, SMCAlgorithm, TractableAlgorithm, density_start,
                             estimate_aide)

OUT = Path(__file__).resolve().parents[1] / "figures" / "aide_figure2"


def regression() -> LinearRegression:
    """y = a + b x + noise, 20 points, x in [0, 2] (uncentred: a and b are correlated)."""
    rng = np.random.default_rng(2017)
    x = np.linspace(0.0, 2.0, 20)
    X = np.column_stack([np.ones_like(x), x])
    y = X @ np.array([0.5, 1.0]) + 0.8 * rng.standard_normal(x.size)
    return LinearRegression(X, y, prior_sd=2.0, noise_sd=0.8)


def gaussian_kl(m0, s0, m1, s1) -> float:
    p1 = np.linalg.inv(s1)
    diff = m1 - m0
    return 0.5 * (np.trace(p1 @ s0) + diff @ p1 @ diff - m0.size
                  + np.linalg.slogdet(s1)[1] - np.linalg.slogdet(s0)[1])


def jeffreys_gauss(m0, s0, m1, s1) -> float:
    return gaussian_kl(m0, s0, m1, s1) + gaussian_kl(m1, s1, m0, s0)


def row(res, **extra) -> dict:
    return {**extra, "aide": res.estimate, "se": res.se, "lower": res.lower, "upper": res.upper}


# -- panel 1: SMC over particles -------------------------------------------------------------

def smc_panel(model, gold, particles, n_runs) -> list[dict]:
    betas = np.linspace(0.0, 1.0, 10) ** 3
    betas[0], betas[-1] = 0.0, 1.0
    covs = [model.tempered_posterior(b)[1] for b in betas]
    schedule = KernelSchedule(betas, 2, "hmc", np.full(betas.size, 0.6),
                              np.array([np.diag(c) for c in covs]), {"n_leapfrog": 4})
    draw = lambda n, seed: model.sample_prior(np.random.default_rng(seed), n)  # noqa: E731
    rows = []
    for P in particles:
        smc = SMCAlgorithm(model, HMC(native=False), schedule, draw, P,
                           resample_at=np.arange(1, betas.size - 1), name=f"smc:{P}")
        res = estimate_aide(gold, smc, n_gold=n_runs, n_target=n_runs, seed=P)
        rows.append(row(res, particles=P))
        print(f"  smc:{P}: {res.estimate:.4f} [{res.lower:.4f}, {res.upper:.4f}]", flush=True)
    return rows


# -- panel 2: Metropolis on the discretised posterior ----------------------------------------



def lattice(model, size: int = 25, width: float = 4.5):
    """The posterior and prior at the centres of a size x size lattice over mean +- width sd."""
    mean, cov = model.tempered_posterior(1.0)
    sd = np.sqrt(np.diag(cov))
    axes = [np.linspace(m - width * s, m + width * s, size) for m, s in zip(mean, sd)]
    a, b = np.meshgrid(*axes, indexing="ij")
    w = np.column_stack([a.ravel(), b.ravel()])
    ev = model.evaluate(w, gradient=False)
    shape = (size, size)
    return GridTarget(ev.log_lik.reshape(shape), ev.log_prior.reshape(shape)), shape, w


def lattice_start(model, w: np.ndarray, shift: float = 1.5, scale: float = 0.6) -> np.ndarray:
    """log pmf (unnormalised) on the lattice points ``w`` of N(mean + shift * sd * (1, -1),
    scale^2 cov): the posterior's shape, narrower, displaced along its ridge."""
    mean, cov = model.tempered_posterior(1.0)
    centre = mean + shift * np.sqrt(np.diag(cov)) * np.array([1.0, -1.0])
    z = w - centre
    return -0.5 * np.einsum("ni,ij,nj->n", z, np.linalg.inv(cov), z) / scale ** 2


def mh_panel(model, iterations, traces, n_runs) -> list[dict]:
    target, shape, points = lattice(model)
    log_post = (target.log_prior + target.log_f).ravel()
    log_post -= logsumexp(log_post)
    post = np.exp(log_post)
    start = GridLaw(lattice_start(model, points), shape)
    kernel = NeighbourMetropolis(shape)
    probs = kernel.probabilities(log_post[None])[0]
    S = post.size
    P = np.zeros((S, S))
    np.add.at(P, (np.repeat(np.arange(S), probs.shape[1]), kernel.neighbours.ravel()),
              probs.ravel())
    gold = TractableAlgorithm(GridLaw(log_post, shape), "exact (lattice)")
    rows = []
    for T in iterations:
        law = np.exp(start.log_p) @ np.linalg.matrix_power(P, T)
        true = float(np.sum((law - post) * (np.log(law) - log_post)))
        for m in traces:
            mh = MCMCAlgorithm(target, GridMetropolis(), None, density_start("ridge", start), T,
                               name=f"mh:{T}")
            res = estimate_aide(gold, mh, n_gold=n_runs, n_target=n_runs, m_target=m,
                                seed=1000 * T + m)
            rows.append(row(res, iterations=T, m_target=m, true_jeffreys=true))
            print(f"  mh:{T} M_t={m}: {res.estimate:.3f} (se {res.se:.3f}), true {true:.3f}",
                  flush=True)
    return rows


# -- panel 3: mean-field VI ------------------------------------------------------------------

def vi_panel(model, gold, sweeps, n_runs) -> tuple[list[dict], float]:
    mean, cov = model.tempered_posterior(1.0)
    precision = np.linalg.inv(cov)
    var = 1.0 / np.diag(precision)
    asymptote = jeffreys_gauss(mean, np.diag(var), mean, cov)
    m = np.zeros(2)  # the prior mean
    rows = []
    for k in range(max(sweeps) + 1):
        if k in sweeps:
            q = GaussianBase(m.copy(), np.diag(var))
            res = estimate_aide(gold, TractableAlgorithm(q, f"vi:{k}"), n_gold=n_runs,
                                n_target=n_runs, seed=k)
            exact = jeffreys_gauss(mean, cov, m, np.diag(var))
            rows.append(row(res, sweeps=k, exact=exact, asymptote=asymptote))
            print(f"  vi:{k}: {res.estimate:.4f} [{res.lower:.4f}, {res.upper:.4f}], exact "
                  f"{exact:.4f}, asymptote {asymptote:.4f}", flush=True)
        for i in range(2):  # one coordinate-ascent sweep
            j = 1 - i
            m[i] = mean[i] - precision[i, j] * (m[j] - mean[j]) / precision[i, i]
    return rows, asymptote


# -- figure and tables -----------------------------------------------------------------------

def plot(smc_rows, mh_rows, vi_rows, asymptote, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    ax = axes[0]
    p = [r["particles"] for r in smc_rows]
    est = np.array([r["aide"] for r in smc_rows])
    ax.errorbar(p, est, yerr=[est - [r["lower"] for r in smc_rows],
                              np.array([r["upper"] for r in smc_rows]) - est], fmt="o-",
                capsize=3)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("SMC particles P")
    ax.set_ylabel("AIDE estimate (nats)")
    ax.set_title("SMC")

    ax = axes[1]
    for m, colour in zip(sorted({r["m_target"] for r in mh_rows}), ("C0", "C1", "C2")):
        rs = [r for r in mh_rows if r["m_target"] == m]
        t = np.array([r["iterations"] for r in rs])
        e = np.array([r["aide"] for r in rs])
        ax.errorbar(t, e, yerr=2 * np.array([r["se"] for r in rs]), fmt="o-", color=colour,
                    capsize=3, label=f"AIDE, M_t = {m}")
    rs = [r for r in mh_rows if r["m_target"] == mh_rows[0]["m_target"]]
    ax.plot([r["iterations"] for r in rs], [r["true_jeffreys"] for r in rs], "k--",
            label="exact (matrix powers)")
    ax.set_xscale("log")
    ax.set_xlabel("Metropolis-Hastings iterations T")
    ax.set_title("Metropolis-Hastings (lattice)")
    ax.legend(fontsize=8)

    ax = axes[2]
    k = [r["sweeps"] for r in vi_rows]
    est = np.array([r["aide"] for r in vi_rows])
    ax.errorbar(k, est, yerr=[est - [r["lower"] for r in vi_rows],
                              np.array([r["upper"] for r in vi_rows]) - est], fmt="o",
                capsize=3, label="AIDE")
    ax.plot(k, [r["exact"] for r in vi_rows], "k--", label="exact")
    ax.axhline(asymptote, color="C3", lw=1, label="mean-field asymptote")
    ax.set_yscale("log")
    ax.set_xlabel("coordinate-ascent sweeps")
    ax.set_title("mean-field VI")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])
                                       for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    model = regression()
    mean, cov = model.tempered_posterior(1.0)
    gold = TractableAlgorithm(GaussianBase(mean, cov), "exact")
    n = 60 if args.quick else 300
    print("panel 1: SMC", flush=True)
    smc_rows = smc_panel(model, gold, (1, 4, 16, 64) if args.quick else (1, 2, 4, 8, 16, 32, 64, 128),
                         n)
    print("panel 2: Metropolis-Hastings", flush=True)
    mh_rows = mh_panel(model, (1, 10, 100) if args.quick else (1, 4, 16, 64, 256),
                       (1, 10, 100), n)
    print("panel 3: mean-field VI", flush=True)
    vi_rows, asymptote = vi_panel(model, gold, (0, 1, 2, 4, 8, 16, 32), 4 * n)
    OUT.mkdir(parents=True, exist_ok=True)
    plot(smc_rows, mh_rows, vi_rows, asymptote, OUT / "figure2.png")
    seconds = time.perf_counter() - t0
    text = [
        "# AIDE figure 2 reproduced (scripts/studies/aide_figure2.py)", "",
        f"Bayesian linear regression, 2 coefficients, 20 points; gold = the exact posterior; "
        f"{n} runs per side (VI: {4 * n}); {seconds:.0f} s.", "",
        "## Panel 1: SMC (10 tempered distributions, HMC moves, resampling every step), "
        "M_t = 1", "",
        table(smc_rows, ["particles", "aide", "se", "lower", "upper"]), "",
        "## Panel 2: Metropolis-Hastings on a 25 x 25 lattice of the posterior, from a "
        "discretised Gaussian displaced along the posterior's ridge", "",
        "true_jeffreys: the exact symmetrised KL of the T-step law (matrix powers).", "",
        table(mh_rows, ["iterations", "m_target", "aide", "se", "true_jeffreys"]), "",
        "## Panel 3: mean-field VI (coordinate ascent from the prior mean)", "",
        table(vi_rows, ["sweeps", "aide", "lower", "upper", "exact", "asymptote"]), "",
        "![figure 2](figure2.png)", ""]
    (OUT / "results.md").write_text("\n".join(text))
    (OUT / "results.json").write_text(json.dumps({"smc": smc_rows, "mh": mh_rows,
                                                  "vi": vi_rows, "seconds": seconds}, indent=1))
    print(f"wrote {OUT} in {seconds:.0f} s")


if __name__ == "__main__":
    main()

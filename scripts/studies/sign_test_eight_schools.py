"""How often the sign test flags a correct run of the non-centred eight-schools model.

Issue 26: ``bread-stan run`` on posteriordb's ``eight_schools_noncentered`` (split and
drafted simulator, ``--steps 100,1000 --chains 30``) came out *inconsistent*: the sign
test fired at T = 1000 with p = 0.0007.  This script measures the sign test's false-alarm
rate on that model without trusting the verdict layer:

1. for each seed (one simulated problem (x*, y*) per seed), one run with many chains
   (``--pool``, default 300 + 300) at the given step counts, through the command line
   exactly as a user runs it (``--no-check``; runs already in ``--work`` are reused);
2. log p(y*) in closed form up to a 1-d quadrature: with theta integrated out,
   y ~ N(0, diag(sigma^2 + tau^2) + 25 11'), and tau ~ half-Cauchy(0, 5) (the model's
   priors, mu ~ normal(0, 5); the script checks the program has them);
3. per problem and T: the forward chains stranded in the prior's tail (L more than 10
   nats below the median), where the bulk of the forward and reverse estimates sits
   against log p(y*), and the sign test's firing rate for runs of 30 + 30 chains,
   estimated by resampling the pool (``--reps`` resamples; the p-value is
   :func:`bread_stan.ais.estimators.sign_test`'s, vectorised and checked against it);
   also the rate of a test on the weights (the log-mean-exps, in which stranded chains
   weigh nothing), and with ``--nested B`` the rates of a bootstrap-t and of Hall's
   skew-corrected bootstrap test (B inner resamples): the alternatives considered.

The per-step-count level is ``sign_alpha`` / (number of step counts) = 0.005, as the
verdict uses it.  Output: ``scripts/figures/sign_test_eight_schools/``
``{summary,rows}_{pdb,repo}_POOL[_nested]`` (``.md``, ``.csv``).

    # the repository's copy of the model (same priors and likelihood as posteriordb's)
    PYTHONPATH=$PWD nice python scripts/studies/sign_test_eight_schools.py --seeds 0,2,3
    # posteriordb's program and data, read from its git directory
    PYTHONPATH=$PWD nice python scripts/studies/sign_test_eight_schools.py \\
        --posteriordb /path/to/posteriordb/.git --seeds 0,2,3,5,6,8,10,11,14,15
    # the robust alternatives (slow), and one large pool (about 25 minutes)
    ... --posteriordb /path/to/posteriordb/.git --seeds 0,2 --nested 500 --reps 20000
    ... --posteriordb /path/to/posteriordb/.git --seeds 2 --steps 1000 --pool 3000
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import integrate, stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bread_stan.ais.estimators import jeffreys_bound, sign_test  # noqa: E402
from bread_stan.ais.results import BreadResult  # noqa: E402
from bread_stan.reporting.report import markdown_table  # noqa: E402

OUT = ROOT / "scripts" / "figures" / "sign_test_eight_schools"
ALPHA = 0.01 / 2  # sign_alpha over two step counts
CHAINS = 30  # the run being judged: 30 + 30 chains
PDB = "posterior_database"


def log_ml(y, sigma, mu_sd: float = 5.0, tau_scale: float = 5.0) -> float:
    """log p(y) of eight schools: theta and mu integrated out in closed form, tau by
    quadrature over u = arctan(tau / tau_scale) (the half-Cauchy's CDF up to 2 / pi)."""
    y, sigma = np.asarray(y, float), np.asarray(sigma, float)

    def h(u):
        tau = tau_scale * np.tan(u)
        cov = np.diag(sigma ** 2 + tau ** 2) + mu_sd ** 2
        return stats.multivariate_normal(np.zeros(y.size), cov).logpdf(y) + np.log(2 / np.pi)

    grid = np.linspace(1e-6, np.pi / 2 - 1e-9, 2001)
    values = np.array([h(u) for u in grid])
    top, peak = values.max(), grid[values.argmax()]
    value, _ = integrate.quad(lambda u: np.exp(h(u) - top), 0, np.pi / 2, points=[peak],
                              limit=1000, epsabs=0, epsrel=1e-12)
    return float(np.log(value) + top)


def sign_p(L: np.ndarray, U: np.ndarray, *, normal: bool = False) -> np.ndarray:
    """The sign test's p-value (chains given x*) for each row of (R, n) arrays: Welch's
    t as :func:`~bread_stan.ais.estimators.sign_test` computes it, or (``normal``) the
    normal quantile the test used before issue 26."""
    vl, vu = L.var(1, ddof=1) / L.shape[1], U.var(1, ddof=1) / U.shape[1]
    B, se = U.mean(1) - L.mean(1), np.sqrt(vl + vu)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (vl + vu) ** 2 / (vl ** 2 / (L.shape[1] - 1) + vu ** 2 / (U.shape[1] - 1))
        p = stats.norm.cdf(B / se) if normal else stats.t.cdf(B / se, df)
        return np.where(se > 0, p, np.where(B < 0, 0.0, 1.0))


def weight_p(L: np.ndarray, U: np.ndarray) -> np.ndarray:
    """p-value of a test on the weights instead of the log estimates: the sandwich
    width -lme(-U) - lme(L) over its delta-method standard error (normal), per row.
    Stranded chains weigh nothing in it, which is why it was considered."""
    mL, mU = L.max(1, keepdims=True), (-U).max(1, keepdims=True)
    wL, wU = np.exp(L - mL), np.exp(-U - mU)
    width = -(mU[:, 0] + np.log(wU.mean(1))) - (mL[:, 0] + np.log(wL.mean(1)))
    se = np.sqrt(wL.var(1, ddof=1) / (L.shape[1] * wL.mean(1) ** 2)
                 + wU.var(1, ddof=1) / (U.shape[1] * wU.mean(1) ** 2))
    return stats.norm.cdf(width / se)


def _moments(L, U):
    B = U.mean(-1) - L.mean(-1)
    var = L.var(-1, ddof=1) / L.shape[-1] + U.var(-1, ddof=1) / U.shape[-1]
    k3 = (np.mean((U - U.mean(-1, keepdims=True)) ** 3, -1) / U.shape[-1] ** 2
          - np.mean((L - L.mean(-1, keepdims=True)) ** 3, -1) / L.shape[-1] ** 2)
    return B, np.sqrt(var), k3


def _hall(t, g):
    a = g / 3
    return t + a * t ** 2 + a ** 2 * t ** 3 / 3 + g / 6


def bootstrap_p(L, U, rng, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """p-values of the bootstrap-t and of Hall's skew-corrected bootstrap test of
    E[U] - E[L] >= 0, for each row of (R, n) arrays (each direction resampled alone)."""
    R, n = L.shape
    m = U.shape[1]
    B, se, k3 = _moments(L, U)
    Lb = np.take_along_axis(L[:, None, :], rng.integers(0, n, (R, n_boot, n)), -1)
    Ub = np.take_along_axis(U[:, None, :], rng.integers(0, m, (R, n_boot, m)), -1)
    Bb, seb, k3b = _moments(Lb, Ub)
    with np.errstate(divide="ignore", invalid="ignore"):
        t, tb = B / se, (Bb - B[:, None]) / seb
        p_t = np.mean(tb <= t[:, None], 1)
        p_h = np.mean(_hall(tb, k3b / seb ** 3) <= _hall(t, k3 / se ** 3)[:, None], 1)
    return p_t, p_h


def extract_posteriordb(git_dir: str, work: Path) -> tuple[Path, Path]:
    """posteriordb's eight_schools_noncentered program and eight_schools data into work/."""
    def show(path):
        return subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{PDB}/{path}"],
                              check=True, capture_output=True).stdout
    work.mkdir(parents=True, exist_ok=True)
    model = work / "eight_schools_noncentered.stan"
    model.write_bytes(show("models/stan/eight_schools_noncentered.stan"))
    with zipfile.ZipFile(io.BytesIO(show("data/data/eight_schools.json.zip"))) as z:
        data = work / "eight_schools.json"
        data.write_bytes(z.read(z.namelist()[0]))
    return model, data


def run_pool(model: Path, data: Path, seed: int, steps: str, pool: int, out: Path) -> None:
    command = [sys.executable, "-m", "bread_stan.cli", "run", str(model),
               "--data", str(data), "--steps", steps, "--chains", str(pool), "--seed",
               str(seed), "--threads", "1", "--quiet", "--no-check", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode not in (0, 3, 4):  # converged, inconsistent, not converged
        raise SystemExit(f"seed {seed}: {result.stderr.strip().splitlines()[-1:]}")


def analyse(out: Path, sigma, reps: int, nested: int, rng) -> list[dict]:
    result = BreadResult.load(out)
    y = result.extra["simulated_data"]["y"]
    truth = result.extra["truth"]
    lp = log_ml(y, sigma)
    rows = []
    for step in result.steps:
        L0 = np.asarray(step.forward.log_estimates) - lp
        U0 = np.asarray(step.reverse.log_estimates) - lp
        stranded = L0 < np.median(L0) - 10
        bulk = L0[~stranded]
        idx_l = rng.integers(0, L0.size, (reps, CHAINS))
        idx_u = rng.integers(0, U0.size, (reps, CHAINS))
        p = sign_p(L0[idx_l], U0[idx_u])
        p_normal = sign_p(L0[idx_l], U0[idx_u], normal=True)
        for r in range(20):  # the vectorised p-value is the package's
            ref = sign_test(jeffreys_bound(L0[idx_l[r]], U0[idx_u[r]], method="normal"),
                            alpha=ALPHA).p_value
            assert abs(ref - p[r]) < 1e-9, (ref, p[r])
        row = {"seed": result.settings.get("run", {}).get("seed"), "T": step.n_steps,
               "tau*": truth["tau"], "log p(y*)": lp, "pool": f"{L0.size} + {U0.size}",
               "stranded": int(stranded.sum()), "lowest L - log p": float(L0.min()),
               "bulk L - log p": float(bulk.mean()),
               "bulk L se": float(bulk.std(ddof=1) / np.sqrt(bulk.size)),
               "U - log p": float(U0.mean()), "U se": float(U0.std(ddof=1) / np.sqrt(U0.size)),
               "sd L (bulk)": float(bulk.std(ddof=1)), "sd U": float(U0.std(ddof=1)),
               "bulk bound": float(U0.mean() - bulk.mean()),
               "pool bound": float(U0.mean() - L0.mean()),
               "normal test fired (before)": float(np.mean(p_normal < ALPHA)),
               "sign test fired (30 + 30)": float(np.mean(p < ALPHA)),
               "weight test fired": float(np.mean(weight_p(L0[idx_l], U0[idx_u]) < ALPHA)),
               "first 30 p": float(sign_p(L0[None, :CHAINS], U0[None, :CHAINS])[0])}
        if nested:
            fired_t = fired_h = 0
            for _ in range(max(1, reps // 200)):
                i = rng.integers(0, L0.size, (200, CHAINS))
                j = rng.integers(0, U0.size, (200, CHAINS))
                p_t, p_h = bootstrap_p(L0[i], U0[j], rng, nested)
                fired_t += int(np.sum(p_t < ALPHA))
                fired_h += int(np.sum(p_h < ALPHA))
            n = max(1, reps // 200) * 200
            row["bootstrap-t fired"] = fired_t / n
            row["Hall fired"] = fired_h / n
        rows.append(row)
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--posteriordb", help="posteriordb git directory (default: the "
                   "repository's tests/stan/eight_schools.stan)")
    p.add_argument("--seeds", default="0,2,3,5,6,8,10,11,14,15")
    p.add_argument("--steps", default="100,1000")
    p.add_argument("--pool", type=int, default=300, help="chains per direction per problem")
    p.add_argument("--reps", type=int, default=40000, help="resampled 30 + 30 runs")
    p.add_argument("--nested", type=int, default=0, help="inner resamples of the "
                   "bootstrap tests (0: skip them)")
    p.add_argument("--work", default="/tmp/sign_test_eight_schools")
    args = p.parse_args(argv)
    work = Path(args.work)
    if args.posteriordb:
        model, data = extract_posteriordb(args.posteriordb, work)
        label = "posteriordb eight_schools_noncentered"
    else:
        model, data = ROOT / "tests/stan/eight_schools.stan", ROOT / "tests/stan/eight_schools.json"
        label = "tests/stan/eight_schools.stan"
    text = model.read_text()
    if "normal(0, 5)" not in text or "cauchy(0, 5)" not in text:
        raise SystemExit(f"{model}: log_ml assumes mu ~ normal(0, 5), tau ~ cauchy(0, 5)")
    sigma = json.loads(data.read_text())["sigma"]
    rng = np.random.default_rng(2026)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        out = work / f"{'pdb' if args.posteriordb else 'repo'}-{args.pool}-s{seed}"
        run_pool(model, data, seed, args.steps, args.pool, out)
        rows += analyse(out, sigma, args.reps, args.nested, rng)
        print(f"seed {seed} done", flush=True)
    frame = pd.DataFrame(rows)
    def run_level(column):  # either step count fires; step counts independent
        return 1 - (1 - frame[column]).groupby(frame["seed"]).prod()

    before, after = run_level("normal test fired (before)"), run_level("sign test fired (30 + 30)")
    OUT.mkdir(parents=True, exist_ok=True)
    stem = (("pdb" if args.posteriordb else "repo") + f"_{args.pool}"
            + ("_nested" if args.nested else ""))
    frame.to_csv(OUT / f"rows_{stem}.csv", index=False)
    md = [f"# Sign test on correct runs of eight schools ({label})", "",
          f"Pools of {args.pool} + {args.pool} chains per simulated problem (one seed each), "
          f"steps {args.steps}, `bread-stan run ... --no-check`; log p(y*) by quadrature. "
          f"'fired' is the share of {args.reps} resampled runs of {CHAINS} + {CHAINS} chains "
          f"where the sign test's p < {ALPHA} (sign_alpha 0.01 over 2 step counts): "
          "Welch's t as the test now computes it, and the normal quantile it used before. "
          "Written by `scripts/studies/sign_test_eight_schools.py`.", "",
          markdown_table(frame.drop(columns=["pool"])), "",
          "Run-level false alarms (either step count fires; step counts independent), "
          "Welch's t (the normal quantile before issue 26 in brackets): "
          + ", ".join(f"seed {s}: {after[s]:.4f} ({before[s]:.4f})" for s in after.index)
          + f"; mean over problems {after.mean():.4f} ({before.mean():.4f}), largest "
          f"{after.max():.4f} ({before.max():.4f}).", ""]
    (OUT / f"summary_{stem}.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()

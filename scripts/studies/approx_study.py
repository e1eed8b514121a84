"""Exact-weights subjective divergence of Laplace, ADVI and Pathfinder on the study data.

For each model/data pairing of SPEC section 5 (MovieLens left out: its NUTS reference
takes too long, see scripts/studies/subjective_study.py), fits the toolkit's NUTS reference on
the REAL data (4 chains, saved in ``OUT/<case>/reference_fit`` and reused), runs the four
approximations of :mod:`bread_stan.approx` with their defaults and measures each by

    D_SBJ = E_r[log p~ - log q] - E_q[log p~ - log q]

(:func:`bread_stan.workflows.subjective_tractable.subjective_tractable`): its expectation
is J(p, q) when the reference is exact, and the two terms bracket log Z (the reference
term from above, the approximation term from below).  Writes ``OUT/summary.csv`` and
``OUT/summary.md``; prints each case's time.

    python scripts/studies/approx_study.py [--only linear_regression,ar1] [--draws 4000]

Measured: 23 s in all on 2 shared cores (the four NUTS references 2-6 s each, each
approximation under 1 s).  The committed table (``scripts/figures/approx_study``, seed 0)
shows Stan's full-rank ADVI with its default settings at thousands of nats on NHEFS and
Pima: over 15 seeds on Pima it ranges 1.5 to 11224 nats (median 17.7), CmdStan 2.35's own
full-rank ADVI, measured the same way from its draws, 1.4 to 227 (median 13.8).  The
mixture's reference is not a posterior sample (R-hat 1.53, label switching), so its row
measures nothing.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bread_stan.approx import METHODS, approximate  # noqa: E402
from bread_stan.errors import BreadStanError  # noqa: E402
from bread_stan.reporting.report import markdown_table  # noqa: E402
from bread_stan.stan import datasets  # noqa: E402
from bread_stan.workflows.fit import FitSettings  # noqa: E402
from bread_stan.workflows.subjective import own_fit, stan_model, load_reference  # noqa: E402
from bread_stan.workflows.subjective_tractable import subjective_tractable  # noqa: E402
from study_common import MODELS, cases, names  # noqa: E402

CASES = cases("linear_regression", "logistic_regression", "ar1", "gaussian_mixture")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "scripts" / "figures" / "approx_study")
    p.add_argument("--draws", type=int, default=4000, help="draws of each approximation")
    p.add_argument("--fit-warmup", type=int, default=400)
    p.add_argument("--fit-draws", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--only", type=names, default=list(CASES))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        datefmt="%H:%M:%S")
    fit = FitSettings(chains=4, warmup=args.fit_warmup, draws=args.fit_draws, max_depth=8)
    start, rows = time.perf_counter(), []
    for case in args.only:
        t0 = time.perf_counter()
        program, data_name = CASES[case]
        stan = stan_model(MODELS / f"{program}.stan", datasets.load(data_name),
                           args.threads)
        reference = load_reference(own_fit(stan, fit, args.seed, args.out / case), stan)
        for method in METHODS:
            row = {"case": case, "data": data_name, "d": stan.dim, "method": method,
                   "ref_rhat": round(reference.max_rhat, 3),
                   "ref_ess": round(reference.min_ess)}
            try:
                q = approximate(stan, method, seed=args.seed)
                r = subjective_tractable(stan, q, reference, n=args.draws, seed=args.seed)
            except BreadStanError as error:
                rows.append({**row, "error": str(error)})
                continue
            info = q.diagnostics
            rows.append({**row, "dsbj": r.estimate,
                         "dsbj_ci": f"{r.interval[0]:.3g} to {r.interval[1]:.3g}",
                         "log_z_bracket": f"{r.approximation_term:.6g} to "
                                          f"{r.reference_term:.6g}",
                         "iterations": info["iterations"], "converged": info["converged"],
                         "gradients": info["gradient_evaluations"],
                         "seconds": round(info["seconds"], 2)})
        print(f"{case}: {time.perf_counter() - t0:.0f} s", flush=True)
    summary = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(args.out / "summary.csv", index=False)
    total = time.perf_counter() - start
    (args.out / "summary.md").write_text(
        "# Exact-weights subjective divergence of the Gaussian approximations on the real "
        "data\n\nD_SBJ = E_r[log p~ - log q] - E_q[log p~ - log q] in the unconstrained "
        "space, r = the toolkit's NUTS fit (4 chains, thinned to about one draw per "
        "effective sample), q = each approximation with its defaults (seed "
        f"{args.seed}), {args.draws} draws of q; `log_z_bracket`: the two terms, which "
        "bracket log Z when the reference is exact.  `seconds`: the approximation's own "
        f"time.  Whole study: {total:.0f} s on 2 shared cores.\n\n"
        + markdown_table(summary) + "\n")
    print(markdown_table(summary))
    print(f"\napprox study: {total:.0f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

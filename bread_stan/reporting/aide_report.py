"""Report of AIDE runs: a table, a figure (divergence with interval per target), a summary.

:func:`aide_table` turns :class:`~bread_stan.meta.estimator.AIDEResult` objects into one row
per target; :func:`plot_aide` draws each estimate with its interval; :func:`write_aide_report`
saves ``summary.json`` (per target and, under ``"aide_nats"``, target -> estimate),
``aide.png`` and ``report.md`` in the output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..meta.estimator import AIDEResult
from ..store import save_json, write_atomic
from .report import markdown_table, save_figures
from ..errors import InputError

__all__ = ["aide_table", "plot_aide", "write_aide_report"]


def aide_table(results: Sequence[AIDEResult]) -> pd.DataFrame:
    """One row per target: estimate, interval, the two terms, runs, cost."""
    rows = []
    for r in results:
        run_cost = r.cost.get("target_runs")
        fit = r.cost.get("target_fit")
        per_run = (run_cost.gradients / r.n_target) if run_cost is not None else np.nan
        rows.append({"target": r.target, "aide_nats": r.estimate, "lower": r.lower,
                     "upper": r.upper, "gold_term": r.gold_term, "target_term": r.target_term,
                     "n_gold": r.n_gold, "n_target": r.n_target, "m_gold": r.m_gold,
                     "m_target": r.m_target, "gradients_per_run": per_run,
                     "fit_gradients": fit.gradients if fit is not None else 0,
                     "seconds": sum(c.seconds for k, c in r.cost.items()
                                    if k in ("target", "target_fit"))})
    return pd.DataFrame(rows)


def plot_aide(results: Sequence[AIDEResult]):
    """AIDE estimate with its interval, one row per target (symlog axis: estimates near 0
    and of thousands of nats side by side)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 0.5 * len(results) + 1.5))
    y = np.arange(len(results))
    est = np.array([r.estimate for r in results])
    lo = np.array([r.lower for r in results])
    hi = np.array([r.upper for r in results])
    ax.errorbar(est, y, xerr=[est - lo, hi - est], fmt="o", color="#1f77b4", capsize=3)
    ax.axvline(0.0, color="grey", lw=0.8)
    ax.set_yticks(y, [r.target for r in results])
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_xlabel(f"AIDE, symmetrised KL to {results[0].gold} (nats)")
    ax.invert_yaxis()
    return fig


def _mcmc_notes(results: Sequence[AIDEResult]) -> list[str]:
    """What the report says about MCMC targets (``nuts:T``, ``hmc:T``, ``mh:T``)."""
    mcmc = [r for r in results if "mcmc_start" in r.settings]
    if not mcmc:
        return []
    starts = sorted({r.settings["mcmc_start"] for r in mcmc})
    accept = ", ".join(f"{r.target} {r.settings['mcmc_accept_stat']:.2f}" for r in mcmc)
    return [
        f"- **MCMC targets** ({', '.join(r.target for r in mcmc)}): T transitions at the "
        f"posterior from {' / '.join(starts)}, with a kernel frozen after a tuning run that "
        "is not part of what is scored. Stan's warm-up adapts while it runs; that "
        "adaptation is not what is scored here. Mean acceptance statistic: " + accept + ".",
        "- AIDE over-estimates an MCMC run's divergence in expectation. Each trace of the "
        "meta-inference is a reverse chain of T steps from the output; averaged over M_t "
        "traces, its xi estimates the output density q_T(x) without bias, so E[AIDE] lies "
        "above J(q_T, p) and falls towards it as M_t grows. With M_t = 1 its expectation "
        "is J(q0, p), the divergence of the start, whatever T. Give MCMC targets many "
        "traces (--m-target), and compare estimates at equal M_t."]


def write_aide_report(results: Sequence[AIDEResult], out_dir: str | Path, *,
                      model: str = "") -> Path:
    """Save ``summary.json``, ``aide.png`` and ``report.md`` in ``out_dir``; return the
    report's path."""
    out = Path(out_dir)
    results = list(results)
    if not results:
        raise InputError("no AIDE results to report")
    save_json(out / "summary.json", {"model": model, "gold": results[0].gold,
                                     "aide_nats": {r.target: r.estimate for r in results},
                                     "targets": [r.summary() for r in results]})
    figures, failures = save_figures({"aide": lambda: plot_aide(results)}, out)
    table = aide_table(results)
    r0 = results[0]
    lines = [f"# AIDE: {model}" if model else "# AIDE", "",
             f"Gold standard: **{r0.gold}**. Each row estimates the symmetrised KL divergence "
             "KL(gold || target) + KL(target || gold) between the algorithms' outputs in the "
             "unconstrained space (Cusumano-Towner & Mansinghka 2017). Its expectation is an "
             "upper bound on that divergence when the gold standard is exact; the interval is "
             f"a {r0.level:.0%} CLT interval over the runs.", "",
             markdown_table(table), "",
             "- **gold_term**: mean over gold runs of LME log xi_gold - LME log xi_target",
             "- **target_term**: mean over target runs of LME log xi_target - LME log xi_gold",
             "- **gradients_per_run**: gradient evaluations of one target run (fitting an "
             "approximation: fit_gradients, once)"]
    if not r0.terms_meaningful:
        lines.append("- The gold standard is reference draws taken as exact: each term is "
                     "shifted by the unknown log Z (with opposite signs), only their sum is "
                     "meaningful.")
    lines += _mcmc_notes(results)
    if "aide" in figures:
        lines += ["", "![AIDE per target](aide.png)"]
    lines += [f"- {f}" for f in failures]
    path = out / "report.md"
    write_atomic(path, "\n".join(lines) + "\n")
    return path

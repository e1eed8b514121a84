"""Figures and report of the real-data protocol (:mod:`bread_stan.workflows.protocol`).

- :func:`plot_shifted_curves`: (a) quartiles over chains of forward estimates on
  real and simulated data and reverse estimates on simulated data against the
  number of distributions, each shifted by its largest forward estimate, with
  the replicate simulated data sets' medians, the agreement band and score.
- :func:`plot_s_sweep`: (b) the reverse curves for every S of the sweep.
- (c) the Jeffreys bound on the simulated data against steps and wall time is
  :func:`bread_stan.reporting.plots.plot_bound` of ``result.sim``.
- :func:`write_protocol_report`: all figures, ``summary.csv``/``summary.json``,
  ``curves.csv``, ``fit_summary.csv``, ``report.md`` and a self-contained
  ``report.html``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from ..workflows.protocol_budget import not_started_sentence
from ..workflows.protocol_result import ProtocolResult
from .html_page import embedded_figure, html_document, markdown_to_html
from .report import markdown_table, save_figures
from ..store import save_json, write_atomic

__all__ = ["plot_shifted_curves", "plot_s_sweep", "plot_protocol", "write_protocol_report",
           "protocol_verdict"]

_STYLE = {"real forward": ("#2ca02c", "o-"), "simulated forward": ("#1f77b4", "s-"),
          "simulated reverse": ("#d62728", "^-")}


def _axes(ncols: int = 1, width: float = 5.5):
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 4.0), squeeze=False)
    return fig, axes[0]


def _symlog(ax, values: np.ndarray) -> None:
    """Symmetric log scale when the curves span orders of magnitude; linear within
    5% of the largest value, so the bands near zero stay readable."""
    span = np.nanmax(np.abs(values)) if values.size else 1.0
    if np.isfinite(span) and span > 20:
        ax.set_yscale("symlog", linthresh=max(1.0, 0.05 * span))


def plot_shifted_curves(result: ProtocolResult, ax=None):
    """(a) Shifted quartile curves of real/simulated forward and simulated reverse AIS."""
    fig = None
    if ax is None:
        fig, (ax,) = _axes()
    table = result.curves()
    # The band and the replicates live in the agreement's frame (each curve shifted
    # by its largest median over the T that all curves ran); moved into the real
    # curve's frame here, so "inside the band" on the plot means what the score says.
    offset, agreement = 0.0, None
    if result.has_agreement:
        agreement = result.agreement()
        band = agreement.table
        real = table[table["curve"] == "real forward"].set_index("steps")["median"]
        first = band.iloc[0]
        offset = float(real.loc[first["steps"]] - first["real_shifted_median"])
    replicates = sorted(n for n in table["curve"].unique() if n.startswith("replicate "))
    for i, name in enumerate(replicates):
        part = table[table["curve"] == name]
        ax.plot(part["steps"], part["median"] + offset, "-", color="#1f77b4", alpha=0.45,
                linewidth=0.8, label="replicate simulated forward" if i == 0 else None)
    if agreement is not None:
        ax.fill_between(band["steps"], band["sims_mean"] - band["half_width"] + offset,
                        np.minimum(band["sims_mean"] + band["half_width"], 0.0) + offset,
                        color="0.6", alpha=0.25, linewidth=0, label="agreement band")
    for name, (color, fmt) in _STYLE.items():
        part = table[table["curve"] == name]
        if part.empty:
            continue
        label = name if name != "simulated reverse" else (
            f"simulated reverse (S={max(result.s_sweep)})" if result.s_sweep else name)
        ax.plot(part["steps"], part["median"], fmt, color=color, label=label)
        ax.fill_between(part["steps"], part["q25"], part["q75"], color=color, alpha=0.2,
                        linewidth=0)
    ax.axhline(0.0, color="k", linewidth=0.6)
    ax.set_xscale("log")
    _symlog(ax, table["median"].to_numpy(float))
    ax.set_xlabel("number of AIS distributions")
    ax.set_ylabel("log p(D) estimate - largest median forward (nats)")
    title = f"{result.model}: shifted quartile curves"
    if agreement is not None:
        title += (f"\nagreement score {agreement.score:.2f} "
                  f"({'DISAGREE' if agreement.flagged else 'agree'})")
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    return fig if fig is not None else ax.figure


def plot_s_sweep(result: ProtocolResult, ax=None):
    """(b) Reverse curves (median and quartiles) for every S, shifted like (a)."""
    import matplotlib.pyplot as plt

    fig = None
    if ax is None:
        fig, (ax,) = _axes()
    table = result.curves()
    sweep = result.s_sweep
    colors = plt.cm.viridis(np.linspace(0.0, 0.85, max(len(sweep), 1)))
    for S, color in zip(sweep, colors):
        part = table[table["curve"] == f"simulated reverse S={S}"]
        ax.plot(part["steps"], part["median"], "o-", color=color, label=f"S = {S}")
        ax.fill_between(part["steps"], part["q25"], part["q75"], color=color, alpha=0.15,
                        linewidth=0)
    fwd = table[table["curve"] == "simulated forward"]
    ax.plot(fwd["steps"], fwd["median"], "s--", color="#1f77b4", label="simulated forward")
    ax.set_xscale("log")
    _symlog(ax, table["median"].to_numpy(float))
    ax.set_xlabel("number of AIS distributions")
    ax.set_ylabel("shifted log p(D_sim) estimate (nats)")
    title = f"{result.model}: reverse AIS by start transitions S"
    if len(sweep) >= 2 and len(result.steps) >= 1:
        title += f"\nS-sweep test {'passed' if result.sweep_test().passed else 'FAILED'}"
    ax.set_title(title, fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    return fig if fig is not None else ax.figure


def _figure_makers(result: ProtocolResult) -> dict:
    from .plots import plot_bound

    makers = {"shifted_curves": lambda: plot_shifted_curves(result),
              "s_sweep": lambda: plot_s_sweep(result)}
    if result.sim.steps:
        makers["bound"] = lambda: plot_bound(result.sim)
    return makers


def plot_protocol(result: ProtocolResult) -> dict:
    """All figures of a protocol run, by file stem."""
    return {stem: make() for stem, make in _figure_makers(result).items()}


def _fit_sentence(fit) -> str:
    """Which NUTS fitted the real data, and its diagnostics in Stan's terms."""
    who = {"toolkit": "the toolkit's NUTS", "cmdstan": "CmdStan's NUTS"}[fit.sampler]
    d = fit.diagnostics
    chains, draws = fit.unconstrained.shape[:2]
    total = int(d.get("transitions", chains * draws))
    return (f"Fit on the real data with {who} ({chains} chains x {draws} draws): max R-hat "
            f"{fit.max_rhat:.3f}, min bulk ESS {fit.min_ess_bulk:.0f}, "
            f"{int(d.get('divergences', 0))} of {total} transitions divergent, "
            f"{int(d.get('max_tree_depth_hits', 0))} at the maximum tree depth "
            f"{fit.settings.get('max_depth', 10)}")


def _number(value) -> str:
    """A fitted hyperparameter: "0.5" or, for a vector or array, "[0.5, 1.2]"."""
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        return f"{float(array):.4g}"
    return np.array2string(array, precision=4, separator=", ")


def protocol_verdict(result: ProtocolResult) -> list[str]:
    """Plain-language findings, one sentence each."""
    if len(result.steps) == 0:
        return ["No number of distributions has finished yet."]
    lines = []
    route = result.extra.get("route")
    if route:
        lines.append(f"Route: {route['description']} ("
                     + "; ".join(f"{k}: {v}" for k, v in route.get("why", {}).items())
                     + "); forward AIS on the Gaussian path of each data set.")
    if result.fit is not None:
        lines.append(_fit_sentence(result.fit) + "; fitted hyperparameters (posterior "
                     f"{result.extra.get('hyper_summary', 'median')}): "
                     + ", ".join(f"{k} = {_number(v)}" for k, v in result.hyper.items())
                     + ".")
    checked = result.data_check()
    if checked is not None:
        lines.append(checked.message + ".")
    if len(result.steps) >= 2:
        if result.sim.steps and not any(v.converged for v in result.sim.verdicts()):
            lines.append("AIS converged at no number of distributions on the simulated data, "
                         "so the forward curves below compare two runs that did not reach "
                         "the posterior: agreeing curves then say the two data sets are "
                         "equally hard for AIS, not that the model fits the real data.")
        if result.has_agreement:
            lines.append(result.agreement().message + ".")
        else:
            lines.append("No agreement score: it needs replicate simulated data sets "
                         "(ProtocolSettings.replicates or --replicates, 4 or more) run at "
                         "two or more of the numbers of distributions (replicate_max_steps).")
        if len(result.s_sweep) >= 2:
            lines.append(result.sweep_test().message + ".")
    if not result.sim.consistent:
        lines.append("The consistency checks failed on the simulated data: "
                     + " ".join(result.sim.problems()))
    elif result.sim.steps:
        last = max(s.n_steps for s in result.sim.steps)
        lines.append(f"On the simulated data, with {last} distributions, AIS is "
                     f"{result.sim.last_message()} (The reverse chains start from an approximate posterior "
                     "draw, so this bound is checked by the S-sweep rather than guaranteed.)")
    if (left := not_started_sentence(result.extra.get("budget"), len(result.steps))) is not None:
        lines.append(left)
    if route:
        lines.append(route["heuristic"])
    return lines


def write_protocol_report(result: ProtocolResult, out_dir: Path) -> Path:
    """Save figures, tables and ``report.md``/``report.html``; return the HTML path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = result.summary()
    write_atomic(out_dir / "summary.csv", summary.to_csv(index=False))
    write_atomic(out_dir / "curves.csv", result.curves().to_csv(index=False))
    if result.fit is not None:
        write_atomic(out_dir / "fit_summary.csv", result.fit.summary.to_csv())
    save_json(out_dir / "summary.json", result.summary_json())
    figures, failures = save_figures(_figure_makers(result), out_dir)
    verdict = protocol_verdict(result) + failures
    if promoted := result.extra.get("programs", {}).get("promoted"):
        verdict = [promoted[0].upper() + promoted[1:] + "."] + verdict    # .draft.promote
    cols = [c for c in ("steps", "verdict", "bound", "bound_ci_low", "bound_ci_high",
                        "median_gap", "consistent", "seconds", "real_forward_shifted", "sim_forward_shifted",
                        "sim_reverse_shifted") if c in summary.columns]
    table = summary[cols] if cols else summary
    md = [f"# Real-data protocol: {result.model}", ""] + [f"- {v}" for v in verdict] + [""]
    md += ["## Jeffreys bound on the simulated data and shifted medians", "",
           markdown_table(table), ""]
    if len(result.steps) >= 2:
        if result.has_agreement:
            md += ["## Agreement of real and simulated forward curves", "",
                   markdown_table(result.agreement().table), ""]
        if len(result.s_sweep) >= 2:
            md += ["## S-sweep test", "", markdown_table(result.sweep_test().table), ""]
    if checked := result.data_check():
        md += ["## Simulated data against the real data", "",
               f"{checked.n_simulated} data sets simulated at the fitted hyperparameters; "
               "p: two-sided Monte Carlo p-value of the real statistic among the simulated "
               "ones; z: how many simulated sds the real statistic is from their mean.", "",
               markdown_table(checked.table), ""]
    if result.fit is not None:
        md += [f"## Fit on the real data ({result.fit.sampler} NUTS; ArviZ summary)", "",
               markdown_table(result.fit.summary.reset_index().rename(
                   columns={"index": "parameter"}).head(40)), ""]
    text = "\n".join(md)
    md += [f"![{stem}]({path.name})" for stem, path in figures.items()]
    settings = json.dumps(result.settings, indent=1, default=str)
    md += ["", "## Settings", "", "```json", settings, "```", ""]
    write_atomic(out_dir / "report.md", "\n".join(md))

    imgs = "".join(embedded_figure(path, stem) for stem, path in figures.items())
    page = html_document(f"protocol: {result.model}",
                         markdown_to_html(text)
                         + (f"<h2>Figures</h2><div class=figures>{imgs}</div>" if imgs else "")
                         + f"<h2>Settings</h2><pre>{html.escape(settings)}</pre>")
    path = out_dir / "report.html"
    write_atomic(path, page)
    return path

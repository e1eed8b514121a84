"""Write a BREAD run's figures and a self-contained report into its directory.

``write_report(result, out_dir)`` saves the figures as PNG, ``summary.csv``,
``summary.json``, ``report.md`` (figures linked) and ``report.html`` (figures
embedded, so the one file can be mailed or opened anywhere).
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..ais.results import BreadResult

__all__ = ["write_report", "write_comparison", "markdown_table"]

_COLUMNS = {
    "steps": "steps", "bound": "Jeffreys bound", "bound_ci_low": "CI low",
    "bound_ci_high": "CI high", "log_ml_lower": "log p(y) >=", "log_ml_upper": "log p(y) <=",
    "consistent": "consistent", "seconds": "seconds", "gradients": "gradients",
}


def _display_table(result: BreadResult) -> pd.DataFrame:
    table = result.summary()
    cols = [c for c in _COLUMNS if c in table.columns]
    extra = [c for c in ("kl_q_p", "kl_p_q") if c in table.columns]
    return table[cols + extra].rename(columns=_COLUMNS)


def markdown_table(frame: pd.DataFrame, float_format: str = "{:.4g}") -> str:
    """A pipe table of ``frame`` (no dependency on tabulate)."""
    def cell(v):
        if isinstance(v, (float, np.floating)):
            return "n/a" if np.isnan(v) else float_format.format(v)
        return str(v)
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |",
             "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |"
              for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _verdict(result: BreadResult) -> str:
    if not result.steps:
        return "No step count has finished yet."
    if not result.consistent:
        return ("**The consistency check failed**: reverse estimates sit below forward "
                "estimates by more than chance allows, so the numbers below are not "
                "divergence bounds. " + " ".join(result.problems()))
    best = max(result.steps, key=lambda s: s.n_steps)
    b = best.bound()
    text = (f"With {best.n_steps} distributions, the Jeffreys divergence between the "
            f"forward AIS output and the exact posterior (on simulated data) is at most "
            f"about {b.estimate:.3g} nats ({100 * b.level:.0f}% interval "
            f"{b.ci_low:.3g} to {b.ci_high:.3g}).")
    stranded = best.stranded_forward_chains()
    if stranded.size:
        L = np.asarray(best.forward.log_estimates)
        rest = np.delete(L, stranded)
        share = (np.mean(rest) - np.mean(L)) / max(b.estimate, 1e-300)
        text += (f" Note: {stranded.size} of {L.size} forward chains are stranded far below "
                 f"the rest and make up {100 * share:.0f}% of that bound; these are usually "
                 "chains started in the prior's tails where the tuned step size is far too "
                 "large. More leapfrog steps, step-size jitter (--jitter), NUTS or a "
                 "reparameterised model may free them.")
    return text


def write_report(result: BreadResult, out_dir: Path, *, truth: float | None = None) -> Path:
    """Save figures, tables and ``report.md``/``report.html``; return the HTML path."""
    import matplotlib.pyplot as plt

    from .plots import plot_all

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result.summary().to_csv(out_dir / "summary.csv", index=False)
    (out_dir / "summary.json").write_text(json.dumps(result.summary_json(), indent=1))
    figures = {}
    for stem, fig in plot_all(result, truth=truth).items():
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        figures[stem] = path

    table = _display_table(result)
    settings = json.dumps(result.settings, indent=1, default=str)
    md = [f"# BREAD report: {result.model}", "", _verdict(result), "",
          markdown_table(table), ""]
    md += [f"![{stem}]({path.name})" for stem, path in figures.items()]
    md += ["", "## Settings", "", "```json", settings, "```", ""]
    (out_dir / "report.md").write_text("\n".join(md))

    imgs = "".join(
        f"<img alt='{stem}' style='max-width:100%' src='data:image/png;base64,"
        f"{base64.b64encode(path.read_bytes()).decode()}'/>" for stem, path in figures.items())
    page = (f"<!doctype html><meta charset='utf-8'><title>BREAD: {html.escape(result.model)}"
            f"</title><body style='font-family:sans-serif;max-width:1100px;margin:auto'>"
            f"<h1>BREAD report: {html.escape(result.model)}</h1>"
            f"<p>{html.escape(_verdict(result)).replace('**', '')}</p>"
            f"{table.to_html(index=False, float_format=lambda v: f'{v:.4g}')}"
            f"{imgs}<h2>Settings</h2><pre>{html.escape(settings)}</pre></body>")
    html_path = out_dir / "report.html"
    html_path.write_text(page)
    return html_path


def write_comparison(results: dict[str, BreadResult], out_dir: Path) -> Path:
    """Figure and table comparing the bound of several programs; returns the table path."""
    import matplotlib.pyplot as plt

    from .plots import plot_comparison

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = [r.summary().assign(program=label) for label, r in results.items()]
    table = pd.concat(frames, ignore_index=True)
    cols = ["program", "steps", "bound", "bound_ci_low", "bound_ci_high", "seconds",
            "gradients", "consistent"]
    table = table[cols]
    table.to_csv(out_dir / "comparison.csv", index=False)
    fig = plot_comparison(results)
    fig.savefig(out_dir / "comparison.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    md = ["# Representation comparison", "", markdown_table(table), "",
          "![comparison](comparison.png)", ""]
    path = out_dir / "comparison.md"
    path.write_text("\n".join(md))
    return path

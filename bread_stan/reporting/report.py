"""Write a BREAD run's figures and a self-contained report into its directory.

``write_report(result, out_dir)`` saves the figures as PNG, ``summary.csv``,
``summary.json``, ``report.md`` (figures linked) and ``report.html`` (figures
embedded, so the one file can be mailed or opened anywhere).
"""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..ais.results import BreadResult, SubjectiveResult
from ..store import write_atomic
from .html_page import (embedded_figure, html_document, markdown_to_html, png_figure,
                        scoped_style, verdict_banner)

__all__ = ["write_report", "write_comparison", "markdown_table", "display_table", "result_table",
           "glossary", "save_figures", "result_html"]

log = logging.getLogger(__name__)

# Columns of the table a user reads, and what each means (the report's glossary).
_COLUMNS = {
    "steps": ("steps", "number of AIS distributions T (the annealing schedule's length)"),
    "verdict": ("verdict", "converged (the bound's upper limit is within the scale), not "
                "converged, or inconsistent (a check failed: no bound is reported)"),
    "bound": ("bound", "B = mean(U) - mean(L): an upper bound, in expectation, on the Jeffreys "
              "divergence between the forward AIS output and the exact posterior (nats)"),
    "interval": ("interval", "the bound's confidence interval, its low end truncated at 0 "
                 "(a divergence is never negative): a studentised bootstrap over the chains "
                 "(corrects the skew of the chains' estimates), covering the expected bound "
                 "given the run's exact draw; with several exact draws, a Student-t interval "
                 "over the simulated problems, covering the expected bound over data sets"),
    "raw_interval": ("raw interval", "the interval as computed, before truncation"),
    "lower": ("log p(y) >=", "log-mean-exp of the forward estimates: a stochastic lower bound "
              "on log p(y*) of the simulated data; in brackets a one-sided confidence limit: "
              "log p(y*) lies above it with the stated probability, however heavy-tailed the "
              "chains' weights (a test-martingale bound that assumes only exact prior draws, "
              "correct kernels and independent chains)"),
    "upper": ("log p(y) <=", "minus log-mean-exp of minus the reverse estimates: a stochastic "
              "upper bound on log p(y*); in brackets a one-sided confidence limit: log p(y*) "
              "lies below it with the stated probability, however heavy-tailed the weights: "
              "Markov's inequality on the mean reverse weight exp(-U), which averages to "
              "1/p(y*) over exact posterior draws, so the limit is the upper end plus "
              "log(1 / (1 - level)) (3.0 nats at 95%): reverse chains that share one exact "
              "draw are not independent, and no tighter limit holds without assuming how "
              "they depend on it. The two estimates may cross by chance once they are "
              "close; the limits rarely do"),
    "sign_p": ("sign p", "p-value of the one-sided sign test of E[U] - E[L] >= 0 (small: "
               "the bound is negative beyond chance)"),
    "tail_p": ("tail p", "p-value of the assumption-free tail-bound test that reverse "
               "estimates do not undercut forward ones (needs a gap of tens of nats)"),
    "seconds": ("seconds", "wall time of both directions"),
    "gradients": ("gradients", "log-density gradient evaluations of both directions"),
    "kl_q_p": ("KL(q||p) <=", "from the given trusted upper bound on log p(y)"),
    "kl_p_q": ("KL(p||q) <=", "from the given trusted lower bound on log p(y)"),
}


def _pm(value: float, se: float) -> str:
    if not np.isfinite(value):
        return "n/a"
    return f"{value:.6g} +- {se:.2g}" if np.isfinite(se) else f"{value:.6g}"


def _limit(value: float, limit: float, level: float, sign: str) -> str:
    if not np.isfinite(value):
        return "n/a"
    if not np.isfinite(limit):
        return f"{value:.6g}"
    return f"{value:.6g} ({level:.0%}: {sign} {limit:.6g})"


def _with_limits(table: pd.DataFrame, side: str, sign: str) -> list[str]:
    values = table[f"log_ml_{side}"]
    if f"log_ml_{side}_limit" not in table.columns:  # a summary saved before the limits
        return [_pm(v, s) for v, s in zip(values, table[f"log_ml_{side}_se"])]
    return [_limit(v, lim, lev, sign) for v, lim, lev in
            zip(values, table[f"log_ml_{side}_limit"], table["log_ml_level"])]


def _interval(low: float, high: float) -> str:
    return "n/a" if not (np.isfinite(low) or np.isfinite(high)) else f"{low:.3g} to {high:.3g}"


def display_table(table: pd.DataFrame, *, log_z: bool = False) -> pd.DataFrame:
    """The summary as a user reads it: one row per step count, columns of the glossary
    (``log_z``: the sandwich is on log Z of the program's density, not on log p(y), as in
    a subjective divergence from a Gaussian base)."""
    out = pd.DataFrame({
        "steps": table["steps"], "verdict": table["verdict"], "bound": table["bound"],
        "interval": [_interval(a, b) for a, b in zip(table["bound_ci_low"], table["bound_ci_high"])],
        "raw_interval": [_interval(a, b) for a, b in zip(table["raw_ci_low"], table["raw_ci_high"])],
        "lower": _with_limits(table, "lower", ">="),
        "upper": _with_limits(table, "upper", "<="),
        "sign_p": table["sign_p"], "tail_p": table["tail_p"],
        "seconds": table["seconds"], "gradients": table["gradients"],
    })
    for col in ("kl_q_p", "kl_p_q"):
        if col in table.columns:
            out[col] = table[col]
    names = {k: v[0] for k, v in _COLUMNS.items()}
    if log_z:
        names.update(lower="log Z >=", upper="log Z <=")
    return out.rename(columns=names)


def result_table(result: BreadResult) -> pd.DataFrame:
    """``display_table`` of ``result``'s summary, its sandwich named for what it bounds."""
    info = result.extra.get("subjective") or {}
    return display_table(result.summary(),
                         log_z=(info.get("base") or {}).get("kind") == "gaussian")


# What changes in the glossary of a subjective-divergence result (real data, reference).
_SUBJECTIVE = {
    "bound": "D_SBJ = mean(U) - mean(L), reverse chains from the reference's draws: if the "
             "reference is exact, an upper bound, in expectation, on the Jeffreys divergence "
             "between the forward AIS output and the posterior (nats)",
    "log p(y) >=": "log-mean-exp of the forward estimates, with (in brackets) a one-sided "
                   "confidence limit valid for any weight distribution: a stochastic lower "
                   "bound on log p(y) of the real data",
    "log p(y) <=": "minus log-mean-exp of minus the reverse estimates, with (in brackets) a "
                   "one-sided confidence limit: an upper bound on log p(y) of the real data "
                   "if the reference is exact (the limit assumes it is), or at least as close "
                   "to the posterior as AIS's output, KL(r||p) <= KL(r||q) (Proposition 3 of "
                   "Cusumano-Towner and Mansinghka 2016, arXiv:1612.02161)",
    "log Z >=": "log-mean-exp of the forward estimates, with (in brackets) a one-sided "
                "confidence limit valid for any weight distribution: a stochastic lower bound "
                "on log Z, the normaliser of the program's density on the real data (log p(y) "
                "only if its prior density integrates to 1)",
    "log Z <=": "minus log-mean-exp of minus the reverse estimates, with (in brackets) a "
                "one-sided confidence limit that assumes the reference is exact: an upper "
                "bound on log Z if it is, or if it is at least as close to the posterior as "
                "AIS's output, KL(r||p) <= KL(r||q) (Proposition 3 of Cusumano-Towner and "
                "Mansinghka 2016, arXiv:1612.02161)",
}


def glossary(columns, *, subjective: bool = False) -> list[str]:
    """One Markdown bullet per displayed column (``subjective``: for a subjective
    divergence, whose reverse chains start from a reference on the real data)."""
    names = {v[0]: v[1] for v in _COLUMNS.values()}
    if subjective:
        names.update(_SUBJECTIVE)
    return [f"- **{c}**: {names[c]}" for c in columns if c in names]


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


def _value_summary(values: Mapping[str, Any], limit: int = 6) -> pd.DataFrame:
    """Shape, a few entries, and range of each variable (the truth and simulated data)."""
    rows = []
    for name, value in values.items():
        a = np.asarray(value, dtype=float) if np.size(value) else np.zeros(0)
        flat = a.ravel()
        shown = ", ".join(f"{v:.4g}" for v in flat[:limit]) + (", ..." if flat.size > limit else "")
        rows.append({"variable": name, "shape": "scalar" if a.ndim == 0 else "x".join(map(str, a.shape)),
                     "values": shown,
                     "min": float(np.min(flat)) if flat.size else np.nan,
                     "mean": float(np.mean(flat)) if flat.size else np.nan,
                     "max": float(np.max(flat)) if flat.size else np.nan})
    return pd.DataFrame(rows, columns=["variable", "shape", "values", "min", "mean", "max"])


def _reference_table(info: Mapping[str, Any]) -> pd.DataFrame:
    """The reference's quality and its check against AIS output, one row per fact."""
    rows = [("source", info.get("reference_source")),
            ("chains x draws", f"{info.get('reference_chains')} x "
                               f"{info.get('reference_draws', 0) // max(info.get('reference_chains', 1), 1)}"),
            ("max R-hat (threshold)", f"{info.get('reference_max_rhat', float('nan')):.4g} "
                                      f"({info.get('rhat_max')})"),
            ("min bulk ESS (threshold)", f"{info.get('reference_min_ess', float('nan')):.0f} "
                                         f"({info.get('ess_min')})"),
            ("thinning stride / draws kept", f"{info.get('thinning_stride')} / "
                                             f"{info.get('thinned_draws')}"),
            ("reverse chains", info.get("reverse_chains")),
            ("base (widening of its sds)", f"{(info.get('base') or {}).get('kind')} "
                                           f"({(info.get('base') or {}).get('widen', '-')})")]
    for T, check in (info.get("reference_checks") or {}).items():
        rows.append((f"AIS vs reference at {T} distributions",
                     f"{'agree' if check['passed'] else 'DIFFER'} (p = {check['p_value']:.2g})"))
    return pd.DataFrame(rows, columns=["reference", "value"])


def _is_subjective(result: BreadResult) -> bool:
    return isinstance(result, SubjectiveResult)


def _title(result: BreadResult) -> str:
    kind = "Subjective divergence" if _is_subjective(result) else "BREAD"
    return f"{kind} report: {result.model}"


def _sections(result: BreadResult) -> list[tuple[str, str]]:
    """(title, Markdown body) of the report's sections after the headline."""
    table = result_table(result)
    verdicts = result.verdicts()
    sections = [("Results", markdown_table(table)),
                ("Verdict at each number of distributions",
                 "\n".join(f"- **{v.n_steps}**: {v.message}" for v in verdicts)),
                ("What the columns mean",
                 "\n".join(glossary(table.columns, subjective=_is_subjective(result))))]
    subjective = result.extra.get("subjective")
    if _is_subjective(result):
        sections.append(("Subjective divergence: what the number means",
                         subjective.get("meaning", "") + "\n\n"
                         + markdown_table(_reference_table(subjective))))
        return sections
    check = result.simulator_check()
    sections.append(("What the checks can and cannot see", " ".join([
        "The sign test and the tail-bound test catch reverse estimates that undercut forward "
        "ones: a simulator or kernel bug that makes the bound negative.",
        "They cannot see a simulator that is wrong in a way the reverse chains repair (a prior "
        "or noise scale off by a factor): the bound then stays positive and looks normal.",
        ("The simulator check " + ("passed." if check.get("passed") else "FAILED: " +
                                   str(check.get("message", "")))) if check else
        "The simulator check did not run for this result.",
        f"The bound is on {_algorithm_name(result)} with this kernel and these numbers of "
        "distributions, on data simulated from the model, not on another sampler or on the "
        "real data."])))
    if verdicts and verdicts[-1].exact_draws > 1:
        best = max(result.steps, key=lambda s: s.n_steps)
        sections.append((f"Simulated problems at {best.n_steps} distributions",
                         "Each row is one simulated data set y*_k with its exact draw x*_k; "
                         "the bound is their mean, its interval from their spread.\n\n"
                         + markdown_table(best.problem_bounds())))
    schedule = _schedule_section(result)
    if schedule:
        sections.append(("Schedule and kernel", schedule))
    truth = result.extra.get("truth") or {}
    data = result.extra.get("simulated_data") or {}
    if truth or data:
        body = ""
        if truth:
            body += ("The exact draw x* (the parameters that generated the data; reverse "
                     "chains start here):\n\n" + markdown_table(_value_summary(truth)) + "\n\n")
        if data:
            body += ("The simulated data y* (the model's data that the simulator replaced):\n\n"
                     + markdown_table(_value_summary(data)))
        sections.append(("Simulated truth and data", body))
    return sections


def _algorithm_name(result: BreadResult) -> str:
    run = result.settings.get("run") or {}
    if run.get("algorithm") != "smc":
        return "AIS"
    return f"SMC with {run.get('particles')} particles"


def _schedule_section(result: BreadResult) -> str:
    """How the betas were placed and which metric the frozen kernel uses."""
    kind = (result.settings.get("run") or {}).get("schedule", {}).get("kind")
    tuning = result.extra.get("tuning") or {}
    if not kind or not result.steps:
        return ""
    lines = []
    run = result.settings.get("run") or {}
    if run.get("algorithm") == "smc":
        resampled = ", ".join(
            f"{int(s.forward.diagnostics.get('resampling_steps', 0))} at T = {s.n_steps}"
            for s in result.steps)
        lines.append(f"- Algorithm: **{_algorithm_name(result)}**: each chain in the tables "
                     "is one run of that many particles (the reverse ones conditional SMC "
                     "from the exact draw); the bound is on the output particle's "
                     f"distribution.  Resampling steps: {resampled}.")
    choice = result.extra.get("path_choice")
    if choice:
        how = "chosen automatically" if choice.get("requested") == "auto" else "as requested"
        lines.append(f"- Path: **{choice.get('path')}** ({how}): {choice.get('reason')}.")
    lines += [f"- Schedule: **{kind}**" + (
        " (betas at equal shares of the path's thermodynamic length, from the pilot's "
        "sd of the log likelihood along beta)" if kind == "adaptive" else "") + "."]
    metric = tuning.get("inv_metric")
    if metric is not None:
        lines.append(f"- Inverse metric: **{'dense' if np.ndim(metric) == 3 else 'diagonal'}**, "
                     f"tuned at {len(tuning['grid_betas'])} pilot betas from "
                     f"{float(tuning['grid_betas'][1]):.3g} to 1.")
        separated = np.asarray(tuning.get("separated") or [], dtype=bool)
        if separated.any():
            lines.append(f"- At {int(separated.sum())} of {separated.size} pilot betas the "
                         "pilot chains sat apart (a coordinate spread more than 100 times as "
                         "much across chains as within them: separate modes, or a funnel "
                         "the chains cross slowly): the metric there is the spread within "
                         "each chain.")
    longest = max(result.steps, key=lambda st: st.n_steps)
    betas = longest.betas  # an array or a lazy Betas
    at = [int(q * (betas.size - 1)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)]
    lines.append(f"- With {longest.n_steps} distributions, the betas at 10%, 25%, 50%, 75% and "
                 "90% of the steps: " + ", ".join(f"{betas[i]:.3g}" for i in at) + ".")
    return "\n".join(lines)


def save_figures(makers: Mapping[str, Any], out_dir: Path) -> tuple[dict, list[str]]:
    """Draw and save each figure (``stem -> function returning a Figure``) as PNG.

    A figure that fails is logged and listed, never fatal: returns the saved paths by
    stem and one message per failure.
    """
    import matplotlib.pyplot as plt

    figures, failures = {}, []
    for stem, make in makers.items():
        try:
            fig = make()
            path = Path(out_dir) / f"{stem}.png"
            fig.savefig(path, dpi=110, bbox_inches="tight")
            plt.close(fig)
            figures[stem] = path
        except Exception as error:  # a figure must never take the report away
            log.warning("figure %s could not be drawn: %s", stem, error)
            failures.append(f"figure {stem} could not be drawn ({type(error).__name__}: {error})")
            plt.close("all")
    return figures, failures


def write_report(result: BreadResult, out_dir: Path, *, truth: float | None = None) -> Path:
    """Save figures, tables and ``report.md``/``report.html``; return the HTML path.

    The tables and the report are written even when a figure fails (the failure is
    noted in the report).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result.save_summary(out_dir)
    from . import plots

    figures, failures = save_figures(
        {"estimates": lambda: plots.plot_estimates(result, truth=truth),
         "bound": lambda: plots.plot_bound(result),
         "gap_by_temperature": lambda: plots.plot_gap_by_temperature(result)}, out_dir)
    sections = _sections(result) + _split_section(out_dir)
    settings = json.dumps(result.settings, indent=1, default=str)
    headline = f"**{result.status.upper()}.** {result.headline()}"
    others = {stem: path for stem, path in figures.items() if stem != "bound"}

    md = [f"# {_title(result)}", "", headline, ""]
    md += [f"> {f}" for f in failures]
    if "bound" in figures:
        md += [f"![bound]({figures['bound'].name})", ""]
    for title, body in sections:
        md += [f"## {title}", "", body, ""]
    md += [f"![{stem}]({path.name})" for stem, path in others.items()]
    md += ["", "## Settings", "", "```json", settings, "```", ""]
    write_atomic(out_dir / "report.md", "\n".join(md))

    html_path = out_dir / "report.html"
    write_atomic(html_path, _html(result, sections, figures, failures, settings))
    return html_path


_CAPTIONS = {
    "bound": "The bound on the Jeffreys divergence with its confidence interval, against the "
             "number of distributions (left) and the wall time (right); the dashed line is "
             "the convergence scale.",
    "estimates": "Forward (lower) and reverse (upper) log estimates per number of "
                 "distributions: medians with quartile bands.",
    "gap_by_temperature": "Where along the schedule the bound comes from: mean reverse minus "
                          "mean forward contribution of each block of temperatures.",
}


def result_html(result: BreadResult) -> str:
    """The report's first screen, for a notebook (``BreadResult._repr_html_``, through
    :func:`bread_stan.late`): the title, the verdict banner, the bound figure (PNG,
    embedded) and the results table, styled by rules that reach no further than the
    cell.  A figure that cannot be drawn is noted, never fatal."""
    import io

    import matplotlib.pyplot as plt

    from . import plots

    parts = [f"<h3>{html.escape(_title(result))}</h3>",
             verdict_banner(result.status, result.headline())]
    parts += [f"<p class=failure>{html.escape(p)}</p>" for p in result.problems()]
    try:
        fig = plots.plot_bound(result)
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=90, bbox_inches="tight")
        plt.close(fig)
        parts.append(png_figure(png.getvalue(), "bound", _CAPTIONS["bound"], main=True))
    except Exception as error:  # a figure must never take the display away
        plt.close("all")
        parts.append(f"<p class=failure>figure bound could not be drawn "
                     f"({html.escape(type(error).__name__)}: {html.escape(str(error))})</p>")
    parts.append(markdown_to_html(markdown_table(result_table(result))))
    return (f"<div class=bread-result><style>{scoped_style('.bread-result')}</style>"
            + "".join(parts) + "</div>")


def _split_section(out_dir: Path) -> list[tuple[str, str]]:
    """The automatic prior/likelihood split's table, when the run made one."""
    for path in (out_dir / "programs" / "split_table.md",
                 out_dir.parent / "programs" / out_dir.name / "split_table.md"):
        if path.is_file():
            return [("Prior/likelihood split", path.read_text())]
    return []


def _html(result: BreadResult, sections, figures: dict, failures: list[str],
          settings: str) -> str:
    """The report page: a first section with the verdict in words and the bound figure
    (one screen at 1280 x 800), then the results table, the other figures and the
    remaining sections, and the settings."""
    first = (f"<section id=verdict><h1>{html.escape(_title(result))}</h1>"
             + verdict_banner(result.status, result.headline())
             + "".join(f"<p class=failure>{html.escape(f)}</p>" for f in failures)
             + (embedded_figure(figures["bound"], "bound", _CAPTIONS["bound"], main=True,
                                element_id="bound-figure") if "bound" in figures else "")
             + "</section>")
    parts = [first]
    others = [(stem, path) for stem, path in figures.items() if stem != "bound"]
    for i, (title, text) in enumerate(sections):
        parts.append(f"<section><h2>{html.escape(title)}</h2>{markdown_to_html(text)}</section>")
        if i == 0 and others:  # the figures right after the results table
            parts.append("<section><h2>Figures</h2><div class=figures>" + "".join(
                embedded_figure(path, stem, _CAPTIONS.get(stem, "")) for stem, path in others)
                + "</div></section>")
    parts.append(f"<section><h2>Settings</h2><pre>{html.escape(settings)}</pre></section>")
    return html_document(f"BREAD: {result.model}", "".join(parts))


def write_comparison(results: dict[str, BreadResult], out_dir: Path) -> Path:
    """Figure and table comparing the bound of several programs; returns the table path."""
    import matplotlib.pyplot as plt

    from .plots import plot_comparison

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = [r.summary().assign(program=label) for label, r in results.items()]
    table = pd.concat(frames, ignore_index=True)
    cols = ["program", "steps", "verdict", "bound", "bound_ci_low", "bound_ci_high", "seconds",
            "gradients", "consistent"]
    table = table[cols]
    write_atomic(out_dir / "comparison.csv", table.to_csv(index=False))
    md = ["# Representation comparison", "", markdown_table(table), ""]
    try:
        fig = plot_comparison(results)
        fig.savefig(out_dir / "comparison.png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        md += ["![comparison](comparison.png)", ""]
    except Exception as error:  # a figure must never take the comparison away
        log.warning("comparison figure could not be drawn: %s", error)
        md += [f"> the comparison figure could not be drawn ({error})", ""]
    path = out_dir / "comparison.md"
    write_atomic(path, "\n".join(md))
    return path

"""Figures of a BREAD run (matplotlib, no display needed).

- :func:`plot_estimates`: forward and reverse log estimates against the number
  of steps, median with quartile bands (the study's kind of plot).
- :func:`plot_bound`: the Jeffreys bound against steps and against seconds.
- :func:`plot_gap_by_temperature`: where along the path the gap arises.

Each returns the matplotlib Figure; nothing is shown or saved here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ais.budget import DecayFit

# A result is a bread_stan.ais.results.BreadResult; it is not imported here, since
# BreadResult.plot calls plot_all (through bread_stan.late: no circle, even for type
# checkers).
BreadResult = Any

__all__ = ["plot_estimates", "plot_bound", "plot_gap_by_temperature", "plot_all",
           "plot_comparison"]

_FORWARD, _REVERSE = "#1f77b4", "#d62728"


def _figure(ncols: int = 1, width: float = 5.0):
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 3.8), squeeze=False)
    return fig, axes[0]


def _quartiles(values: list[np.ndarray]) -> np.ndarray:
    return np.array([np.percentile(v, [25, 50, 75]) for v in values])


def _plain_symlog(ax, linthresh: float) -> None:
    """A symlog y axis whose ticks read as plain numbers (-1000, -10, 0, 10), not 10^k."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("symlog", linthresh=linthresh)
    ax.yaxis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v:,.0f}" if abs(v) >= 1 or v == 0 else f"{v:g}"))


def _plain_log_x(ax, values: np.ndarray) -> None:
    """A log x axis labelled with plain numbers (10, 100; 0.2, 0.5, 1), at 1, 2 and 5
    times powers of ten when the data span less than about 1.5 decades, else at powers
    of ten only: no overlapping minor labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    v = values[np.isfinite(values) & (values > 0)]
    narrow = v.size == 0 or np.log10(v.max() / v.min()) <= 1.5
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if narrow else (1.0,)))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:.2g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_estimates(result: BreadResult, *, truth: float | None = None, ax=None):
    """Forward (lower) and reverse (upper) log estimates vs steps, with quartile bands.

    Estimates span thousands of nats (few steps) down to fractions of a nat (many),
    so they are drawn relative to a reference (the median reverse estimate at the
    largest number of steps, stated on the axis) on an axis that is linear within
    1 nat of it and logarithmic beyond, with plain-number ticks.
    """
    steps = sorted(result.steps, key=lambda s: s.n_steps)
    fig = None
    if ax is None:
        fig, (ax,) = _figure()
    x = np.array([s.n_steps for s in steps])
    ref = float(np.median(steps[-1].reverse.log_estimates))
    for label, color, get in (("forward (lower bounds)", _FORWARD, lambda s: s.forward),
                              ("reverse (upper bounds)", _REVERSE, lambda s: s.reverse)):
        q = _quartiles([get(s).log_estimates for s in steps]) - ref
        ax.plot(x, q[:, 1], "o-", color=color, label=label)
        ax.fill_between(x, q[:, 0], q[:, 2], color=color, alpha=0.25, linewidth=0)
    if truth is not None:
        ax.axhline(truth - ref, color="k", linestyle="--", linewidth=1, label="exact log p(y)")
    ax.set_xscale("log")
    _plain_symlog(ax, 1.0)
    ax.set_xlabel("number of AIS distributions")
    ax.set_ylabel("log p(y) estimate minus reference (nats)")
    ax.set_title(f"{result.model}: median and quartiles over chains\n"
                 f"reference = {ref:.6g}, the median upper estimate at {steps[-1].n_steps} "
                 "distributions", fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    return fig if fig is not None else ax.figure


def plot_bound(result: BreadResult):
    """The Jeffreys bound against steps and against wall time, with its interval.

    The bound is a divergence, so the axis starts at 0: an interval reaching below 0
    ends at 0 (the raw interval is in the summary table), and a step whose bound
    failed a consistency test is marked, not drawn.
    """
    fig, (ax_steps, ax_time) = _figure(ncols=2)
    table = result.summary()
    ok = table["consistent"].to_numpy(bool)
    y = table["bound"].to_numpy(float)
    lo = np.minimum(table["bound_ci_low"].to_numpy(float), y)
    hi = np.maximum(table["bound_ci_high"].to_numpy(float), y)
    shown = ok & np.isfinite(y)
    for ax, xcol, xlabel in ((ax_steps, "steps", "number of AIS distributions"),
                             (ax_time, "seconds", "wall time (s), forward + reverse")):
        x = table[xcol].to_numpy(float)
        yv = np.maximum(y, 0.0)
        ax.errorbar(x[shown], yv[shown],
                    yerr=[np.maximum(yv - np.maximum(lo, 0.0), 0.0)[shown],
                          np.maximum(hi - yv, 0.0)[shown]],
                    fmt="o-", color="k", capsize=3, label="bound on Jeffreys divergence")
        if (~ok).any():
            for xv in x[~ok]:
                ax.axvline(xv, color="#b00", alpha=0.4)
            ax.plot([], [], color="#b00", alpha=0.4, label="check failed: no bound")
        if ax is ax_steps:
            x = np.append(x, _decay_fit_line(ax, result.extra.get("auto_steps")))
        scale = result.verdict_settings().converged_nats
        ax.axhline(scale, color="#060", linestyle="--", linewidth=1,
                   label=f"converged below {scale:g} nat")
        ax.set_xscale("log")
        _plain_log_x(ax, x)
        _plain_symlog(ax, 0.1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("E[U] - E[L] (nats)")
        ax.legend(frameon=False, fontsize=8)
    fig.suptitle(f"{result.model}: bound on the Jeffreys divergence (axis linear below 0.1 nat)")
    fig.tight_layout()
    return fig


def _decay_fit_line(ax, record: dict | None) -> list[float]:
    """The fit of a ``--steps auto`` run's upper limits (linear in log T), from its
    smallest T to the T it predicts for the converged level; the Ts it spans."""
    if not record or not record.get("fit"):
        return []
    fit = DecayFit(**record["fit"])
    right = max(record["chosen"] + [record.get("predicted_steps") or 0])
    T = np.geomspace(min(record["chosen"]), right, 50)
    how = "one step count" if fit.slope_fixed else f"{fit.points} step counts"
    ax.plot(T, [fit.bound_at(t) for t in T], color="#36c", linestyle=":",
            label=f"fit of the upper limits ({how})")
    if record.get("predicted_steps"):
        ax.plot([record["predicted_steps"]], [record["level"]], marker="x", color="#36c",
                linestyle="none", label=f"predicted T = {record['predicted_steps']:,.0f}")
    return [float(T[0]), float(T[-1])]


def plot_gap_by_temperature(result: BreadResult, n_steps: int | None = None):
    """Mean reverse minus mean forward contribution of each block of temperatures."""
    s = result.step(n_steps) if n_steps is not None else max(result.steps, key=lambda s: s.n_steps)
    table = s.gap_by_temperature()
    fig, (ax,) = _figure()
    if table is None:
        ax.text(0.5, 0.5, "per-temperature increments were not recorded",
                ha="center", va="center", transform=ax.transAxes)
        return fig
    beta = table["beta"].to_numpy()
    x = beta if np.all(np.isfinite(beta)) else table["temperature_index"].to_numpy()
    ax.step(x, table["gap"], where="post", color="k")
    ax.set_xlabel("beta (end of block)" if x is beta else "temperature index")
    ax.set_ylabel("gap contribution (nats)")
    ax.set_title(f"{result.model}: where the gap arises ({s.n_steps} distributions)")
    return fig


def plot_all(result: BreadResult, *, truth: float | None = None) -> dict:
    """All figures of a run, by file stem."""
    return {"estimates": plot_estimates(result, truth=truth), "bound": plot_bound(result),
            "gap_by_temperature": plot_gap_by_temperature(result)}


def plot_comparison(results: dict[str, BreadResult]):
    """The Jeffreys bound of several programs against steps and against seconds."""
    fig, (ax_steps, ax_time) = _figure(ncols=2)
    for label, result in results.items():
        table = result.summary()
        for ax, xcol in ((ax_steps, "steps"), (ax_time, "seconds")):
            ax.plot(table[xcol], np.maximum(table["bound"], 0.0), "o-", label=label)
    for ax, xcol, xlabel in ((ax_steps, "steps", "number of AIS distributions"),
                             (ax_time, "seconds", "wall time (s), forward + reverse")):
        ax.set_xscale("log")
        _plain_log_x(ax, np.concatenate([r.summary()[xcol].to_numpy(float)
                                         for r in results.values()]))
        _plain_symlog(ax, 0.1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Jeffreys bound (nats)")
        ax.legend(frameon=False)
    fig.suptitle("representation comparison: bound on the Jeffreys divergence")
    fig.tight_layout()
    return fig

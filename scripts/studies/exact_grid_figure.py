"""Exact Jeffreys divergence and expected BREAD bound on the 7 x 7 grid (SPEC section 6).

Left: for each target (easy random, hard random, barrier), the target, two
intermediate distributions of the annealing path and the exact distribution of
forward-AIS output with 100 distributions, all as log10 probabilities.  Right:
exact J and E[B] against the number of distributions, log-log.

    python scripts/studies/exact_grid_figure.py [--out PATH] [--max-t 100000] [--points 13]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import logsumexp  # noqa: E402

from bread_stan.exact.oracle import grid_bounds  # noqa: E402
from bread_stan.exact.grid import grid_log_f  # noqa: E402

FIGURES = Path(__file__).resolve().parents[1] / "figures"

TARGETS = {"easy": "easy random (sd 2)", "hard": "hard random (sd 10)", "barrier": "barrier"}
COLOURS = {"easy": "tab:blue", "hard": "tab:red", "barrier": "tab:green"}
PANEL_T = 100
PANEL_BETAS = (0.1, 0.3)
LOG10_FLOOR = -6.0


def _log10_path(log_f: np.ndarray, beta: float) -> np.ndarray:
    lp = beta * log_f
    return (lp - logsumexp(lp)) / np.log(10)


def _curves(ts: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    out = {}
    for name in TARGETS:
        rows = []
        for T in ts:
            t0 = time.perf_counter()
            r = grid_bounds(name, int(T), seed=seed)
            rows.append((r.jeffreys, r.bound))
            print(f"{name:8s} T={T:7d}  J={r.jeffreys:10.4g}  E[B]={r.bound:10.4g}  "
                  f"E[B]/J={r.bound / r.jeffreys:8.3g}  ({time.perf_counter() - t0:.2f} s)")
        out[name] = np.array(rows)
    return out


def make_figure(ts: np.ndarray, seed: int = 0):
    curves = _curves(ts, seed)
    fig = plt.figure(figsize=(17, 9.5), layout="constrained")
    grid = fig.add_gridspec(3, 6, width_ratios=[1, 1, 1, 1, 0.08, 3.2])
    image = None
    for row, (name, label) in enumerate(TARGETS.items()):
        log_f = grid_log_f(name, seed=seed)
        final = grid_bounds(name, PANEL_T, seed=seed).final_marginal
        panels = [(_log10_path(log_f, 1.0), "target p"),
                  *[(_log10_path(log_f, b), f"path at b = {b}") for b in PANEL_BETAS],
                  (np.log10(np.maximum(final, 1e-300)), f"forward AIS output, T = {PANEL_T}")]
        for col, (values, title) in enumerate(panels):
            ax = fig.add_subplot(grid[row, col])
            image = ax.imshow(np.maximum(values, LOG10_FLOOR), vmin=LOG10_FLOOR, vmax=0,
                              cmap="viridis")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(title, fontsize=10)
            if col == 0:
                ax.set_ylabel(label, fontsize=11)
    fig.colorbar(image, cax=fig.add_subplot(grid[:, 4]), label="log10 probability (floored at -6)")

    ax = fig.add_subplot(grid[:, 5])
    for name, label in TARGETS.items():
        j, b = curves[name].T
        ax.loglog(ts, b, "--o", color=COLOURS[name], ms=3, label=f"{label}: E[B]")
        ax.loglog(ts, j, "-o", color=COLOURS[name], ms=3, label=f"{label}: J")
    ax.axvline(PANEL_T, color="grey", ls=":", lw=1)
    ax.text(PANEL_T * 1.08, ax.get_ylim()[0] * 1.5, f"T = {PANEL_T} (left panels)",
            color="grey", fontsize=8)
    ax.set_xlabel("number of distributions T")
    ax.set_ylabel("nats")
    ax.set_title("exact Jeffreys divergence J (solid) and expected bound E[B] (dashed)")
    ax.grid(True, which="major", alpha=0.4)
    ax.legend(fontsize=9)
    return fig


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=FIGURES / "exact_grid_figure" / "exact_grid.png")
    parser.add_argument("--max-t", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=13, help="values of T, log-spaced")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random targets")
    args = parser.parse_args(argv)
    ts = np.unique(np.round(np.logspace(1, np.log10(args.max_t), args.points)).astype(int))
    fig = make_figure(ts, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()

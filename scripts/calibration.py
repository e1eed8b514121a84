"""Coverage of every interval the toolkit prints, on targets with exact answers (issue 29).

Runs :mod:`bread_stan.exact.calibration` over ``--seeds`` replications (default 200) at
20 and 50 chains and T = 10, 30, 100, and writes to ``scripts/figures/calibration/``:

- ``calibration.csv``: every row (miss share on each side, nominal, mean reach of each
  end from the estimate);
- ``calibration.md``: the table, with a verdict per row: ``ok`` when each side's miss
  share is at most the 97.5% quantile of Binomial(seeds, nominal) / seeds;
- ``calibration.png``: miss shares against T, one panel per interval.

The delta-method rows are the "estimate -/+ z se" the sandwich used to print, kept for
comparison; they are not printed any more.  Run it niced (about 8 minutes on one busy core):

    nice python scripts/calibration.py

``--only aide`` (or ``sandwich``, ``bound``, ``subjective``) reruns only those interval
families and merges their rows into the table already in ``--out`` (same ``--seeds``
and ``--first-seed``); ``--stem`` names the files (``calibration_seeds1000`` holds the
rerun on seeds 1000-1199, ``aide_seeds1000`` AIDE's rows on seeds 0-999):

    nice python scripts/calibration.py --only aide
    nice python scripts/calibration.py --only aide --first-seed 1000 --stem calibration_seeds1000
    nice python scripts/calibration.py --only aide --seeds 1000 --stem aide_seeds1000
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from bread_stan.exact.calibration import (AIDE_PAIRS, aide_misses,  # noqa: E402
                                          binomial_limit,
                                          grid_bound_misses, sandwich_misses,
                                          tractable_subjective_misses)

OUT = Path(__file__).parent / "figures" / "calibration"


#: The interval families, in the table's order: each measures its own rows.
FAMILIES = {
    "sandwich": lambda seeds, kw: [sandwich_misses(seeds, **kw)],
    "bound": lambda seeds, kw: [grid_bound_misses(seeds, **kw)],
    "aide": lambda seeds, kw: [aide_misses(seeds, runs=(20, 50, 100), pair=pair,
                                           compare=True, **kw) for pair in AIDE_PAIRS],
    "subjective": lambda seeds, kw: [tractable_subjective_misses(seeds, draws=(20, 50, 100),
                                                                 **kw)],
}


def family(interval: str) -> str:
    """The family of a row's interval name."""
    if interval.startswith(("sandwich", "delta-method")):
        return "sandwich"
    for name in ("bound", "AIDE", "subjective"):
        if interval.startswith(name):
            return name.lower()
    raise ValueError(f"no family for the interval {interval!r}")


def measure(seeds: int, first_seed: int = 0, only=None) -> pd.DataFrame:
    """The rows of the families ``only`` (default all), with the binomial limit and a
    verdict per row."""
    kw = {"first_seed": first_seed}
    parts = [part for name, rows in FAMILIES.items() if only is None or name in only
             for part in rows(seeds, kw)]
    table = pd.concat(parts, ignore_index=True)
    table["limit"] = [binomial_limit(p, seeds) for p in table["nominal_miss"]]
    ok = (table["miss_low"] <= table["limit"]) & (table["miss_high"] <= table["limit"])
    table["verdict"] = ["ok" if v else "MISSES TOO OFTEN" for v in ok]
    return table


def merge(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``old`` with the rows of the families in ``new`` replaced by ``new``'s, in the
    families' order; both must be on the same number of seeds."""
    if set(old["seeds"]) != set(new["seeds"]):
        raise SystemExit(f"the table in --out is on {sorted(set(old['seeds']))} seeds, the new rows "
                         f"on {sorted(set(new['seeds']))}: rerun with the same --seeds")
    fams = set(new["interval"].map(family))
    kept = old[~old["interval"].map(family).isin(fams)]
    table = pd.concat([kept, new], ignore_index=True)
    order = {name: i for i, name in enumerate(FAMILIES)}
    key = table["interval"].map(family).map(order)
    return table.iloc[key.argsort(kind="stable")].reset_index(drop=True)


def markdown(table: pd.DataFrame) -> str:
    """The table a user reads: interval, chains, T, nominal and measured misses per side."""
    lines = ["| interval | chains (runs) | T | level | nominal miss per side | miss low | "
             "miss high | mean reach below / above the estimate | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        reach = " / ".join("-" if v == float("inf") else f"{v:.2f}"
                           for v in (r.reach_low, r.reach_high))
        lines.append(f"| {r.interval} | {r.chains} | {r.T or '-'} | {r.level:g} | "
                     f"{r.nominal_miss:.3f} | {r.miss_low:.3f} | {r.miss_high:.3f} | {reach} | "
                     f"{r.verdict} |")
    seeds = int(table["seeds"].iloc[0])
    lines.append("")
    lines.append("The delta-method rows are the 'estimate -/+ 1.645 se' the sandwich printed "
                 "before, and the '(normal, old)' AIDE rows 'estimate +- z se' from the same "
                 "runs, for comparison; the toolkit prints neither.")
    lines.append(f"{seeds} seeds per row; a side is within binomial error when its miss share "
                 f"is at most the 97.5% quantile of Binomial({seeds}, nominal) / {seeds} "
                 f"({binomial_limit(0.05, seeds):.3f} for a nominal 0.05).  'miss low': the "
                 "truth lies below the interval (for a lower limit: the limit is above "
                 "log p(y)); 'miss high': above it.")
    return "\n".join(lines) + "\n"


def figure(table: pd.DataFrame, path: Path) -> None:
    """Miss share per side against T, one panel per interval, the binomial limit dashed."""
    names = list(dict.fromkeys(table["interval"]))
    cols = 4
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.0 * rows), sharey=True,
                             squeeze=False)
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.ravel(), names):
        sub = table[table["interval"] == name]
        if (sub["T"] > 0).any():
            for n, g in sub.groupby("chains"):
                ax.plot(g["T"], g["miss_low"], "v-", label=f"{n} chains: low")
                ax.plot(g["T"], g["miss_high"], "^--", label=f"{n} chains: high")
            ax.set_xlabel("T")
        else:  # AIDE, subjective: no T; runs (draws) per side on the x axis
            ax.plot(sub["chains"], sub["miss_low"], "v-", label="low")
            ax.plot(sub["chains"], sub["miss_high"], "^--", label="high")
            ax.set_xlabel("runs per side")
        ax.axhline(sub["nominal_miss"].iloc[0], color="k", lw=0.8)
        ax.axhline(sub["limit"].iloc[0], color="r", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_title(name, fontsize=8)
        ax.legend(fontsize=6)
    for ax in axes[:, 0]:
        ax.set_ylabel("miss share")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="first replication's seed (a fresh set of seeds re-checks a row "
                             "flagged by chance: at 200 seeds about 2.5% of correct sides are flagged)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="+", choices=list(FAMILIES),
                        help="rerun only these interval families and merge their rows into "
                             "the table already in --out (same --seeds and --first-seed)")
    parser.add_argument("--stem", default="calibration",
                        help="file names in --out: STEM.csv, STEM.md, STEM.png")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / f"{args.stem}.csv"
    t0 = time.perf_counter()
    table = measure(args.seeds, args.first_seed, args.only)
    if args.only and csv.exists():
        table = merge(pd.read_csv(csv), table)
    table.to_csv(csv, index=False)
    (args.out / f"{args.stem}.md").write_text(markdown(table))
    figure(table, args.out / f"{args.stem}.png")
    print(markdown(table))
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Coverage of every interval the toolkit prints, on targets with exact answers (issue 29).

Runs :mod:`bread_stan.exact.calibration` over ``--seeds`` replications (default 200) at
20 and 50 chains and T = 10, 30, 100, and writes to ``scripts/figures/calibration/``:

- ``calibration.csv``: every row (miss share on each side, nominal, mean reach of each
  end from the estimate);
- ``calibration.md``: the table, with a verdict per row: ``ok`` when each side's miss
  share is at most the 97.5% quantile of Binomial(seeds, nominal) / seeds; a row over
  it is flagged and, by the confirmatory rule, judged on its rerun on at least
  :data:`CONFIRM_SEEDS` fresh seeds (``--confirm``); the footer gives the chance of a
  flag and of a confirmed failure if every interval were exact;
- ``calibration.png``: miss shares against T, one panel per interval.

The delta-method rows are the "estimate -/+ z se" the sandwich used to print, kept for
comparison; they are not printed any more.  Run it niced (about 8 minutes on one busy core):

    nice python scripts/studies/calibration.py

``--only aide`` (or ``sandwich``, ``bound``, ``subjective``) reruns only those interval
families and merges their rows into the table already in ``--out`` (same ``--seeds``
and ``--first-seed``); ``--stem`` names the files (``calibration_seeds1000`` holds the
rerun on seeds 1000-1199, ``aide_seeds1000`` AIDE's rows on seeds 0-999):

    nice python scripts/studies/calibration.py --only aide
    nice python scripts/studies/calibration.py --only aide --first-seed 1000 --stem calibration_seeds1000
    nice python scripts/studies/calibration.py --only aide --seeds 1000 --stem aide_seeds1000

The confirmatory reruns of the rows flagged on seeds 0-199 (one row each: ``--runs`` and
``--pair`` narrow AIDE to it), then the official table judged on them (``--render``
rewrites the table from its CSV without measuring):

    nice python scripts/studies/calibration.py --only bound --seeds 2000 --first-seed 2000 --stem bound_seeds2000
    nice python scripts/studies/calibration.py --only aide --runs 100 --pair "two Gaussians" --seeds 2000 --first-seed 2000 --stem aide_2d100_seeds2000
    nice python scripts/studies/calibration.py --confirm bound_seeds2000 aide_2d100_seeds2000
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from bread_stan.exact.calibration import (AIDE_PAIRS, aide_misses,  # noqa: E402
                                          binomial_limit,
                                          grid_bound_misses, sandwich_misses,
                                          tractable_subjective_misses)

OUT = Path(__file__).resolve().parents[1] / "figures" / "calibration"

#: The confirmatory rule's rerun: a row flagged on the official seeds is judged on at
#: least this many fresh seeds (:func:`confirm`).
CONFIRM_SEEDS = 2000


#: The interval families, in the table's order: each measures its own rows.
FAMILIES = {
    "sandwich": lambda seeds, kw, sel: [sandwich_misses(seeds, **kw)],
    "bound": lambda seeds, kw, sel: [grid_bound_misses(seeds, **kw)],
    "aide": lambda seeds, kw, sel: [aide_misses(seeds, runs=sel.get("runs", (20, 50, 100)),
                                                pair=pair, compare=True, **kw)
                                    for pair in sel.get("pairs", AIDE_PAIRS)],
    "subjective": lambda seeds, kw, sel: [tractable_subjective_misses(
        seeds, draws=sel.get("runs", (20, 50, 100)), **kw)],
}


def family(interval: str) -> str:
    """The family of a row's interval name."""
    if interval.startswith(("sandwich", "delta-method")):
        return "sandwich"
    for name in ("bound", "AIDE", "subjective"):
        if interval.startswith(name):
            return name.lower()
    raise ValueError(f"no family for the interval {interval!r}")


def measure(seeds: int, first_seed: int = 0, only=None, runs=None, pairs=None) -> pd.DataFrame:
    """The rows of the families ``only`` (default all), with the binomial limit and a
    verdict per row; ``runs`` (AIDE's runs per side, the subjective draws) and ``pairs``
    (AIDE's pairs) narrow those families to a few rows (default all)."""
    kw = {"first_seed": first_seed}
    sel = {key: value for key, value in (("runs", runs), ("pairs", pairs)) if value}
    parts = [part for name, rows in FAMILIES.items() if only is None or name in only
             for part in rows(seeds, kw, sel)]
    table = pd.concat(parts, ignore_index=True)
    table["first_seed"] = first_seed
    return verdicts(table)


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the binomial limit of its seeds and the per-row verdict: ``ok`` when
    each side's miss share is at most that limit, else ``MISSES TOO OFTEN`` (flagged)."""
    table = table.copy()
    table["limit"] = [binomial_limit(p, n) for p, n in zip(table["nominal_miss"], table["seeds"])]
    ok = (table["miss_low"] <= table["limit"]) & (table["miss_high"] <= table["limit"])
    table["verdict"] = ["ok" if v else "MISSES TOO OFTEN" for v in ok]
    return table


def _seed_range(t: pd.DataFrame) -> tuple[int, int]:
    first = int(t["first_seed"].iloc[0]) if "first_seed" in t else 0
    return first, first + int(t["seeds"].iloc[0]) - 1


def confirm(table: pd.DataFrame, reruns: list[pd.DataFrame]) -> pd.DataFrame:
    """The confirmatory rule: a row flagged in ``table`` is judged again on its rerun in
    ``reruns`` (the first that has its interval, chains and T), which must be on at least
    :data:`CONFIRM_SEEDS` seeds disjoint from ``table``'s; the verdict then names the
    rerun's seeds and miss shares, and says ``ok`` or ``MISSES TOO OFTEN`` by the rerun's
    own binomial limit.  A flagged row without a rerun keeps ``MISSES TOO OFTEN``."""
    lo, hi = _seed_range(table)
    keyed = {}
    for rerun in reruns:
        a, b = _seed_range(rerun)
        if int(rerun["seeds"].iloc[0]) < CONFIRM_SEEDS or not (b < lo or a > hi):
            raise SystemExit(f"a confirmatory rerun must be on at least {CONFIRM_SEEDS} seeds "
                             f"outside {lo}-{hi}; this one is on seeds {a}-{b}")
        for r in verdicts(rerun).itertuples():
            keyed.setdefault((r.interval, r.chains, r.T), (r, a, b))
    table = table.copy()
    for i, r in table.iterrows():
        key = (r["interval"], r["chains"], r["T"])
        if r["verdict"] == "ok" or key not in keyed:
            continue
        c, a, b = keyed[key]
        table.loc[i, "verdict"] = (f"flagged; seeds {a}-{b}: {c.miss_low:.3f} / "
                                   f"{c.miss_high:.3f}, {c.verdict}")
    return table


def merge(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``old`` with the rows of the families in ``new`` replaced by ``new``'s, in the
    families' order; both must be on the same number of seeds."""
    if set(old["seeds"]) != set(new["seeds"]):
        raise SystemExit(f"the table in --out is on {sorted(set(old['seeds']))} seeds, the new rows "
                         f"on {sorted(set(new['seeds']))}: rerun with the same --seeds")
    first = int(new["first_seed"].iloc[0])
    if "first_seed" not in old:  # tables written before the column: as the docstring says
        old = old.assign(first_seed=first)
    if set(old["first_seed"]) != {first}:
        raise SystemExit(f"the table in --out starts at seed {sorted(set(old['first_seed']))}, "
                         f"the new rows at {first}: rerun with the same --first-seed")
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
    first, last = _seed_range(table)
    lines.append("")
    lines.append("The delta-method rows are the 'estimate -/+ 1.645 se' the sandwich printed "
                 "before, and the '(normal, old)' AIDE rows 'estimate +- z se' from the same "
                 "runs, for comparison; the toolkit prints neither.")
    lines.append(f"{seeds} seeds per row (seeds {first}-{last}); a side is within binomial "
                 f"error when its miss share is at most the 97.5% quantile of Binomial({seeds}, "
                 f"nominal) / {seeds} ({binomial_limit(0.05, seeds):.3f} for a nominal 0.05).  "
                 "'miss low': the truth lies below the interval (for a lower limit: the limit "
                 "is above log p(y)); 'miss high': above it.")
    lines.append("")
    lines.append(multiplicity(table))
    return "\n".join(lines) + "\n"


def false_alarms(table: pd.DataFrame) -> dict:
    """Chance failures of the table's verdicts if every interval missed at exactly its
    nominal rate: ``sides`` checked (one per one-sided limit), ``flagged`` the expected
    number of sides flagged on the table's seeds, ``any_flagged`` the chance of at least
    one (sides taken as independent), and ``family_wise`` the union bound on the chance
    that any side fails the confirmatory rule (flagged, then over its limit again on
    :data:`CONFIRM_SEEDS` disjoint seeds, independent of the first stage)."""
    one_sided = (table["one_sided"].notna() if "one_sided" in table
                 else pd.Series(False, index=table.index))
    first = np.array([stats.binom.sf(round(lim * n), n, p) for lim, n, p in
                      zip(table["limit"], table["seeds"], table["nominal_miss"])])
    second = np.array([stats.binom.sf(round(binomial_limit(p, CONFIRM_SEEDS) * CONFIRM_SEEDS),
                                      CONFIRM_SEEDS, p) for p in table["nominal_miss"]])
    per_row = np.where(one_sided, 1, 2)
    return {"sides": int(per_row.sum()), "flagged": float(np.sum(per_row * first)),
            "any_flagged": float(1 - np.prod((1 - first) ** per_row)),
            "family_wise": float(np.sum(per_row * first * second)),
            "first": float(first.max()), "second": float(second.max())}


def multiplicity(table: pd.DataFrame) -> str:
    """The footer's paragraph on multiplicity and the confirmatory rule."""
    f = false_alarms(table)
    seeds = int(table["seeds"].iloc[0])
    return (f"Multiplicity: the table checks {f['sides']} sides (two per two-sided interval, "
            "one per one-sided limit).  "
            f"Were every interval exact, a side would be flagged on these seeds with "
            f"probability {f['first']:.3f} (the chance that Binomial({seeds}, 0.05) exceeds "
            f"its 97.5% quantile), {f['flagged']:.1f} sides on average and at least one with "
            f"probability {f['any_flagged']:.2f}.  So a flag is not a verdict.  Confirmatory "
            f"rule: a flagged row is rerun on at least {CONFIRM_SEEDS} fresh seeds, disjoint "
            f"from these (`--first-seed`, `--stem`, then `--confirm STEM` here), and judged "
            f"there by the same rule (at most {binomial_limit(0.05, CONFIRM_SEEDS):.3f} per "
            f"side at a nominal 0.05); its verdict then reads 'flagged; seeds a-b: miss low / "
            f"miss high, verdict'.  A side of an exact interval fails both stages with "
            f"probability {f['first']:.3f} x {f['second']:.3f} (disjoint seeds: independent "
            f"stages), so the chance that any of the {f['sides']} sides fails by chance is "
            f"at most {f['family_wise']:.3f} (union bound).")


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
                        help="first replication's seed (a confirmatory rerun of a flagged row "
                             "takes seeds disjoint from the table's: at 200 seeds about 2.4%% of "
                             "the sides of exact intervals are flagged)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="+", choices=list(FAMILIES),
                        help="rerun only these interval families and merge their rows into "
                             "the table already in --out (same --seeds and --first-seed)")
    parser.add_argument("--runs", type=int, nargs="+",
                        help="AIDE's runs per side and the subjective draws (default 20 50 100); "
                             "for a confirmatory rerun of one row, with --stem")
    parser.add_argument("--pair", nargs="+", choices=list(AIDE_PAIRS),
                        help="AIDE's pairs (default both)")
    parser.add_argument("--confirm", nargs="+", default=[], metavar="STEM",
                        help="tables in --out (STEM.csv) of flagged rows rerun on at least "
                             f"{CONFIRM_SEEDS} fresh seeds: flagged rows are judged on them")
    parser.add_argument("--render", action="store_true",
                        help="measure nothing: rewrite STEM.md and STEM.png from STEM.csv "
                             "(with --confirm: judge its flagged rows on the reruns)")
    parser.add_argument("--stem", default="calibration",
                        help="file names in --out: STEM.csv, STEM.md, STEM.png")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / f"{args.stem}.csv"
    t0 = time.perf_counter()
    if args.render:
        if not csv.exists():
            raise SystemExit(f"--render: no table {csv}; measure it first (drop --render)")
        table = pd.read_csv(csv)
        if "first_seed" not in table:  # written before the column: --first-seed says
            table["first_seed"] = args.first_seed
    else:
        if (args.runs or args.pair) and csv.exists():
            raise SystemExit(f"{csv} exists: --runs and --pair measure a few rows, written "
                             "to a new --stem only")
        table = measure(args.seeds, args.first_seed, args.only, args.runs, args.pair)
        if args.only and csv.exists():
            table = merge(pd.read_csv(csv), table)
    table = confirm(verdicts(table), [pd.read_csv(args.out / f"{stem}.csv")
                                      for stem in args.confirm])
    table.to_csv(csv, index=False)
    (args.out / f"{args.stem}.md").write_text(markdown(table))
    figure(table, args.out / f"{args.stem}.png")
    print(markdown(table))
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

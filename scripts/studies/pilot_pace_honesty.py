"""How honest is a pilot's first projection of its own time?  Read from a sweep's run logs.

A pilot's tuning along beta logs its progress ("tuning nuts: 2 of 16 betas after 35 s
(...); about 2.37 minutes more at the recent pace"); the budget decides from that pace
whether the pilot fits and which leaner pilot to take.  For each pilot that ran to its
last beta, this compares the first projection (seconds so far plus "more") with the
seconds the pilot took in the end.  A ratio above 1 means the pilot took longer than it
first said.

    python scripts/studies/pilot_pace_honesty.py --runs /tmp/sweep8/runs \\
        --out scripts/figures/pilot_pace_honesty/results.md
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

_UNIT = {"s": 1.0, "minutes": 60.0, "hours": 3600.0}
OVERRUN = 1.5   # took / projected above this: the pilot overran its first projection
PROGRESS = re.compile(
    r"tuning (\w+): (\d+) of (\d+) betas after ([\d.e+]+) (s|minutes|hours) \(.*?"
    r"step size ([\d.e+-]+)\)(?:; about ([\d.e+]+) (s|minutes|hours) more)?")


def pilots(lines) -> list[dict]:
    """The pilots of one log that reached their last beta: the first projection, the
    seconds taken, the step sizes at the first report and at the last beta."""
    found, current = [], []
    for line in lines:
        m = PROGRESS.search(line)
        if not m:
            continue
        done, size = int(m.group(2)), int(m.group(3))
        if current and done <= current[-1]["done"]:   # a new pilot started
            current = []
        more = None if m.group(7) is None else float(m.group(7)) * _UNIT[m.group(8)]
        current.append({"done": done, "size": size, "seconds": float(m.group(4))
                        * _UNIT[m.group(5)], "more": more, "step": float(m.group(6))})
        if done == size:
            first = current[0]
            if first["more"] is not None and first["done"] < size:
                found.append({"first_done": first["done"], "size": size,
                              "projected": first["seconds"] + first["more"],
                              "took": current[-1]["seconds"], "first_step": first["step"],
                              "last_step": current[-1]["step"]})
            current = []
    return found


def table(runs: Path) -> str:
    rows = []
    for log in sorted(runs.glob("*.log")):
        for p in pilots(log.read_text(errors="replace").splitlines()):
            rows.append({"program": log.stem, **p, "ratio": p["took"] / p["projected"]})
    lines = ["| program | first report | projected s | took s | took / projected | "
             "step size: first report -> last beta |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['program']} | {r['first_done']} of {r['size']} betas | "
                     f"{r['projected']:.0f} | {r['took']:.0f} | {r['ratio']:.2f} | "
                     f"{r['first_step']:.3g} -> {r['last_step']:.3g} |")
    if rows:
        ratios = [r["ratio"] for r in rows]
        lines += ["", f"{len(rows)} pilots: took / projected median "
                  f"{statistics.median(ratios):.2f}, largest {max(ratios):.2f}; "
                  f"{sum(x > OVERRUN for x in ratios)} took more than {OVERRUN:g} times "
                  "their first projection."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, required=True,
                        help="a sweep's folder of run logs (its --work/runs)")
    parser.add_argument("--out", type=Path, help="write the table here (else print it)")
    args = parser.parse_args(argv)
    text = table(args.runs)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Coverage of posteriordb by the one command ``bread-stan run MODEL.stan --data DATA.json``.

For each of posteriordb's 120 Stan programs (with the data of its first posterior):

* ``--stage stanc`` (no C++): the automatic prior/likelihood split, then the drafted
  simulator of the split program; each program is "reaches AIS" or "refused" with the
  line and the reason.
* ``--stage exact``: also compiles the user's program, the split program and the split
  program with its likelihood deleted, and checks the split is exact (joint at
  prior_only = 0 equals the user's, prior at prior_only = 1 equals the prior part, 20
  random unconstrained points, Jacobian on and off, relative tolerance 1e-10).
* ``--stage run``: the command itself, ``python -m bread_stan.cli run MODEL
  --data DATA --steps 100,1000 --chains 30``, one program at a time, time-boxed per
  program (``--timeout``; a time-out ends the compilers the command started too): "ran"
  (exit code, the simulator check's result, verdict, bound at T = 1000, whether the
  report holds the split table, seconds), "refused" (exit 2 and the message), "failed"
  (any other exit without results) or "timed out".  Each run's output is kept under
  ``--work``/runs.

``--reaching-ais`` takes only the programs the stanc stage's table says reach AIS
(smallest data first, the list read afresh after each program, so programs admitted by a
later stanc stage join a running sweep); ``--refused`` only those it refuses.
``--resume`` keeps the table's rows, skips their programs and rewrites the table after
each program, so an interrupted sweep loses nothing and can be continued; the run
stage's total time is the sum of the programs' seconds.

posteriordb (https://github.com/stan-dev/posteriordb) is read from a git directory
(``--posteriordb``, e.g. a bare clone); its files are extracted to ``--work``, never
committed.  Output: ``scripts/figures/posteriordb_coverage/{coverage_STAGE.md,
coverage_STAGE.json}``: one row per program, and totals by reason.

    PYTHONPATH=$PWD nice python scripts/studies/posteriordb_coverage.py \\
        --posteriordb /path/to/posteriordb/.git --stage stanc
    PYTHONPATH=$PWD nice python scripts/studies/posteriordb_coverage.py \\
        --posteriordb /path/to/posteriordb/.git --stage run --reaching-ais --resume \\
        --timeout 360
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "scripts" / "figures" / "posteriordb_coverage"

# (pattern of a refusal message, reason shown in the totals), first match wins
REASONS = [
    (r"transformed data computed from the data",
     "split: modelled data only through transformed data"),
    (r"reads both the modelled data", "split: outcome reads data and parameters"),
    (r"a prior \(outcome not data\) that reads", "split: prior reads the modelled data"),
    (r"adds to the target itself", "split: a _lp function"),
    (r"no density statement of the model block has modelled data", "split: no likelihood found"),
    (r"does not type-check", "splitter/drafter bug (does not type-check)"),
    (r"can draw \w+ (below|above) \w+'s declared",
     "draft: data bounds the likelihood crosses"),
    (r"is computed from the data \w+ that the simulator draws",
     "draft: data enter their own distribution"),
    (r"a zero-inflated mixture", "draft: zero-inflated mixture not provably exact"),
    (r"was drawn outside its declared bound", "run: a draw outside a declared bound"),
    (r"the simulator produced non-finite values",
     "run: a prior draw overflows double precision (an infinite parameter or datum)"),
    (r"prior predictive overflows|too vague for double precision|too far apart for a variance",
     "run: the prior predictive overflows (simulated data too large)"),
    (r"improper|no density statement|has no prior", "draft: parameter without a proper prior"),
    (r"target \+= has no _rng", "draft: target += not a density the drafter reads"),
    (r"transformed data use", "draft: data enter their own distribution"),
    (r"is transformed data", "draft: outcome is transformed data"),
    (r"no _rng|has no random", "draft: distribution without an _rng"),
    (r"transformed parameter", "draft: density on a transformed parameter"),
    (r"cannot tell that this draws every element",
     "draft: indexed draws not provably covering each element once"),
    (r"has \w+ support; the model's prior would be truncated|uniform\(.*\) needs",
     "draft: prior truncated by the declared bounds"),
    (r"the prior uses the data", "draft: data enter their own distribution"),
    (r"inside a conditional", "draft: ~ inside a conditional"),
    (r"line \d+: expected|unexpected", "parser: syntax outside the drafter's parser"),
    (r"simulation failed", "run: a prior draw gives an _rng an infinite or NaN argument "
                           "(simulation failed)"),
    (r"appears on both sides of", "draft: a variable on both sides of ~ (autoregression)"),
]


def _reason(message: str) -> str:
    for pattern, label in REASONS:
        if re.search(pattern, message):
            return label
    return "other: " + " ".join(message.split())[:60]


def _git(gitdir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], check=True,
                          capture_output=True).stdout


def extract(gitdir: Path, work: Path) -> list[tuple[str, Path, Path | None]]:
    """(name, program path, data path or None) of every Stan program, extracted to work."""
    names = _git(gitdir, "ls-tree", "-r", "--name-only", "HEAD").decode().split("\n")
    base = "posterior_database/"
    data_of: dict[str, list[str]] = {}
    for path in sorted(n for n in names if n.startswith(base + "posteriors/")):
        info = json.loads(_git(gitdir, "show", f"HEAD:{path}"))
        data_of.setdefault(info["model_name"], []).append(info["data_name"])
    models = sorted(n for n in names if n.startswith(base + "models/stan/")
                    and n.endswith(".stan"))
    out = []
    (work / "models").mkdir(parents=True, exist_ok=True)
    (work / "data").mkdir(parents=True, exist_ok=True)
    for path in models:
        name = Path(path).stem
        program = work / "models" / f"{name}.stan"
        if not program.exists():
            program.write_bytes(_git(gitdir, "show", f"HEAD:{path}"))
        data = None
        for data_name in data_of.get(name, []):   # the first whose file the clone holds
            path = work / "data" / f"{data_name}.json"
            if not path.exists():
                try:
                    blob = _git(gitdir, "show", f"HEAD:{base}data/data/{data_name}.json.zip")
                    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
                        path.write_bytes(archive.read(archive.namelist()[0]))
                except (subprocess.CalledProcessError, zipfile.BadZipFile):
                    continue
            data = path
            break
        out.append((name, program, data))
    return out


def stanc_stage(name: str, program: Path, data: Path | None, work: Path) -> dict:
    from bread_stan.stan.draft import DraftError, draft_simulator, split_model

    row = {"program": name, "data": data.stem if data else None}
    if data is None:
        return {**row, "status": "no data", "reason": "",
                "message": "no posterior of this program has its data file in the clone"}
    try:
        split = split_model(program)
    except DraftError as error:
        return {**row, "status": "refused", "reason": _reason(str(error)),
                "message": str(error)}
    row["split"] = "own prior_only" if split.own_split else (
        f"{sum(r.role == 'prior' for r in split.rows)} prior, "
        f"{sum(r.role == 'likelihood' for r in split.rows)} likelihood")
    generated = work / "split" / f"{name}.stan"
    generated.parent.mkdir(exist_ok=True)
    generated.write_text(split.program)
    (work / "split" / f"{name}_prior.stan").write_text(split.prior_program or "")
    try:
        draft_simulator(generated)
    except DraftError as error:
        return {**row, "status": "refused", "reason": _reason(str(error)),
                "message": str(error)}
    return {**row, "status": "reaches AIS", "reason": "", "message": ""}


def exact_stage(row: dict, program: Path, data: Path, work: Path) -> dict:
    from bread_stan.stan.compile import compile_many
    from bread_stan.stan.split_check import check_split_exact

    generated = work / "split" / f"{row['program']}.stan"
    prior = work / "split" / f"{row['program']}_prior.stan"
    if not prior.read_text():
        return {**row, "exact": "own prior_only"}
    try:
        user, gen, pri = compile_many([program, generated, prior], workers=1)
        check = check_split_exact(user, gen, pri, data, rng=np.random.default_rng(0), n=20)
    except Exception as error:   # noqa: BLE001 (a sweep records every failure and goes on)
        return {**row, "exact": f"error: {' '.join(str(error).split())[:120]}"}
    verdict = ("exact" if check.exact(1e-10) else
               "unchecked: no finite point" if not check.points else "NOT EXACT")
    return {**row, "exact": f"{verdict} (joint {check.joint:.1e}, prior {check.prior:.1e}, "
                            f"{check.points} points at sd {check.scale:g}, "
                            f"{check.mismatched} mismatched)"}


def _sim_check(text: str) -> str:
    """The simulator check's result as the run printed it (passed, failed, ...)."""
    found = re.search(r"^simulator check: (\w+)", text, re.M) or re.search(
        r"INFO simulator check (\w+)", text)
    return found.group(1) if found else ""


def run_stage(row: dict, program: Path, data: Path, work: Path, timeout: float) -> dict:
    out = work / "runs" / row["program"]
    command = [sys.executable, "-m", "bread_stan.cli", "run", str(program),
               "--data", str(data), "--steps", "100,1000", "--chains", "30",
               "--out", str(out)]
    start = time.perf_counter()
    (work / "runs").mkdir(parents=True, exist_ok=True)
    log = work / "runs" / f"{row['program']}.log"
    # written as the run goes (a long program's progress can be read there); a session
    # of its own, so a time-out ends the compilers it started too
    timed_out = False
    with open(log, "w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            timed_out = True
    text = log.read_text()
    if timed_out:
        reached = [line for line in text.splitlines() if " INFO " in line]
        return {**row, "status": "timed out", "timeout": timeout,
                "seconds": round(time.perf_counter() - start),
                "message": f"timed out after {timeout:.0f} s; last progress line: "
                           f"{reached[-1].split(' INFO ', 1)[1][:150] if reached else 'none'}"}
    seconds = round(time.perf_counter() - start)
    last_line = text.strip().splitlines()[-1] if text.strip() else ""
    traceback = "Traceback (most recent call last)" in text
    row = {**row, "sim_check": _sim_check(text)}
    if process.returncode == 2:
        return {**row, "status": "refused", "reason": _reason(last_line), "message": last_line,
                "exit": 2, "traceback": traceback, "seconds": seconds}
    summary = out / "summary.csv"
    if not summary.is_file():
        return {**row, "status": f"failed (exit {process.returncode})", "message": last_line,
                "exit": process.returncode, "traceback": traceback, "seconds": seconds}
    with open(summary) as handle:
        steps = {r["steps"]: r for r in csv.DictReader(handle)}
    last = steps.get("1000", {})
    bound = (f"{float(last['bound']):.3g} (95% up to {float(last['bound_ci_high']):.3g})"
             if last.get("bound") else "none (the checks failed)" if last else "")
    report = out / "report.md"
    split_in_report = report.is_file() and "## Prior/likelihood split" in report.read_text()
    return {**row, "status": "ran", "exit": process.returncode, "traceback": traceback,
            "verdict": last.get("verdict", "no T = 1000"), "bound_T1000": bound,
            "split_in_report": split_in_report, "seconds": seconds}


def write(rows: list[dict], stage: str, elapsed: float) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for r in rows:
        if r["status"] == "refused":     # reasons as this version of the script reads them
            r["reason"] = _reason(r["message"])
    partial = OUT / f"coverage_{stage}.json.part"     # replaced whole: a reader never
    partial.write_text(json.dumps(rows, indent=1))   # sees half a table
    partial.replace(OUT / f"coverage_{stage}.json")
    status = Counter(r["status"] for r in rows)
    reasons = Counter(r["reason"] for r in rows if r["status"] == "refused")
    lines = [f"# posteriordb coverage, stage {stage}", "",
             f"{len(rows)} programs, {elapsed:.0f} s. " + ", ".join(
                 f"{k}: {v}" for k, v in status.most_common()), ""]
    if stage == "run":
        verdicts = Counter(r["verdict"] for r in rows if r["status"] == "ran")
        lines += ["Verdicts of the programs that ran: " + ", ".join(
            f"{k}: {v}" for k, v in verdicts.most_common()) + ". Wall time: the sum of the "
            "programs' seconds (each program in its own process, one at a time).", ""]
    lines += ["| refusal reason | programs |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in reasons.most_common()]
    columns = ["program", "data", "status", "split", "exact", "sim_check", "verdict",
               "bound_T1000", "split_in_report", "exit", "seconds", "message"]
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [" ".join(str(r.get(c, "")).split()).replace("|", "\\|") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    (OUT / f"coverage_{stage}.md").write_text("\n".join(lines) + "\n")


def _write_merged(rows: list[dict], stage: str, start: float, resume: bool) -> None:
    """Write the table; with --resume merged with the rows on disk, under a lock, so that
    two sweeps of one stage (say --reaching-ais and --refused) can run side by side."""
    OUT.mkdir(parents=True, exist_ok=True)
    with open(Path(tempfile.gettempdir()) / f"posteriordb_coverage_{stage}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = OUT / f"coverage_{stage}.json"
        on_disk = json.loads(table.read_text()) if resume and table.is_file() else []
        mine = {r["program"] for r in rows}
        merged = sorted([r for r in on_disk if r["program"] not in mine] + rows,
                        key=lambda r: r["program"])
        elapsed = (sum(r.get("seconds", 0) for r in merged) if stage == "run"
                   else time.perf_counter() - start)
        write(merged, stage, elapsed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posteriordb", type=Path, required=True,
                        help="git directory of stan-dev/posteriordb")
    parser.add_argument("--work", type=Path, default=Path("/tmp/posteriordb_coverage"))
    parser.add_argument("--stage", choices=["stanc", "exact", "run"], default="stanc")
    parser.add_argument("--only", nargs="*", help="program names (default: all)")
    parser.add_argument("--reaching-ais", action="store_true",
                        help="only the programs the stanc stage's table (coverage_stanc.json) "
                             "says reach AIS, smallest data file first")
    parser.add_argument("--refused", action="store_true",
                        help="only the programs the stanc stage's table refuses (the run "
                             "stage then checks that the command refuses them too)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows of coverage_STAGE.json and skip their programs "
                             "(those named by --only are run again)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per program")
    args = parser.parse_args()
    start = time.perf_counter()
    table = OUT / f"coverage_{args.stage}.json"
    kept = json.loads(table.read_text()) if args.resume and table.is_file() else []
    if args.only:   # named programs are run again and replace their rows
        kept = [r for r in kept if r["program"] not in args.only]
    for r in kept:    # rows of an earlier version of this script: the check from the log
        log = args.work / "runs" / f"{r['program']}.log"
        if args.stage == "run" and "sim_check" not in r and log.is_file():
            r["sim_check"] = _sim_check(log.read_text())
    done = {r["program"] for r in kept}
    programs = extract(args.posteriordb, args.work)

    def pending() -> list:
        """The programs still to do; with --reaching-ais read afresh from the stanc
        stage's table, so that a sweep picks up programs admitted while it runs."""
        chosen = programs
        if args.reaching_ais:
            stanc = json.loads((OUT / "coverage_stanc.json").read_text())
            reach = {r["program"] for r in stanc if r["status"] == "reaches AIS"}
            chosen = sorted((p for p in programs if p[0] in reach),
                            key=lambda p: p[2].stat().st_size)
        if args.refused:
            stanc = json.loads((OUT / "coverage_stanc.json").read_text())
            chosen = [p for p in chosen if p[0] in {r["program"] for r in stanc
                                                   if r["status"] == "refused"}]
        return [p for p in chosen if p[0] not in done
                and (not args.only or p[0] in args.only)]

    rows = []
    while todo := pending():
        name, program, data = todo[0]
        done.add(name)
        row = stanc_stage(name, program, data, args.work)
        if args.stage == "exact" and "split" in row:
            row = exact_stage(row, program, data, args.work)
        if args.stage == "run" and data is not None:
            row = run_stage(row, program, data, args.work, args.timeout)
        rows.append(row)
        print(f"{name}: {row['status']} {row.get('exact', '')} {row.get('verdict', '')} "
              f"{row.get('seconds', '')} {row.get('message', '')}"[:200], flush=True)
        if args.resume:   # the table after each program: an interruption loses none
            _write_merged(kept + rows, args.stage, start, True)
    _write_merged(kept + rows, args.stage, start, args.resume)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Coverage of posteriordb by the one command ``bread-stan run MODEL.stan --data DATA.json``,
each program within a budget: ``--steps auto --budget M``.

For each of posteriordb's 120 Stan programs (with the data of its first posterior):

* ``--stage stanc`` (no C++): the automatic prior/likelihood split, then the drafted
  simulator of the split program; each program is "reaches AIS" or "refused" with the
  line and the reason.  Table ``coverage_stanc.{md,json}``.
* ``--stage table``: the sweep's table written again from ``--out``'s rows, each
  protocol row read again from ``--work`` (after a change to what this script reads);
  nothing runs.
* ``--stage exact``: also compiles the user's program, the split program and the split
  program with its likelihood deleted, and checks the split is exact (joint at
  prior_only = 0 equals the user's, prior at prior_only = 1 equals the prior part, 20
  random unconstrained points, Jacobian on and off, relative tolerance 1e-10).
* ``--stage sweep`` (the budget-aware sweep, issue 42), in one command, compiles
  included: the stanc stage for every program (in this process), then, for each program
  that reaches AIS, ``python -m bread_stan.cli run MODEL --data DATA --steps auto
  --budget M --chains 30 --threads 1 --out WORK/runs/NAME`` (plus ``--run-args``), one
  subprocess a program, spread over a Dask ``LocalCluster`` of ``--workers`` single-
  threaded workers (the toolkit's :class:`bread_stan.parallel.Executor`; ``--workers
  1`` runs them here, one at a time), largest data file first (``--order``).  A
  program is time-boxed at ``--timeout-factor`` x M minutes + ``--compile-allowance``
  seconds; a time-out kills the subprocess's whole process group (the compilers it
  started too).  With ``--protocol``, programs refused
  for a reason the real-data protocol may get past (:data:`PROTOCOL_REASONS`, by the
  stanc stage or by the run itself) go to ``python -m bread_stan.cli protocol MODEL
  --data DATA --out WORK/protocol/NAME`` (plus ``--protocol-args``) instead: route
  "protocol", with the protocol's agreement flag, S-sweep test and bound read from its
  ``summary.json`` (the bound at the first of its T that converged, else at its last:
  the paper's heuristic on data simulated at the fitted hyperparameters, counted apart
  from the run's bound in the totals; where none converged, the T its bounds predict for
  1 nat, as the protocol saved it or, for a protocol from before it saved one, by the
  same fit made here).  With ``--retry-budget M2``, a program whose set-up stopped it (a
  pilot or the check would overrun M) and whose stated need is at most
  ``RETRY_NEED_FACTOR`` (3) x M2 minutes (an early pace overstates it: by up to 3x,
  measured), and a protocol run that timed out (without ``--protocol-budget MP``,
  which gives each protocol ``--budget MP`` and makes its set-up stops retried as a
  run's are), run once more in the same run directory (what finished is reused) at M2 minutes with M2's
  time-out; the row keeps the first try's seconds (counted in its own) and message, and
  the table's budget column says which rows were retried and why.  ``--resume`` with
  ``--retry-budget`` gives the table's rows of that kind their retry.

The sweep's table, ``coverage_sweep.{md,json}``, has one row a program: status (ran,
refused, timed out, failed, no data), route (run, protocol, refused), the step counts
``--steps auto`` chose (``extra.auto_steps`` of the run's ``run.json``), the bound at the
largest T and its 95% upper limit, the verdict, the T the fit of the bounds predicts for
1 nat when not converged, wall seconds (compiles included) and the compile seconds the
run's log reports, the share of gradients spent before the first scored transition
(``extra.setup_gradients``: pilots and check over pilots, check and scored) and the
refusal in one line; totals: programs by status, route and verdict, the sum of the
programs' seconds, the sweep's wall time (summed over resumed sessions) and the median
setup share of the programs that ran.  Each row records the package's code version
(``git describe`` of this checkout); the header lists every version the table holds.

Only this process writes the table (workers return rows), after each program, each file
replaced whole (a reader never sees half a table).  ``--resume`` keeps the table's rows
and skips their programs (those named by ``--only``, and with ``--rerun STATUS`` the rows
of that status, are run again; the run directories
under ``--work`` are resumed by the command itself).  A program's log is
``WORK/runs/NAME.log`` (``WORK/protocol/NAME.log``), written as it runs.

posteriordb (https://github.com/stan-dev/posteriordb) is read from a git directory
(``--posteriordb``, e.g. a bare clone); its files are extracted to ``--work``, never
committed.  Output: ``scripts/figures/posteriordb_coverage/``.  The table
``coverage_run.md`` there is the earlier sequential run stage (``--steps 100,1000``,
2025-26 code versions), kept as the record the docs quote.

    PYTHONPATH=$PWD nice python scripts/studies/posteriordb_coverage.py \\
        --posteriordb /path/to/posteriordb/.git --stage stanc
    PYTHONPATH=$PWD nice python scripts/studies/posteriordb_coverage.py \\
        --posteriordb /path/to/posteriordb/.git --stage sweep --budget 3 --workers 2 \\
        --resume [--protocol] [--retry-budget 10] [--run-args "--budget-gradients 1e7"]
        [--only A B C]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
import zipfile
from collections import Counter
from dataclasses import dataclass, field
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
    # the simulator's parameter draws themselves fail (no draw to check a redraw against)
    (r"cannot be drawn: .*_rng: .* is (-?inf|nan)\b",
     "run: a prior draw gives an _rng an infinite or NaN argument (simulation failed)"),
    (r"cannot be drawn: .*write_array: .* must be",
     "run: a prior draw breaks the simulation (a transformed parameter outside its bound)"),
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




# -- the sweep: one program's subprocess -------------------------------------------------

# refusals the real-data protocol (``bread-stan protocol``) may get past, as _reason names them
PROTOCOL_REASONS = (
    "draft: parameter without a proper prior",
    "split: modelled data only through transformed data",
    "run: a prior draw gives an _rng an infinite or NaN argument",
    "run: a prior draw breaks the simulation",
    "run: a prior draw overflows double precision",
    "run: the prior predictive overflows",
)


@dataclass(frozen=True)
class SweepSettings:
    """What every program of a sweep shares (sent to the workers with each task)."""

    work: Path
    budget: float                  # minutes, --steps auto --budget
    timeout: float                 # seconds per program (and per protocol run)
    threads: int = 1               # --threads of each command
    chains: int = 30
    run_args: tuple[str, ...] = ()
    protocol: bool = False
    protocol_args: tuple[str, ...] = ()
    version: str = ""
    python: str = field(default=sys.executable)
    retry_budget: float | None = None   # minutes of the one retry (see :func:`retry_reason`)
    retry_timeout: float = 0.0          # seconds per program of the retry
    protocol_budget: float | None = None  # minutes, protocol --budget (None: none)


# a set-up's stated need is an early projection; measured, it overstated the need by up to
# 3x (radon_county_intercept: 23 minutes after 3 transitions, 7 after a whole beta)
RETRY_NEED_FACTOR = 3.0


def setup_need_minutes(message: str) -> float | None:
    """The budget a run stopped in its set-up says it needs ("the set-up needs a budget
    above X minutes|hours|s"), in minutes; None when the message names none."""
    found = re.search(r"needs a budget above ([\d.e+]+) (minutes|hours|s)\b", message)
    if not found:
        return None
    scale = {"minutes": 1.0, "hours": 60.0, "s": 1 / 60}[found.group(2)]
    return float(found.group(1)) * scale


def stated_need(row: dict, work: Path) -> float | None:
    """The budget, in minutes, that a run stopped in its set-up says it needs: read when
    its log was (``setup_need_minutes``), else from its message, else (a row of an earlier
    version of this script, whose message was cut before it) from the last line of its
    log in ``work``."""
    if row.get("setup_need_minutes") is not None:
        return float(row["setup_need_minutes"])
    need = setup_need_minutes(row.get("message", ""))
    log = None if work is None else Path(work) / "runs" / f"{row.get('program')}.log"
    if need is None and row.get("route") == "run" and log is not None and log.is_file():
        lines = log.read_text().strip().splitlines()
        need = setup_need_minutes(lines[-1]) if lines else None
    return need


def retry_reason(row: dict, settings: SweepSettings) -> str | None:
    """Why a finished row gets its one retry at ``--retry-budget``, or None: a run stopped
    in its set-up (a pilot or the check would overrun the budget) whose stated need is at
    most RETRY_NEED_FACTOR retry budgets, a run not converged within its budget whose
    predicted T would end within the retry budget (its minutes so far, which the resumed
    run counts, plus the predicted T's), or a protocol run that timed out (a run's own
    budget stops it before its time-out; one that timed out overran outside it)."""
    retry = settings.retry_budget
    if retry is None or row.get("budget", settings.budget) >= retry:
        return None
    if row.get("status") == "timed out" and row.get("route") == "protocol":
        return "timed out"   # the protocol has no budget of its own: more time is the retry
    if row.get("stopped") == "set-up over budget":
        need = stated_need(row, settings.work)
        if need is not None and need <= RETRY_NEED_FACTOR * retry:
            return f"set-up needs {need:.3g} minutes"
    if row.get("stopped") == "budget" and row.get("predicted_minutes") is not None:
        minutes = float(row.get("seconds") or 0) / 60 + float(row["predicted_minutes"])
        if minutes <= retry:
            return (f"T = {float(row['predicted_T']):.0f} predicted, {minutes:.3g} minutes "
                    "in all")
    return None


def _protocol_reason(reason: str) -> bool:
    return any(reason.startswith(r) for r in PROTOCOL_REASONS)


def _run_command(command: list[str], log: Path, timeout: float) -> tuple[int | None, float]:
    """Run ``command`` with its output in ``log`` (written as it goes), in a session of
    its own so that a time-out kills the compilers it started too; (exit code or None
    when it timed out, wall seconds).  Its process id is kept in ``log``.pid while it
    runs, for the driver to end it if the sweep is stopped."""
    start = time.perf_counter()
    pid_file = log.with_suffix(".pid")
    with open(log, "w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        pid_file.write_text(str(process.pid))
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        finally:
            pid_file.unlink(missing_ok=True)
    return code, round(time.perf_counter() - start, 1)


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def compile_seconds(text: str) -> float:
    """Wall seconds of the compiles a log reports ("HH:MM:SS INFO compiled X in S s"):
    the length of the union of their intervals, so compiles run side by side count
    once (0 when every program came from the compile cache)."""
    spans = []
    pattern = r"^(\d\d):(\d\d):(\d\d) INFO compiled \S+ in ([\d.]+) s"
    for hours, minutes, secs, seconds in re.findall(pattern, text, re.M):
        end = 3600 * int(hours) + 60 * int(minutes) + int(secs)
        spans.append((end - float(seconds), float(end)))
    total, reach = 0.0, -np.inf
    for begin, end in sorted(spans):
        total += max(0.0, end - max(begin, reach))
        reach = max(reach, end)
    return round(total, 1)


def _log_facts(text: str, code: int | None, timeout: float) -> dict:
    """What a command's log says: the simulator check, the compiles' wall seconds, the
    last line (a refusal's message) and whether it ended in a traceback."""
    lines = text.strip().splitlines()
    facts = {"sim_check": _sim_check(text), "exit": code,
             "traceback": "Traceback (most recent call last)" in text,
             "compile_seconds": compile_seconds(text)}
    if code is None:
        reached = [line.split(" INFO ", 1)[1] for line in lines if " INFO " in line]
        facts["message"] = (f"timed out after {timeout:.0f} s; last progress line: "
                            f"{_one_line(reached[-1], 150) if reached else 'none'}")
    else:
        facts["message"] = _one_line(lines[-1]) if lines and code != 0 else ""
        # a set-up stopped after its pilot names the T the tuned path predicts; one
        # stopped inside its pilot, the least T the part of the path measured implies
        last = lines[-1] if lines and code != 0 else ""
        # read from the whole line: the message kept in the row is cut at 300 characters
        facts["setup_need_minutes"] = setup_need_minutes(last)
        predicted = re.search(r"at about T = (\d+) \(L\^2/\(2T\)\)", last)
        least = re.search(r"needs at least T = (\d+) \(L\^2/\(2T\);", last)
        if predicted or least:
            facts["setup_predicted_T"] = float((predicted or least).group(1))
            facts["predicted_at_least"] = bool(least and not predicted)
    return facts


def _status(code: int | None, has_results: bool) -> str:
    from bread_stan.cli.main import EXIT_BAD_INPUT, EXIT_NOT_CONVERGED

    if code is None:
        return "timed out"
    if code == EXIT_BAD_INPUT:
        return "refused"
    # exit 4 without results: a pilot or the check would have overrun the budget
    return "ran" if has_results or code == EXIT_NOT_CONVERGED else "failed"


def _largest_step(summary: list[dict]) -> dict:
    return max(summary, key=lambda r: int(r["steps"])) if summary else {}


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):   # a file cut short by a time-out
        return {}


def read_run(out: Path) -> dict:
    """The row's numbers from a run directory (what a timed-out run saved too): the step
    counts chosen, the bound at the largest T with its 95% upper limit, the verdict, the
    predicted T for 1 nat, the gradients before the first scored transition."""
    summary, header = _load(out / "summary.json"), _load(out / "run.json")
    extra = header.get("extra", {})
    auto, setup = extra.get("auto_steps") or {}, extra.get("setup_gradients") or {}
    last = _largest_step(summary.get("summary", []))
    row = {"has_results": bool(last)}
    if auto:
        row.update(steps=auto.get("chosen"), stopped=auto.get("stopped"),
                   predicted_T=auto.get("predicted_steps"),
                   predicted_minutes=auto.get("predicted_minutes"),
                   setup_seconds=auto.get("setup_seconds"))
    if last:
        row.update(T=int(last["steps"]), verdict=last.get("verdict"),
                   bound=last.get("bound"), bound_high=last.get("bound_ci_high"))
    if setup:
        row.update(setup_share=setup.get("share"),
                   setup_gradients={k: setup.get(k) for k in ("pilots", "check", "scored")})
    spent, before = auto.get("spent_seconds"), auto.get("setup_seconds")
    if spent and before is not None and spent > 0:
        row["time_share"] = before / spent   # the seconds before the first scored transition
    return row


def run_program(row: dict, program: Path, data: Path, settings: SweepSettings,
                budget: float | None = None, timeout: float | None = None) -> dict:
    """``bread-stan run --steps auto --budget M`` on one program (in a worker); its row.
    A refusal the protocol may get past goes on to :func:`protocol_program`.  ``budget``
    and ``timeout`` (default: the sweep's) are a retry's."""
    name, work = row["program"], settings.work
    budget = settings.budget if budget is None else budget
    timeout = settings.timeout if timeout is None else timeout
    (work / "runs").mkdir(parents=True, exist_ok=True)
    out = work / "runs" / name
    command = [settings.python, "-m", "bread_stan.cli", "run", str(program),
               "--data", str(data), "--steps", "auto", "--budget", f"{budget:g}",
               "--chains", str(settings.chains), "--threads", str(settings.threads),
               "--out", str(out), *settings.run_args]
    code, seconds = _run_command(command, work / "runs" / f"{name}.log", timeout)
    facts = _log_facts((work / "runs" / f"{name}.log").read_text(), code, timeout)
    found = read_run(out)
    status = _status(code, found.pop("has_results"))
    row = {**row, **facts, **found, "status": status, "route": "run", "seconds": seconds,
           "budget": budget}
    if status == "ran" and "verdict" not in row:   # stopped before any step count
        row.update(verdict="not converged", stopped="set-up over budget",
                   predicted_T=row.pop("setup_predicted_T", None))
    if status == "refused":
        row.update(route="refused", reason=_reason(row["message"]))
        if settings.protocol and _protocol_reason(row["reason"]):
            return protocol_program(row, program, data, settings)
    return row


def read_protocol(out: Path) -> dict:
    """The protocol's outcome from its ``summary.json``: ok, the agreement flag and score,
    the S-sweep test, the problems."""
    summary = _load(out / "summary.json")
    if not summary:
        return {"has_results": False}
    agreement, sweep = summary.get("agreement") or {}, summary.get("sweep_test") or {}
    scored = sorted((r for r in summary.get("summary", []) if "steps" in r),
                    key=lambda r: int(r["steps"]))
    first = next((r for r in scored if r.get("converged")), scored[-1] if scored else None)
    bound = {} if first is None else {
        "T": int(first["steps"]), "bound": first.get("bound"),
        "bound_high": first.get("bound_ci_high"),
        "protocol_converged": bool(first.get("converged")) and bool(summary.get("ok")),
        **_protocol_prediction(summary, scored)}
    return {"has_results": True, "steps": [int(r["steps"]) for r in scored] or None,
            "verdict": "protocol ok" if summary.get("ok") else "protocol not ok", **bound,
            "agreement": ("" if not agreement else
                          f"{'flagged' if agreement.get('flagged') else 'agrees'} "
                          f"(score {agreement.get('score', float('nan')):.3g})"),
            "sweep_test": ("" if not sweep else
                           "passed" if sweep.get("passed") else "failed"),
            "protocol_problems": _one_line("; ".join(summary.get("problems") or []))}


def _protocol_prediction(summary: dict, scored: list[dict]) -> dict:
    """The T the protocol's bounds predict for 1 nat where none converged: its
    ``predicted`` where it saved one, else (a protocol from before it did) the same fit
    made here on its saved bounds (``predicted_here``)."""
    saved = summary.get("predicted")
    if saved:
        return {"predicted_T": saved["steps"], "predicted_minutes": saved.get("minutes")}
    if not scored or any(r.get("converged") or not r.get("consistent", True) for r in scored):
        return {}
    from bread_stan.ais.budget import predict_steps

    last = scored[-1]
    rate = (last["seconds"] / (int(last["steps"]) - 1)
            if last.get("seconds") and int(last["steps"]) > 1 else None)
    found = predict_steps([int(r["steps"]) for r in scored], [r.get("bound") for r in scored],
                          [r.get("bound_ci_high") for r in scored], 1.0, seconds_per_step=rate)
    return {} if found is None else {"predicted_T": found.steps,
                                     "predicted_minutes": found.minutes,
                                     "predicted_here": True}


def protocol_program(row: dict, program: Path, data: Path, settings: SweepSettings,
                     timeout: float | None = None, budget: float | None = None) -> dict:
    """``bread-stan protocol`` on a program the run refused (in a worker); its row, route
    "protocol", keeping the refusal's message and adding the protocol's seconds.
    ``timeout`` (default: the sweep's) and ``budget`` (default: ``--protocol-budget``)
    are a retry's.  A protocol stopped by its budget before any step count (exit 4, no
    results) is a set-up stop, retried as a run's is."""
    name, work = row["program"], settings.work
    timeout = settings.timeout if timeout is None else timeout
    budget = settings.protocol_budget if budget is None else budget
    (work / "protocol").mkdir(parents=True, exist_ok=True)
    out = work / "protocol" / name
    command = [settings.python, "-m", "bread_stan.cli", "protocol", str(program),
               "--data", str(data), "--threads", str(settings.threads), "--out", str(out),
               *(["--budget", f"{budget:g}"] if budget is not None else []),
               *settings.protocol_args]
    log = work / "protocol" / f"{name}.log"
    code, seconds = _run_command(command, log, timeout)
    facts = _log_facts(log.read_text(), code, timeout)
    found = read_protocol(out)
    status = _status(code, found.pop("has_results"))
    refusal = {"refusal": row.get("message", ""), "reason": row.get("reason", "")}
    if status == "ran" and "verdict" not in found:   # stopped by its budget, nothing scored
        found.update(verdict="not converged", stopped="set-up over budget")
    if budget is not None:
        found["budget"] = budget
    return {**row, **facts, **found, **refusal, "route": "protocol", "status": status,
            "seconds": round(row.get("seconds", 0) + seconds, 1),
            "protocol_seconds": seconds}


def retry_program(row: dict, program: Path, data: Path, settings: SweepSettings) -> dict:
    """A finished row's one retry (:func:`retry_reason`): the same command, in the same
    run directory (what finished, such as a pilot, is reused), at ``--retry-budget``
    with the time-out that budget gets; the row says why and keeps the first try's
    seconds and message."""
    first = {"seconds": row.get("seconds"), "message": row.get("message", ""),
             "budget": row.get("budget", settings.budget), "why": retry_reason(row, settings)}
    base = {k: row[k] for k in ("program", "data", "split", "version") if k in row}
    if row.get("route") == "protocol":
        base.update(refusal=row.get("refusal", ""), reason=row.get("reason", ""),
                    message=row.get("refusal", ""), seconds=0)
        again = protocol_program(base, program, data, settings, settings.retry_timeout,
                                 settings.retry_budget if settings.protocol_budget else None)
        again["budget"] = settings.retry_budget
    else:
        again = run_program(base, program, data, settings, settings.retry_budget,
                            settings.retry_timeout)
    again["seconds"] = round((first["seconds"] or 0) + (again.get("seconds") or 0), 1)
    return {**again, "first_try": first}


def sweep_task(row: dict, program: str, data: str, settings: SweepSettings) -> dict:
    """One program on a worker: the run, or (a stanc-stage refusal) the protocol, then
    its retry where :func:`retry_reason` gives one (a row carried over from an earlier
    session with ``"retry": True`` goes straight to its retry).  An error of this
    script's own reading is the row's failure, not the sweep's."""
    program, data = Path(program), Path(data)
    try:
        if row.pop("retry", False):
            return retry_program(row, program, data, settings)
        if row["status"] == "refused":
            done = protocol_program(row, program, data, settings)
        else:
            done = run_program(row, program, data, settings)
        if retry_reason(done, settings):
            return retry_program(done, program, data, settings)
        return done
    except Exception as error:  # noqa: BLE001 (a sweep records every failure and goes on)
        return {**row, "status": "failed", "route": "run",
                "message": f"the sweep script: {type(error).__name__}: {_one_line(error)}"}


def kill_leftovers(work: Path) -> None:
    """End the commands still running (a sweep stopped mid-way: their pid files remain)."""
    for pid_file in [*work.glob("runs/*.pid"), *work.glob("protocol/*.pid")]:
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
        pid_file.unlink(missing_ok=True)


# -- the sweep's table ---------------------------------------------------------------------

SWEEP_COLUMNS = ["program", "data", "status", "route", "budget (min)", "steps", "bound",
                 "verdict", "predicted T (1 nat)", "seconds", "compile s", "setup share",
                 "agreement", "sweep test", "version", "message"]


def _bound_cell(r: dict) -> str:
    if r.get("bound") is None:
        return ""
    high = "" if r.get("bound_high") is None else f" (95% up to {r['bound_high']:.3g})"
    return f"{r['bound']:.3g}{high} at T = {r['T']}"


def _predicted_cell(r: dict) -> str:
    T, minutes = r.get("predicted_T"), r.get("predicted_minutes")
    if r.get("verdict") == "converged" or T is None:
        return ""
    if not np.isfinite(T):
        return "none (the bound does not fall)"
    least = "at least " if r.get("predicted_at_least") else ""
    return f"{least}{T:.3g}" + (f" (about {minutes:.3g} min)" if minutes else "")


def _verdict_cell(r: dict) -> str:
    """The verdict, and why ``--steps auto`` stopped when it did not converge (for the
    protocol: whether its bound on the simulated data is under the line)."""
    verdict, stopped = r.get("verdict") or "", r.get("stopped") or ""
    if r.get("route") == "protocol" and r.get("bound") is not None:
        where = f"converged at T = {r['T']}" if r.get("protocol_converged") else \
            "not converged" if verdict == "protocol ok" else ""
        return f"{verdict}; {where} (heuristic bound)" if where else verdict
    return f"{verdict} ({stopped})" if verdict and stopped not in ("", "converged", verdict) \
        else verdict


def _message_cell(r: dict) -> str:
    """Why a program did not run (or, stopped in its set-up, why); for one the
    protocol ran, the run's refusal."""
    if r.get("stopped") == "set-up over budget":
        return r.get("message", "")
    return r.get("message", "") if r["status"] != "ran" else r.get("refusal", "")


def _budget_cell(r: dict) -> str:
    """The budget of the row's run (minutes; blank for a refusal), and the first try's
    where the row is a retry."""
    if r.get("route") not in ("run", "protocol") or r["status"] == "refused":
        return ""
    first = r.get("first_try")
    if not first:
        return "" if r.get("route") == "protocol" else f"{r.get('budget', '')}"
    return f"{r.get('budget'):g} (retry: {first.get('why')} at {first.get('budget'):g})"


SHARE_TARGET = 0.25   # issue 42: at most a quarter of the gradients before scoring


def _ratios(r: dict) -> tuple[float, float] | None:
    """The pilots' and the check's gradients, each in units of the scored run's."""
    g = r.get("setup_gradients") or {}
    scored = g.get("scored") or 0
    if scored <= 0:
        return None
    return (g.get("pilots") or 0) / scored, (g.get("check") or 0) / scored


def _share_cell(r: dict) -> str:
    """The share of gradients before the first scored transition; above SHARE_TARGET,
    why: the pilots' and the check's gradients as multiples of the scored run's (pilots
    above 1/3 of it keep the share above 25% with no check at all)."""
    share, time_share = r.get("setup_share"), r.get("time_share")
    if share is None:
        return ""
    seconds = "" if time_share is None else f"; {time_share:.0%} of the seconds"
    ratios = _ratios(r)
    if share <= SHARE_TARGET or ratios is None:
        return f"{share:.0%}{seconds}"
    return (f"{share:.0%}{seconds} (pilots {ratios[0]:.2g}x, check {ratios[1]:.2g}x the "
            "scored run's gradients)")


def _share_sentence(ran: list[dict]) -> str:
    """How many shares are over the target, and in how many the pilots alone put them
    there (pilots above a third of the scored run: no size of the check helps)."""
    over = [r for r in ran if (r.get("setup_share") or 0) > SHARE_TARGET and _ratios(r)]
    if not over:
        return ""
    floor = SHARE_TARGET / (1 - SHARE_TARGET)   # pilots / scored above it: share > target
    pilots = sum(_ratios(r)[0] > floor for r in over)
    return (f"; {len(over)} above {SHARE_TARGET:.0%}, {pilots} of them with the pilots alone "
            f"above a third of the scored run's gradients, so above {SHARE_TARGET:.0%} with "
            "no check")


def _cells(r: dict) -> list:
    return [r["program"], r.get("data") or "", r["status"], r.get("route", ""),
            _budget_cell(r), ", ".join(map(str, r.get("steps") or [])), _bound_cell(r), _verdict_cell(r),
            _predicted_cell(r), r.get("seconds", ""), r.get("compile_seconds", ""),
            _share_cell(r), r.get("agreement", ""),
            r.get("sweep_test", ""), r.get("version", ""), _message_cell(r)]


def _counts(rows: list[dict], key: str, where=lambda r: True) -> str:
    counts = Counter(str(r.get(key) or "none") for r in rows if where(r))
    return ", ".join(f"{k}: {v}" for k, v in counts.most_common()) or "none"


def _retry_sentence(rows: list[dict], meta: dict) -> str:
    if not meta.get("retry_budget"):
        return ""
    retried = sum(1 for r in rows if r.get("first_try"))
    return (f" Retried once at {meta['retry_budget']:g} minutes (time-out "
            f"{meta['retry_timeout']:.0f} s), in the same run directory: {retried} programs, "
            f"those stopped in their set-up whose stated need was at most "
            f"{RETRY_NEED_FACTOR:g} x {meta['retry_budget']:g} minutes, and the protocol runs "
            "that timed out; their seconds include the first try.")


def _converged_sentence(ran: list[dict]) -> str:
    by_run = sum(r.get("verdict") == "converged" for r in ran)
    by_protocol = sum(bool(r.get("protocol_converged")) for r in ran)
    return (f"{by_run + by_protocol} programs: {by_run} by the run (a bound: exact "
            f"reverse starts on data simulated from the prior) and {by_protocol} by the "
            "protocol (passed, and its bound on data simulated at the fitted "
            "hyperparameters under the line: the paper's heuristic, its reverse starts "
            "checked by the S-sweep)")


def sweep_totals(rows: list[dict], meta: dict) -> list[str]:
    """The totals' lines: programs by status, route and verdict, seconds, wall time,
    the median setup share of the programs that ran."""
    ran = [r for r in rows if r["status"] == "ran"]
    shares = [r["setup_share"] for r in ran if r.get("setup_share") is not None]
    versions = sorted({r.get("version", "") for r in rows if r.get("status") != "no data"})
    return [
        f"{len(rows)} programs; budget {meta['budget']:g} minutes a program "
        f"(--steps auto), time-out {meta['timeout']:.0f} s, {meta['workers']} worker(s); "
        f"code version{'s' if len(versions) > 1 else ''}: {', '.join(versions)}."
        + _retry_sentence(rows, meta)
        + (f" The protocol ran with {meta['protocol_args']}." if meta.get("protocol_args")
           else "")
        + (f" Protocol budget {meta['protocol_budget']:g} minutes (--budget)."
           if meta.get("protocol_budget") else ""), "",
        f"- by status: {_counts(rows, 'status')}",
        f"- by route: {_counts(rows, 'route')}",
        f"- verdicts of the programs that ran: {_counts(ran, 'verdict')}",
        f"- converged: {_converged_sentence(ran)}",
        f"- seconds, summed over programs: {sum(r.get('seconds') or 0 for r in rows):.0f}; "
        f"the sweep's wall time: {meta['wall_seconds']:.0f} s over {meta['sessions']} "
        "session(s) (compiles included)",
        "- median share of gradients before the first scored transition (pilots and "
        f"check), over the {len(shares)} programs that ran: "
        + (f"{statistics.median(shares):.0%}" if shares else "none")
        + _pooled_share(ran) + _share_sentence(ran) + _time_share(ran), ""]


def _time_share(ran: list[dict]) -> str:
    """The median share of the seconds (pilots, check) before the first scored transition:
    a gradient of the check's prior stage evaluates the prior alone, cheaper than one of
    the data's, so the share in seconds can be lower."""
    shares = [r["time_share"] for r in ran if r.get("time_share") is not None]
    return (f"; median share of the seconds, over {len(shares)}: "
            f"{statistics.median(shares):.0%}") if shares else ""


def _pooled_share(ran: list[dict]) -> str:
    """The same share over all those programs' gradients together (the expensive
    programs weigh in proportion to their cost)."""
    parts = [r["setup_gradients"] for r in ran if r.get("setup_gradients")]
    setup = sum((g.get("pilots") or 0) + (g.get("check") or 0) for g in parts)
    total = setup + sum(g.get("scored") or 0 for g in parts)
    return f"; pooled over their gradients: {setup / total:.0%}" if total > 0 else ""


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".part")
    partial.write_text(text)
    partial.replace(path)


def write_sweep(rows: list[dict], meta: dict, out: Path) -> None:
    """coverage_sweep.json ({"sweep": meta, "rows": rows}) and coverage_sweep.md in
    ``out``, each replaced whole."""
    out.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: r["program"])
    _write_atomic(out / "coverage_sweep.json",
                  json.dumps({"sweep": meta, "rows": rows}, indent=1, default=str))
    reasons = Counter(r.get("reason") for r in rows if r["status"] == "refused")
    lines = ["# posteriordb coverage within a budget (stage sweep)", "",
             *sweep_totals(rows, meta), "| refusal reason | programs |", "|---|---|",
             *(f"| {k} | {v} |" for k, v in reasons.most_common()), "",
             "| " + " | ".join(SWEEP_COLUMNS) + " |", "|" + "---|" * len(SWEEP_COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(_one_line(c, 200).replace("|", "\\|")
                                       for c in _cells(r)) + " |")
    _write_atomic(out / "coverage_sweep.md", "\n".join(lines) + "\n")


# -- the sweep's driver ----------------------------------------------------------------------

def code_version() -> str:
    """The package's code version: the last commit of this checkout that changed
    bread_stan/ (a commit of scripts or docs only does not change it), ``-dirty`` when
    bread_stan/ has uncommitted changes."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--", "bread_stan")
    return git("log", "-1", "--format=%h", "--", "bread_stan") + ("-dirty" if dirty else "")


def _kept_rows(args, budget: float) -> tuple[list[dict], dict]:
    """With --resume: the rows on disk (minus --only's and those of a --rerun status) and
    the earlier sessions' record."""
    table = args.out / "coverage_sweep.json"
    on_disk = _load(table) if args.resume else {}
    kept = [r for r in on_disk.get("rows", []) if r["status"] not in args.rerun
            and not (args.only and r["program"] in args.only)]
    before = on_disk.get("sweep", {})
    if before and before.get("budget") != budget:
        print(f"note: the table's rows were run with a budget of {before.get('budget')} "
              f"minutes, this session {budget}", file=sys.stderr)
    return kept, before


def plan(programs, done: set, args, settings: SweepSettings) -> tuple[list, dict]:
    """The stanc stage of every program still to do (here: no C++): rows that end there
    (no data, refused) and the tasks for the workers, in ``--order`` of data size
    (largest first by default: the long programs start early and none straggles at the
    end, the usual greedy rule for the shortest total wall time)."""
    finished, tasks = [], {}
    todo = [p for p in programs if p[0] not in done and (not args.only or p[0] in args.only)]
    def size(p) -> int:
        return p[2].stat().st_size if p[2] else 0
    todo.sort(key=size, reverse=args.order == "large-first")
    for name, program, data in todo:
        row = {**stanc_stage(name, program, data, settings.work), "version": settings.version}
        if row["status"] == "reaches AIS":
            tasks[name] = (row, str(program), str(data), settings)
        elif row["status"] == "refused" and settings.protocol and _protocol_reason(row["reason"]):
            tasks[name] = (row, str(program), str(data), settings)
        else:
            finished.append({**row, "route": "refused" if row["status"] == "refused" else "",
                             "seconds": 0})
    return finished, tasks


def retry_tasks(kept: list[dict], programs, settings: SweepSettings) -> dict:
    """The tasks of the rows carried over from earlier sessions that get their one retry
    (:func:`retry_reason`), timed-out rows first, then by the set-up's stated need,
    largest first."""
    paths = {name: (program, data) for name, program, data in programs}
    due = [r for r in kept if r["program"] in paths and retry_reason(r, settings)]
    due.sort(key=lambda r: (r["status"] != "timed out",
                            -(stated_need(r, settings.work) or 0)))
    return {r["program"]: ({**r, "retry": True}, str(paths[r["program"]][0]),
                           str(paths[r["program"]][1]), settings) for r in due}


def sweep(args) -> int:
    """The sweep stage: plan, then the programs over the workers, the table after each."""
    from bread_stan.parallel.executor import Executor

    start = time.perf_counter()
    timeout = lambda budget: args.timeout_factor * 60 * budget + args.compile_allowance  # noqa: E731
    settings = SweepSettings(
        work=args.work, budget=args.budget, threads=args.threads,
        timeout=timeout(args.budget), run_args=tuple(shlex.split(args.run_args)),
        protocol=args.protocol, protocol_args=tuple(shlex.split(args.protocol_args)),
        version=code_version(), retry_budget=args.retry_budget,
        retry_timeout=timeout(args.retry_budget or 0), protocol_budget=args.protocol_budget)
    kept, before = _kept_rows(args, args.budget)
    programs = extract(args.posteriordb, args.work)
    rows, tasks = plan(programs, {r["program"] for r in kept}, args, settings)
    retries = retry_tasks(kept, programs, settings)
    rows = [r for r in kept if r["program"] not in retries] + rows
    tasks = {**retries, **tasks}

    def meta() -> dict:
        return {"budget": args.budget, "timeout": settings.timeout, "workers": args.workers,
                "retry_budget": args.retry_budget or before.get("retry_budget"),
                "retry_timeout": (settings.retry_timeout if args.retry_budget
                                  else before.get("retry_timeout")),
                "run_args": args.run_args, "protocol": args.protocol,
                "protocol_args": args.protocol_args, "protocol_budget": args.protocol_budget,
                "sessions": before.get("sessions", 0) + 1,
                "wall_seconds": round(before.get("wall_seconds", 0)
                                      + time.perf_counter() - start)}

    def on_result(name: str, row: dict) -> None:
        rows.append(row)
        write_sweep(rows, meta(), args.out)
        print(f"{name}: {row['status']} ({row.get('route')}) {row.get('verdict') or ''} "
              f"T {row.get('steps') or ''} {row.get('seconds')} s "
              f"{row.get('message') or ''}"[:200], flush=True)

    write_sweep(rows, meta(), args.out)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cleanup below runs
    print(f"{len(tasks)} programs to run on {args.workers} worker(s), time-out "
          f"{settings.timeout:.0f} s each", flush=True)
    executor = Executor(workers=args.workers, retries=0) if args.workers > 1 else Executor()
    try:
        with executor:
            executor.run(sweep_task, tasks, on_result, progress=False)
    finally:
        kill_leftovers(args.work)
        write_sweep(rows, meta(), args.out)
    return 0


def retable(args) -> int:
    """The table stage: the sweep's table written again from its rows on disk, each
    protocol row read again from its run directory (what a later version of this script
    reads from it), each run row's share of seconds too; nothing is run."""
    saved = _load(args.out / "coverage_sweep.json")
    if not saved:
        print(f"error: no sweep table in {args.out}; run --stage sweep first", file=sys.stderr)
        return 2
    rows = []
    for row in saved["rows"]:
        found = {}
        if row["status"] == "ran" and row.get("route") == "protocol":
            found = read_protocol(args.work / "protocol" / row["program"])
        elif row["status"] == "ran" and (args.work / "runs" / row["program"]).is_dir():
            found = {k: v for k, v in read_run(args.work / "runs" / row["program"]).items()
                     if k == "time_share"}
        found.pop("has_results", None)
        rows.append({**row, **found})
    write_sweep(rows, saved["sweep"], args.out)
    return 0


# -- the stanc and exact stages ---------------------------------------------------------------

def write(rows: list[dict], stage: str, elapsed: float) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for r in rows:
        if r["status"] == "refused":     # reasons as this version of the script reads them
            r["reason"] = _reason(r["message"])
    _write_atomic(OUT / f"coverage_{stage}.json", json.dumps(rows, indent=1))
    status = Counter(r["status"] for r in rows)
    reasons = Counter(r["reason"] for r in rows if r["status"] == "refused")
    lines = [f"# posteriordb coverage, stage {stage}", "",
             f"{len(rows)} programs, {elapsed:.0f} s. " + ", ".join(
                 f"{k}: {v}" for k, v in status.most_common()), ""]
    lines += ["| refusal reason | programs |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in reasons.most_common()]
    columns = ["program", "data", "status", "split", "exact", "message"]
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = [" ".join(str(r.get(c, "")).split()).replace("|", "\\|") for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    _write_atomic(OUT / f"coverage_{stage}.md", "\n".join(lines) + "\n")


def stages(args) -> int:
    """The stanc stage (and with --stage exact, the split's exactness) of each program."""
    start = time.perf_counter()
    table = OUT / f"coverage_{args.stage}.json"
    kept = json.loads(table.read_text()) if args.resume and table.is_file() else []
    kept = [r for r in kept if not args.only or r["program"] not in args.only]
    done = {r["program"] for r in kept}
    rows = []
    for name, program, data in extract(args.posteriordb, args.work):
        if name in done or (args.only and name not in args.only):
            continue
        row = stanc_stage(name, program, data, args.work)
        if args.stage == "exact" and "split" in row:
            row = exact_stage(row, program, data, args.work)
        rows.append(row)
        print(f"{name}: {row['status']} {row.get('exact', '')} {row.get('message', '')}"[:200],
              flush=True)
        if args.resume:   # the table after each program: an interruption loses none
            write(sorted(kept + rows, key=lambda r: r["program"]), args.stage,
                  time.perf_counter() - start)
    write(sorted(kept + rows, key=lambda r: r["program"]), args.stage,
          time.perf_counter() - start)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posteriordb", type=Path, required=True,
                        help="git directory of stan-dev/posteriordb")
    parser.add_argument("--work", type=Path, default=Path("/tmp/posteriordb_coverage"))
    parser.add_argument("--stage", choices=["stanc", "exact", "sweep", "table"],
                        default="stanc", help="table: write the sweep's table again from "
                        "--out's rows and --work's runs, running nothing")
    parser.add_argument("--out", type=Path, default=OUT,
                        help="sweep: folder of its table (default: %(default)s)")
    parser.add_argument("--only", nargs="*", help="program names (default: all)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the table's rows and skip their programs (those named "
                             "by --only are run again)")
    parser.add_argument("--rerun", nargs="*", default=[], metavar="STATUS",
                        help="sweep, with --resume: run the rows of these statuses again "
                             "(e.g. 'timed out' failed)")
    parser.add_argument("--budget", type=float, default=3.0,
                        help="sweep: minutes a program (--steps auto --budget M; compiles "
                             "excluded)")
    parser.add_argument("--workers", type=int, default=2,
                        help="sweep: Dask LocalCluster workers, one thread each (1: here)")
    parser.add_argument("--threads", type=int, default=1,
                        help="sweep: --threads of each command (default 1 a worker)")
    parser.add_argument("--order", choices=["large-first", "small-first"],
                        default="large-first", help="sweep: order of the programs by the "
                        "size of their data file")
    parser.add_argument("--timeout-factor", type=float, default=3.0,
                        help="sweep: a program's time-out is this many budgets ...")
    parser.add_argument("--compile-allowance", type=float, default=600.0,
                        help="sweep: ... plus this many seconds for the compiles")
    parser.add_argument("--retry-budget", type=float, default=None, metavar="M2",
                        help="sweep: run once more, at M2 minutes (time-out from M2 too), "
                             "each program stopped in its set-up whose stated need is at "
                             f"most {RETRY_NEED_FACTOR:g} x M2, and each protocol run that "
                             "timed out; "
                             "with --resume, the table's rows of that kind too")
    parser.add_argument("--run-args", default="",
                        help='sweep: more flags for every run, e.g. "--budget-gradients N"')
    parser.add_argument("--protocol", action="store_true",
                        help="sweep: run `bread-stan protocol` on programs refused for one "
                             "of PROTOCOL_REASONS")
    parser.add_argument("--protocol-args", default="",
                        help="sweep: more flags for every protocol run")
    parser.add_argument("--protocol-budget", type=float, default=None, metavar="MP",
                        help="sweep: protocol --budget MP for every protocol run (its retry "
                             "at --retry-budget); default none, the time-out alone")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if args.stage == "table":
        return retable(args)
    return sweep(args) if args.stage == "sweep" else stages(args)


if __name__ == "__main__":
    raise SystemExit(main())

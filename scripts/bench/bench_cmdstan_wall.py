"""Wall time of the toolkit's budgeted run beside CmdStan's default fit, per program, in
one run on one machine (issue 42's benchmark; not a timed test).

For each posteriordb program (default: five that converged in the coverage sweep):

* CmdStan's default fit: 4 chains of 1,000 warm-up + 1,000 draws, 2 in parallel, seed 0,
  via cmdstanpy when it is installed, else CmdStan's own executable (``make`` in the
  CmdStan folder, the chains run as two pairs of processes).  Its compile is timed apart
  from its sampling.  CmdStan is ``$CMDSTAN``, else the offline build of
  ``../shared/cmdstan`` in ``~/.cache/bread-stan/cmdstan-2.35.0`` (as ``tests/conftest.py``
  finds it).
* The toolkit: ``python -m bread_stan.cli run MODEL --data DATA --steps auto --budget M
  --chains 30 --out WORK/toolkit/NAME`` (``--run-args`` adds flags), one subprocess; its
  wall time with and without the compiles its log reports, the step counts chosen and
  the verdict.

The table gives both wall times and their ratio (the toolkit's wall time without
compiles over CmdStan's sampling time); the programs run one after another, so the two
sides never share the cores.  posteriordb is read as in
``scripts/studies/posteriordb_coverage.py`` (whose extraction and result reading this
reuses).  A second run resumes nothing: ``WORK`` is emptied of the programs' folders
first (``--keep`` keeps them, then the toolkit's side reads its finished run back).

    PYTHONPATH=$PWD python scripts/bench/bench_cmdstan_wall.py \\
        --posteriordb /path/to/posteriordb/.git --budget 3 [--programs A B C]

Writes ``scripts/figures/bench_cmdstan_wall/results.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "studies"))
import posteriordb_coverage as coverage  # noqa: E402  (extract, read_run, _run_command)

OUT = ROOT / "scripts" / "figures" / "bench_cmdstan_wall"
CMDSTAN_HOME = Path.home() / ".cache" / "bread-stan" / "cmdstan-2.35.0"
DEFAULT = ["Rate_1_model", "eight_schools_noncentered", "GLM_Binomial_model",
           "dogs_hierarchical", "M0_model"]
CHAINS, PARALLEL, WARMUP, DRAWS = 4, 2, 1000, 1000


def cmdstan_home() -> Path:
    return Path(os.environ.get("CMDSTAN") or CMDSTAN_HOME)


def cmdstan_fit(program: Path, data: Path, work: Path) -> dict:
    """CmdStan's default fit of ``program``: seconds to compile and to sample."""
    folder = work / "cmdstan" / program.stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    stan_file = folder / program.name
    shutil.copy(program, stan_file)
    try:
        import cmdstanpy
    except ImportError:
        return _cmdstan_binary(stan_file, data, folder)
    cmdstanpy.set_cmdstan_path(str(cmdstan_home()))
    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    start = time.perf_counter()
    model = cmdstanpy.CmdStanModel(stan_file=str(stan_file))
    compiled = time.perf_counter()
    fit = model.sample(data=str(data), chains=CHAINS, parallel_chains=PARALLEL,
                       iter_warmup=WARMUP, iter_sampling=DRAWS, seed=0,
                       output_dir=str(folder), show_progress=False)
    sampled = time.perf_counter()
    divergent = int(sum(fit.divergences))
    return {"via": "cmdstanpy", "compile_s": round(compiled - start, 1),
            "sample_s": round(sampled - compiled, 2), "divergences": divergent}


def _cmdstan_binary(stan_file: Path, data: Path, folder: Path) -> dict:
    """The same fit with CmdStan's makefile and executable (no cmdstanpy)."""
    start = time.perf_counter()
    exe = stan_file.with_suffix("")
    subprocess.run(["make", str(exe)], cwd=cmdstan_home(), check=True, capture_output=True)
    compiled = time.perf_counter()
    for first in range(1, CHAINS + 1, PARALLEL):
        runs = [subprocess.Popen([str(exe), "sample", f"num_warmup={WARMUP}",
                                  f"num_samples={DRAWS}", "data", f"file={data}", "output",
                                  f"file={folder / f'chain_{c}.csv'}", "random", "seed=0",
                                  f"id={c}"], stdout=subprocess.DEVNULL)
                for c in range(first, min(first + PARALLEL, CHAINS + 1))]
        if any(r.wait() for r in runs):
            raise RuntimeError(f"CmdStan failed on {stan_file.name}")
    return {"via": "cmdstan binary", "compile_s": round(compiled - start, 1),
            "sample_s": round(time.perf_counter() - compiled, 2)}


def toolkit_run(program: Path, data: Path, work: Path, budget: float,
                run_args: list[str]) -> dict:
    """The toolkit's ``--steps auto --budget M`` run: wall seconds, compiles, T's, verdict."""
    out = work / "toolkit" / program.stem
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "bread_stan.cli", "run", str(program), "--data",
               str(data), "--steps", "auto", "--budget", f"{budget:g}", "--chains", "30",
               "--out", str(out), *run_args]
    log = work / "toolkit" / f"{program.stem}.log"
    code, seconds = coverage._run_command(command, log, timeout=3 * 60 * budget + 900)
    compile_s = coverage._log_facts(log.read_text(), code, 0)["compile_seconds"]
    found = coverage.read_run(out)
    return {"exit": code, "wall_s": seconds, "toolkit_compile_s": compile_s,
            "run_s": round(seconds - compile_s, 1), "steps": found.get("steps"),
            "verdict": found.get("verdict"), "bound": found.get("bound"),
            "setup_share": found.get("setup_share")}


def write(rows: list[dict], budget: float) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"budget": budget, "rows": rows}, indent=1))
    columns = ["program", "CmdStan compile s", "CmdStan sample s", "toolkit wall s",
               "toolkit compile s", "toolkit without compiles s", "ratio", "steps", "verdict"]
    lines = [f"# Toolkit (--steps auto --budget {budget:g}) beside CmdStan's default fit "
             f"({CHAINS} chains of {WARMUP} + {DRAWS}, {PARALLEL} in parallel)", "",
             "ratio: the toolkit's wall time without compiles over CmdStan's sampling time. "
             "The toolkit's compile seconds: the wall time of the compiles its log reports.", "",
             "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        ratio = (f"{r['run_s'] / r['sample_s']:.2f}" if r.get("sample_s") and r.get("run_s")
                 else "")
        cells = [r["program"], r.get("compile_s", ""), r.get("sample_s", ""),
                 r.get("wall_s", ""), r.get("toolkit_compile_s", ""), r.get("run_s", ""),
                 ratio, ", ".join(map(str, r.get("steps") or [])), r.get("verdict") or
                 r.get("error", "")]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    (OUT / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posteriordb", type=Path, required=True,
                        help="git directory of stan-dev/posteriordb")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_cmdstan_wall"))
    parser.add_argument("--programs", nargs="*", default=DEFAULT)
    parser.add_argument("--budget", type=float, default=3.0, help="minutes (--budget)")
    parser.add_argument("--run-args", default="", help="more flags for the toolkit's run")
    parser.add_argument("--keep", action="store_true", help="keep WORK's earlier runs")
    args = parser.parse_args()
    if not args.keep:
        shutil.rmtree(args.work / "toolkit", ignore_errors=True)
    found = {name: (program, data)
             for name, program, data in coverage.extract(args.posteriordb, args.work)}
    rows = []
    for name in args.programs:
        program, data = found[name]
        row = {"program": name}
        try:
            row.update(cmdstan_fit(program, data, args.work))
        except Exception as error:  # noqa: BLE001 (a benchmark records it and goes on)
            row["error"] = f"CmdStan: {coverage._one_line(error, 150)}"
        row.update(toolkit_run(program, data, args.work, args.budget, args.run_args.split()))
        rows.append(row)
        write(rows, args.budget)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

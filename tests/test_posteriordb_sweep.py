"""The budget-aware posteriordb sweep's own parts (scripts/studies/posteriordb_coverage.py):
what it reads from a run's files and log, its table and totals, resuming, and the
time-out that ends a command's whole process group.  Exact: no Stan, no Dask."""

from __future__ import annotations

import argparse
import json
import time

import pytest

from script_module import load_script

cov = load_script("studies/posteriordb_coverage")


def _run_dir(path, *, steps=(10, 40), verdict="not converged", share=0.3):
    path.mkdir(parents=True)
    summary = [{"steps": T, "verdict": verdict, "bound": 2.0 / T ** 0.5,
                "bound_ci_high": 3.0 / T ** 0.5} for T in steps]
    (path / "summary.json").write_text(json.dumps({"status": verdict, "summary": summary}))
    auto = {"chosen": list(steps), "stopped": "budget", "predicted_steps": 400.0,
            "predicted_minutes": 2.5, "setup_seconds": 4.0}
    setup = {"pilots": 30.0, "check": 0.0, "scored": 70.0, "share": share}
    (path / "run.json").write_text(json.dumps({"extra": {"auto_steps": auto,
                                                         "setup_gradients": setup}}))
    return path


def test_read_run_takes_the_largest_T_the_chosen_steps_and_the_setup_share(tmp_path):
    row = cov.read_run(_run_dir(tmp_path / "run"))
    assert row["has_results"] and row["T"] == 40 and row["steps"] == [10, 40]
    assert row["bound"] == pytest.approx(2 / 40 ** 0.5)
    assert row["bound_high"] == pytest.approx(3 / 40 ** 0.5)
    assert row["predicted_T"] == 400.0 and row["setup_share"] == 0.3
    assert cov.read_run(tmp_path / "missing") == {"has_results": False}


def test_compile_seconds_count_side_by_side_compiles_once():
    log = ("00:00:10 INFO compiled a in 10.0 s (stanc ...)\n"    # 0 to 10 s
           "00:00:12 INFO compiled b in 11.0 s (stanc ...)\n"    # 1 to 12 s, beside a
           "00:01:00 INFO compiled c in 5.0 s (stanc ...)\n")    # 55 to 60 s
    assert cov.compile_seconds(log) == pytest.approx(12.0 + 5.0)
    assert cov.compile_seconds("12:00:00 INFO nothing compiled\n") == 0


def test_a_time_out_names_the_last_progress_line_and_a_refusal_its_last_line():
    text = "00:00:01 INFO tuning nuts along beta\nsome output\n"
    assert "last progress line: tuning nuts" in cov._log_facts(text, None, 60)["message"]
    refused = cov._log_facts("x\nbread-stan run: error: no prior\n", 2, 60)
    assert refused["message"] == "bread-stan run: error: no prior"
    assert cov._status(2, False) == "refused" and cov._status(None, True) == "timed out"
    assert cov._status(0, False) == "failed" and cov._status(4, True) == "ran"
    # exit 4 with no step count: the set-up would have overrun the budget
    assert cov._status(4, False) == "ran" and cov._status(1, False) == "failed"


def test_a_set_up_stopped_after_its_pilot_gives_the_tuned_paths_T():
    line = ("bread-stan run: not converged within the budget of 3 minutes: the simulator "
            "check's prior stage alone would take about 4 minutes (1 of 10 after 24 s), so "
            "no step count could run; the set-up needs a budget above 5 minutes, or fixed "
            "step counts (--steps); the tuned path (thermodynamic length L = 14.1) "
            "predicts a gap of 1 nat at about T = 100 (L^2/(2T))")
    assert cov._log_facts(f"x\n{line}\n", 4, 60)["setup_predicted_T"] == 100.0
    assert "setup_predicted_T" not in cov._log_facts("x\nbread-stan run: not converged "
                                                     "within the budget ...\n", 4, 60)


def test_the_protocol_takes_only_the_refusals_it_may_get_past():
    assert cov._protocol_reason(cov._reason("parameter x has no prior"))
    assert cov._protocol_reason(cov._reason("transformed data computed from the data y"))
    assert cov._protocol_reason(cov._reason("simulation failed for 3 draw(s)"))
    assert not cov._protocol_reason(cov._reason("x is a transformed parameter"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return "zombie" not in status.read()
    except FileNotFoundError:
        return False


def test_a_time_out_ends_the_commands_whole_process_group(tmp_path):
    child = tmp_path / "child.pid"
    start = time.perf_counter()
    code, _ = cov._run_command(["bash", "-c", f"sleep 60 & echo $! > {child}; wait"],
                               tmp_path / "p.log", timeout=0.5)
    assert code is None and time.perf_counter() - start < 10
    assert not (tmp_path / "p.pid").exists()
    pid = int(child.read_text())
    for _ in range(50):   # the grandchild, killed with its group, is gone
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def test_the_table_has_one_row_a_program_and_the_totals(tmp_path):
    ran = {"program": "b", "status": "ran", "route": "run", "verdict": "not converged",
           "seconds": 30, "version": "abc", **cov.read_run(_run_dir(tmp_path / "b"))}
    rows = [ran, {**ran, "program": "a", "setup_share": 0.1, "seconds": 10},
            {"program": "c", "status": "refused", "route": "refused", "reason": "x",
             "message": "line 3: no | prior", "seconds": 0, "version": "abc"}]
    meta = {"budget": 2, "timeout": 900, "workers": 2, "sessions": 2, "wall_seconds": 25}
    cov.write_sweep(rows, meta, tmp_path)
    text = (tmp_path / "coverage_sweep.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("| a |")
             or line.startswith("| b |") or line.startswith("| c |")]
    assert [line[:5] for line in table] == ["| a |", "| b |", "| c |"]
    assert "400 (about 2.5 min)" in table[1] and "no \\| prior" in table[2]
    assert "| not converged (budget) |" in table[1]
    assert "summed over programs: 40; the sweep's wall time: 25 s over 2" in text
    assert "over the 2 programs that ran: 20%" in text   # median of 10% and 30%
    saved = json.loads((tmp_path / "coverage_sweep.json").read_text())
    assert saved["sweep"] == meta and len(saved["rows"]) == 3


def test_resume_keeps_finished_rows_but_reruns_named_programs_and_statuses(tmp_path):
    rows = [{"program": p, "status": s} for p, s in
            [("a", "ran"), ("b", "timed out"), ("c", "ran")]]
    (tmp_path / "coverage_sweep.json").write_text(json.dumps(
        {"sweep": {"budget": 2, "sessions": 1, "wall_seconds": 5}, "rows": rows}))
    args = argparse.Namespace(out=tmp_path, resume=True, only=["c"], rerun=["timed out"])
    kept, before = cov._kept_rows(args, 2)
    assert [r["program"] for r in kept] == ["a"] and before["wall_seconds"] == 5


def test_an_error_of_the_scripts_own_reading_fails_the_row_not_the_sweep(tmp_path):
    settings = cov.SweepSettings(work=tmp_path, budget=0.1, timeout=5, python="/nonexistent")
    row = cov.sweep_task({"program": "p", "status": "reaches AIS"}, "p.stan", "p.json",
                         settings)
    assert row["status"] == "failed" and "the sweep script: FileNotFoundError" in row["message"]

"""Toolchain discovery, the compile cache and the exported symbols."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bread_stan.stan import compile as compile_module
from bread_stan.stan.compile import cache_dir, compile_model, read_program, stanc_info
from bread_stan.errors import ToolchainError
from bread_stan.stan.toolchain import find_toolchain

from conftest import PROGRAMS


def test_toolchain():
    toolchain = find_toolchain()
    assert toolchain.stanc.exists()
    assert "Stan 2." in toolchain.version
    flags = toolchain.cxxflags()
    assert "-DSTAN_THREADS" in flags and "-fvisibility=hidden" in flags
    assert "-ltbb" in toolchain.ldflags(sundials=False)
    assert toolchain.key() == find_toolchain().key()
    assert toolchain.key(("-O2",)) != toolchain.key()


def test_toolchain_source_is_explicit(monkeypatch):
    # CMDSTAN alone switches nothing; asking for CmdStan where there is none says how.
    monkeypatch.setenv("CMDSTAN", "/nonexistent/cmdstan")
    monkeypatch.delenv("BREAD_STAN_TOOLCHAIN", raising=False)
    find_toolchain.cache_clear()
    try:
        assert find_toolchain().source == "httpstan"
        with pytest.raises(ToolchainError, match="no stanc in /nonexistent/cmdstan/bin"):
            find_toolchain("cmdstan")
        monkeypatch.delenv("CMDSTAN")
        monkeypatch.setitem(sys.modules, "cmdstanpy", None)  # cmdstanpy cannot help either
        with pytest.raises(ToolchainError, match="set CMDSTAN"):
            find_toolchain("cmdstan")
        with pytest.raises(ToolchainError, match="use 'cmdstan' or 'httpstan'"):
            find_toolchain("auto")
    finally:
        find_toolchain.cache_clear()


def test_cache_dir_can_be_overridden(monkeypatch, tmp_path):
    monkeypatch.setenv("BREAD_STAN_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" and cache_dir().is_dir()


def test_read_program_from_path_and_text():
    from_path = read_program(PROGRAMS["linear_regression"])
    assert from_path.name == "linear_regression" and from_path.path is not None
    from_text = read_program(from_path.code)
    assert from_text.path is None and from_text.code == from_path.code
    assert from_text.name.startswith("model_")
    with pytest.raises(FileNotFoundError):
        read_program("no_such_program.stan")


def test_stanc_info_lists_data_variables():
    info = stanc_info(PROGRAMS["linear_regression"])
    assert set(info["inputs"]) == {"N", "K", "X", "y", "prior_only"}
    assert info["inputs"]["prior_only"]["type"] == "int"


def test_cache_hit_runs_no_subprocess(compiled, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a cache hit must not run stanc or the compiler")

    monkeypatch.setattr(compile_module, "_run", forbidden)
    monkeypatch.setattr(subprocess, "run", forbidden)
    again = compile_model(PROGRAMS["linear_regression"])
    assert again.library == compiled["linear_regression"].library
    assert again.info == compiled["linear_regression"].info


def test_cmdstan_fits_use_the_toolkits_stanc_arguments(compiled, monkeypatch, tmp_path):
    # FitSettings(sampler="cmdstan") has CmdStan build the program with the stanc
    # arguments of the toolkit's own library (--O1 by default), cached in a folder per
    # argument list: cmdstanpy reuses any executable newer than its .stan file.
    cmdstanpy = pytest.importorskip("cmdstanpy")
    from cmdstanpy.compilation import CompilerOptions

    from bread_stan.workflows import fit as fit_module

    built = []

    class Recorder:  # stands in for cmdstanpy.CmdStanModel (no CmdStan needed)
        def __init__(self, stan_file, stanc_options):
            built.append((Path(stan_file), stanc_options))

    monkeypatch.setattr(cmdstanpy, "CmdStanModel", Recorder)
    monkeypatch.setattr(cmdstanpy, "cmdstan_path", lambda: "/somewhere/cmdstan-2.35.0")
    monkeypatch.setenv("BREAD_STAN_CACHE", str(tmp_path))
    library = compiled["linear_regression"]
    assert library.stanc_args == ("--O1",)
    monkeypatch.setattr(fit_module, "cmdstan_available", lambda: True)
    with pytest.raises(AttributeError, match="full_model"):  # stops after the compile
        fit_module._cmdstan(SimpleNamespace(compiled=library), np.zeros((1, 8)),
                            fit_module.FitSettings(sampler="cmdstan"), 0)
    fit_module._cmdstan_model(library.program, ())
    fit_module._cmdstan_model(library.program, ("--O1",))
    (o1, options), (plain, plain_options), (again, _) = built
    flags = CompilerOptions(stanc_options=options).compose()
    assert "STANCFLAGS+=--O1" in flags
    assert f"STANCFLAGS+=--include-paths={library.program.path.parent}" in flags
    assert "STANCFLAGS+=--O1" not in CompilerOptions(stanc_options=plain_options).compose()
    assert again == o1 and plain.parent != o1.parent
    assert o1.read_text() == plain.read_text() == library.program.code


def test_only_bridge_symbols_are_exported(compiled):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    out = subprocess.run([nm, "-D", "--defined-only", str(compiled["throws"].library)],
                         capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert names and all(n.startswith(("bs_", "bread_")) for n in names), names
    assert {"bs_major_version", "bs_log_density_gradient", "bread_split_batch"} <= set(names)


def test_concurrent_compiles_build_once_and_report_time(monkeypatch, tmp_path, caplog):
    """Two compiles of one new program at once: one build, one intact library, no
    leftovers.  The toolchain is faked (each step writes its output after a pause),
    so this tests the locking and atomic renames, not the compiler."""
    import json
    import logging
    import threading
    import time
    from pathlib import Path

    monkeypatch.setenv("BREAD_STAN_CACHE", str(tmp_path / "cache"))
    calls, lock = [], threading.Lock()

    def fake_run(command, cwd=None):
        with lock:
            calls.append(command)
        time.sleep(0.2)
        stdout = ""
        if "--info" in command:
            stdout = json.dumps({"inputs": {"prior_only": {"type": "int"}}})
        for flag in ("--o", "-o"):
            if flag in command:
                out = Path(command[command.index(flag) + 1])
                out.write_text(f"built by {command[0]}")
        return subprocess.CompletedProcess(command, 0, stdout, "")

    monkeypatch.setattr(compile_module, "_run", fake_run)
    program = "data { int<lower=0, upper=1> prior_only; } parameters { real x; } model { }"
    results = [None, None]

    def build(i):
        results[i] = compile_model(program)

    with caplog.at_level(logging.INFO, logger="bread_stan"):
        threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results[0].library == results[1].library and results[0].library.exists()
    assert results[0].data_variables == {"prior_only": {"type": "int"}}
    model_compiles = [c for c in calls if "-c" in c and "-x" in c]
    links = [c for c in calls if "-shared" in c]
    assert len(model_compiles) == 1 and len(links) == 1
    assert len([c for c in calls if "-c" in c and "-x" not in c]) == 1  # the bridge object
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if ".tmp" in p.name]
    assert not leftovers, leftovers
    assert any("compiled model_" in r.getMessage() and " s (stanc" in r.getMessage()
               for r in caplog.records)


def test_precompiled_model_header_is_used(tmp_path):
    # A precompiled header built with other flags than the model's is silently ignored
    # by GCC (the compile is then just slow): compile a unit that includes the model
    # header with -H, which marks a precompiled header it loads with "!".
    from bread_stan.stan.pch import HEADER, precompiled_header_dir
    toolchain = find_toolchain()
    pch = precompiled_header_dir(toolchain, (), cache_dir())
    assert pch is not None and (pch / f"{HEADER}.gch").is_file()
    unit = tmp_path / "unit.hpp"
    unit.write_text("#include <stan/model/model_header.hpp>\nint unit_marker = 1;\n")
    result = subprocess.run([toolchain.cxx, f"-I{pch}", *toolchain.cxxflags(), "-Winvalid-pch",
                             "-H", "-x", "c++", "-c", str(unit), "-o", str(tmp_path / "u.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"! {pch / HEADER}.gch" in result.stderr, result.stderr[:2000]


def test_precompiled_header_can_be_switched_off(monkeypatch):
    from bread_stan.stan.pch import precompiled_header_dir
    monkeypatch.setenv("BREAD_STAN_PCH", "0")
    assert precompiled_header_dir(find_toolchain(), (), cache_dir()) is None

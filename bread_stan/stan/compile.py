"""Stan program -> C++ (stanc) -> shared library, with a content-addressed cache.

The model-independent bridge object (``csrc/bridge.cpp``) is compiled once per
toolchain and flags; per model only the stanc-generated translation unit is
compiled (against a precompiled model header, :mod:`bread_stan.stan.pch`), then
the two are linked (a fraction of a second).  Libraries are
cached under a hash of the program text, the stanc arguments, the toolchain,
the flags and the bridge sources, in ``$BREAD_STAN_CACHE`` or the platformdirs
user cache.  A cache hit runs no subprocess at all.  Everything is built under
a temporary name and moved into place with ``os.replace``, and a file lock per
entry keeps concurrent processes from building the same thing twice.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import CompilerError, InputError, StanCompileError
from ..store import (CorruptFileError, OutputDirectoryError, check_writable, load_json, lock,
                     save_json, write_atomic)
from .features import newer_stan_refusal
from .pch import precompiled_header_dir
from .toolchain import Toolchain, find_toolchain

__all__ = ["CompiledModel", "Program", "cache_dir", "read_program", "stanc_info",
           "build_bridge", "compile_model", "compile_many", "DEFAULT_STANC_ARGS",
           "resolve_toolchain", "run_stanc"]

logger = logging.getLogger("bread_stan")

DEFAULT_STANC_ARGS: tuple[str, ...] = ("--O1",)
_CSRC = Path(__file__).parent / "csrc"
_BRIDGE_SOURCES = ("bridge.cpp", "bridge.hpp", "exports.map")


@dataclass(frozen=True)
class Program:
    """A Stan program's text, a name for it, and the file it came from (if any)."""

    code: str
    name: str
    path: Path | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()


@dataclass(frozen=True)
class CompiledModel:
    """A compiled model library, what stanc reported about the program, and the
    stanc arguments it was built with."""

    library: Path
    program: Program
    info: dict           # `stanc --info`: inputs, parameters, generated quantities, ...
    stanc_args: tuple[str, ...] = DEFAULT_STANC_ARGS

    @property
    def data_variables(self) -> dict:
        return self.info.get("inputs", {})


def cache_dir() -> Path:
    """The cache root: ``$BREAD_STAN_CACHE`` or the platformdirs user cache.

    When that cannot be written (read-only, or a file), a private temporary
    cache is used instead, with one warning per process.
    """
    env = os.environ.get("BREAD_STAN_CACHE")
    if env:
        root = Path(env)
    else:
        import platformdirs
        root = Path(platformdirs.user_cache_dir("bread_stan"))
    return _usable_cache(root)


@functools.lru_cache(maxsize=None)
def _usable_cache(root: Path) -> Path:
    try:
        return check_writable(root, "cache directory")
    except OutputDirectoryError as error:
        fallback = Path(tempfile.mkdtemp(prefix="bread_stan_cache_"))
        atexit.register(shutil.rmtree, fallback, ignore_errors=True)
        logger.warning("the compile cache %s is unusable (%s); using the private temporary "
                       "cache %s for this process (models are recompiled; set "
                       "BREAD_STAN_CACHE to a writable directory)", root, error, fallback)
        return fallback


def read_program(program: str | os.PathLike | Program) -> Program:
    """A :class:`Program` from a ``.stan`` path, program text or a ``cmdstanpy.CmdStanModel``."""
    if isinstance(program, Program):
        return program
    if type(program).__name__ == "CmdStanModel":  # cmdstanpy is optional: no import
        if not program.stan_file:
            raise InputError(f"the CmdStanModel {program.name!r} has no Stan file (built from "
                             "an executable); give the .stan program instead")
        program = Path(program.stan_file)
    text = str(program)
    looks_like_path = isinstance(program, os.PathLike) or (
        text.endswith(".stan") and "\n" not in text and "{" not in text)
    if looks_like_path:
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(f"Stan program {path} does not exist")
        return Program(path.read_text(), _identifier(path.stem), path.resolve())
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Program(text, f"model_{digest[:10]}")


def resolve_toolchain(toolchain: Toolchain | str | None) -> Toolchain:
    """A :class:`Toolchain` as given, or found from its source name (None: the default)."""
    return toolchain if isinstance(toolchain, Toolchain) else find_toolchain(toolchain)


def _identifier(stem: str) -> str:
    name = re.sub(r"\W", "_", stem)
    return name if re.match(r"[A-Za-z]", name) else f"m_{name}"


def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


def run_stanc(program: Program, toolchain: Toolchain, args: Sequence[str], workdir: Path,
           output: Path | None) -> str:
    """Run stanc on the program (from its file when it has one); return stdout."""
    source = program.path
    if source is None:
        source = workdir / f"{program.name}.stan"
        source.write_text(program.code)
    command = [str(toolchain.stanc), *args, f"--name={program.name}_model"]
    if program.path is not None:
        command.append(f"--include-paths={program.path.parent}")
    command += ["--o", str(output)] if output else []
    command.append(str(source))
    result = _run(command)
    if result.returncode != 0:
        label = str(program.path or program.name)
        # a feature of a newer Stan (sum_to_zero_vector under 2.35): one line saying so
        raise (newer_stan_refusal(program.code, toolchain, label)
               or StanCompileError(result.stderr + result.stdout, program=label))
    return result.stdout


def stanc_info(program: str | os.PathLike | Program, toolchain: Toolchain | str | None = None,
               stanc_args: Sequence[str] = DEFAULT_STANC_ARGS) -> dict:
    """``stanc --info`` of the program (data, parameters, ... as JSON), cached.

    ``stanc_args`` are those of the compile (``--allow-undefined`` matters here).
    """
    program = read_program(program)
    toolchain = resolve_toolchain(toolchain)
    key = _digest(program.digest, *stanc_args, toolchain.key())
    path = cache_dir() / "info" / f"{key}.json"
    with contextlib.suppress(FileNotFoundError, CorruptFileError):
        return load_json(path)
    with tempfile.TemporaryDirectory() as tmp:
        text = run_stanc(program, toolchain, [*stanc_args, "--info"], Path(tmp), None)
    info = json.loads(text)
    save_json(path, info)
    return info


def _bridge_digest() -> str:
    h = hashlib.sha256()
    for name in _BRIDGE_SOURCES:
        h.update((_CSRC / name).read_bytes())
    return h.hexdigest()[:16]


def build_bridge(toolchain: Toolchain | str | None = None, cxxflags: Sequence[str] = ()) -> Path:
    """The bridge object for this toolchain and flags, compiled once and cached."""
    toolchain = resolve_toolchain(toolchain)
    key = f"{toolchain.key(tuple(cxxflags))}-{_bridge_digest()}"
    directory = cache_dir() / "bridge" / key
    target = directory / "bridge.o"
    if target.exists():
        return target
    with lock(directory, wait=True):
        if target.exists():
            return target
        tmp = directory / f"bridge.{os.getpid()}.tmp.o"
        command = [toolchain.cxx, *toolchain.cxxflags(tuple(cxxflags)), "-c",
                   str(_CSRC / "bridge.cpp"), "-o", str(tmp)]
        start = time.perf_counter()
        result = _run(command)
        if result.returncode != 0:
            raise CompilerError(command, result.stderr + result.stdout)
        os.replace(tmp, target)
        logger.info("compiled the bridge object in %.1f s (%s)",
                    time.perf_counter() - start, toolchain.version)
    return target


def compile_model(program: str | os.PathLike | Program, *,
                  stanc_args: Sequence[str] = DEFAULT_STANC_ARGS,
                  cxxflags: Sequence[str] = (), user_header: str | os.PathLike | None = None,
                  toolchain: Toolchain | str | None = None, force: bool = False
                  ) -> CompiledModel:
    """Compile a Stan program (path, text or CmdStanModel) into a cached model library.

    ``stanc_args`` go to stanc (default ``--O1``), ``cxxflags`` to the C++
    compiler for the model and the bridge; ``user_header`` is a C++ header with
    the definitions of functions declared without body (add
    ``--allow-undefined`` to ``stanc_args``).  ``toolchain``: a :class:`Toolchain`
    or its source, "httpstan" (default) or "cmdstan".  ``force`` rebuilds even
    when cached.
    """
    program = read_program(program)
    toolchain = resolve_toolchain(toolchain)
    cxxflags = tuple(cxxflags)
    header_text = Path(user_header).read_text() if user_header else ""
    # The model object does not depend on the bridge sources, the library does:
    # a change of the bridge costs one bridge compile and a link per model.
    object_key = _digest(program.digest, *stanc_args, toolchain.key(cxxflags), header_text)
    directory = cache_dir() / "models" / f"{program.name}-{object_key}"
    library = directory / f"{program.name}-{_bridge_digest()}.so"
    info_path = directory / "info.json"
    if not force and (info := _verified(library, info_path, quiet=True)) is not None:
        logger.debug("cache hit for %s: %s", program.name, library)
        return CompiledModel(library, program, info, tuple(stanc_args))
    with lock(directory, wait=True):
        if not force and (info := _verified(library, info_path)) is not None:
            return CompiledModel(library, program, info, tuple(stanc_args))
        build = functools.partial(_build, program, toolchain, stanc_args, cxxflags,
                                  user_header, directory, library, info_path)
        if force or not library.exists():
            return build(force)
        try:  # a damaged library: link it again from the cached object
            return build(False)
        except CompilerError:  # the object is damaged too
            return build(True)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verified(library: Path, info_path: Path, quiet: bool = False) -> dict | None:
    """The stanc info of a cache entry whose library matches the size and hash
    recorded when it was built; None (with a warning, unless ``quiet``, if the
    entry exists but is damaged) when it must be built again."""
    if not library.exists():
        return None
    manifest = library.with_name(library.name + ".json")
    if not manifest.exists():
        if quiet:
            return None
        logger.info("the cached model library %s has no record of its size and hash "
                    "(built by an older version); linking it again", library)
        return None
    try:
        recorded = load_json(manifest)
        info = load_json(info_path)
        size = library.stat().st_size
        if size != recorded["size"] or _file_digest(library) != recorded["sha256"]:
            raise CorruptFileError(library, f"{size} bytes that do not match the "
                                            f"{recorded['size']} recorded at build time")
    except (OSError, CorruptFileError, KeyError, TypeError) as error:
        if quiet:
            return None
        logger.warning("the cached model library %s is damaged or incomplete (%s); "
                       "rebuilding it", library, getattr(error, "problem", error))
        return None
    return info


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _build(program: Program, toolchain: Toolchain, stanc_args: Sequence[str],
           cxxflags: tuple[str, ...], user_header, directory: Path, library: Path,
           info_path: Path, force: bool) -> CompiledModel:
    tag = f"{os.getpid()}.tmp"
    hpp, obj, lib = (directory / f"{program.name}.{tag}.{ext}" for ext in ("hpp", "o", "so"))
    model_object = directory / f"{program.name}.o"
    try:
        t0 = time.perf_counter()
        info = None
        if not force and model_object.exists():
            try:
                info = load_json(info_path)
            except (FileNotFoundError, CorruptFileError):  # lost: stanc alone restores it
                info = json.loads(run_stanc(program, toolchain, [*stanc_args, "--info"],
                                         directory, None))
                save_json(info_path, info)
        if info is None:
            run_stanc(program, toolchain, stanc_args, directory, hpp)
            info = json.loads(run_stanc(program, toolchain, [*stanc_args, "--info"], directory,
                                     None))
            t1 = time.perf_counter()
            flags = toolchain.cxxflags(cxxflags)
            if user_header:
                flags += ["-include", str(Path(user_header).resolve())]
            elif (pch := precompiled_header_dir(toolchain, cxxflags, cache_dir())) is not None:
                # searched first, so the precompiled copy of the model header is used
                flags = [f"-I{pch}", *flags]
            command = [toolchain.cxx, *flags, "-x", "c++", "-c", str(hpp), "-o", str(obj)]
            result = _run(command)
            if result.returncode != 0:
                raise CompilerError(command, result.stderr + result.stdout)
            save_json(info_path, info)
            write_atomic(directory / f"{program.name}.stan", program.code)
            os.replace(obj, model_object)
        else:
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        bridge = build_bridge(toolchain, cxxflags)
        t3 = time.perf_counter()
        # The SUNDIALS archives are static: linking them costs nothing measurable
        # and pulls objects in only for models that use the ODE/DAE solvers.
        command = [toolchain.cxx, "-shared", "-o", str(lib), str(model_object), str(bridge),
                   *toolchain.ldflags(sundials=True),
                   f"-Wl,--version-script={_CSRC / 'exports.map'}"]
        result = _run(command)
        if result.returncode != 0:
            raise CompilerError(command, result.stderr + result.stdout)
        t4 = time.perf_counter()
        os.replace(lib, library)
        save_json(library.with_name(library.name + ".json"),
                  {"size": library.stat().st_size, "sha256": _file_digest(library)})
        logger.info("compiled %s in %.1f s (stanc %.2f s, C++ %.1f s, bridge wait/build "
                    "%.1f s, link %.2f s)", program.name, t4 - t0, t1 - t0, t2 - t1,
                    t3 - t2, t4 - t3)
    finally:
        for leftover in (hpp, obj, lib):
            leftover.unlink(missing_ok=True)
    return CompiledModel(library, program, info, tuple(stanc_args))


def compile_many(programs: Sequence[str | os.PathLike | Program], *, workers: int = 2,
                 **options) -> list[CompiledModel]:
    """Compile several programs, ``workers`` compiler processes at a time.

    The bridge object is built alongside the first model, so a cold cache costs
    about (bridge + models) / workers.
    """
    options["toolchain"] = resolve_toolchain(options.get("toolchain"))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        bridge = pool.submit(build_bridge, options["toolchain"], options.get("cxxflags", ()))
        futures = [pool.submit(compile_model, p, **options) for p in programs]
        bridge.result()
        return [f.result() for f in futures]

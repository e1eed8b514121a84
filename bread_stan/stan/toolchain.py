"""Finding stanc, the Stan C++ headers and libtbb: the one place that knows where.

Two sources are supported, chosen explicitly (never switched silently):

- the ``httpstan`` wheel (the default), a pinned dependency used only as a
  toolchain: it ships stanc, the Stan / Stan Math / Eigen / Boost / SUNDIALS /
  TBB headers, a prebuilt ``libtbb.so.2`` and the SUNDIALS static libraries;
- a CmdStan installation, on request (``source="cmdstan"`` or
  ``BREAD_STAN_TOOLCHAIN=cmdstan``): the ``CMDSTAN`` environment variable, or
  the path ``cmdstanpy`` reports.  Both a release layout (headers under
  ``stan/lib/stan_math/lib``) and the offline build of
  ``shared/cmdstan/build-cmdstan.sh`` (headers of the httpstan wheel) work.

The :class:`Toolchain` carries a version string (part of every cache key) and
the compile and link flags; finding it runs no subprocess.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ToolchainError

__all__ = ["Toolchain", "find_toolchain", "BASE_CXXFLAGS"]

logger = logging.getLogger("bread_stan")

BASE_CXXFLAGS: tuple[str, ...] = (
    "-std=c++17", "-O3", "-fPIC", "-fvisibility=hidden",
    "-DSTAN_THREADS", "-D_REENTRANT", "-DBOOST_DISABLE_ASSERTS",
    "-DBOOST_PHOENIX_NO_VARIADIC_EXPRESSION",
    "-Wno-deprecated-declarations", "-Wno-ignored-attributes",
)


@dataclass(frozen=True)
class Toolchain:
    """Where stanc, the headers and the libraries are, and how to compile with them."""

    source: str                       # "httpstan" or "cmdstan"
    stanc: Path
    include_dirs: tuple[Path, ...]
    tbb_dir: Path                     # holds libtbb.so.2
    sundials_libs: tuple[Path, ...]
    stan_version: str
    source_version: str
    cxx: str = field(default_factory=lambda: os.environ.get("CXX", "g++"))

    @property
    def version(self) -> str:
        """Human-readable version: source, Stan and compiler."""
        return f"{self.source} {self.source_version}, Stan {self.stan_version}, {self.cxx}"

    def cxxflags(self, extra: tuple[str, ...] = ()) -> list[str]:
        """Flags for compiling one translation unit."""
        return [*BASE_CXXFLAGS, *(f"-I{d}" for d in self.include_dirs), *extra]

    def ldflags(self, sundials: bool) -> list[str]:
        """Flags for linking a model library (libtbb always: Stan Math needs it)."""
        flags = [f"-L{self.tbb_dir}", f"-Wl,-rpath,{self.tbb_dir}", "-ltbb"]
        if sundials:
            flags += [str(p) for p in self.sundials_libs]
        return flags

    def key(self, extra: tuple[str, ...] = ()) -> str:
        """A short hash identifying this toolchain and these flags (for cache keys)."""
        stanc_stat = self.stanc.stat()
        text = "\n".join([self.version, str(self.stanc), str(stanc_stat.st_size),
                          *map(str, self.include_dirs), *self.cxxflags(extra)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stan_version(stan_include: Path) -> str:
    text = (stan_include / "stan" / "version.hpp").read_text()
    parts = [re.search(rf"#define STAN_{p} (\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) if m else "?" for m in parts)


def _from_httpstan() -> Toolchain:
    try:
        import importlib.metadata
        import importlib.util
        spec = importlib.util.find_spec("httpstan")
    except ImportError:  # pragma: no cover - importlib is always there
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("the httpstan package is not installed; install it with "
                             "`pip install -e .` in the bread-stan checkout (which pins "
                             "its version) or set CMDSTAN")
    root = Path(next(iter(spec.submodule_search_locations)))
    include, lib = root / "include", root / "lib"
    stanc = root / "stanc"
    for needed in (stanc, include / "stan", lib / "libtbb.so.2"):
        if not needed.exists():
            raise ToolchainError(f"the httpstan wheel at {root} lacks {needed.name}; "
                                 "reinstall the httpstan version bread-stan pins")
    return Toolchain(
        source="httpstan", stanc=stanc, include_dirs=(include,), tbb_dir=lib,
        sundials_libs=tuple(sorted(lib.glob("libsundials_*.a"))),
        stan_version=_stan_version(include),
        source_version=importlib.metadata.version("httpstan"))


def _cmdstan_path() -> Path | None:
    env = os.environ.get("CMDSTAN")
    if env:
        return Path(env)
    try:
        import cmdstanpy  # optional
        return Path(cmdstanpy.cmdstan_path())
    except Exception:  # cmdstanpy absent, or it found no installation
        return None


def _httpstan_of_offline_build(math: Path) -> Path | None:
    """The httpstan folder an offline CmdStan build (build-cmdstan.sh) takes headers from."""
    flags = math / "make" / "compiler_flags"
    if not flags.is_file():
        return None
    found = re.search(r"^HTTPSTAN := (.+)$", flags.read_text(), re.MULTILINE)
    return Path(found.group(1).strip()) if found else None


def _from_cmdstan(root: Path) -> Toolchain:
    math = root / "stan" / "lib" / "stan_math"
    stanc = root / "bin" / ("stanc.exe" if os.name == "nt" else "stanc")
    if not stanc.exists():
        raise ToolchainError(f"no stanc in {root}/bin; build CmdStan with `make build`")
    stan_version = _stan_version(root / "stan" / "src")
    httpstan = _httpstan_of_offline_build(math)
    if httpstan is not None:
        if not (httpstan / "include" / "stan" / "math.hpp").is_file():
            raise ToolchainError(f"CmdStan at {root} takes its headers from {httpstan}, "
                                 "which is gone; rebuild it with build-cmdstan.sh")
        lib = httpstan / "lib"
        return Toolchain(
            source="cmdstan", stanc=stanc,
            include_dirs=(root / "src", root / "stan" / "src", httpstan / "include"),
            tbb_dir=lib, sundials_libs=tuple(sorted(lib.glob("libsundials_*.a"))),
            stan_version=stan_version, source_version=str(root))

    def one(pattern: str) -> Path:
        found = sorted((math / "lib").glob(pattern))
        if not found:
            raise ToolchainError(f"CmdStan at {root} lacks stan_math/lib/{pattern}; "
                                 "is it built (`make build`)?")
        return found[-1]

    sundials = one("sundials_*")
    tbb = one("tbb")
    include_dirs = (root / "src", root / "stan" / "src", math, one("eigen_*"),
                    one("boost_*"), sundials / "include", one("tbb_*") / "include")
    return Toolchain(
        source="cmdstan", stanc=stanc, include_dirs=include_dirs, tbb_dir=tbb,
        sundials_libs=tuple(sorted(sundials.glob("lib/*.a"))),
        stan_version=stan_version, source_version=str(root))


@functools.lru_cache(maxsize=None)
def find_toolchain(source: str | None = None) -> Toolchain:
    """The toolchain to compile with: ``"httpstan"`` (default) or ``"cmdstan"``.

    ``source`` defaults to the ``BREAD_STAN_TOOLCHAIN`` environment variable,
    then to "httpstan".  "cmdstan" uses the installation in ``CMDSTAN`` (or the
    one cmdstanpy finds) and fails clearly when there is none.
    """
    source = source or os.environ.get("BREAD_STAN_TOOLCHAIN") or "httpstan"
    if source not in ("cmdstan", "httpstan"):
        raise ToolchainError(f"unknown toolchain source {source!r}; use 'cmdstan' or 'httpstan'")
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        raise ToolchainError("no C++ compiler found: install g++ or set CXX")
    if source == "cmdstan":
        root = _cmdstan_path()
        if root is None:
            raise ToolchainError("no CmdStan found: set CMDSTAN to its directory "
                                 "(or build one with shared/cmdstan/build-cmdstan.sh)")
        toolchain = _from_cmdstan(root)
        logger.info("using the CmdStan toolchain at %s", root)
        return toolchain
    toolchain = _from_httpstan()
    logger.debug("using the toolchain of the httpstan wheel: %s", toolchain.version)
    return toolchain

"""A precompiled Stan model header, built once per toolchain and flags.

Every stanc-generated translation unit starts with ``#include
<stan/model/model_header.hpp>``; parsing that header is most of a model's C++
compile (on this project's machines about 20 of 30 seconds).  GCC can load it
precompiled instead: a ``model_header.hpp.gch`` found in an include directory
searched before the real one is used in place of the header, and gives the same
object file, byte for byte.  Building it costs about two model compiles and
0.8 GB of cache, so it pays for itself from the third model on.

Set ``BREAD_STAN_PCH=0`` to compile without it.  A toolchain whose compiler
cannot build one (not GCC, or a failure) compiles without it, with one warning.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Sequence

from ..store import lock
from .toolchain import Toolchain

__all__ = ["precompiled_header_dir", "HEADER"]

logger = logging.getLogger("bread_stan")

HEADER = Path("stan") / "model" / "model_header.hpp"


def precompiled_header_dir(toolchain: Toolchain, cxxflags: Sequence[str],
                           cache_root: Path) -> Path | None:
    """The include directory holding the precompiled model header for these flags
    (built on first use, under ``cache_root/pch``), or None to compile without it."""
    if os.environ.get("BREAD_STAN_PCH", "1").strip().lower() in ("0", "no", "false", "off"):
        return None
    return _build(toolchain, tuple(cxxflags), cache_root)


@functools.lru_cache(maxsize=None)
def _build(toolchain: Toolchain, cxxflags: tuple[str, ...], cache_root: Path) -> Path | None:
    directory = cache_root / "pch" / toolchain.key(cxxflags)
    target = directory / f"{HEADER}.gch"
    failed = directory / "failed"
    if target.exists():
        return directory
    if failed.exists():
        return None
    source = next((d / HEADER for d in toolchain.include_dirs if (d / HEADER).is_file()), None)
    if source is None:
        return None
    with lock(directory, wait=True):
        if target.exists():
            return directory
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        command = [toolchain.cxx, *toolchain.cxxflags(cxxflags), "-x", "c++-header",
                   str(source), "-o", str(tmp)]
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            failed.write_text(result.stderr[-4000:])
            logger.warning("could not precompile the Stan model header (%s); models are "
                           "compiled without it", (result.stderr.strip().splitlines()
                                                   or ["no message"])[-1][:200])
            return None
        os.replace(tmp, target)
        logger.info("precompiled the Stan model header in %.1f s (used by every model "
                    "compiled with these flags)", time.perf_counter() - start)
    return directory

"""Saving and loading results: atomic one-file units, corrupt files named, one run per directory.

Every file bread_stan writes goes through :func:`write_atomic`: the bytes go to
a temporary file in the same directory whose name starts with a dot (so no load
pattern such as ``steps_*.npz`` can match it), are flushed to disk, and the file
is renamed into place.  A result that has arrays is one ``.npz`` *unit* holding
the arrays and its JSON metadata (:func:`save_unit`), so it is either complete
or absent.  A file that cannot be read raises :class:`CorruptFileError` naming
the file and what is wrong; :func:`set_aside` moves it out of the way so that
a rerun recomputes it.  :func:`lock` keeps two runs off one directory
(``wait=False``) or serialises builders of one cache entry (``wait=True``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

from .errors import BreadStanError, InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: no locking, os.replace still atomic
    fcntl = None

__all__ = ["CorruptFileError", "DirectoryBusyError", "OutputDirectoryError", "write_atomic", "save_json",
           "save_for_run", "load_for_run",
           "load_json", "save_unit", "load_unit", "set_aside", "load_if_sound", "clean_temporaries",
           "lock", "check_writable", "jsonable"]

log = logging.getLogger("bread_stan")

T = TypeVar("T")

_META = "__meta__"
_TMP_NAME = re.compile(r"\..+\.\d+\.tmp")  # what write_atomic names its temporaries
_TMP_SUFFIX = ".tmp"
_LOCK = ".lock"


class CorruptFileError(BreadStanError):
    """A saved file exists but cannot be read; ``path`` and ``problem`` say which and why."""

    def __init__(self, path: Path, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path} is corrupt or half-written ({problem}); rerunning the "
                         "command that wrote it recomputes it")


class DirectoryBusyError(BreadStanError):
    """Another process holds the lock of an output directory."""


class OutputDirectoryError(BreadStanError):
    """The output directory is a file, lies under a file, or cannot be written."""


def jsonable(obj):
    """Convert numpy values inside nested containers to plain Python."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to ``path`` so that ``path`` is either the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{_TMP_SUFFIX}")
    payload = data.encode() if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` (numpy values allowed) as indented JSON, atomically."""
    write_atomic(path, json.dumps(jsonable(obj), indent=1, default=float))


def load_json(path: str | os.PathLike) -> Any:
    """Read a JSON file; :class:`CorruptFileError` if it is empty or not JSON."""
    path = Path(path)
    text = path.read_bytes()
    if not text.strip():
        raise CorruptFileError(path, "the file is empty")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorruptFileError(path, f"not valid JSON: {error}") from None


def save_for_run(path: str | os.PathLike, record: dict, fingerprint: str | None) -> None:
    """Write ``record`` with the ``fingerprint`` of the run it was made for, atomically."""
    save_json(path, {**record, "fingerprint": fingerprint})


def load_for_run(path: str | os.PathLike, fingerprint: str | None,
                 read: Callable[[dict], T], what: str) -> T | None:
    """``read`` of the record saved by :func:`save_for_run`: None when it was saved for
    a run of another ``fingerprint`` (read by any run when ``fingerprint`` is None, and
    when the record has no fingerprint at all);
    CorruptFileError when the file is not ``what`` (a JSON object ``read`` accepts)."""
    record = load_json(path)
    if not isinstance(record, dict):
        raise CorruptFileError(Path(path), f"not {what}")
    # A record without the key was written before runs kept fingerprints (tuning.json):
    # only ever inside its own run's directory, whose header the resume checks.
    if fingerprint is not None and record.get("fingerprint", fingerprint) != fingerprint:
        return None
    try:
        return read(record)
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptFileError(Path(path), f"not {what}: {error!r}") from None


def save_unit(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """One ``.npz`` file holding ``arrays`` and the JSON ``meta``, written atomically."""
    if _META in arrays:
        raise InputError(f"array name {_META!r} is reserved")
    buffer = io.BytesIO()
    text = json.dumps(jsonable(meta), default=float)
    np.savez_compressed(buffer, **arrays, **{_META: np.frombuffer(text.encode(), np.uint8)})
    write_atomic(path, buffer.getvalue())


def load_unit(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and metadata of a unit saved by :func:`save_unit`.

    A truncated, garbled or foreign file raises :class:`CorruptFileError`.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as error:
        raise CorruptFileError(path, f"not a readable .npz file: {error}") from None
    if _META not in arrays:
        raise CorruptFileError(path, "no metadata inside (not written by this version of "
                                     "bread_stan?)")
    try:
        meta = json.loads(arrays.pop(_META).tobytes().decode())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorruptFileError(path, f"its metadata is not valid JSON: {error}") from None
    return arrays, meta


def set_aside(error: CorruptFileError) -> Path:
    """Rename the corrupt file to ``<name>.corrupt`` (matched by no load pattern),
    log one warning, and return the new path."""
    aside = error.path.with_name(error.path.name + ".corrupt")
    with contextlib.suppress(FileNotFoundError):
        os.replace(error.path, aside)
    log.warning("%s is corrupt or half-written (%s); moved to %s and it will be recomputed",
                error.path, error.problem, aside.name)
    return aside


def load_if_sound(path: str | os.PathLike, loader: Callable[[Path], T]) -> T | None:
    """``loader(path)`` for resuming: None when the file is absent, or when it is
    corrupt (then it is set aside with a warning, so the caller recomputes it)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return loader(path)
    except CorruptFileError as error:
        set_aside(error)
        return None


def clean_temporaries(directory: str | os.PathLike) -> int:
    """Remove the temporary files that interrupted writes left under ``directory``
    (call only while holding its lock); returns how many were removed."""
    removed = 0
    root = Path(directory)
    if not root.is_dir():
        return 0
    # Only names write_atomic makes, at most three folders deep (replicates/r1/...).
    for pattern in (f".*{_TMP_SUFFIX}", f"*/.*{_TMP_SUFFIX}", f"*/*/.*{_TMP_SUFFIX}"):
        for tmp in root.glob(pattern):
            if not _TMP_NAME.fullmatch(tmp.name):
                continue
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                removed += 1
    if removed:
        log.info("removed %d temporary file(s) left by an interrupted run in %s", removed, root)
    return removed


@contextlib.contextmanager
def lock(directory: str | os.PathLike, *, wait: bool = False) -> Iterator[Path]:
    """Hold the lock file of ``directory`` for the duration of the block.

    ``wait=False`` raises :class:`DirectoryBusyError` ("another run (pid N) is
    using DIR") at once when another process holds it; ``wait=True`` blocks.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / _LOCK, "a+") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                handle.seek(0)
                pid = handle.read().strip()
                who = f"another run (pid {pid})" if pid.isdigit() else "another run"
                raise DirectoryBusyError(
                    f"{who} is using {directory}; wait for it to finish or choose another "
                    "output directory") from None
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            yield directory
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def check_writable(directory: str | os.PathLike, what: str = "output directory") -> Path:
    """Create ``directory`` (the ``what``) if needed and prove it writable, before
    any work is done.

    Raises :class:`OutputDirectoryError` with a one-line message naming the directory.
    """
    directory = Path(directory)
    for parent in [directory, *directory.parents]:
        if parent.exists():
            if not parent.is_dir():
                where = "is" if parent == directory else f"is under {parent}, which is"
                raise OutputDirectoryError(f"{what} {directory} {where} a file, not a "
                                           "directory")
            break
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=directory, prefix=".write-test.",
                                         suffix=_TMP_SUFFIX)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise OutputDirectoryError(f"cannot write to {what} {directory}: "
                                   f"{error.strerror or error}") from None
    return directory

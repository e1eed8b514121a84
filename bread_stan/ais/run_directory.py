"""What a run keeps in its output directory, and the one way it is read back.

A run directory holds, each written atomically as a complete unit:

- ``run.json``: the header (written and read as a result by
  :mod:`bread_stan.ais.result_files`, with ``steps_T.npz`` and the summary) (the model, the settings and their fingerprint, the extras:
  the path choice, the tuning record, the simulator check);
- ``steps_T.npz``: one finished number of distributions T each;
- ``summary.json``, ``summary.csv``: the table of the finished run;
- ``path_choice.json``: the automatic path choice (under the fingerprint of the
  settings as requested, before the choice made them concrete);
- the tuned path, in its kind's file (:data:`bread_stan.ais.path_kinds.KINDS`):
  ``tuning.json`` (the prior path), ``gaussian_path.json`` or ``waypoint_path.json``
  (the paths from a Gaussian q);
- ``shards/*.npz``: the finished shards of a step count still running.

**One fingerprint rule.**  Every file carries the fingerprint of the run that wrote
it and is read only by a run with the same fingerprint; a file from another run's
settings is ignored (and the work redone).  Files written before runs kept
fingerprints in them (``tuning.json``) are read by the run of their directory, whose
header the resume checks first.

**One corruption rule.**  A damaged file is set aside (renamed, with a warning) and
what it held is computed again; nothing else is lost.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path as FilePath
from typing import Any, Callable, TypeVar

import numpy as np

from ..store import (CorruptFileError, load_for_run, load_if_sound, load_json, load_unit,
                     save_for_run, save_unit, set_aside)
from .path import Path
from .result_files import RUN_FILE
from .path_kinds import KINDS, read_path

__all__ = ["RunDirectory", "HEADER_FILE", "CHOICE_FILE", "SHARD_DIR"]

log = logging.getLogger(__name__)

T = TypeVar("T")

HEADER_FILE = RUN_FILE
CHOICE_FILE = "path_choice.json"
SHARD_DIR = "shards"
class RunDirectory:
    """A run's output directory (``root`` None: a run that keeps nothing), read and
    written under the run's ``fingerprint`` (see the module docstring)."""

    def __init__(self, root: str | FilePath | None, fingerprint: str | None):
        self.root = None if root is None else FilePath(root)
        self.fingerprint = fingerprint

    def file(self, name: str) -> FilePath | None:
        return None if self.root is None else self.root / name

    # -- records ----------------------------------------------------------------------
    def read(self, name: str, read: Callable[[dict], T], what: str,
             key: str | None = None) -> T | None:
        """``read`` of the record ``name`` saved for this run (or for the settings
        ``key``), or None: nothing kept, none saved, saved for other settings, or
        damaged (set aside)."""
        path = self.file(name)
        if path is None:
            return None
        key = self.fingerprint if key is None else key
        return load_if_sound(path, lambda p: load_for_run(p, key, read, what))

    def write(self, name: str, record: dict, key: str | None = None) -> None:
        """Save ``record`` as ``name`` under this run's fingerprint (or ``key``)."""
        if self.root is not None:
            save_for_run(self.root / name, record, self.fingerprint if key is None else key)

    def header(self) -> dict | None:
        """The saved ``run.json`` as a dict, or None (none saved, or damaged: set aside);
        the resume checks its fingerprint.  :func:`~bread_stan.ais.result_files.read_header`
        reads it as a result."""
        path = self.file(HEADER_FILE)
        return None if path is None else load_if_sound(path, load_json)

    # -- the tuned path -----------------------------------------------------------------
    def load_path(self, name: str, file: str | None = None) -> Path | None:
        """The ``name`` path ("prior", "gaussian", "waypoint") saved for this run (in
        ``file``, default the kind's own file name)."""
        return self.read(file or KINDS[name].file, read_path, f"a tuned {name} path")

    def save_path(self, path: Path, file: str | None = None) -> None:
        if self.root is not None:
            path.save(self.root / (file or KINDS[path.name].file), self.fingerprint)

    def load_or_fit(self, name: str, fit: Callable[[], Path], given: Path | None = None,
                    file: str | None = None) -> tuple[Path, float | None]:
        """The run's ``name`` path: ``given`` (a pilot's, kept here unless one is
        saved), else the one saved for this run, else ``fit()``'s, saved.  Returns it
        and the seconds fitting took (None unless fitted here).  ``file``: where it is
        kept, for a directory that holds several paths of one kind (the protocol's
        simulated and real data, its replicates; AIDE's kernels)."""
        saved = self.load_path(name, file)
        if saved is not None:
            log.info("the path saved in %s (the %s path, not fitted again)",
                     self.file(file or KINDS[name].file), name)
            return saved, None
        if given is not None:
            self.save_path(given, file)
            return given, None
        start = time.perf_counter()
        path = fit()
        seconds = time.perf_counter() - start
        self.save_path(path, file)
        return path, seconds

    # -- the path choice ------------------------------------------------------------
    def load_choice(self, key: str, read: Callable[[dict], T]) -> T | None:
        return self.read(CHOICE_FILE, read, "a path choice", key)

    def save_choice(self, key: str, record: dict) -> None:
        self.write(CHOICE_FILE, record, key)

    # -- shards of an unfinished step count -------------------------------------------
    def saved_shards(self) -> dict[str, tuple[dict, dict]]:
        """The shards an interrupted run of these settings saved, by key."""
        shard_dir = self.file(SHARD_DIR)
        if shard_dir is None or not shard_dir.is_dir():
            return {}
        saved = {}
        for path in sorted(shard_dir.glob("*.npz")):
            try:
                arrays, meta = load_unit(path)
            except CorruptFileError as error:
                set_aside(error)
                continue
            if meta.get("fingerprint") == self.fingerprint:
                saved[meta["shard"]] = (arrays, meta)
        return saved

    def save_shard(self, key: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]
                   ) -> None:
        shard_dir = self.file(SHARD_DIR)
        if shard_dir is not None:
            shard_dir.mkdir(exist_ok=True)
            save_unit(shard_dir / f"{key}.npz", arrays, {**meta, "fingerprint": self.fingerprint})

    def drop_shards(self, keys) -> None:
        """Remove the shards of a step count now saved whole (and the folder when empty)."""
        shard_dir = self.file(SHARD_DIR)
        if shard_dir is None:
            return
        for key in keys:
            (shard_dir / f"{key}.npz").unlink(missing_ok=True)
        if shard_dir.is_dir() and not any(shard_dir.iterdir()):
            shard_dir.rmdir()  # no shard left to resume from

"""The local executor: a run's independent pieces run here, one after another.

It has the interface of the Dask executor (:class:`~bread_stan.parallel.executor.Executor`),
so a workflow sends its work through one path whatever runs it.  Its block size is
None: the shards of one number of distributions T are one per simulated problem, each
holding the forward and reverse chains in one batch, which is the batch
:func:`bread_stan.ais.runs.run` runs, so the numbers (and the wall times split between
the directions) are those of the engine's own call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LocalExecutor"]


class LocalExecutor:
    """Runs every task in this process, in the order given (see the module docstring)."""

    kind = "local"
    n_workers = 1
    chains_per_shard = None
    in_process = True  # tasks run here, so they may show their own progress bars

    def describe(self) -> dict:
        """What ran the work, for the result's record."""
        return {"kind": "local", "workers": 1}

    def block_size(self, chains: int) -> None:
        """None: a problem's chains are not split (one shard, both directions)."""
        return None

    def share(self, value: Any) -> Any:
        """``value`` itself (nothing to send)."""
        return value

    def run(self, function: Callable, tasks: Mapping[str, tuple],
            on_result: Callable[[str, Any], None], *, progress: bool = True,
            saved_in: str | None = None) -> None:
        """``on_result(key, function(*args))`` for every ``key: args`` of ``tasks``, in
        order (``progress`` and ``saved_in`` are the Dask executor's; a local task shows
        its own progress)."""
        for key, args in tasks.items():
            on_result(key, function(*args))

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> "LocalExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""Where a run's independent pieces execute: here (threads), or on a Dask cluster.

``Executor()`` is the local default: the tasks run in this process, one after
another, through :class:`~bread_stan.parallel.local.LocalExecutor` (same interface,
so workflows never ask where work runs; numbers unchanged).  ``Executor(workers=N)`` starts a ``LocalCluster`` of N single-threaded
worker processes on this machine; ``Executor("tcp://HOST:8786")`` connects to a
running Dask scheduler; ``Executor(client=client)`` uses a
``distributed.Client`` the caller made.  Every call goes through that one client
(``client.submit``, never Dask's process-wide default client or scheduler setting),
and a client the executor makes is not made the process's default, so Dask's global
state is left as it was.  On Dask, each task's result is handed
back as it arrives (one progress bar across all tasks), so the caller saves it at
once; a worker that dies mid-task has its task rerun elsewhere by Dask (and
``retries`` reruns a task that raised), and a scheduler that goes away stops the
run with :class:`SchedulerLostError`.

Dask is the optional extra ``bread_stan[dask]`` (``pip install "dask[distributed]"``).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..progress import progress_bar
from ..errors import BreadStanError, InputError
from .local import LocalExecutor

__all__ = ["Executor", "SchedulerLostError", "DaskClientClosedError", "DaskEnvironmentError",
           "DaskMissingError"]

log = logging.getLogger(__name__)


class SchedulerLostError(BreadStanError):
    """The Dask scheduler could not be reached or went away during a run."""


class DaskClientClosedError(BreadStanError):
    """The executor's Dask client was closed before the work was sent."""


class DaskEnvironmentError(BreadStanError):
    """The Dask scheduler or workers lack what the tasks need (bread_stan itself)."""


class DaskMissingError(BreadStanError):
    """Dask was asked for but is not installed."""


def _distributed():
    try:
        import distributed
    except ImportError:
        raise DaskMissingError('running on Dask needs dask.distributed: pip install '
                               '"bread_stan[dask]" (or "dask[distributed]")') from None
    return distributed


class Executor:
    """Local threads (the default) or a Dask cluster; see the module docstring.

    ``chains_per_shard`` sets how many chains of one direction a Dask task runs
    (default: each problem's chains split evenly over the workers); any value
    gives the same numbers.  ``retries`` is how often Dask reruns a task that
    raised.  ``connect_timeout`` is how many seconds an unreachable scheduler is tried.
    Use it as a context manager (or call :meth:`close`) to shut down a cluster it
    started.
    """

    def __init__(self, scheduler: str | None = None, *, workers: int | None = None,
                 client=None, chains_per_shard: int | None = None, retries: int = 2,
                 connect_timeout: float = 10.0):
        if sum(x is not None for x in (scheduler, workers, client)) > 1:
            raise InputError("give at most one of a scheduler address, a number of workers "
                             "and a Dask client")
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise InputError(f"workers must be a whole number >= 1; got {workers!r}")
        if not connect_timeout > 0:
            raise InputError(f"the connect timeout must be a positive number of seconds; "
                             f"got {connect_timeout!r}")
        if chains_per_shard is not None and (not isinstance(chains_per_shard, int)
                                             or chains_per_shard < 1):
            raise InputError(f"chains_per_shard must be a whole number >= 1; "
                             f"got {chains_per_shard!r}")
        self.chains_per_shard = chains_per_shard
        self.retries = int(retries)
        self.client = client
        self._cluster = None
        self._own_client = False
        if scheduler is not None or workers is not None:
            distributed = _distributed()
            if workers is not None:
                self._cluster = distributed.LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True,
                    dashboard_address=None)
                scheduler = self._cluster.scheduler_address
            try:
                self.client = distributed.Client(scheduler, timeout=f"{connect_timeout}s",
                                                 set_as_default=False)
            except (OSError, TimeoutError) as error:
                self.close()
                raise SchedulerLostError(
                    f"cannot reach the Dask scheduler at {scheduler} ({_first_line(error)}); "
                    "check the address and that the scheduler is running") from None
            self._own_client = True
        self.address = getattr(getattr(self.client, "scheduler", None), "address", None)
        self._local = LocalExecutor() if self.client is None else None
        if self.client is not None:
            self._open_client()

    @property
    def kind(self) -> str:
        """``"local"`` or ``"dask"``."""
        return "local" if self.client is None else "dask"

    @property
    def in_process(self) -> bool:
        """Whether tasks run in this process (and may show their own progress bars)."""
        return self.client is None

    @property
    def n_workers(self) -> int:
        """Workers the scheduler knows now (1 for local)."""
        if self.client is None:
            return 1
        return max(1, len(self._open_client().scheduler_info(n_workers=-1).get("workers", {})))

    def describe(self) -> dict:
        """What ran the work, for the result's record (not part of any resume key)."""
        if self.client is None:
            return self._local.describe()
        return {"kind": "dask", "workers": self.n_workers, "scheduler": self.address}

    def block_size(self, chains: int) -> int | None:
        """Chains per task when ``chains`` chains of one direction are split (None,
        locally: not split, one shard per problem holding both directions)."""
        if self.client is None:
            return self._local.block_size(chains)
        return self.chains_per_shard or max(1, math.ceil(chains / self.n_workers))

    def share(self, value: Any):
        """``value`` sent to the cluster once, for many tasks to use.

        Broadcast to every worker: data scattered to one worker only is lost with that
        worker, and Dask cannot recompute it, so a killed worker would fail the run.
        Locally, ``value`` itself."""
        if self.client is None:
            return self._local.share(value)
        return self._open_client().scatter(value, broadcast=True, hash=False)

    def run(self, function: Callable, tasks: Mapping[str, tuple],
            on_result: Callable[[str, Any], None], *, progress: bool = True,
            saved_in: str | None = None) -> None:
        """Run ``function(*args)`` for every ``key: args`` of ``tasks`` on the cluster
        and call ``on_result(key, value)`` in this process as each finishes (locally:
        each in turn, here, in the order given)."""
        if self.client is None:
            return self._local.run(function, tasks, on_result, progress=progress,
                                   saved_in=saved_in)
        distributed = _distributed()
        if not tasks:
            return
        client = self._open_client()
        run_id = uuid.uuid4().hex[:8]
        futures = {client.submit(function, *args, key=f"bread-{key}-{run_id}",
                                 retries=self.retries, pure=False): key
                   for key, args in tasks.items()}
        bar = progress_bar(len(futures), progress, f"shards on {self.n_workers} Dask workers")
        done = 0
        arriving = distributed.as_completed(futures, loop=client.loop)  # not default_client()
        try:
            while True:
                try:
                    future = next(arriving)
                    value = future.result()
                except StopIteration:
                    break
                except Exception as error:  # noqa: BLE001 - sorted out just below
                    if self._scheduler_lost(error):
                        raise self._lost(done, saved_in) from None
                    if "different environments" in str(error):
                        raise DaskEnvironmentError(
                            f"the Dask cluster at {self.address} cannot load bread_stan's "
                            "tasks: install the same bread_stan (and numpy) on the scheduler "
                            "and every worker") from None
                    raise
                on_result(futures[future], value)
                done += 1
                if bar is not None:
                    bar.update()
        finally:
            if bar is not None:
                bar.close()
            for future in futures:
                future.release()

    def _open_client(self):
        """The client, or one line saying it is closed and what to do instead (not
        Dask's "IOLoop is closed")."""
        status = self.client.status
        if status in ("closing", "closed"):
            fix = ("this Executor was closed: make a new one" if self._own_client else
                   "give Executor(client=...) a running distributed.Client, or use "
                   "Executor(workers=N) or a scheduler address")
            raise DaskClientClosedError(f"the Dask client is {status}; {fix}")
        return self.client

    def _scheduler_lost(self, error: BaseException) -> bool:
        import asyncio
        import concurrent.futures

        from distributed.comm.core import CommClosedError

        # A future the client cancels because its connection went (FutureCancelledError,
        # reason "scheduler-connection-lost") may arrive while the client still says
        # "running": this run never cancels its own futures, so a cancelled one means
        # the cluster dropped it.
        return (isinstance(error, (CommClosedError, asyncio.CancelledError,
                                   concurrent.futures.CancelledError))
                or self.client.status not in ("running", "connecting"))

    def _lost(self, done: int, saved_in: str | None) -> SchedulerLostError:
        where = f"saved in {saved_in}" if saved_in else "not saved (no output directory)"
        return SchedulerLostError(
            f"lost the Dask scheduler at {self.address}; {done} shards finished are "
            f"{where}; rerun the same command to resume")

    def close(self) -> None:
        """Close the client and cluster this executor started (not a client it was given)."""
        if self._own_client and self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._cluster = None

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__

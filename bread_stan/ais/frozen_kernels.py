"""Frozen kernel settings for every temperature of one annealing schedule.

A frozen kernel schedule is what forward and reverse AIS share (SPEC section
1): the betas, the number of kernel steps per temperature and, for a kernel
with settings, its params at each temperature (step size and inverse metric,
diagonal or dense, per temperature; the other fields, such as the number of leapfrog steps
or the maximum tree depth, fixed).  It is decided before any scored chain runs.

- :class:`KernelSchedule` holds the per-temperature params as arrays (T, ...)
  and is saved as JSON (``to_dict``/``from_dict``, ``to_json``/``from_json``).
- :class:`InterpolatedSchedule` computes them on demand, a block of
  temperatures at a time, from a function of beta (the tuned kernel's
  interpolation, or constant params): memory does not grow with T, which is
  what the runs use.  Its ``to_dict`` writes the same JSON as the array form.

A kernel without settings (the grid Metropolis kernel) uses ``kind=None`` and
gets ``params_at(t) is None``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..kernels.registry import KERNELS
from .betas import Betas, validate
from ..errors import InputError

__all__ = ["KernelSchedule", "InterpolatedSchedule", "PARAMS_BY_KIND", "kind_of"]

PARAMS_BY_KIND = {name: entry.params for name, entry in KERNELS.items()}


def kind_of(params) -> str:
    """The registry name of a params object (``"hmc"``, ``"nuts"``)."""
    for kind, cls in PARAMS_BY_KIND.items():
        if isinstance(params, cls):
            return kind
    raise TypeError(f"no kernel kind is registered for {type(params).__name__}")


@dataclass(frozen=True, eq=False)
class KernelSchedule:
    """Betas (T,), kernel steps per temperature, and per-temperature params.

    ``step_size`` is (T,) and ``inv_metric`` (T, d) (diagonal), (T, d, d)
    (dense) or None (identity); ``fixed`` holds the params fields that do not
    vary with temperature.
    """

    betas: np.ndarray
    steps_per_temperature: int = 1
    kind: str | None = None
    step_size: np.ndarray | None = None
    inv_metric: np.ndarray | None = None
    fixed: dict | None = None

    def __post_init__(self):
        if not isinstance(self.betas, Betas):  # a lazy Betas is validated when built
            object.__setattr__(self, "betas", validate(self.betas))
        if int(self.steps_per_temperature) < 1:
            raise InputError("steps_per_temperature must be at least 1")
        object.__setattr__(self, "steps_per_temperature", int(self.steps_per_temperature))
        if self.kind is None:
            return
        if self.kind not in PARAMS_BY_KIND:
            raise InputError(f"unknown kernel kind {self.kind!r}; known: {sorted(PARAMS_BY_KIND)}")
        T = self.betas.size
        step = np.asarray(self.step_size, dtype=float)
        if step.shape != (T,) or not np.all(np.isfinite(step) & (step > 0)):
            raise InputError(f"step_size must be {T} finite positive values, one per temperature")
        object.__setattr__(self, "step_size", step)
        if self.inv_metric is not None:
            m = np.asarray(self.inv_metric, dtype=float)
            if m.ndim == 3:
                if (m.shape[0] != T or m.shape[1] != m.shape[2] or not np.all(np.isfinite(m))
                        or not np.allclose(m, np.swapaxes(m, 1, 2))):
                    raise InputError(f"a dense inv_metric must be ({T}, d, d) finite "
                                     "symmetric matrices")
            elif m.ndim != 2 or m.shape[0] != T or not np.all(np.isfinite(m) & (m > 0)):
                raise InputError(f"inv_metric must be ({T}, d) finite positive values "
                                 f"(diagonal) or ({T}, d, d) (dense)")
            object.__setattr__(self, "inv_metric", m)
        object.__setattr__(self, "fixed", dict(self.fixed or {}))

    @classmethod
    def constant(cls, betas, params=None, steps_per_temperature: int = 1):
        """The same params at every temperature (or none, for kernels without
        params), as an :class:`InterpolatedSchedule` (nothing stored per temperature)."""
        if params is None:
            return cls(betas, steps_per_temperature)
        fields = asdict(params)
        step = float(fields.pop("step_size"))
        metric = fields.pop("inv_metric")
        if metric is not None:
            metric = np.asarray(metric, dtype=float)
            if metric.ndim == 3:  # dense, given as (1, d, d)
                metric = metric[0]
        width = 0 if metric is None else metric.size
        return InterpolatedSchedule(betas, _Constant(step, metric), kind_of(params), fields,
                                    width, steps_per_temperature)

    @property
    def n_temperatures(self) -> int:
        return self.betas.size

    def params_at(self, t: int):
        """Kernel params at temperature index ``t`` (0-based into ``betas``)."""
        if self.kind is None:
            return None
        metric = None if self.inv_metric is None else self.inv_metric[t]
        if metric is not None and metric.ndim == 2:
            metric = metric[None]  # dense: (1, d, d), never read as a per-chain diagonal
        return PARAMS_BY_KIND[self.kind](step_size=float(self.step_size[t]),
                                         inv_metric=metric, **self.fixed)

    def with_steps(self, steps_per_temperature: int) -> "KernelSchedule":
        return replace(self, steps_per_temperature=steps_per_temperature)

    def to_dict(self) -> dict:
        """Plain-JSON form (lists and numbers)."""
        lst = lambda a: None if a is None else np.asarray(a).tolist()  # noqa: E731
        return {"betas": lst(self.betas), "steps_per_temperature": self.steps_per_temperature,
                "kind": self.kind, "step_size": lst(self.step_size),
                "inv_metric": lst(self.inv_metric), "fixed": self.fixed}

    @classmethod
    def from_dict(cls, data: dict) -> "KernelSchedule":
        arr = lambda a: None if a is None else np.asarray(a, dtype=float)  # noqa: E731
        return cls(arr(data["betas"]), data.get("steps_per_temperature", 1), data.get("kind"),
                   arr(data.get("step_size")), arr(data.get("inv_metric")), data.get("fixed"))

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> "KernelSchedule":
        return cls.from_dict(json.loads(text))


class _Constant:
    """The interpolation of :meth:`KernelSchedule.constant`: the same step size and
    metric at every beta (a class, not a closure, so that schedules pickle for Dask)."""

    def __init__(self, step: float, metric: np.ndarray | None):
        self.step, self.metric = step, metric

    def __call__(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        m = b.size
        return (np.full(m, self.step),
                None if self.metric is None else np.repeat(self.metric[None], m, axis=0))


class InterpolatedSchedule:
    """A frozen kernel schedule whose per-temperature params are computed on demand.

    ``interpolate(betas)`` returns step sizes (m,) and inverse metrics ((m, d),
    (m, d, d) or None) for a block of m betas, each entry a function of its own
    beta only (the tuned kernel's interpolation: :meth:`TunedKernel.interpolate
    <bread_stan.ais.tuning.TunedKernel.interpolate>`).  ``width`` is the number of
    metric entries per temperature (d, d * d or 0); it sets the block length, so
    that the two blocks kept (the forward and the reverse chains' current ones) stay
    under about 0.5 MB each.  ``betas`` is an array
    or a lazy :class:`~bread_stan.ais.betas.Betas`.  :meth:`params_at` equals
    the array form :meth:`materialise` entry for entry, bit for bit.
    """

    _BLOCK_FLOATS = 1 << 16
    _CACHED = 2  # the forward and the reverse chains' current blocks

    def __init__(self, betas, interpolate, kind: str, fixed: dict, width: int,
                 steps_per_temperature: int = 1):
        if kind not in PARAMS_BY_KIND:
            raise InputError(f"unknown kernel kind {kind!r}; known: {sorted(PARAMS_BY_KIND)}")
        if int(steps_per_temperature) < 1:
            raise InputError("steps_per_temperature must be at least 1")
        self.betas = betas if isinstance(betas, Betas) else validate(betas)
        self.steps_per_temperature = int(steps_per_temperature)
        self.kind, self.fixed, self.width = kind, dict(fixed or {}), int(width)
        self._interpolate = interpolate
        self.block = int(np.clip(self._BLOCK_FLOATS // (1 + self.width), 16, 4096))
        self._cache: dict[int, tuple] = {}

    @property
    def n_temperatures(self) -> int:
        return len(self.betas)

    def _block(self, j: int) -> tuple[np.ndarray, np.ndarray | None]:
        found = self._cache.get(j)
        if found is None:
            lo = j * self.block
            found = self._interpolate(np.asarray(
                self.betas[lo:min(lo + self.block, self.n_temperatures)], dtype=float))
            if len(self._cache) >= self._CACHED:
                self._cache.pop(next(iter(self._cache)))
            self._cache[j] = found
        return found

    def params_at(self, t: int):
        """Kernel params at temperature index ``t`` (0-based into ``betas``)."""
        t = int(t)
        if not 0 <= t < self.n_temperatures:
            raise IndexError(f"temperature {t} out of range for {self.n_temperatures}")
        step, metric = self._block(t // self.block)
        i = t % self.block
        row = None if metric is None else metric[i]
        if row is not None and row.ndim == 2:
            row = row[None]  # dense: (1, d, d), never read as a per-chain diagonal
        return PARAMS_BY_KIND[self.kind](step_size=float(step[i]), inv_metric=row,
                                         **self.fixed)

    def materialise(self) -> KernelSchedule:
        """The array form (T per-temperature entries: for inspection and small T)."""
        betas = np.asarray(self.betas, dtype=float)
        step, metric = self._interpolate(betas)
        return KernelSchedule(betas, self.steps_per_temperature, self.kind, step, metric,
                              self.fixed)

    @property
    def step_size(self) -> np.ndarray:
        """All T step sizes (built on each access)."""
        return self.materialise().step_size

    @property
    def inv_metric(self) -> np.ndarray | None:
        """All T inverse metrics (built on each access)."""
        return self.materialise().inv_metric

    def with_steps(self, steps_per_temperature: int) -> "InterpolatedSchedule":
        return InterpolatedSchedule(self.betas, self._interpolate, self.kind, self.fixed,
                                    self.width, steps_per_temperature)

    def to_dict(self) -> dict:
        """The array form's plain JSON (:meth:`KernelSchedule.to_dict`)."""
        return self.materialise().to_dict()

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

"""Frozen kernel settings for every temperature of one annealing schedule.

A :class:`KernelSchedule` is what forward and reverse AIS share (SPEC section
1): the betas, the number of kernel steps per temperature and, for a kernel
with settings, its params at each temperature (step size and inverse metric,
diagonal or dense, per temperature; the other fields, such as the number of leapfrog steps
or the maximum tree depth, fixed).  It is decided before any scored chain runs
and saved with the results (``to_dict``/``from_dict``, ``to_json``/``from_json``).
A kernel without settings (the grid Metropolis kernel) uses ``kind=None`` and
gets ``params_at(t) is None``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..kernels.hmc import HMCParams
from ..kernels.nuts import NUTSParams
from .betas import validate

__all__ = ["KernelSchedule", "PARAMS_BY_KIND", "kind_of"]

PARAMS_BY_KIND = {"hmc": HMCParams, "nuts": NUTSParams}


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
        object.__setattr__(self, "betas", validate(self.betas))
        if int(self.steps_per_temperature) < 1:
            raise ValueError("steps_per_temperature must be at least 1")
        object.__setattr__(self, "steps_per_temperature", int(self.steps_per_temperature))
        if self.kind is None:
            return
        if self.kind not in PARAMS_BY_KIND:
            raise ValueError(f"unknown kernel kind {self.kind!r}; known: {sorted(PARAMS_BY_KIND)}")
        T = self.betas.size
        step = np.asarray(self.step_size, dtype=float)
        if step.shape != (T,) or not np.all(np.isfinite(step) & (step > 0)):
            raise ValueError(f"step_size must be {T} finite positive values, one per temperature")
        object.__setattr__(self, "step_size", step)
        if self.inv_metric is not None:
            m = np.asarray(self.inv_metric, dtype=float)
            if m.ndim == 3:
                if (m.shape[0] != T or m.shape[1] != m.shape[2] or not np.all(np.isfinite(m))
                        or not np.allclose(m, np.swapaxes(m, 1, 2))):
                    raise ValueError(f"a dense inv_metric must be ({T}, d, d) finite "
                                     "symmetric matrices")
            elif m.ndim != 2 or m.shape[0] != T or not np.all(np.isfinite(m) & (m > 0)):
                raise ValueError(f"inv_metric must be ({T}, d) finite positive values "
                                 f"(diagonal) or ({T}, d, d) (dense)")
            object.__setattr__(self, "inv_metric", m)
        object.__setattr__(self, "fixed", dict(self.fixed or {}))

    @classmethod
    def constant(cls, betas, params=None, steps_per_temperature: int = 1) -> "KernelSchedule":
        """The same params at every temperature (or none, for kernels without params)."""
        betas = validate(betas)
        if params is None:
            return cls(betas, steps_per_temperature)
        fields = asdict(params)
        step = np.full(betas.size, float(fields.pop("step_size")))
        metric = fields.pop("inv_metric")
        if metric is not None:
            metric = np.asarray(metric, dtype=float)
            if metric.ndim == 3:  # dense, given as (1, d, d)
                metric = metric[0]
            metric = np.repeat(metric[None], betas.size, axis=0)
        return cls(betas, steps_per_temperature, kind_of(params), step, metric, fields)

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

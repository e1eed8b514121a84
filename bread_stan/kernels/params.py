"""Batching kernel settings: one params object for chains at different temperatures.

Forward and reverse chains can share one batch (one model call per leapfrog
step) although each sits at its own temperature with its own step size and
metric.  :func:`concat_params` merges the settings of several groups of chains
into one params object with per-chain fields.
"""

from __future__ import annotations

import numpy as np

from .integrator import per_chain_metric

__all__ = ["concat_params"]


def concat_params(parts: list[tuple[object, int]], d: int):
    """Per-chain params for a batch made of groups ``(params, n_chains)`` of one class.

    Scalar fields that agree across groups stay scalar; the others become
    per-chain arrays (the inverse metric becomes (n, d), or (n, d, d) if any is dense).
    """
    params = [p for p, _ in parts]
    cls = type(params[0])
    if any(type(p) is not cls for p in params):
        raise TypeError("cannot batch kernel params of different classes")
    if hasattr(cls, "concat"):  # a params class that knows how to batch itself (IMH)
        return cls.concat(parts, d)
    fields = {}
    for name in cls.__dataclass_fields__:
        values = [getattr(p, name) for p in params]
        if name == "inv_metric":
            if all(v is None for v in values):
                fields[name] = None
            else:
                metrics = [per_chain_metric(v, n, d) for v, (_, n) in zip(values, parts)]
                if any(m.ndim == 3 for m in metrics):  # a diagonal joins a dense batch
                    metrics = [m if m.ndim == 3 else np.einsum("ni,ij->nij", m, np.eye(d))
                               for m in metrics]
                fields[name] = np.concatenate(metrics)
        elif all(np.ndim(v) == 0 for v in values) and len({float(v) for v in values}) == 1:
            fields[name] = values[0]
        else:
            fields[name] = np.concatenate([np.broadcast_to(v, (n,)) for v, (_, n) in zip(values, parts)])
    return cls(**fields)

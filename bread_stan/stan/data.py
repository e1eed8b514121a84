"""Turning user data (dicts of numbers, numpy or pandas values, JSON files) into Stan JSON.

Stan's JSON reader is strict: an ``int`` variable must be written without a
decimal point, non-finite reals are the strings ``"NaN"``, ``"Inf"`` and
``"-Inf"``.  When the program's variable types are known (from ``stanc
--info``), integral float arrays given for ``int`` variables are converted, so
``y`` read from a CSV as floats still works.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StanDataError

__all__ = ["DataLike", "load_data", "to_stan_json", "to_json_value", "nonfinite_entries"]

DataLike = Mapping[str, Any] | str | os.PathLike | None


def load_data(data: DataLike) -> dict[str, Any]:
    """A mutable dict of variables from a mapping, a JSON file path, or None."""
    if data is None:
        return {}
    if isinstance(data, Mapping):
        return dict(data)
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.is_file():
            raise StanDataError(f"data file {path} does not exist; give a dict or the path "
                                "of a JSON file")
        try:
            values = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StanDataError(f"data file {path} is not valid JSON: {exc}") from None
        if not isinstance(values, dict):
            raise StanDataError(f"data file {path} must hold a JSON object (name: value)")
        return {k: _nonfinite_strings(v) for k, v in values.items()}
    raise StanDataError(f"cannot use data of type {type(data).__name__}: give a dict or "
                        "the path of a JSON file")


_NONFINITE = {"NaN": math.nan, "Inf": math.inf, "+Inf": math.inf, "-Inf": -math.inf,
              "Infinity": math.inf, "-Infinity": -math.inf}


def _nonfinite_strings(value: Any) -> Any:
    """CmdStan's JSON strings "NaN", "Inf", "-Inf" (in nested lists) as floats."""
    if isinstance(value, list):
        return [_nonfinite_strings(v) for v in value]
    if isinstance(value, str) and value in _NONFINITE:
        return _NONFINITE[value]
    return value


def nonfinite_entries(values: Mapping[str, Any], *, batched: bool = False,
                      limit: int = 3) -> list[str]:
    """Up to ``limit`` descriptions such as ``"X[4, 2] is NaN"`` (Stan's 1-based
    indices; with ``batched``, the leading axis is the draw) of non-finite
    numbers in ``values``."""
    found = []
    for name, value in values.items():
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            continue
        for index in np.argwhere(~np.isfinite(array))[:limit]:
            x = array[tuple(index)]
            draw = ""
            if batched:
                draw, index = f" in draw {index[0]}", index[1:]
            where = f"[{', '.join(str(i + 1) for i in index)}]" if len(index) else ""
            found.append(f"{name}{where} is {'NaN' if np.isnan(x) else x}{draw}")
        if len(found) >= limit:
            break
    return found[:limit]


def _real(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Inf" if x > 0 else "-Inf")


def to_json_value(value: Any, *, integer: bool = False, name: str = "?") -> Any:
    """One variable as a JSON-compatible value (nested lists, row-major)."""
    if hasattr(value, "to_numpy"):  # pandas Series / DataFrame
        value = value.to_numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "biufc":
        raise StanDataError(f"data variable {name!r} is not numeric (dtype {array.dtype}); "
                            "give numbers, lists of numbers or numpy arrays")
    if array.dtype.kind == "c":
        array = np.stack([array.real, array.imag], axis=-1)
    if array.dtype.kind == "b":
        array = array.astype(np.int64)
    if integer and array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise StanDataError(f"data variable {name!r} is declared int in the program "
                                "but has non-integer values")
        array = array.astype(np.int64)
    if array.dtype.kind in "iu":
        return array.tolist()
    if array.dtype.kind != "f":
        raise StanDataError(f"data variable {name!r} has unsupported dtype {array.dtype}")
    if array.ndim == 0:
        return _real(float(array))
    if np.all(np.isfinite(array)):
        return array.tolist()
    return np.vectorize(_real, otypes=[object])(array).tolist()


def to_stan_json(data: DataLike, *, int_variables: frozenset[str] | set[str] = frozenset()
                 ) -> str:
    """Stan JSON text for ``data``; ``int_variables`` names the program's int variables."""
    values = load_data(data)
    out = {str(k): to_json_value(v, integer=k in int_variables, name=str(k))
           for k, v in values.items()}
    return json.dumps(out)

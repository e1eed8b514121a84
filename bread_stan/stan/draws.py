"""Posterior draws in Stan's shapes, in and out: CmdStan CSV, cmdstanpy fits, ArviZ.

:func:`read_draws` turns CmdStan CSV files, a ``cmdstanpy`` fit, ArviZ data
(``InferenceData`` of ArviZ 0.x or the ``DataTree`` of ArviZ 1.x) or a mapping
name -> array into constrained draws name -> ``(chains, draws, *shape)``, the shape
Stan declares; :func:`unconstrain_draws` maps them to a model's unconstrained
space.  :func:`to_arviz` and :func:`summarise` go the other way, to whichever
ArviZ is installed; :func:`stan_name` writes flat names as Stan does (``theta[1]``).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .model import variable_shapes
from ..errors import InputError

__all__ = ["read_draws", "unconstrain_draws", "stan_name", "to_arviz", "summarise"]


def stan_name(flat: str) -> str:
    """Stan's 1-based name of a flat output: "theta.2.1" (or "theta[2,1]") -> "theta[2,1]"."""
    base, _, rest = _dotted(flat).partition(".")
    return f"{base}[{rest.replace('.', ',')}]" if rest else base


def _dotted(name: str) -> str:
    """"theta[2,1]" (cmdstanpy, Stan) -> "theta.2.1" (CmdStan CSV, BridgeStan)."""
    return re.sub(r"\[([^\]]*)\]", lambda m: "." + m.group(1).replace(",", "."), name.strip())


def _from_flat(columns: Sequence[str], values: np.ndarray) -> dict[str, np.ndarray]:
    """(chains, draws, columns) in Stan's flat order -> name -> (chains, draws, *shape)."""
    keep = [i for i, c in enumerate(columns) if not c.endswith("__")]  # lp__, treedepth__...
    names = [_dotted(columns[i]) for i in keep]
    values = values[:, :, keep]
    out, column = {}, 0
    for name, shape in variable_shapes(names):
        size = int(np.prod(shape))
        block = values[:, :, column:column + size]
        column += size
        # Stan's flat order is column-major within a variable.
        value = block.reshape((*block.shape[:2], *shape[::-1]))
        out[name] = np.ascontiguousarray(value.transpose(0, 1, *range(value.ndim - 1, 1, -1)))
    return out


def _csv_config(path: Path) -> dict[str, str]:
    """The ``key = value`` settings of a CmdStan CSV file's comment header."""
    config = {}
    with open(path) as handle:
        for line in handle:
            if not line.startswith("#"):
                break
            key, sep, value = line[1:].partition("=")
            if sep:
                config[key.strip()] = value.strip().split(" ")[0]
    return config


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    """Column names and post-warmup draws of one CmdStan sampler output file."""
    if not path.is_file():
        raise FileNotFoundError(f"CmdStan CSV file {path} does not exist")
    config = _csv_config(path)
    if config.get("method", "sample") != "sample":
        raise InputError(f"{path} is CmdStan {config['method']} output; draws are read "
                         "from the sampler's output (method = sample)")
    frame = pd.read_csv(path, comment="#")
    if frame.empty or "lp__" not in frame.columns:
        raise InputError(f"{path} is not a CmdStan CSV file with draws (no lp__ column)")
    if config.get("save_warmup") in ("1", "true"):
        frame = frame.iloc[int(config.get("num_warmup", 0)):]
    return list(frame.columns), frame.to_numpy(dtype=float)


def _read_csv_files(paths: Sequence[Path]) -> dict[str, np.ndarray]:
    chains = [_read_csv(Path(p)) for p in paths]
    columns = chains[0][0]
    for path, (cols, values) in zip(paths, chains):
        if cols != columns or values.shape != chains[0][1].shape:
            raise InputError(f"CmdStan CSV file {path} has other columns or another number of "
                             f"draws than {paths[0]}; give the chains of one fit")
    return _from_flat(columns, np.stack([values for _, values in chains]))


def _read_arviz(data: Any) -> dict[str, np.ndarray]:
    try:
        posterior = data["posterior"]
    except KeyError:
        raise InputError("the ArviZ data have no posterior group") from None
    out = {}
    for name in posterior.data_vars:
        if str(name).endswith("__"):
            continue
        array = posterior[name]
        out[str(name)] = np.asarray(array.transpose("chain", "draw", ...).values)
    return out


def _read_mapping(values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for name, value in values.items():
        array = np.asarray(value, dtype=float)
        if array.ndim < 2:
            raise InputError(f"draws of {name!r} have shape {array.shape}; give arrays of "
                             "shape (chains, draws, *Stan shape)")
        out[str(name)] = array
    return out


def read_draws(source: Any, model: Any = None) -> dict[str, np.ndarray]:
    """Constrained draws name -> ``(chains, draws, *shape)`` from any common source.

    ``source``: a CmdStan CSV path or a list of them (one per chain; warmup
    draws, when saved, are dropped), a ``cmdstanpy.CmdStanMCMC`` fit, ArviZ
    data with a posterior group (``InferenceData`` or ``DataTree``), or a
    mapping name -> array ``(chains, draws, *shape)``.  Sampler columns such as
    ``lp__`` are dropped.  ``model`` (a StanModel or StanTarget): keep only its
    parameters, and check that each is present with the shape it declares.
    """
    if isinstance(source, (str, os.PathLike)):
        draws = _read_csv_files([Path(source)])
    elif (isinstance(source, Sequence) and source
          and all(isinstance(p, (str, os.PathLike)) for p in source)):
        draws = _read_csv_files([Path(p) for p in source])
    elif type(source).__name__ == "CmdStanMCMC":  # cmdstanpy is optional: no import
        values = np.asarray(source.draws(concat_chains=False, inc_warmup=False))
        draws = _from_flat(list(source.column_names), values.transpose(1, 0, 2))
    elif hasattr(source, "groups") or hasattr(source, "children"):  # InferenceData, DataTree
        draws = _read_arviz(source)
    elif isinstance(source, Mapping):
        draws = _read_mapping(source)
    else:
        raise TypeError(f"cannot read draws from a {type(source).__name__}; give CmdStan CSV "
                        "files, a cmdstanpy fit, ArviZ data or a dict name -> array")
    if model is None:
        return draws
    chains_draws = {a.shape[:2] for a in draws.values()}
    if len(chains_draws) > 1:
        raise InputError(f"the draws disagree on (chains, draws): {sorted(chains_draws)}")
    out = {}
    for name, shape in variable_shapes(model.param_names()):
        if name not in draws:
            raise InputError(f"the draws lack the model parameter {name!r}; "
                             f"they have {sorted(draws)}")
        value = draws[name]
        if value.shape[2:] != shape and value[0, 0].size == int(np.prod(shape)):
            value = value.reshape(*value.shape[:2], *shape)
        if value.shape[2:] != shape:
            raise InputError(f"draws of {name!r} have shape {value.shape[2:]} per draw; the "
                             f"model declares {shape}")
        out[name] = value
    return out


def unconstrain_draws(draws: Mapping[str, np.ndarray], model: Any) -> np.ndarray:
    """The model's unconstrained points (chains, draws, d) of constrained draws."""
    draws = read_draws(dict(draws), model)
    chains, n = next(iter(draws.values())).shape[:2] if draws else (0, 0)
    flat = model.param_unconstrain_batch(
        {k: v.reshape(chains * n, *v.shape[2:]) for k, v in draws.items()})
    return flat.reshape(chains, n, -1)


# -- ArviZ, either generation ------------------------------------------------------------

def _import_arviz():
    with warnings.catch_warnings():  # arviz 0.x announces its refactor on import
        warnings.simplefilter("ignore", FutureWarning)
        import arviz
    return arviz


def arviz_generation() -> int:
    """The major version of the installed ArviZ (0: InferenceData, 1: DataTree)."""
    return int(_import_arviz().__version__.split(".")[0])


def _datatree(groups: Mapping[str, Mapping[str, np.ndarray]], attrs: Mapping[str, Any]):
    """ArviZ 1.x (arviz_base): an ``xarray.DataTree`` with one node per group."""
    from arviz_base import from_dict

    groups = {g: dict(v) for g, v in groups.items() if v}
    return from_dict(groups, attrs={g: dict(attrs) for g in groups})


def _inference_data(groups: Mapping[str, Mapping[str, np.ndarray]], attrs: Mapping[str, Any]):
    """ArviZ 0.x: an ``InferenceData``."""
    idata = _import_arviz().from_dict(**{g: dict(v) for g, v in groups.items() if v})
    for group in idata.groups():
        idata[group].attrs.update(attrs)
    return idata


def to_arviz(groups: Mapping[str, Mapping[str, np.ndarray]], attrs: Mapping[str, Any] = {}):
    """ArviZ data of groups (e.g. "posterior") of arrays ``(chain, draw, *shape)``.

    ArviZ 0.x gives an ``InferenceData``, ArviZ 1.x an ``xarray.DataTree``; both
    write NetCDF files with one group each (``to_netcdf``) that either reads.
    ``attrs`` (numbers and strings) are set on every group.
    """
    build = _datatree if arviz_generation() >= 1 else _inference_data
    return build(groups, attrs)


def summarise(draws: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """ArviZ's summary (mean, sd, interval, ``r_hat``, ``ess_bulk``, ``mcse_mean``...) of
    draws name -> ``(chains, draws, *shape)``, one row per element named as Stan does
    (``theta[1]``, 1-based), in Stan's order (column-major within a variable).  ``sd``
    is the sample standard deviation (divisor n - 1) over all chains' draws, as Stan
    reports it, whichever ArviZ is installed (their releases differ on the divisor)."""
    return _summarise(draws, arviz_generation())


def _summarise(draws: Mapping[str, np.ndarray], generation: int) -> pd.DataFrame:
    draws = {name: np.asarray(value, dtype=float) for name, value in draws.items()}
    with warnings.catch_warnings():  # R-hat of constant generated quantities is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        if generation >= 1:  # ArviZ 1.x: arviz.summary is arviz_stats.summary
            from arviz_stats import summary
            table = summary(_datatree({"posterior": draws}, {}), kind="all", round_to="none")
        else:
            table = _import_arviz().summary(_inference_data({"posterior": draws}, {}),
                                            kind="all", round_to="none")
    # ArviZ lists each variable's elements in C order with 0-based labels; so does
    # flattening each variable's (chains * draws, *shape) array.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one draw: sd is NaN
        sd = [v.reshape(v.shape[0] * v.shape[1], -1).std(axis=0, ddof=1)
              for v in draws.values()]
    labels, stan_order = [], []
    for name, value in draws.items():
        shape = value.shape[2:]
        start = len(labels)
        labels += [f"{name}[{','.join(str(i + 1) for i in index)}]" if shape else name
                   for index in np.ndindex(*shape)]
        stan_order += [start + int(np.ravel_multi_index(index[::-1], shape))
                       for index in np.ndindex(*shape[::-1])] if shape else [start]
    if len(labels) != len(table):
        raise RuntimeError(f"ArviZ's summary has {len(table)} rows for {len(labels)} elements")
    table.index = labels
    table["sd"] = np.concatenate(sd) if sd else []  # Stan's divisor, n - 1
    return table.iloc[stan_order]

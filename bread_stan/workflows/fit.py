"""Posterior inference on real data, to fit the hyperparameters (SPEC section 4, step 1).

:func:`fit` runs NUTS at beta = 1 on the model's posterior:

- with CmdStan, through cmdstanpy, when both are installed (``method="auto"``
  or ``"cmdstan"``);
- otherwise with the toolkit's own vectorised NUTS (``method="nuts"``): several
  chains started from exact prior draws, a warmup with Stan's windowed
  adaptation (an initial fast buffer, doubling slow windows that each end by
  setting the chain's diagonal inverse metric to the regularised variance of the
  window's draws, a terminal fast buffer; dual averaging of the step size toward
  ``target_accept`` throughout, restarted after every metric update), then
  ``draws`` transitions per chain with the step size and metric frozen.

The result carries the draws, ArviZ's R-hat / ESS summary and sampler
diagnostics.  :meth:`FitResult.hyperparameters` summarises the draws of the
hyperparameters (the variables with a ``*_given`` input in the simulator) by
their **posterior median** by default: a median is a typical value of the
fitted posterior, is robust to the heavy right tail of variance parameters
with inverse-gamma priors, and commutes with monotone transforms (the median
of ``sigma_sq`` is the square of the median of ``sigma``), so the fitted value
does not depend on how a hyperparameter is parameterised.  ``"mean"`` is
available too.
"""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..kernels.base import initial_state
from ..kernels.nuts import NUTS, NUTSParams
from ..stan.model import unflatten_draws
from ..rng import ChainRandom
from ..ais.results import _jsonable
from ..stan.tempered import PRIOR_ONLY, StanTarget
from ..ais.tuning import DualAveraging, regularised_variance

__all__ = ["FitSettings", "FitResult", "fit", "warmup_windows", "cmdstan_available"]

log = logging.getLogger(__name__)

_FIT_STREAM = 2_000_000  # random stream of the fit's chains (scored AIS uses small streams)


@dataclass(frozen=True)
class FitSettings:
    """NUTS on the real data: chains, warmup and sampling lengths, adaptation target.

    ``method``: ``"auto"`` (CmdStan if installed, else ours), ``"nuts"`` or
    ``"cmdstan"``.  ``hyper_summary``: ``"median"`` or ``"mean"`` of the draws.
    """

    chains: int = 4
    warmup: int = 500
    draws: int = 500
    max_depth: int = 10
    target_accept: float = 0.8
    method: str = "auto"
    hyper_summary: str = "median"

    def __post_init__(self):
        if self.method not in ("auto", "nuts", "cmdstan"):
            raise ValueError(f"unknown fit method {self.method!r}; use auto, nuts or cmdstan")
        if self.hyper_summary not in ("median", "mean"):
            raise ValueError("hyper_summary must be 'median' or 'mean'")
        if self.chains < 2 or self.draws < 4:
            raise ValueError("the fit needs at least 2 chains and 4 draws (for R-hat)")


@dataclass
class FitResult:
    """Draws of a posterior fit and their diagnostics.

    ``unconstrained`` is (chains, draws, d); ``draws`` maps each parameter to
    (chains, draws, *shape) on the constrained scale.  ``summary`` is ArviZ's
    table (mean, sd, quantiles, ``r_hat``, ``ess_bulk``, ``ess_tail``).
    """

    method: str
    unconstrained: np.ndarray
    draws: dict[str, np.ndarray]
    summary: pd.DataFrame
    seconds: float
    diagnostics: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def hyperparameters(self, names: Sequence[str], how: str = "median"
                        ) -> dict[str, float | list]:
        """The fitted value of each hyperparameter: posterior median or mean, elementwise
        (a float for a scalar, nested lists of the hyperparameter's shape otherwise)."""
        out = {}
        for name in names:
            if name not in self.draws:
                raise KeyError(f"hyperparameter {name!r} is not a model parameter; "
                               f"parameters: {sorted(self.draws)}")
            x = np.asarray(self.draws[name], dtype=float)  # (chains, draws, *shape)
            value = np.median(x, axis=(0, 1)) if how == "median" else np.mean(x, axis=(0, 1))
            out[name] = float(value) if value.ndim == 0 else value.tolist()
        return out

    @property
    def max_rhat(self) -> float:
        return float(np.nanmax(self.summary["r_hat"])) if "r_hat" in self.summary else np.nan

    @property
    def min_ess_bulk(self) -> float:
        return float(np.nanmin(self.summary["ess_bulk"])) if "ess_bulk" in self.summary else np.nan

    # -- persistence -----------------------------------------------------
    def save(self, out_dir: Path) -> None:
        """``fit.npz`` (unconstrained draws) and ``fit_summary.csv``, ``fit.json``."""
        import json

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / "fit.tmp.npz"
        np.savez_compressed(tmp, unconstrained=self.unconstrained,
                            **{f"draw__{k}": v for k, v in self.draws.items()})
        self.summary.to_csv(out_dir / "fit_summary.csv")
        meta = {"method": self.method, "seconds": self.seconds,
                "diagnostics": self.diagnostics, "settings": self.settings,
                "max_rhat": self.max_rhat, "min_ess_bulk": self.min_ess_bulk}
        (out_dir / "fit.json").write_text(json.dumps(meta, indent=1, default=float))
        tmp.replace(out_dir / "fit.npz")  # the npz appearing marks the fit complete

    @classmethod
    def load(cls, out_dir: Path) -> "FitResult":
        import json

        out_dir = Path(out_dir)
        meta = json.loads((out_dir / "fit.json").read_text())
        with np.load(out_dir / "fit.npz") as z:
            unc = z["unconstrained"]
            draws = {k[len("draw__"):]: z[k] for k in z.files if k.startswith("draw__")}
        summary = pd.read_csv(out_dir / "fit_summary.csv", index_col=0)
        return cls(meta["method"], unc, draws, summary, meta["seconds"],
                   meta.get("diagnostics", {}), meta.get("settings", {}))

    @staticmethod
    def exists(out_dir: Path) -> bool:
        return (Path(out_dir) / "fit.npz").exists() and (Path(out_dir) / "fit.json").exists()


def warmup_windows(warmup: int, init_buffer: int = 75, term_buffer: int = 50,
                   base_window: int = 25) -> list[tuple[int, int]]:
    """Stan's slow adaptation windows as (start, end) iterations (0-based, end exclusive).

    When the three buffers do not fit, Stan uses 15% / 75% / 10% of the warmup;
    the slow windows double in length and the last one stretches to the
    terminal buffer.  Fewer than 20 warmup iterations: no metric adaptation.
    """
    if warmup < 20:
        return []
    if init_buffer + base_window + term_buffer > warmup:
        init_buffer = int(0.15 * warmup)
        term_buffer = int(0.1 * warmup)
        base_window = warmup - init_buffer - term_buffer
    windows, start, size = [], init_buffer, base_window
    slow_end = warmup - term_buffer
    while start < slow_end:
        end = start + size
        if end + 2 * size > slow_end:  # the next window would not fit: stretch this one
            end = slow_end
        windows.append((start, end))
        start, size = end, 2 * size
    return windows


def _own_nuts(target: StanTarget, inits: np.ndarray, settings: FitSettings, seed: int
              ) -> tuple[np.ndarray, dict]:
    """Warmup and sampling with our NUTS; returns (chains, draws, d) and diagnostics."""
    n, d = inits.shape
    kernel = NUTS()
    rng = ChainRandom.from_seed(seed, n, stream=_FIT_STREAM)
    state = initial_state(target, inits, gradient=True)
    bad = ~np.isfinite(state.evaluation.log_prior + state.evaluation.log_lik)
    if bad.any():
        raise ValueError(f"{int(bad.sum())} initial points of the fit have zero posterior "
                         "density")
    beta = np.ones(n)
    step = np.full(n, 0.1)
    metric = np.ones((n, d))
    da = DualAveraging(step, settings.target_accept)
    windows = warmup_windows(settings.warmup)
    window: list[np.ndarray] = []
    for it in range(settings.warmup):
        params = NUTSParams(step_size=da.current, inv_metric=metric, max_depth=settings.max_depth)
        state, info = kernel.step(rng, state, target, beta, params)
        da.update(info.accept_stat)
        if any(a <= it < b for a, b in windows):
            window.append(state.position.copy())
        if any(it + 1 == b for _, b in windows):
            metric = regularised_variance(np.stack(window))
            window = []
            da.restart(da.current)
    step = da.final if settings.warmup > 0 else step
    draws = np.empty((n, settings.draws, d))
    accept = np.empty((n, settings.draws))
    depth = np.empty((n, settings.draws))
    divergent = np.zeros(n, dtype=np.int64)
    n_grad = 0
    params = NUTSParams(step_size=step, inv_metric=metric, max_depth=settings.max_depth)
    for i in range(settings.draws):
        state, info = kernel.step(rng, state, target, beta, params)
        draws[:, i] = state.position
        accept[:, i] = info.accept_stat
        depth[:, i] = info.tree_depth
        divergent += info.divergent.astype(np.int64)
        n_grad += int(np.sum(info.n_grad))
    diagnostics = {"accept_stat": float(np.nanmean(accept)),
                   "divergences": float(divergent.sum()),
                   "tree_depth": float(np.mean(depth)),
                   "max_tree_depth_hits": float(np.mean(depth >= settings.max_depth)),
                   "gradients_sampling": float(n_grad),
                   "step_size_min": float(step.min()), "step_size_max": float(step.max())}
    return draws, diagnostics


def cmdstan_available() -> bool:
    """True when cmdstanpy is importable and finds a CmdStan installation."""
    try:
        import cmdstanpy
        cmdstanpy.cmdstan_path()
    except (ImportError, ValueError, RuntimeError, OSError):
        return False
    return True


def _cmdstan(target: StanTarget, data: Mapping, inits: np.ndarray, settings: FitSettings,
             seed: int) -> tuple[np.ndarray, dict]:  # pragma: no cover - needs CmdStan
    """Sample with CmdStan; unconstrained draws (chains, draws, d) via our bridge."""
    import cmdstanpy

    program = target.compiled.program
    with tempfile.TemporaryDirectory(prefix="bread_stan_fit_") as tmp:
        stan_file = Path(tmp) / f"{program.name}.stan"
        stan_file.write_text(program.code)
        init_dicts = [_constrained_dict(target, u) for u in inits]
        sampled = cmdstanpy.CmdStanModel(stan_file=str(stan_file)).sample(
            data={**_jsonable(dict(data)), PRIOR_ONLY: 0}, chains=inits.shape[0],
            iter_warmup=settings.warmup, iter_sampling=settings.draws, seed=seed,
            adapt_delta=settings.target_accept, max_treedepth=settings.max_depth,
            inits=init_dicts, show_progress=False)
        params = {name: sampled.stan_variable(name) for name in target.compiled.info["parameters"]}
    flat = target.param_unconstrain_batch(params)
    n_chains = inits.shape[0]
    unc = flat.reshape(n_chains, settings.draws, -1)  # stan_variable concatenates chains
    return np.ascontiguousarray(unc), {"cmdstan": 1.0}


def _constrained_dict(target: StanTarget, u: np.ndarray) -> dict:
    flat = target.param_constrain(u)
    return {k: np.asarray(v)[0].tolist()
            for k, v in unflatten_draws(flat, target.param_names()).items()}


def _summary(draws: dict[str, np.ndarray]) -> pd.DataFrame:
    with warnings.catch_warnings():  # arviz announces its refactor on import
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
        idata = az.from_dict(posterior=draws)
        return az.summary(idata, kind="all", round_to="none")


def fit(target: StanTarget, inits: np.ndarray, *, settings: FitSettings = FitSettings(),
        seed: int = 0, data: Mapping | None = None) -> FitResult:
    """NUTS on the posterior of ``target`` (the model on the real data).

    ``inits`` are (chains, d) unconstrained starting points, normally exact
    prior draws.  ``data`` is only needed for CmdStan (the model's data).
    """
    inits = np.ascontiguousarray(np.asarray(inits, dtype=float))
    if inits.ndim != 2 or inits.shape != (settings.chains, target.dim):
        raise ValueError(f"fit needs ({settings.chains}, {target.dim}) initial points, "
                         f"got {inits.shape}")
    method = settings.method
    if method == "auto":
        method = "cmdstan" if cmdstan_available() else "nuts"
    t0 = time.perf_counter()
    if method == "cmdstan":
        unc, diagnostics = _cmdstan(target, data or {}, inits, settings, seed)
    else:
        unc, diagnostics = _own_nuts(target, inits, settings, seed)
    seconds = time.perf_counter() - t0
    c, s, d = unc.shape
    flat = target.param_constrain(unc.reshape(c * s, d))
    draws = {k: v.reshape(c, s, *v.shape[1:])
             for k, v in unflatten_draws(flat, target.param_names()).items()}
    summary = _summary(draws)
    result = FitResult(method, unc, draws, summary, seconds, diagnostics,
                       {**asdict(settings), "seed": seed})
    log.info("fit (%s): %d chains x %d draws in %.1f s, max R-hat %.3f, min bulk ESS %.0f",
             method, c, s, seconds, result.max_rhat, result.min_ess_bulk)
    return result

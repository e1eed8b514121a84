"""Posterior inference on real data, to fit the hyperparameters (SPEC section 4, step 1).

:func:`fit` runs NUTS at beta = 1 on the model's posterior with the sampler
named in :class:`FitSettings` (no automatic switching; the result and the
protocol report say which ran):

- ``sampler="toolkit"`` (default): the toolkit's own NUTS (native: one call
  into the model library per transition of all chains, on the joint density
  alone, one gradient per leapfrog step; see :mod:`bread_stan.kernels.nuts`): several
  chains started from exact prior draws, a warmup with Stan's windowed
  adaptation (an initial fast buffer, doubling slow windows that each end by
  setting the chain's diagonal inverse metric to the regularised variance of the
  window's draws, a terminal fast buffer; dual averaging of the step size toward
  ``target_accept`` throughout, restarted after every metric update), then
  ``draws`` transitions per chain with the step size and metric frozen;
- ``sampler="cmdstan"``: CmdStan's NUTS through cmdstanpy (the ``cmdstan``
  extra and a CmdStan installation), from the same starting points.

The result carries the draws of parameters, transformed parameters and
generated quantities, a summary in Stan's terms (1-based ``theta[1]`` rows:
mean, sd, quantiles, R-hat, ESS) and the sampler's diagnostics, among them the
numbers of divergent transitions and of transitions that hit the maximum tree
depth (logged as warnings when not zero).
:meth:`FitResult.hyperparameters` summarises the draws of the
hyperparameters (the variables with a ``*_given`` input in the simulator) by
their **posterior median** by default: a median is a typical value of the
fitted posterior, is robust to the heavy right tail of variance parameters
with inverse-gamma priors, and commutes with monotone transforms (the median
of ``sigma_sq`` is the square of the median of ``sigma``), so the fitted value
does not depend on how a hyperparameter is parameterised.  ``"mean"`` is
available too.
"""

from __future__ import annotations

import hashlib
import io
import logging
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..ais.metric_estimates import regularised_variance
from ..deadline import keep_pace
from ..errors import InputError, ToolchainError
from ..kernels.adaptation import DualAveraging
from ..kernels.base import initial_state
from ..kernels.nuts import NUTS, NUTSParams
from ..rng import ChainRandom, Stream
from ..stan.compile import DEFAULT_STANC_ARGS, Program, cache_dir
from ..stan.draws import read_draws, summarise, unconstrain_draws
from ..stan.model import unflatten_draws
from ..stan.tempered import StanTarget
from ..store import CorruptFileError, load_unit, save_unit, write_atomic

__all__ = ["FitSettings", "FitResult", "fit", "stan_inits", "warmup_windows",
           "cmdstan_available", "INIT_TRIES"]

INIT_TRIES = 100  # Stan's: draws of uniform(-2, 2) a chain tries before it gives up

log = logging.getLogger(__name__)

_PACED = "the fit on the real data"   # the loop a deadline names (deadline.keep_pace)

SAMPLERS = ("toolkit", "cmdstan")


@dataclass(frozen=True)
class FitSettings:
    """NUTS on the real data: sampler, chains, warmup and sampling lengths, adaptation.

    ``sampler``: ``"toolkit"`` (the toolkit's NUTS) or ``"cmdstan"`` (CmdStan's,
    through cmdstanpy).  ``hyper_summary``: ``"median"`` or ``"mean"`` of the draws.
    """

    chains: int = 4
    warmup: int = 500
    draws: int = 500
    max_depth: int = 10
    target_accept: float = 0.8
    sampler: str = "toolkit"
    hyper_summary: str = "median"

    def __post_init__(self):
        if self.sampler not in SAMPLERS:
            raise InputError(f"unknown fit sampler {self.sampler!r}; use 'toolkit' or 'cmdstan'")
        if self.hyper_summary not in ("median", "mean"):
            raise InputError("hyper_summary must be 'median' or 'mean'")
        if self.chains < 2 or self.draws < 4:
            raise InputError("the fit needs at least 2 chains and 4 draws (for R-hat)")


@dataclass
class FitResult:
    """Draws of a posterior fit and their diagnostics.

    ``sampler`` is "toolkit" or "cmdstan"; ``unconstrained`` is (chains, draws,
    d); ``draws`` maps each parameter, transformed parameter and generated
    quantity to ``(chains, draws, *shape)`` on the constrained scale.  ``summary``
    is ArviZ's table (mean, sd, quantiles, ``r_hat``, ``ess_bulk``, ``ess_tail``)
    with one row per element, named as Stan does (``theta[1]``).
    ``diagnostics`` holds ``divergences`` and ``max_tree_depth_hits`` (counts of
    transitions), ``transitions``, ``accept_stat`` and step sizes.
    """

    sampler: str
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
        """``fit.npz`` (draws, summary and settings in one unit) and, for reading,
        ``fit_summary.csv``."""
        out_dir = Path(out_dir)
        write_atomic(out_dir / "fit_summary.csv", self.summary.to_csv())
        meta = {"sampler": self.sampler, "seconds": self.seconds,
                "diagnostics": self.diagnostics, "settings": self.settings,
                "max_rhat": self.max_rhat, "min_ess_bulk": self.min_ess_bulk,
                "summary": self.summary.to_json(orient="split")}
        save_unit(out_dir / "fit.npz", {"unconstrained": self.unconstrained,
                                        **{f"draw__{k}": v for k, v in self.draws.items()}},
                  meta)

    @classmethod
    def load(cls, out_dir: Path) -> "FitResult":
        """Read a fit saved by :meth:`save`; CorruptFileError if it is damaged."""
        path = Path(out_dir) / "fit.npz"
        arrays, meta = load_unit(path)
        try:
            draws = {k[len("draw__"):]: v for k, v in arrays.items() if k.startswith("draw__")}
            summary = pd.read_json(io.StringIO(meta["summary"]), orient="split")
            return cls(meta["sampler"], arrays["unconstrained"], draws, summary,
                       meta["seconds"], meta.get("diagnostics", {}), meta.get("settings", {}))
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptFileError(path, f"missing or unreadable entry {error}") from None

    @staticmethod
    def exists(out_dir: Path) -> bool:
        return (Path(out_dir) / "fit.npz").exists()


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


def stan_inits(target, n: int, rng: np.random.Generator, radius: float = 2.0
               ) -> np.ndarray:
    """Stan's default starting points: (n, d) draws of uniform(-radius, radius) on the
    unconstrained scale, each chain drawing again, as Stan does, where the log density or
    its gradient is not finite there (up to :data:`INIT_TRIES` draws).  Where every
    first draw is finite these are ``rng.uniform(-radius, radius, (n, d))``.  A chain
    with no finite draw in :data:`INIT_TRIES` is an :class:`InputError`."""
    inits = rng.uniform(-radius, radius, size=(n, target.dim))
    for _ in range(INIT_TRIES - 1):
        ev = target.evaluate(inits, gradient=True)
        bad = ~(np.isfinite(ev.log_prior + ev.log_lik)
                & np.all(np.isfinite(ev.grad_prior + ev.grad_lik), axis=1))
        if not bad.any():
            return inits
        inits[bad] = rng.uniform(-radius, radius, size=(int(bad.sum()), target.dim))
    raise InputError(f"no starting point with a finite log density and gradient in "
                     f"{INIT_TRIES} draws of uniform(-{radius:g}, {radius:g}) on the "
                     "unconstrained scale (Stan's default inits): the model rejects almost "
                     "everywhere there; check its constraints and its rejections")


def _own_nuts(target: StanTarget, inits: np.ndarray, settings: FitSettings, seed: int
              ) -> tuple[np.ndarray, dict]:
    """Warmup and sampling with our NUTS; returns (chains, draws, d) and diagnostics."""
    n, d = inits.shape
    kernel = NUTS()
    rng = ChainRandom.from_seed(seed, n, stream=Stream.FIT)
    if hasattr(target, "joint"):  # the posterior alone: one model instance, native NUTS
        target = target.joint()
    state = initial_state(target, inits, gradient=True)
    bad = ~np.isfinite(state.evaluation.log_prior + state.evaluation.log_lik)
    if bad.any():
        raise InputError(f"{int(bad.sum())} initial points of the fit have zero posterior "
                         "density")
    beta = np.ones(n)
    step = np.full(n, 0.1)
    metric = np.ones((n, d))
    da = DualAveraging(step, settings.target_accept)
    windows = warmup_windows(settings.warmup)
    window: list[np.ndarray] = []
    n_grad_warmup = 0
    total, began = settings.warmup + settings.draws, time.monotonic()
    for it in range(settings.warmup):
        keep_pace(_PACED, it, total, began, projected=False)
        params = NUTSParams(step_size=da.current, inv_metric=metric, max_depth=settings.max_depth)
        state, info = kernel.step(rng, state, target, beta, params)
        n_grad_warmup += int(np.sum(info.n_grad))
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
        keep_pace(_PACED, settings.warmup + i, total, began, projected=False)
        state, info = kernel.step(rng, state, target, beta, params)
        draws[:, i] = state.position
        accept[:, i] = info.accept_stat
        depth[:, i] = info.tree_depth
        divergent += info.divergent.astype(np.int64)
        n_grad += int(np.sum(info.n_grad))
    diagnostics = {"accept_stat": float(np.nanmean(accept)),
                   "divergences": float(divergent.sum()),
                   "max_tree_depth_hits": float(np.sum(depth >= settings.max_depth)),
                   "transitions": float(depth.size),
                   "tree_depth": float(np.mean(depth)),
                   "gradients_warmup": float(n_grad_warmup),
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


def _cmdstan(target: StanTarget, inits: np.ndarray, settings: FitSettings, seed: int
             ) -> tuple[dict[str, np.ndarray], dict]:
    """Sample with CmdStan from the same program, data and starting points.

    Returns CmdStan's own draws of every variable, (chains, draws, *shape),
    and its diagnostics.
    """
    if not cmdstan_available():
        raise ToolchainError("FitSettings(sampler='cmdstan') needs cmdstanpy "
                             "(pip install 'bread-stan[cmdstan]') and a CmdStan installation "
                             "(set CMDSTAN); or use sampler='toolkit'")
    model = _cmdstan_model(target.compiled.program, target.compiled.stanc_args)
    with tempfile.TemporaryDirectory(prefix="bread_stan_fit_") as tmp:
        data_file = Path(tmp) / "data.json"  # the model's data with prior_only = 0
        data_file.write_text(target.full_model.data_json)
        sampled = model.sample(
            data=str(data_file), chains=inits.shape[0], iter_warmup=settings.warmup,
            iter_sampling=settings.draws, seed=seed, adapt_delta=settings.target_accept,
            max_treedepth=settings.max_depth, inits=[_constrained_dict(target, u) for u in inits],
            show_progress=False, output_dir=tmp)
        draws = read_draws(sampled)
        stats = sampled.method_variables()  # (draws, chains) each
    depth, divergent = stats["treedepth__"], stats["divergent__"]
    diagnostics = {"accept_stat": float(np.mean(stats["accept_stat__"])),
                   "divergences": float(np.sum(divergent)),
                   "max_tree_depth_hits": float(np.sum(depth >= settings.max_depth)),
                   "transitions": float(depth.size),
                   "tree_depth": float(np.mean(depth)),
                   "gradients_sampling": float(np.sum(stats["n_leapfrog__"])),
                   "step_size_min": float(np.min(sampled.step_size)),
                   "step_size_max": float(np.max(sampled.step_size))}
    return draws, diagnostics


def _cmdstan_model(program: Program, stanc_args: Sequence[str] = DEFAULT_STANC_ARGS):
    """cmdstanpy's model of ``program``, translated by stanc with ``stanc_args`` (the
    arguments the toolkit's own library was built with: ``--O1`` by default).

    The executable is kept in the compile cache, one folder per program text, stanc
    arguments and CmdStan installation: cmdstanpy reuses any executable newer than
    its .stan file whatever flags built it, so the arguments are in the folder's name.
    """
    import cmdstanpy

    key = hashlib.sha256("\n".join([program.digest, str(cmdstanpy.cmdstan_path()),
                                    *stanc_args]).encode()).hexdigest()
    stan_file = cache_dir() / "cmdstan" / f"{program.name}-{key[:24]}" / f"{program.name}.stan"
    if not stan_file.exists():
        write_atomic(stan_file, program.code)
    return cmdstanpy.CmdStanModel(stan_file=str(stan_file),
                                  stanc_options=_stanc_options(stanc_args, program))


def _stanc_options(stanc_args: Sequence[str], program: Program) -> dict:
    """cmdstanpy's ``stanc_options`` for stanc's arguments ``stanc_args`` (``--O1``,
    ``--name=x``, ...), with the folder of the program's file among the include paths."""
    options: dict[str, Any] = {}
    for arg in stanc_args:
        name, _, value = arg.lstrip("-").partition("=")
        options[name] = value.split(",") if name == "include-paths" else (value or True)
    if program.path:
        options["include-paths"] = [*options.get("include-paths", []), str(program.path.parent)]
    return options


def _constrained_dict(target: StanTarget, u: np.ndarray) -> dict:
    flat = target.param_constrain(u)
    return {k: np.asarray(v)[0].tolist()
            for k, v in unflatten_draws(flat, target.param_names()).items()}


def _all_variables(target: StanTarget, unc: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Parameters, transformed parameters and generated quantities (chains, draws, *shape)."""
    c, s, d = unc.shape
    flat = target.full_model.param_constrain(unc.reshape(c * s, d), True, True, seed=seed)
    return {k: v.reshape(c, s, *v.shape[1:])
            for k, v in unflatten_draws(flat, target.param_names(True, True)).items()}


def _log_diagnostics(sampler: str, diagnostics: dict, max_depth: int) -> None:
    total = int(diagnostics["transitions"])
    for key, what in (("divergences", "ended with a divergence"),
                      ("max_tree_depth_hits", f"hit the maximum tree depth of {max_depth}")):
        count = int(diagnostics[key])
        if count:
            log.warning("fit (%s): %d of %d transitions (%.1f%%) %s", sampler, count, total,
                        100 * count / total, what)


def fit(target: StanTarget, inits: np.ndarray, *, settings: FitSettings = FitSettings(),
        seed: int = 0) -> FitResult:
    """NUTS on the posterior of ``target`` (the model on the real data).

    ``inits`` are (chains, d) unconstrained starting points, normally exact
    prior draws; ``settings.sampler`` says whose NUTS runs.
    """
    inits = np.ascontiguousarray(np.asarray(inits, dtype=float))
    if inits.ndim != 2 or inits.shape != (settings.chains, target.dim):
        raise InputError(f"fit needs ({settings.chains}, {target.dim}) initial points, "
                         f"got {inits.shape}")
    t0 = time.perf_counter()
    if settings.sampler == "cmdstan":
        draws, diagnostics = _cmdstan(target, inits, settings, seed)
        unc = unconstrain_draws(draws, target)
    else:
        unc, diagnostics = _own_nuts(target, inits, settings, seed)
        draws = _all_variables(target, unc, seed)
    seconds = time.perf_counter() - t0
    result = FitResult(settings.sampler, unc, draws, summarise(draws), seconds, diagnostics,
                       {**asdict(settings), "seed": seed})
    c, s, _ = unc.shape
    log.info("fit (%s): %d chains x %d draws in %.1f s, max R-hat %.3f, min bulk ESS %.0f, "
             "%d divergences, %d at max tree depth", settings.sampler, c, s, seconds,
             result.max_rhat, result.min_ess_bulk, diagnostics["divergences"],
             diagnostics["max_tree_depth_hits"])
    _log_diagnostics(settings.sampler, diagnostics, settings.max_depth)
    return result

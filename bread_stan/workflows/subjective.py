"""Subjective divergence on the user's own data (SPEC 7.2; Cusumano-Towner & Mansinghka 2016).

On real data there is no exact posterior draw, so reverse AIS starts from a trusted
reference sampler's draws instead.  :func:`subjective` runs, on any Stan program (no
``prior_only`` split, no simulator):

1. the reference: the toolkit's own NUTS fit on the data (default; R-hat and ESS
   reported, a warning below ``RHAT_MAX`` / ``ESS_MIN``), or draws the user brings (a
   :class:`~bread_stan.workflows.fit.FitResult`, CmdStan CSV files, a cmdstanpy fit, ArviZ
   data or a NetCDF file, a mapping of names to arrays in Stan's shapes); they are mapped to the unconstrained space
   through the bridge and thinned to about one draw per effective sample;
2. the base: a Gaussian q0 in the unconstrained space fitted to the reference draws (or
   a Laplace approximation), widened (SPEC 7.1); or, for a program with the
   ``prior_only`` split and a simulator, the prior;
3. the kernel, tuned on never-scored pilot chains from the base and frozen;
4. for each number of distributions T, forward AIS from fresh base draws and reverse AIS
   from the thinned reference draws (one per reverse chain), saved as it finishes; or,
   with ``RunSettings(algorithm="smc")``, SMC runs forward from the base and
   conditional SMC runs, each kept on one reference draw, in reverse.

The result is a :class:`~bread_stan.ais.results.SubjectiveResult` (same summary, verdict,
report and exit codes as ``bread``); D_SBJ = mean U - mean L is its ``bound``, the log Z
sandwich its ``log_ml_*`` columns.  ``extra["subjective"]`` records the reference's
quality, how many draws were used, the base, and a check of the reference against the
AIS output, and says in words what the number means given the reference (typed views:
:attr:`~bread_stan.ais.results.SubjectiveResult.reference`, ``suspect``, ``meaning``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from ..ais import engine, smc
from ..ais.gaussian_base import DEFAULT_WIDEN, GaussianBase, GaussianBaseTarget
from ..ais.results import BreadResult, StepResult, SubjectiveResult
from ..ais.verdict import VerdictSettings
from ..errors import BreadStanError, InputError
from ..stan.compile import CompiledModel, compile_model
from ..stan.data import load_data
from ..stan.draws import arviz_generation, read_draws, summarise, unconstrain_draws
from ..stan.model import StanModel, unflatten_draws, variable_shapes
from ..stan.simulator import Simulator, split_draw
from ..stan.tempered import PRIOR_ONLY, StanTarget
from ..parallel.executor import Executor
from ..parallel.shards import ShardContext
from ..parallel.steps import run_steps_in_shards
from ..rng import Purpose, derived_seed
from .common import (default_name, fingerprints, load_or_tune, output_directory, program_text,
                     resume_steps, setup_warnings)
from .settings import RunSettings, SamplerSettings
from .fit import FitResult, FitSettings, fit, stan_inits
from .auto_path import prior_path_only

__all__ = ["BaseSettings", "Reference", "ReferenceDrawsError", "load_reference", "reference_check",
           "subjective", "RHAT_MAX", "ESS_MIN", "full_data", "own_fit", "prior_base",
           "stan_model"]

log = logging.getLogger(__name__)

RHAT_MAX = 1.01  # Vehtari et al. (2021): R-hat above this says the chains disagree
ESS_MIN = 400    # ... and a bulk ESS below this is too few for reliable summaries


class ReferenceDrawsError(BreadStanError):
    """Reference draws that cannot serve: wrong names or shapes, outside the support."""


@dataclass(frozen=True)
class BaseSettings:
    """The initial distribution of AIS: a Gaussian q0 in the unconstrained space, or the
    prior (``kind="prior"``: exact draws from a simulator program, the model's
    ``prior_only`` split; then ``fit`` and ``widen`` do not apply).

    ``fit``: ``"reference"`` (mean and covariance of the reference draws) or
    ``"laplace"`` (mode and curvature of the log density).  ``widen`` multiplies q0's
    standard deviations, so that its tails cover the posterior's.
    """

    kind: str = "gaussian"
    fit: str = "reference"
    widen: float = DEFAULT_WIDEN

    def __post_init__(self):
        if self.kind not in ("gaussian", "prior"):
            raise InputError(f"unknown base {self.kind!r}; use 'gaussian' or 'prior' (the "
                             "prior needs the prior_only split and a simulator)")
        if self.fit not in ("reference", "laplace"):
            raise InputError(f"unknown base fit {self.fit!r}; use 'reference' or 'laplace'")
        if not np.isfinite(self.widen) or self.widen <= 0:
            raise InputError(f"widen must be a positive factor, got {self.widen}")


@dataclass
class Reference:
    """Reference draws in the unconstrained space, (chains, draws, d), and their quality.

    ``max_rhat`` and ``min_ess`` are over the unconstrained coordinates (R-hat is NaN
    with one chain).
    """

    unconstrained: np.ndarray
    source: str
    max_rhat: float
    min_ess: float

    @classmethod
    def rate(cls, unconstrained: np.ndarray, source: str) -> "Reference":
        """A reference of (chains, draws, d) unconstrained draws, with R-hat and ESS."""
        unc = np.ascontiguousarray(unconstrained, dtype=float)
        return cls(unc, source, *_quality(unc))

    @property
    def n_draws(self) -> int:
        return int(self.unconstrained.shape[0] * self.unconstrained.shape[1])

    def thinned(self) -> tuple[np.ndarray, int]:
        """About one draw per effective sample: every k-th draw of each chain, (m, d), k."""
        chains, draws, d = self.unconstrained.shape
        ess = self.min_ess if np.isfinite(self.min_ess) and self.min_ess > 0 else 1.0
        k = max(1, int(np.ceil(chains * draws / ess)))
        return self.unconstrained[:, ::k].reshape(-1, d), k

    def warnings(self) -> list[str]:
        """Why the reference may not be a good stand-in for the posterior (empty: none)."""
        out = []
        chains = self.unconstrained.shape[0]
        if chains < 2:
            out.append("the reference has one chain, so R-hat cannot check it")
        elif not np.isfinite(self.max_rhat):
            out.append("R-hat of the reference could not be computed (a chain does not move)")
        elif not self.max_rhat <= RHAT_MAX:
            out.append(f"the reference's chains disagree (max R-hat {self.max_rhat:.3f} > "
                       f"{RHAT_MAX})")
        if not self.min_ess >= ESS_MIN:
            out.append(f"the reference has few effective draws (min bulk ESS "
                       f"{self.min_ess:.0f} < {ESS_MIN})")
        return out


def _quality(unc: np.ndarray) -> tuple[float, float]:
    """Max R-hat and min bulk ESS over the unconstrained coordinates."""
    table = summarise({"u": unc})
    rhat = table["r_hat"].to_numpy(dtype=float)
    return (float(np.nanmax(rhat)) if np.any(np.isfinite(rhat)) else np.nan,
            float(np.nanmin(table["ess_bulk"].to_numpy(dtype=float))))


def _describe(reference: Any) -> str:
    if isinstance(reference, (str, os.PathLike)):
        return f"file {Path(reference).name}"
    if isinstance(reference, Sequence) and not isinstance(reference, Mapping):
        return f"{len(reference)} CmdStan CSV files"
    if type(reference).__name__ == "CmdStanMCMC":
        return "cmdstanpy fit"
    return "draws given as a mapping" if isinstance(reference, Mapping) else "ArviZ data"


def _read_netcdf(path: Path):
    """ArviZ data from a NetCDF file, with whichever ArviZ generation is installed."""
    if arviz_generation() >= 1:
        import xarray as xr
        return xr.open_datatree(path)
    with warnings.catch_warnings():  # arviz 0.x announces its refactor on import
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    return az.from_netcdf(str(path))


def load_reference(reference: Any, model: StanModel) -> Reference:
    """Map a user's reference draws to the model's unconstrained space and rate them.

    ``reference``: a :class:`~bread_stan.workflows.fit.FitResult`, CmdStan CSV file(s), a
    cmdstanpy fit, ArviZ data or a NetCDF (``.nc``) file of them, or a mapping name ->
    ``(chains, draws, *Stan shape)`` (read by :func:`~bread_stan.stan.draws.read_draws`).  A
    draw outside the support or with zero density is an error that names it.
    """
    if isinstance(reference, FitResult):
        unc, source = np.asarray(reference.unconstrained, float), f"{reference.sampler} NUTS fit"
    else:
        source = _describe(reference)
        if isinstance(reference, (str, os.PathLike)):
            path = Path(reference)
            if not path.is_file():
                raise FileNotFoundError(f"reference {path} does not exist")
            if path.suffix in (".nc", ".netcdf"):
                reference = _read_netcdf(path)
        try:
            unc = unconstrain_draws(read_draws(reference, model), model)
        except (ValueError, TypeError) as error:  # InputError too: names, shapes
            raise ReferenceDrawsError(f"reference ({source}): {error}") from None
        except BreadStanError as error:
            raise ReferenceDrawsError(f"a reference draw lies outside the model's support: "
                                      f"{error}") from None
    if unc.ndim != 3 or unc.shape[2] != model.dim or unc.shape[1] < 4:
        raise ReferenceDrawsError(f"reference draws must have shape (chains, draws >= 4, "
                             f"{model.dim}), got {unc.shape}")
    lp = model.log_density_batch(unc.reshape(-1, model.dim), jacobian=True)
    bad = np.flatnonzero(~np.isfinite(lp))
    if bad.size:
        c, i = divmod(int(bad[0]), unc.shape[1])
        message = next(iter(model.last_errors.values()), "zero density")
        raise ReferenceDrawsError(f"{bad.size} reference draw(s) have zero density under the model; "
                             f"the first is chain {c + 1}, draw {i + 1} ({message}); the "
                             "reference must sample this model on this data")
    flat = unc.reshape(-1, model.dim)
    constant = np.flatnonzero(np.ptp(flat, axis=0) == 0)
    if constant.size:
        raise ReferenceDrawsError(f"the reference draws do not vary in "
                             f"{model.param_unc_names()[constant[0]]}; a reference must sample "
                             "the posterior, not repeat one point")
    return Reference.rate(unc, source)


def reference_check(ais_draws: np.ndarray, reference_draws: np.ndarray, *,
                    alpha: float = 1e-3) -> dict[str, Any]:
    """Do AIS's final draws and the reference agree?  Per unconstrained coordinate, a
    two-sample z test of the means and of the log standard deviations (normal theory,
    Bonferroni over the 2d tests); returns the worst coordinate and the p-value."""
    a, r = np.asarray(ais_draws, float), np.asarray(reference_draws, float)
    na, nr = a.shape[0], r.shape[0]
    z_mean = (a.mean(0) - r.mean(0)) / np.sqrt(a.var(0, ddof=1) / na + r.var(0, ddof=1) / nr)
    sd_ratio = r.std(0, ddof=1) / a.std(0, ddof=1)
    z_sd = np.log(sd_ratio) / np.sqrt(1 / (2 * (na - 1)) + 1 / (2 * (nr - 1)))
    z = np.concatenate([z_mean, z_sd])
    worst = int(np.nanargmax(np.abs(z)))
    p = float(min(1.0, 2 * stats.norm.sf(np.abs(z[worst])) * z.size))
    k = worst % a.shape[1]
    return {"passed": p >= alpha, "p_value": p, "coordinate": k,
            "z_mean": float(z_mean[k]), "sd_ratio": float(sd_ratio[k]), "alpha": alpha}


def full_data(compiled: CompiledModel, data: Mapping) -> dict:
    values = dict(data)
    if PRIOR_ONLY in compiled.data_variables:
        values[PRIOR_ONLY] = 0  # the full joint density: the path needs nothing else
    return values


def stan_model(model, data: Mapping, threads) -> StanModel:
    compiled = model if isinstance(model, CompiledModel) else compile_model(model)
    return StanModel(compiled, full_data(compiled, data), threads=threads)


def own_fit(stan: StanModel, settings: FitSettings, seed: int, out: Path | None) -> FitResult:
    """The toolkit's NUTS on the data (saved in ``out/reference_fit`` and reused)."""
    where = out / "reference_fit" if out is not None else None
    if where is not None and FitResult.exists(where):
        return FitResult.load(where)
    target = GaussianBaseTarget(stan, GaussianBase.standard(stan.dim))
    rng = np.random.default_rng(derived_seed(seed, Purpose.SUBJECTIVE_FIT))
    inits = stan_inits(target, settings.chains, rng)
    result = fit(target, inits, settings=settings, seed=derived_seed(seed, Purpose.SUBJECTIVE_FIT))
    if where is not None:
        result.save(where)
    return result


# What the log Z sandwich of each base is on.
_NORMALISER = {
    "gaussian": "The log Z sandwich is on the normaliser of the program's density as Stan "
                "evaluates it (every term, constants included), which is log p(y) only when "
                "the program's prior density integrates to 1. It does not when a prior is "
                "improper, or when a constrained parameter has an untruncated prior: "
                "`real<lower=0> tau; tau ~ cauchy(0, 5);` is a half-Cauchy evaluated at half "
                "its density, so log Z = log p(y) - log 2 for each such parameter "
                "(--base prior gives log p(y) itself).",
    "prior": "The log p(y) sandwich is on log p(y) itself: forward AIS starts from the "
             "simulator's exact prior draws.",
}


def _meaning(ref: Reference, used: int, stride: int, problems: list[str], base: str) -> str:
    quality = (f"max R-hat {ref.max_rhat:.3f}, min bulk ESS {ref.min_ess:.0f}"
               if np.isfinite(ref.max_rhat) else f"min bulk ESS {ref.min_ess:.0f}")
    text = (f"This is a subjective divergence: the reverse chains start from {used} reference "
            f"draws ({ref.source}, {ref.unconstrained.shape[0]} chains x "
            f"{ref.unconstrained.shape[1]} draws, thinned by {stride}), not from exact "
            "posterior draws. If the reference is exact, it bounds the Jeffreys divergence "
            "of AIS(T) from the posterior (Proposition 1 of Cusumano-Towner and "
            "Mansinghka 2016, arXiv:1612.02161); a reference closer to the "
            "posterior than AIS still bounds it, or bounds KL(AIS || posterior) "
            f"(Propositions 2-3). Your reference has {quality}. " + _NORMALISER[base])
    if problems:
        text += " THE REFERENCE IS SUSPECT: " + "; ".join(problems) + "."
    return text


def _check_steps(result: BreadResult, stan: StanModel, reference: np.ndarray) -> list[str]:
    """Compare AIS output with the reference at each T; the problems it points to."""
    checks, problems = {}, []
    names = [n for n, _ in variable_shapes(stan.param_names())]
    settings = result.verdict_settings()
    steps = sorted(result.steps, key=lambda s: s.n_steps)
    for step, verdict in zip(steps, result.verdicts()):
        draws = {n: step.draws[n] for n in names if n in step.draws}
        if len(draws) != len(names):
            continue
        check = reference_check(stan.param_unconstrain_batch(draws), reference,
                                alpha=settings.tail_alpha)
        check["converged"] = bool(verdict.converged)
        check["consistent"] = bool(verdict.consistent)
        checks[str(step.n_steps)] = check
    result.extra["subjective"]["reference_checks"] = checks
    if any(not v.consistent for v in result.verdicts()):
        problems.append("reverse estimates from the reference undercut forward ones, so the "
                        "reference is further from the posterior than AIS is (Proposition 3 "
                        "fails) and D_SBJ bounds nothing")
    coords = stan.param_unc_names()
    # A failure where AIS converged, or at the largest T; one only at a small T just says
    # that AIS had not converged there.
    largest = str(max(s.n_steps for s in result.steps)) if result.steps else None
    failed = [(T, c) for T, c in checks.items()
              if not c["passed"] and (c["converged"] or T == largest)]
    if failed:
        T, check = next(((T, c) for T, c in failed if c["converged"]), failed[-1])
        why = ("AIS converged there (D_SBJ within the convergence scale), so the reference is "
               "off" if check["converged"] else
               "AIS has not converged there, so either AIS or the reference is off; if more "
               "distributions do not close the gap, it is the reference")
        problems.append(
            f"at {T} distributions AIS's draws differ from the reference in "
            f"{coords[check['coordinate']]} (mean z = {check['z_mean']:.1f}, reference sd / "
            f"AIS sd = {check['sd_ratio']:.2f}, p = {check['p_value']:.2g}); {why}")
    return problems


def prior_base(target: StanTarget, simulator, data: Mapping, threads):
    """The prior as AIS's initial distribution: the model's split target, exact prior
    draws from the simulator (its data outputs are ignored), and what to record."""
    sim = Simulator(simulator, data, threads=threads)

    def draw_base(n, seed):
        params, _ = split_draw(sim.simulate(n, seed), target.compiled)
        return target.param_unconstrain_batch(params)

    return target, draw_base, {"kind": "prior", "simulator": str(simulator)[:200]}


def subjective(model, data=None, *, reference: Any = None, simulator=None,
               base: BaseSettings = BaseSettings(), sampler: SamplerSettings = SamplerSettings(),
               run: RunSettings = RunSettings(), fit_settings: FitSettings = FitSettings(),
               verdict: VerdictSettings | None = None, out_dir: str | Path | None = None,
               name: str | None = None, executor: Executor | None = None) -> SubjectiveResult:
    """Subjective divergence of AIS from the posterior of ``model`` on the real ``data``.

    ``reference``: None (the toolkit's NUTS fit with ``fit_settings``), or draws as
    :func:`load_reference` takes them (FitResult, CmdStan CSV, cmdstanpy fit, ArviZ data
    or ``.nc`` file, mapping name -> ``(chains, draws, *shape)``).  ``run.chains`` forward chains; one reverse chain per
    thinned reference draw, at most ``run.chains``; with ``run.algorithm`` "smc", SMC
    runs of ``run.particles`` particles forward from the base and conditional SMC runs
    from the reference draws (:mod:`bread_stan.ais.smc`).  ``base`` chooses AIS's initial
    distribution; the prior base needs the ``prior_only`` split and a ``simulator``.  With ``out_dir`` every finished step
    count is saved and a rerun with the same settings continues where it stopped.
    ``executor`` (:class:`~bread_stan.parallel.executor.Executor`) runs the AIS chains
    in shards on a Dask cluster: the same numbers as the local default, each finished
    shard saved in ``out_dir/shards``.
    """
    sampler, run = prior_path_only(sampler, run, "subjective")
    data = load_data(data)
    program = model.program.code if isinstance(model, CompiledModel) else program_text(model)
    name = name or (model.program.name if isinstance(model, CompiledModel)
                    else default_name(model))
    out = Path(out_dir) if out_dir is not None else None
    if base.kind == "prior":
        if simulator is None:
            raise InputError("the prior base needs a simulator program (exact prior draws); "
                             "give one, or use the Gaussian base")
        prior_target = StanTarget(model, data, threads=run.threads)  # needs prior_only
        stan = prior_target.full_model
    else:
        stan = stan_model(model, data, run.threads)

    t0 = time.perf_counter()
    ref, ref_key = _reference(stan, reference, fit_settings, run.seed, out)
    reference_seconds = time.perf_counter() - t0
    thinned, stride = ref.thinned()
    reverse_starts = _reverse_starts(name, thinned, run)
    n_reverse = reverse_starts.shape[0]
    for problem in ref.warnings():
        log.warning("%s: %s", name, problem)

    if base.kind == "prior":
        target, draw_base, base_info = prior_base(prior_target, simulator, data, run.threads)
        shard_source = (prior_target.compiled, dict(data), None)
    else:
        target, draw_base, base_info, shard_source = _gaussian_base(stan, data, ref, base)
    header = _header(name, program, simulator, data, sampler, run, base, ref_key)
    verdict = replace(verdict or VerdictSettings(), one_reverse_start=False)
    info = {"reference_source": ref.source, "reference_chains": ref.unconstrained.shape[0],
            "reference_draws": ref.n_draws, "reference_max_rhat": ref.max_rhat,
            "reference_min_ess": ref.min_ess, "thinning_stride": stride,
            "thinned_draws": int(thinned.shape[0]), "reverse_chains": n_reverse,
            "reference_seconds": reference_seconds, "rhat_max": RHAT_MAX, "ess_min": ESS_MIN,
            "base": base_info, "warnings": ref.warnings()}
    executor = executor or Executor()
    result = SubjectiveResult(name, header, [], {"verdict_settings": asdict(verdict),
                                                 "subjective": info,
                                                 "executor": executor.describe()})
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    with output_directory(out):
        _run_steps(result, out, target, draw_base, reverse_starts, sampler, run, executor,
                   shard_source)
    problems = ref.warnings() + _check_steps(result, stan, thinned)
    info["suspect"] = bool(problems)
    info["meaning"] = _meaning(ref, n_reverse, stride, problems, base_info["kind"])
    if out is not None:
        with output_directory(out):
            result.save(out)
    return result


def _reference(stan: StanModel, reference: Any, fit_settings: FitSettings, seed: int,
               out: Path | None) -> tuple[Reference, Any]:
    """The reference draws (None: the toolkit's own NUTS fit, saved in ``out``) and the
    key that stands for them in the run's fingerprint."""
    if reference is None:
        ref = load_reference(own_fit(stan, fit_settings, seed, out), stan)
        return ref, {"own_fit": asdict(fit_settings)}
    ref = load_reference(reference, stan)
    return ref, hashlib.sha256(ref.unconstrained.tobytes()).hexdigest()[:16]


def _reverse_starts(name: str, thinned: np.ndarray, run: RunSettings) -> np.ndarray:
    """The reverse chains' starts: ``run.chains`` of the thinned reference draws (all of
    them when there are fewer, at least 2), picked at random."""
    n_reverse = min(run.chains, thinned.shape[0])
    if n_reverse < 2:
        raise ReferenceDrawsError(f"only {thinned.shape[0]} roughly independent reference draw(s) "
                             "after thinning; the reverse direction needs at least 2: give a "
                             "longer reference")
    pick = np.random.default_rng(derived_seed(run.seed, Purpose.SUBJECTIVE_PICK))
    reverse_starts = thinned[np.sort(pick.choice(thinned.shape[0], n_reverse, replace=False))]
    if n_reverse < run.chains:
        log.warning("%s: only %d roughly independent reference draws, so %d reverse chains "
                    "(forward: %d)", name, thinned.shape[0], n_reverse, run.chains)
    return reverse_starts


def _gaussian_base(stan: StanModel, data: Mapping, ref: Reference, base: BaseSettings):
    """The Gaussian base fitted to the reference draws (or a Laplace approximation at
    their mean): the annealing target, its sampler, its description and the shards'
    source."""
    all_draws = ref.unconstrained.reshape(-1, stan.dim)
    q0 = (GaussianBase.from_draws(all_draws, base.widen) if base.fit == "reference"
          else GaussianBase.laplace(stan, all_draws.mean(axis=0), base.widen))
    target = GaussianBaseTarget(stan, q0)
    base_info = {"kind": "gaussian", **q0.to_dict()}
    shard_source = (stan.compiled, full_data(stan.compiled, data), q0)

    def draw_base(n, seed):
        return q0.sample(np.random.default_rng(seed), n)

    return target, draw_base, base_info, shard_source


def _header(name: str, program: str, simulator, data: Mapping, sampler: SamplerSettings,
            run: RunSettings, base: BaseSettings, ref_key) -> dict:
    """The saved run's header: its settings and the fingerprints that resuming checks."""
    scored = run.scored()
    fingerprint, parts = fingerprints(
        model=program, simulator=None if simulator is None else program_text(simulator),
        data={k: np.asarray(v).tolist() for k, v in data.items()}, sampler=asdict(sampler),
        tuning=sampler.tuning_fingerprint(), run=scored, base=asdict(base), reference=ref_key)
    return {"model": name, "method": "subjective", "fingerprint": fingerprint,
            "fingerprints": parts, "steps": list(run.steps), "sampler": asdict(sampler),
            "run": {**scored, "schedule": asdict(run.schedule)}, "base": asdict(base)}


def _run_steps(result: BreadResult, out: Path | None, target, draw_base, reverse_starts,
               sampler: SamplerSettings, run: RunSettings, executor: Executor,
               shard_source: tuple) -> None:
    """Tune on pilot chains from the base (or reload the tuning), then run every step
    count not already saved in shards on ``executor`` (here by default, one batch per
    step count as :func:`engine.run <bread_stan.ais.engine.run>`) from ``shard_source``
    (compiled model, data, Gaussian base or None), saving each as it finishes; draws
    are stored constrained."""
    name, stan = result.model, target.full_model
    done = resume_steps(result, out, result.settings) if out is not None else set()
    kernel, base_params = sampler.make()
    tuned, _ = load_or_tune(out / "tuning.json" if out is not None else None, target, kernel,
                            base_params, sampler.tuning_config(),
                            derived_seed(run.seed, Purpose.SUBJECTIVE_PILOT),
                            lambda seed: draw_base(sampler.pilot_chains, seed),
                            progress=run.progress)
    result.extra["tuning"] = tuned.to_dict()
    setup_warnings(result.extra, tuned, name)
    if out is not None:
        result.save_header(out)
    def finish(step: StepResult) -> None:
        flat = stan.param_constrain(step.draws.pop("unconstrained"))
        step.draws = unflatten_draws(flat, stan.param_names())
        result.steps.append(step)
        if out is not None:
            result.save_step(out, step)

    todo = [T for T in run.steps if T not in done]
    for T in sorted(done):
        log.info("%s: %d distributions already done, loaded from %s", name, T, out)
    config = engine.RunConfig(steps=(todo[0] if todo else 2,), schedule=run.schedule,
                              steps_per_temperature=sampler.steps_per_temperature,
                              increment_blocks=run.increment_blocks, progress=run.progress)

    smc_config = (smc.SMCConfig(particles=run.particles_per_run) if run.algorithm == "smc"
                  else None)

    def starts(T: int) -> list[tuple]:
        # SMC: each run draws P forward particles and P - 1 free particles for its
        # conditional twin from the base, (runs, 2P - 1, d); a reverse run starts from a
        # reference draw with the free particles of the first runs.
        per = 1 if smc_config is None else 2 * smc_config.particles - 1
        draws = draw_base(run.chains * per, derived_seed(run.seed, Purpose.SUBJECTIVE_BASE, T))
        if smc_config is None:
            return [(draws, reverse_starts)]
        draws = draws.reshape(run.chains, per, -1)
        return [(draws, (reverse_starts, draws[:reverse_starts.shape[0]]))]

    model, data, base = shard_source
    context = ShardContext(model, data, kernel, tuned, config, base=base, smc=smc_config,
                           target=target)
    run_steps_in_shards([context], starts,
                        lambda T, k: derived_seed(run.seed, Purpose.SUBJECTIVE_CHAINS, T), todo,
                        sampler.steps_per_temperature, out, result.settings["fingerprint"],
                        executor, lambda parts: finish(parts[0]), run.progress)
    result.steps.sort(key=lambda s: s.n_steps)


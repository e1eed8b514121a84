"""AIDE on a Stan model and data: how far is an approximation from a gold standard (SPEC 7.3).

:func:`aide` builds two inference algorithms from short specs and runs the AIDE estimator
(:mod:`bread_stan.meta`) on them:

- ``"ais:T"``: forward AIS with T distributions from the base (the prior, with the
  ``prior_only`` split and a simulator program for exact prior draws; or a Gaussian q0 in
  the unconstrained space, fitted by Laplace or to reference draws and widened: any
  program), kernel tuned once on never-scored pilot chains and frozen (as in
  :func:`~bread_stan.workflows.subjective.subjective`); meta-inference by reverse AIS;
- ``"smc:P:T"``: sequential Monte Carlo (:mod:`bread_stan.ais.smc`) with P particles and T
  distributions along the same path and kernels as ``"ais:T"``, resampled at the steps the
  pilot chooses; meta-inference by conditional SMC;
- ``"sir:P"``: importance sampling with resampling over P particles, the proposal being
  the Gaussian q0 above; meta-inference by conditional SIR;
- ``"nuts:T"``, ``"hmc:T"``, ``"mh:T"``: T transitions of NUTS, HMC or random-walk
  Metropolis (a Gaussian proposal) at the posterior from a tractable start
  (``AIDESettings.mcmc_start``: Stan's uniform(-2, 2) on the unconstrained scale, the
  prior, or the Gaussian q0), the kernel frozen after a tuning run that is not scored
  (the AIS pilot's kernel at beta = 1; for ``mh`` its metric, or q0's covariance, as the
  proposal's shape, scaled by 2.38 / sqrt(d)); meta-inference by the reverse chain
  (:class:`~bread_stan.meta.mcmc.MCMCAlgorithm`);
- ``"laplace"``, ``"advi-meanfield"``, ``"advi-fullrank"``, ``"pathfinder"``: the
  Gaussian approximations of :mod:`bread_stan.approx` (tractable output density);
- ``"reference"`` (gold only): reference draws (the user's, or the toolkit's NUTS fit),
  thinned, taken as exact posterior draws.  The unknown log Z cancels between the two
  terms (see :class:`~bread_stan.meta.algorithms.ReferenceAlgorithm`), so the estimate
  is AIDE with an exact gold when the reference is exact; otherwise the subjective
  divergence's caveats apply.

Any :class:`~bread_stan.meta.algorithms.InferenceAlgorithm` object may be given instead of a
spec.  With ``out_dir``, the gold side (the expensive part) is saved once as a unit
``gold.npz`` and shared by every target run into the same directory; each target's result
is a unit ``aide-<target>.npz`` plus ``aide-<target>.json`` (estimate under
``"aide_nats"``); a rerun with the same settings loads them instead of recomputing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..meta import (AIDEResult, AISAlgorithm, Cost, GoldSide, MCMC_STARTS, MCMCAlgorithm,
                    ReferenceAlgorithm, SIRAlgorithm, SMCAlgorithm, StartDistribution,
                    TractableAlgorithm, density_start, estimate_aide, gold_side, uniform_start)
from ..ais import smc
from ..ais.betas import ScheduleSpec
from ..ais.gaussian_base import GaussianBase, GaussianBaseTarget
from ..approx import METHODS, approximate
from ..errors import BreadStanError, InputError
from ..kernels.rwm import RandomWalkMetropolis, RWMParams
from ..parallel.executor import Executor
from ..parallel.shards import ShardContext, run_on_target
from ..rng import Purpose, derived_seed
from ..stan.compile import CompiledModel
from ..stan.data import load_data
from ..stan.tempered import JointTarget, StanTarget
from ..store import load_if_sound, load_json, load_unit, save_json, save_unit
from .common import (check_resumable, default_name, fingerprints, load_or_tune,
                     output_directory, program_text)
from .settings import RunSettings, SamplerSettings
from .fit import FitSettings
from .subjective import (BaseSettings, full_data, own_fit, prior_base, stan_model,
                         load_reference)
from .auto_path import prior_path_only

__all__ = ["aide", "AIDESettings", "parse_algorithm", "AIDESpecError"]

log = logging.getLogger(__name__)

_SPEC = re.compile(r"(ais|sir):(\d+)")
_SMC_SPEC = re.compile(r"smc:(\d+):(\d+)")
_MCMC_SPEC = re.compile(r"(nuts|hmc|mh):(\d+)")
MCMC_KINDS = ("nuts", "hmc", "mh")


class AIDESpecError(BreadStanError, ValueError):
    """An algorithm spec that is not understood or not allowed in its role."""


def parse_algorithm(spec: str) -> tuple[str, int | tuple[int, int] | None]:
    """``"ais:100"`` -> ("ais", 100), ``"sir:1000"`` -> ("sir", 1000), ``"smc:16:100"``
    -> ("smc", (16, 100)), ``"nuts:100"`` -> ("nuts", 100) (also ``hmc:T``, ``mh:T``),
    ``"laplace"`` -> ("laplace", None); an unknown spec raises
    :class:`AIDESpecError` listing the known."""
    text = str(spec).strip().lower()
    smc_match = _SMC_SPEC.fullmatch(text)
    if smc_match:
        particles, steps = int(smc_match.group(1)), int(smc_match.group(2))
        if particles < 1 or steps < 2:
            raise AIDESpecError(f"{spec}: SMC needs at least 1 particle and 2 distributions")
        return "smc", (particles, steps)
    mcmc_match = _MCMC_SPEC.fullmatch(text)
    if mcmc_match:
        if int(mcmc_match.group(2)) < 1:
            raise AIDESpecError(f"{spec}: an MCMC run needs at least 1 transition")
        return mcmc_match.group(1), int(mcmc_match.group(2))
    match = _SPEC.fullmatch(text)
    if match:
        size = int(match.group(2))
        if size < (2 if match.group(1) == "ais" else 1):
            raise AIDESpecError(f"{spec}: AIS needs at least 2 distributions, SIR 1 particle")
        return match.group(1), size
    if text in METHODS or text == "reference":
        return text, None
    raise AIDESpecError(f"unknown algorithm {spec!r}; use ais:T, smc:P:T, sir:P, nuts:T, "
                        "hmc:T, mh:T, "
                        f"{', '.join(METHODS)} or (gold only) reference")


@dataclass(frozen=True)
class AIDESettings:
    """How many runs of each algorithm and how many meta-inference traces per output
    (``m_*``: only for AIS, SMC, SIR and MCMC; a tractable algorithm needs one), the level
    of the interval, and where an MCMC target (``nuts:T``, ``hmc:T``, ``mh:T``) starts:
    ``mcmc_start`` "uniform" (Stan's default, uniform(-2, 2) on the unconstrained scale),
    "prior" (needs the prior base) or "q0" (the Gaussian q0).

    With M traces AIDE's expectation for an MCMC target lies above the divergence of its
    output and falls towards it as M grows; with M = 1 it is the divergence of the start,
    whatever T (:mod:`bread_stan.meta.mcmc`): give an MCMC target many traces."""

    n_gold: int = 100
    n_target: int = 100
    m_gold: int = 1
    m_target: int = 1
    level: float = 0.95
    mcmc_start: str = "uniform"

    def __post_init__(self):
        if self.mcmc_start not in MCMC_STARTS:
            raise InputError(f"mcmc_start must be one of {', '.join(MCMC_STARTS)}, got "
                             f"{self.mcmc_start!r}")


@dataclass
class _Setup:
    """Everything built once per model and data, lazily: the Stan model, the base, the
    tuned kernel, the Gaussian q0 and the reference."""

    model: Any
    data: Mapping
    base: BaseSettings
    sampler: SamplerSettings
    schedule: ScheduleSpec
    simulator: Any
    reference: Any
    fit_settings: FitSettings
    seed: int
    threads: int | None
    out: Path | None
    progress: bool
    executor: Executor
    mcmc_start: str = "uniform"

    def __post_init__(self):
        if self.base.kind == "prior":
            if self.simulator is None:
                raise InputError("the prior base needs a simulator program (exact prior "
                                 "draws); give one, or use the Gaussian base")
            self._prior_target = StanTarget(self.model, self.data, threads=self.threads)
            self.stan = self._prior_target.full_model
        else:
            self.stan = stan_model(self.model, self.data, self.threads)
        self._cache: dict[str, Any] = {}

    def _once(self, key: str, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def reference_draws(self) -> np.ndarray:
        """Thinned reference draws (the user's, or the toolkit's own NUTS fit)."""
        def make():
            source = (self.reference if self.reference is not None
                      else own_fit(self.stan, self.fit_settings, self.seed, self.out))
            return load_reference(source, self.stan).thinned()[0]
        return self._once("reference", make)

    def q0(self) -> GaussianBase:
        """The Gaussian q0 (fitted to reference draws or by Laplace, widened)."""
        def make():
            if self.base.fit == "reference":
                return GaussianBase.from_draws(self.reference_draws(), self.base.widen)
            start = np.random.default_rng(derived_seed(self.seed, Purpose.AIDE_BASE_FIT)).uniform(
                -2, 2, self.stan.dim)  # Stan's default initialisation
            return GaussianBase.laplace(self.stan, start, self.base.widen)
        return self._once("q0", make)

    def ais_parts(self):
        """The AIS target, exact base draws and the tuned kernel (tuned once, saved)."""
        def make():
            if self.base.kind == "prior":
                target, draw_base, _ = prior_base(self._prior_target, self.simulator,
                                                   self.data, self.threads)
            else:
                q0 = self.q0()
                target = GaussianBaseTarget(self.stan, q0)

                def draw_base(n, seed):
                    return q0.sample(np.random.default_rng(seed), n)
            kernel, params = self.sampler.make()
            tuned, _ = load_or_tune(self.out / "tuning.json" if self.out is not None else None,
                                    target, kernel, params, self.sampler.tuning_config(),
                                    derived_seed(self.seed, Purpose.AIDE_PILOT),
                                    lambda seed: draw_base(self.sampler.pilot_chains, seed),
                                    progress=self.progress)
            return target, draw_base, kernel, tuned
        return self._once("ais", make)

    def block_runner(self):
        """A runner of AIS blocks on the executor (here by default: the blocks run on
        the target already built; on a cluster, on a target each worker rebuilds)."""
        def make():
            target, _, kernel, _ = self.ais_parts()
            if self.base.kind == "prior":
                context = ShardContext(self._prior_target.compiled, dict(self.data), kernel,
                                       target=target)
            else:
                compiled = self.stan.compiled
                context = ShardContext(compiled, full_data(compiled, self.data), kernel,
                                       base=self.q0(), target=target)
            shared = self.executor.share(context)

            def run_blocks(function, blocks):
                done = {}
                self.executor.run(run_on_target,
                                  {f"{function.__name__}-{i}": (shared, function, *block)
                                   for i, block in enumerate(blocks)},
                                  done.__setitem__, progress=self.progress)
                return [done[f"{function.__name__}-{i}"] for i in range(len(blocks))]
            return run_blocks
        return self._once("blocks", make)

    def tuned_kernel(self, kind: str):
        """A kernel of ``kind`` ("nuts", "hmc") tuned along the AIS path on never-scored
        pilot chains (the AIS kernel's own tuning when it is that kind), and the tuned
        kernel; for any other kind the AIS kernel's."""
        target, draw_base, kernel, tuned = self.ais_parts()
        if kind not in ("nuts", "hmc") or kind == self.sampler.kernel:
            return kernel, tuned

        def make():
            sampler = replace(self.sampler, kernel=kind)
            made, params = sampler.make()
            path = self.out / f"tuning-{kind}.json" if self.out is not None else None
            tuned_kind, _ = load_or_tune(path, target, made, params, sampler.tuning_config(),
                                         derived_seed(self.seed, Purpose.AIDE_PILOT),
                                         lambda seed: draw_base(sampler.pilot_chains, seed),
                                         progress=self.progress)
            return made, tuned_kind
        return self._once(f"tuned-{kind}", make)

    def mcmc_start_distribution(self) -> StartDistribution:
        """Where an MCMC target's chains start (``mcmc_start``)."""
        if self.mcmc_start == "uniform":
            return uniform_start(self.stan.dim)
        if self.mcmc_start == "q0":
            return density_start("q0", self.q0())
        if self.base.kind != "prior":
            raise InputError("an MCMC start from the prior needs the prior base (the "
                             "prior_only split and a simulator program)")
        _, draw_base, _, _ = self.ais_parts()
        prior = self._prior_target

        def log_prior(x):
            return prior.evaluate(np.ascontiguousarray(x, dtype=float), gradient=False).log_prior
        return StartDistribution("prior", draw_base, log_prior)

    def mcmc(self, kind: str, steps: int) -> MCMCAlgorithm:
        """``kind:steps`` as an MCMC algorithm on the model's joint density, its kernel
        frozen at the tuned kernel's beta = 1 settings."""
        kernel, tuned = self.tuned_kernel(kind)
        at_one = getattr(tuned, "schedule", None)
        params = at_one(np.array([0.0, 1.0]), 1).params_at(1) if at_one is not None else None
        if kind == "mh":
            metric = getattr(params, "inv_metric", None)
            if metric is None:
                metric = (self.q0().cov / self.base.widen ** 2)[None]
            kernel, params = RandomWalkMetropolis(), RWMParams(2.38 / np.sqrt(self.stan.dim),
                                                               metric)
        return MCMCAlgorithm(JointTarget(self.stan), kernel, params,
                             self.mcmc_start_distribution(), steps, name=f"{kind}:{steps}")

    def algorithm(self, spec, role: str):
        if not isinstance(spec, str):
            return spec  # an InferenceAlgorithm object
        kind, size = parse_algorithm(spec)
        if kind in MCMC_KINDS:
            return self.mcmc(kind, size)
        if kind == "ais":
            target, draw_base, kernel, tuned = self.ais_parts()
            schedule = tuned.schedule(self.schedule.lazy(size, tuned),
                                      self.sampler.steps_per_temperature)
            return AISAlgorithm(target, kernel, schedule, draw_base, name=f"ais:{size}",
                                run_blocks=self.block_runner(),
                                block_size=self.executor.chains_per_shard)
        if kind == "smc":
            particles, steps = size
            target, draw_base, kernel, tuned = self.ais_parts()
            betas = self.schedule.lazy(steps, tuned)
            schedule = tuned.schedule(betas, self.sampler.steps_per_temperature)
            at = smc.SMCConfig(particles=particles).steps_for(betas, tuned)
            return SMCAlgorithm(target, kernel, schedule, draw_base, particles, at,
                                name=f"smc:{particles}:{steps}")
        if kind == "sir":
            return SIRAlgorithm(self.stan, self.q0(), size, name=f"sir:{size}")
        if kind == "reference":
            if role != "gold":
                raise AIDESpecError("reference draws can only be the gold standard: as a "
                                    "target they would only assert their own exactness")
            return ReferenceAlgorithm(self.reference_draws(), self.stan)
        return _approximation(kind, self.stan, derived_seed(self.seed, Purpose.AIDE_APPROXIMATION))


def _approximation(kind: str, stan, seed: int) -> TractableAlgorithm:
    fitted = approximate(stan, kind, seed=seed)
    diagnostics = fitted.diagnostics
    cost = Cost(gradients=int(diagnostics.get("gradient_evaluations", 0)),
                seconds=float(diagnostics.get("seconds", 0.0)))
    return TractableAlgorithm(fitted, name=kind, fit_cost=cost)


def _spec_name(spec) -> str:
    """A spec as given, or an algorithm object's name (never its repr: resume compares it)."""
    return spec if isinstance(spec, str) else str(getattr(spec, "name", type(spec).__name__))


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _load_gold(path: Path, fingerprint: str, name: str) -> GoldSide | None:
    def load(p):
        arrays, meta = load_unit(p)
        if meta.get("fingerprint") != fingerprint:
            return None
        return GoldSide(name, arrays["outputs"], arrays["log_xi"], Cost(**meta["cost"]),
                        meta["seed"])
    return load_if_sound(path, load)


def _load_target(path: Path, fingerprint: str) -> AIDEResult | None:
    def load(p):
        arrays, meta = load_unit(p)
        if meta.get("fingerprint") != fingerprint:
            return None
        return AIDEResult.from_saved(arrays, meta["summary"])
    return load_if_sound(path, load)


def _check_roles(gold, target) -> None:
    """Refuse reference draws as the target (they would only assert their own exactness)."""
    for role, spec in (("gold", gold), ("target", target)):
        if isinstance(spec, str):
            kind, _ = parse_algorithm(spec)
            if kind == "reference" and role == "target":
                raise AIDESpecError("reference draws can only be the gold standard: as a "
                                    "target they would only assert their own exactness")


def _run_header(name: str, program: str, data: Mapping, *, simulator, base, sampler, schedule,
                gold, settings: AIDESettings, seed: int, reference) -> dict:
    """What the run directory's ``run.json`` records (and resumes by): the fingerprint of
    everything the gold side depends on."""
    header_parts = dict(
        model=program, simulator=None if simulator is None else program_text(simulator),
        data={k: np.asarray(v).tolist() for k, v in data.items()}, base=asdict(base),
        sampler=asdict(sampler), schedule=asdict(schedule),
        gold={"spec": _spec_name(gold), "n_gold": settings.n_gold, "m_gold": settings.m_gold,
              "seed": seed},
        reference=None if reference is None else str(reference)[:200])
    fingerprint, parts = fingerprints(**header_parts)
    return {"model": name, "method": "aide", "fingerprint": fingerprint,
            "fingerprints": parts, **{k: v for k, v in header_parts.items()
                                      if k not in ("model", "data", "simulator")}}


def _target_fingerprint(gold_fingerprint: str, target, settings: AIDESettings) -> str:
    """The fingerprint of one target's result (an MCMC target's also covers its start)."""
    extra = {}
    if isinstance(target, str) and parse_algorithm(target)[0] in MCMC_KINDS:
        extra["mcmc_start"] = settings.mcmc_start
    return fingerprints(gold=gold_fingerprint, target=_spec_name(target),
                        n_target=settings.n_target, m_target=settings.m_target,
                        level=settings.level, **extra)[0]


def _gold(out: Path | None, fingerprint: str, algorithm, settings: AIDESettings, seed: int,
          name: str) -> GoldSide:
    """The gold side: loaded from ``gold.npz`` when saved with this fingerprint, else run
    (and saved)."""
    side = _load_gold(out / "gold.npz", fingerprint, algorithm.name) if out else None
    if side is None:
        log.info("%s: %d runs of the gold standard %s", name, settings.n_gold, algorithm.name)
        side = gold_side(algorithm, settings.n_gold, settings.m_gold, seed=seed)
        if out is not None:
            save_unit(out / "gold.npz", {"outputs": side.outputs, "log_xi": side.log_xi},
                      {"fingerprint": fingerprint, "cost": side.cost.to_dict(),
                       "seed": side.seed, "name": side.name})
    return side


def _describe(result: AIDEResult, target_algorithm, *, name: str, gold, target, base,
              executor: Executor) -> None:
    """Add the fitting cost, the specs and (MCMC) the start and acceptance to a result."""
    fit_cost = getattr(target_algorithm, "fit_cost", None)
    if fit_cost is not None:
        result.cost["target_fit"] = fit_cost
    result.settings.update({"model": name, "gold_spec": _spec_name(gold),
                            "target_spec": _spec_name(target), "base": asdict(base),
                            "executor": executor.describe()})
    if isinstance(target_algorithm, MCMCAlgorithm):
        result.settings.update({"mcmc_start": target_algorithm.start.name,
                                "mcmc_steps": target_algorithm.steps,
                                "mcmc_accept_stat": target_algorithm.accept_stat})


def aide(model, data=None, *, gold: Any = "ais:10000", target: Any = "advi-meanfield",
         settings: AIDESettings = AIDESettings(),
         sampler: SamplerSettings = SamplerSettings(), run: RunSettings = RunSettings(),
         base: BaseSettings = BaseSettings(fit="laplace"), simulator=None,
         reference: Any = None, fit_settings: FitSettings = FitSettings(),
         out_dir: str | Path | None = None, name: str | None = None,
         executor: Executor | None = None) -> AIDEResult:
    """AIDE of ``target`` against ``gold`` on ``model`` (a path, program text or compiled
    model) and ``data`` (see the module docstring for the specs).

    ``settings``: runs of each algorithm, traces per output, the interval's level and an
    MCMC target's start (:class:`AIDESettings`).  ``sampler`` and ``run`` are
    :func:`~bread_stan.bread`'s: the AIS kernel and its tuning, and of ``run`` the seed,
    the schedule (the size of AIS is the spec's T), threads and progress (its step counts,
    chains and simulator check are BREAD's and are not read here).  ``base``: AIS's
    initial distribution (default: a Laplace-fitted Gaussian widened 1.5 times, any
    program; the prior needs the ``prior_only`` split and a ``simulator``); SIR's proposal
    is the same Gaussian q0.  ``reference``: draws for a ``"reference"`` gold or a
    reference-fitted base (anything :func:`~bread_stan.workflows.subjective.load_reference`
    takes; default the toolkit's NUTS fit with ``fit_settings``).  Returns an
    :class:`~bread_stan.meta.estimator.AIDEResult` (in nats); ``cost`` adds the fitting
    cost of an approximation under ``"target_fit"``.  ``executor``
    (:class:`~bread_stan.parallel.executor.Executor`) runs the AIS runs and their
    reverse meta-inference chains in blocks on a Dask cluster, with the numbers of
    the local default (MCMC targets run here).
    """
    sampler, run = prior_path_only(sampler, run, "aide")
    data = load_data(data)
    program = model.program.code if isinstance(model, CompiledModel) else program_text(model)
    name = name or (model.program.name if isinstance(model, CompiledModel)
                    else default_name(model))
    out = Path(out_dir) if out_dir is not None else None
    _check_roles(gold, target)
    executor = executor or Executor()
    setup = _Setup(model, data, base, sampler, run.schedule, simulator, reference,
                   fit_settings, run.seed, run.threads, out, run.progress, executor,
                   settings.mcmc_start)
    header = _run_header(name, program, data, simulator=simulator, base=base, sampler=sampler,
                         schedule=run.schedule, gold=gold, settings=settings, seed=run.seed,
                         reference=reference)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    with output_directory(out):
        if out is not None:
            saved = load_if_sound(out / "run.json", load_json)
            if saved is not None:
                check_resumable(out, saved, header)
            save_json(out / "run.json", header)
        gold_algorithm = setup.algorithm(gold, "gold")
        target_algorithm = setup.algorithm(target, "target")
        target_fp = _target_fingerprint(header["fingerprint"], target, settings)
        unit = out / f"aide-{_slug(target_algorithm.name)}.npz" if out is not None else None
        result = _load_target(unit, target_fp) if unit is not None else None
        if result is not None:
            log.info("%s: AIDE of %s loaded from %s", name, target_algorithm.name, unit)
            return result
        aide_seed = derived_seed(run.seed, Purpose.AIDE)
        side = _gold(out, header["fingerprint"], gold_algorithm, settings, aide_seed, name)
        log.info("%s: AIDE of %s (%d runs, %d traces)", name, target_algorithm.name,
                 settings.n_target, settings.m_target)
        result = estimate_aide(side, target_algorithm, gold_algorithm=gold_algorithm,
                               n_target=settings.n_target, m_target=settings.m_target,
                               seed=aide_seed, level=settings.level)
        _describe(result, target_algorithm, name=name, gold=gold, target=target, base=base,
                  executor=executor)
        if unit is not None:
            save_unit(unit, result.arrays(), {"fingerprint": target_fp,
                                              "summary": result.summary()})
            save_json(unit.with_suffix(".json"), result.summary())
    log.info("%s: AIDE(%s, %s) = %.4g nats [%.4g, %.4g]", name, result.gold, result.target,
             result.estimate, result.lower, result.upper)
    return result

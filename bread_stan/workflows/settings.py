"""Settings of a run: the kernel and its tuning (:class:`SamplerSettings`) and the
run itself (:class:`RunSettings`), one type per concept with one set of defaults.

These are the classes a user sets.  The layers below read their own settings types,
with the same field names: :class:`~bread_stan.ais.tuning.TuningConfig` (or
:class:`~bread_stan.ais.imh_tuning.IMHTuningConfig`) from
:meth:`SamplerSettings.tuning_config`, and :class:`~bread_stan.ais.engine.RunConfig`
and :class:`~bread_stan.ais.smc.SMCConfig` from the workflows.  A default shared by
both layers is defined once, in the lower class (the layers below do not import the
workflows), and read here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ..ais.betas import ScheduleSpec
from ..ais.engine import RunConfig
from ..ais.imh_tuning import IMHTuningConfig
from ..ais.path_choice import PATHS
from ..ais.smc import SMCConfig
from ..ais.tuning import METRICS, TuningConfig, fingerprint_fields
from ..ais.tuning import RIDGES as PILOT_RIDGES
from ..kernels.hmc import HMC, HMCParams
from ..kernels.imh import IMH
from ..kernels.nuts import NUTS, NUTSParams
from ..kernels.registry import kernel_entry
from ..errors import InputError

__all__ = ["RunSettings", "SamplerSettings", "SMC_PARTICLES", "RIDGES"]

SMC_PARTICLES = SMCConfig.particles  # particles per SMC run unless RunSettings.particles says
RIDGES = ("auto", *PILOT_RIDGES)  # "auto": chosen by the path (SamplerSettings.for_path)


def _is_whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _iterable(value) -> tuple:
    try:
        return tuple(value)
    except TypeError:
        return (value,)


def _check_whole(name: str, value, least: int, why: str = "") -> None:
    """Refuse anything but a whole number >= ``least`` (2.5, "3", True, -3)."""
    if not _is_whole(value) or value < least:
        hint = f" ({why})" if why else ""
        raise InputError(f"{name} must be a whole number >= {least}{hint}; got {value!r}")


def _step_counts(value) -> tuple[int, ...]:
    """Step counts as a sorted tuple of distinct whole numbers >= 2."""
    steps = (value,) if _is_whole(value) else value
    if isinstance(steps, (str, bytes)) or not all(_is_whole(s) for s in _iterable(steps)):
        raise InputError(f"steps must be whole numbers of distributions (each at least 2), "
                         f"for example (10, 100, 1000), or 'auto' with budget_minutes; "
                         f"got {value!r}")
    steps = tuple(int(s) for s in steps)
    if not steps or min(steps) < 2:
        raise InputError("steps must be numbers of distributions, each at least 2")
    return tuple(sorted(set(steps)))


@dataclass(frozen=True)
class SamplerSettings:
    """The Markov kernel used at every temperature, and how it is tuned.

    ``kernel`` is ``"nuts"`` (``max_depth``; the default), ``"hmc"``
    (``n_leapfrog`` steps) or ``"imh"``: independent Metropolis-Hastings with a
    multivariate t proposal per temperature frozen from an adaptive SMC pilot of
    ``pilot_chains`` particles (:mod:`bread_stan.ais.imh_tuning`; no gradients, one
    log-density evaluation per step; ``steps_per_temperature`` multiplies the
    pilot's number of MH steps per temperature; the other pilot and metric settings
    do not apply).  IMH suits near-Gaussian posteriors of low dimension, with SMC
    (``RunSettings(algorithm="smc")``) and a few hundred pilot particles.  The step size (and, with ``adapt_metric``, an inverse
    metric: ``metric`` "diag", "dense" as Stan's ``dense_e``, or "auto", dense
    where the pilot draws are strongly correlated; see
    :class:`~bread_stan.ais.tuning.TuningConfig`) is tuned along beta on
    ``pilot_chains`` never-scored chains, then frozen for forward and reverse
    runs alike.  ``pilot_floor`` None lets the pilot reach down to the beta where
    the likelihood starts to matter (see ``pilot_floor`` of
    :class:`~bread_stan.ais.tuning.TuningConfig`).  ``step_size_jitter`` and
    ``rescue_prob`` randomise the step size of each transition (see
    :class:`~bread_stan.kernels.hmc.HMCParams`); the default 10% of "rescue"
    transitions with much smaller steps frees chains that start deep in the
    prior's tails, which a fixed step size can leave stranded for the whole run
    (NUTS builds a rescue transition's tree to depth at most 4).

    ``metric_ridge``: how the pilot regularises its metric estimates (``metric_ridge`` of
    :class:`~bread_stan.ais.tuning.TuningConfig`): "stan" (Stan's absolute ridge of
    1e-3), "relative" (1e-3 of each variance: the same metric in any units; needed when
    a parameter's posterior sd is far below 0.03, as for the coefficient of an
    uncentred predictor, where Stan's ridge shrinks the step size by orders of
    magnitude) or "auto" (the default): "stan" on the prior path, "relative" on the
    waypoint and Gaussian-base paths (:meth:`for_path`), so a run on the prior path
    tunes as before.

    NUTS is the default because it reached a given bound in less time than HMC
    with 10 leapfrog steps on every model measured (``scripts/bench/bench_defaults.py``
    and ``scripts/bench/bench_schedules.py``): its trajectory length follows the
    posterior's scale at each temperature, which one fixed L cannot.  The metric
    is "auto" with a 20-transition pilot for the same reason: on the models
    measured (NHEFS, Pima and the vague-prior regression, with six, six and three
    simulated problems) it reached a given bound in no more time than "diag" with 40
    pilot transitions, and in far less where the posterior is strongly
    correlated at some temperature (where "diag" forces small steps and deep
    trees); 20 pilot transitions gave the same bounds as 30 there (six seeds
    each on NHEFS and Pima; ``scripts/figures/bench_settings/results.md``).
    """

    # The pilot's settings carry TuningConfig's names, and its defaults where it has them.
    kernel: str = "nuts"
    n_leapfrog: int = 10
    step_size_jitter: float = 0.0
    rescue_prob: float = 0.1
    max_depth: int = 8
    steps_per_temperature: int = RunConfig.steps_per_temperature
    target_accept: float | None = TuningConfig.target_accept
    adapt_metric: bool = TuningConfig.adapt_metric
    metric: str = TuningConfig.metric
    pilot_chains: int = 32
    pilot_grid: int = TuningConfig.pilot_grid
    pilot_steps: int = TuningConfig.pilot_steps
    pilot_floor: float | None = TuningConfig.pilot_floor
    metric_ridge: str = "auto"

    def __post_init__(self):
        kernel_entry(self.kernel)  # one-line error for an unknown kernel
        if self.metric not in METRICS:
            raise InputError(f"unknown metric {self.metric!r}; use 'diag', 'dense' or 'auto'")
        if self.metric_ridge not in RIDGES:
            raise InputError(f"unknown metric_ridge {self.metric_ridge!r}; use 'stan', "
                             "'relative' or 'auto'")
        for name in ("n_leapfrog", "max_depth", "steps_per_temperature", "pilot_steps"):
            _check_whole(name, getattr(self, name), 1)
        _check_whole("pilot_chains", self.pilot_chains, 2)
        _check_whole("pilot_grid", self.pilot_grid, 2)

    def make(self):
        """The kernel object and its base params (IMH: none; its proposals come from
        its pilot)."""
        if self.kernel == "imh":
            return IMH(), None
        if self.kernel == "hmc":
            return HMC(), HMCParams(step_size=0.1, n_leapfrog=self.n_leapfrog,
                                    step_size_jitter=self.step_size_jitter,
                                    rescue_prob=self.rescue_prob)
        return NUTS(), NUTSParams(step_size=0.1, max_depth=self.max_depth,
                                  step_size_jitter=self.step_size_jitter,
                                  rescue_prob=self.rescue_prob)

    def for_path(self, path: str) -> "SamplerSettings":
        """These settings with ``metric_ridge`` "auto" made concrete for ``path``:
        "relative" on the waypoint and Gaussian-base paths, "stan" on the prior path."""
        if self.metric_ridge != "auto":
            return self
        return replace(self, metric_ridge="stan" if path == "prior" else "relative")

    def tuning_config(self) -> TuningConfig | IMHTuningConfig:
        """The pilot's settings: :class:`~bread_stan.ais.tuning.TuningConfig` for HMC and
        NUTS, its fields of the same names copied ("auto" ridge: the prior path's,
        "stan"), :class:`~bread_stan.ais.imh_tuning.IMHTuningConfig` (its defaults) for
        IMH."""
        if self.kernel == "imh":
            return IMHTuningConfig()
        return TuningConfig(pilot_grid=self.pilot_grid, pilot_steps=self.pilot_steps,
                            target_accept=self.target_accept, adapt_metric=self.adapt_metric,
                            metric=self.metric, pilot_floor=self.pilot_floor,
                            metric_ridge=self.for_path("prior").metric_ridge)

    def tuning_fingerprint(self) -> dict[str, Any]:
        """The pilot's settings as a run's resume fingerprint hashes them (under their
        names from before they were renamed to these:
        :func:`~bread_stan.ais.tuning.fingerprint_fields`)."""
        return fingerprint_fields(self.tuning_config())


@dataclass(frozen=True)
class RunSettings:
    """What to run: step counts, chains per direction, schedule, seed, threads.

    ``steps="auto"`` with ``budget_minutes`` M chooses the step counts: the first T
    where the pilot's predicted gap L^2 / (2T) reaches the verdict's ``converged_nats``
    (at least 10), then 3 to 4 times larger until the bound's upper limit is at most
    that level or the next T would not finish within M minutes of wall time (then the
    T the fit predicts, times 1.25, where that fits; the pilots
    and the simulator check count, compiles do not; :mod:`bread_stan.ais.budget`).
    ``budget_gradients`` N (instead of or beside minutes) makes the same decision in
    gradient evaluations (the pilots' and the check's counted, a rival path's abandoned
    pilot not), so the choice is the same on any machine.  The
    chosen step counts are in ``extra["auto_steps"]``; ``steps`` set to them gives the
    same numbers.

    The default schedule is the adaptive one (equal thermodynamic length, from
    the pilot; :func:`~bread_stan.ais.betas.thermodynamic`): in
    ``scripts/bench/bench_schedules.py`` it gave NHEFS linear regression a bound 5
    times smaller than the sigmoid schedule at the same T, and took the
    vague-prior regression (``stan_models/vague_regression.stan``) from 1e10 nats to a few.

    ``exact_draws`` = K > 1 simulates K independent problems (x*_k, y*_k) and
    splits the chains of each direction among them: the bound is then averaged
    over data sets of the model (it bounds the expected Jeffreys divergence) and
    its interval comes from the spread between problems, which covers the
    variation from one exact draw to the next.  With K = 1 (the default, cheapest)
    the interval is conditional on the single exact draw.  The kernel is tuned
    once, on problem 1, and frozen for all.

    ``check_simulator`` runs the simulator check before the AIS runs (its result
    never changes the bounds, so it is not part of the resume fingerprint).

    ``algorithm`` "smc" runs sequential Monte Carlo (:mod:`bread_stan.ais.smc`)
    instead of AIS: ``chains`` runs per direction of ``particles`` particles each
    (default 16), resampled where the pilot says the effective sample size would
    fall below half; the bound is on the Jeffreys divergence of SMC's output.

    ``path``: "prior" tempers the likelihood from the prior (SPEC
    section 1); "waypoint" anneals from the prior to a Gaussian q fitted to the
    posterior (a Laplace approximation, sds widened 1.5 times) and on from q to the
    posterior, each leg tuned by its own pilot (:mod:`bread_stan.ais.waypoint`).  It
    still starts from exact prior draws and estimates log p(y) itself, and it avoids
    the funnels that tempering a vague prior's likelihood creates (a half-Cauchy
    regression with an uncentred predictor: ``scripts/bench/bench_hard.py``).  It needs a
    posterior mode with a Gaussian approximation there, and runs AIS only with one
    exact draw (``exact_draws`` = 1: the waypoint is fitted to that data set).

    "gaussian" is a different sampler: the same Laplace q, then AIS from exact draws of q
    to the posterior (the waypoint path's second leg alone,
    :mod:`bread_stan.ais.gaussian_path`), with the program prior's normaliser c
    computed by a drafted simulator (:mod:`bread_stan.workflows.simulator_normaliser`), else
    estimated by importance sampling from exact prior draws
    (:mod:`bread_stan.ais.prior_normaliser`), and subtracted from every estimate, so the
    sandwich is of log p(y); its record is in ``extra["tuning"]["normaliser"]``.  The
    bound is on the divergence of that sampler's output, and does not depend on c.

    "auto" (the default) decides before any scored run
    (:mod:`bread_stan.ais.path_choice`): where the Gaussian path can run (AIS, HMC or
    NUTS, one exact draw, a posterior mode, a trustworthy estimate of c), the cheaper of
    it and the prior path by their pilots' cost, gradients a transition times
    thermodynamic length squared (the prior path's pilot abandoned once it costs more;
    the Gaussian path alone when the sd of the log likelihood over the pilot's prior
    draws exceeds 1e12 nats, where tempering would strand chains); elsewhere that sd
    alone: the waypoint path above 1e12, the prior path below, and the prior path with
    a logged reason wherever the waypoint cannot run (SMC, several exact draws, no
    posterior mode; protocol, subjective and aide run the prior path only).  The choice
    and its numbers are in the result's ``extra["path_choice"]``; a run that resolves to
    the prior path gives the numbers of ``path="prior"`` and resumes its saved results.
    """

    steps: tuple[int, ...] | str = RunConfig.steps
    chains: int = 100
    schedule: ScheduleSpec = field(default_factory=lambda: ScheduleSpec("adaptive"))
    seed: int = 0
    threads: int | None = None
    increment_blocks: int | None = RunConfig.increment_blocks
    progress: bool = True
    exact_draws: int = 1
    check_simulator: bool = True
    algorithm: str = "ais"
    particles: int | None = None
    path: str = "auto"
    budget_minutes: float | None = None
    budget_gradients: float | None = None

    def __post_init__(self):
        if self.algorithm not in ("ais", "smc"):
            raise InputError(f"unknown algorithm {self.algorithm!r}; use 'ais' or 'smc'")
        if self.path not in PATHS:
            raise InputError(f"unknown path {self.path!r}; use 'auto', 'prior', 'waypoint' "
                             "or 'gaussian'")
        if self.path in ("waypoint", "gaussian") and self.algorithm != "ais":
            raise InputError(f"path={self.path!r} runs AIS only; use algorithm='ais' with it")
        if self.path in ("waypoint", "gaussian") and self.exact_draws != 1:
            raise InputError(f"path={self.path!r} fits its Gaussian to one simulated data "
                             "set's posterior; use exact_draws=1 with it")
        if self.particles is not None:
            if self.algorithm != "smc":
                raise InputError("particles are for algorithm='smc'")
            _check_whole("particles", self.particles, 1)
        elif self.algorithm == "smc":
            object.__setattr__(self, "particles", SMC_PARTICLES)
        auto = self._check_budget()
        if not auto:
            object.__setattr__(self, "steps", _step_counts(self.steps))
        _check_whole("chains", self.chains, 2, "intervals need spread")
        _check_whole("seed", self.seed, 0)
        if self.threads is not None:
            _check_whole("threads", self.threads, 1, "None uses all cores")
        if self.increment_blocks is not None:
            _check_whole("increment_blocks", self.increment_blocks, 1)
        _check_whole("exact_draws", self.exact_draws, 1)
        if self.exact_draws != 1 and not 2 <= self.exact_draws <= self.chains:
            raise InputError(f"exact_draws must be 1, or between 2 and chains ({self.chains}) "
                             "so that every simulated problem gets a chain in each direction")

    def _check_budget(self) -> bool:
        """Check ``steps="auto"`` and its budget, ``budget_minutes`` or
        ``budget_gradients`` or both (True: the steps are "auto")."""
        auto = isinstance(self.steps, str) and self.steps == "auto"
        for name, unit in (("budget_minutes", "minutes"), ("budget_gradients", "gradients")):
            value = getattr(self, name)
            if value is None:
                continue
            if not auto:
                raise InputError(f"{name} is for steps='auto' (the step counts "
                                 "chosen within the budget)")
            if (isinstance(value, bool) or not isinstance(value, (int, float, np.number))
                    or not value > 0 or not np.isfinite(value)):
                raise InputError(f"{name} must be a positive number of {unit}; "
                                 f"got {value!r}")
        if auto and self.budget_minutes is None and self.budget_gradients is None:
            raise InputError("steps='auto' needs budget_minutes (minutes of wall time, "
                             "compiles excluded) or budget_gradients (gradient "
                             "evaluations, pilots and check included), e.g. "
                             "RunSettings(steps='auto', budget_minutes=10)")
        if auto and self.algorithm != "ais":
            raise InputError("steps='auto' runs AIS only; use algorithm='ais' with it")
        return auto

    @property
    def auto_steps(self) -> bool:
        """True when the step counts are chosen within ``budget_minutes``
        (:mod:`bread_stan.ais.budget`)."""
        return self.steps == "auto"

    # Settings that never change a step's numbers: left out of the resume fingerprint.
    # The budget only chooses which step counts run (each T's numbers depend on T
    # alone), so an auto run and a --steps run of the same settings share a directory.
    UNSCORED: ClassVar[tuple[str, ...]] = ("steps", "progress", "threads", "check_simulator",
                                           "budget_minutes", "budget_gradients")

    def scored(self) -> dict[str, Any]:
        """The settings that change the numbers (those a resumed run must share), as a
        dict: all but the step counts, progress, threads and the simulator check."""
        unscored = self.UNSCORED
        if self.algorithm == "ais":  # AIS results saved before SMC existed keep their fingerprint
            unscored += ("algorithm", "particles")
        return {k: v for k, v in asdict(self).items() if k not in unscored}

    @property
    def particles_per_run(self) -> int:
        """Particles per run: 1 for AIS (one chain), ``particles`` (default 16) for SMC."""
        return 1 if self.algorithm == "ais" else self.particles

"""Does the simulator draw from the model?  A Geweke-style "getting it right" check.

Every BREAD bound assumes that the simulator program draws (x, y) from the model's
joint distribution.  :func:`check_simulator` tests that with exact, frozen kernels
(the kernel and the pilot tuning of AIS, :mod:`bread_stan.ais.tuning`), in two stages:

(a) **prior**: n simulator draws x_i are, if the simulator is right, exact draws of the
    model's prior, so k transitions of the frozen beta = 0 kernel leave their
    distribution unchanged;
(b) **joint**: for m independent simulated (x_j, y_j), x_j is an exact posterior draw
    given y_j, so k transitions of the frozen beta = 1 kernel on the model built on y_j
    leave the distribution of the x_j unchanged.  Every data set gets its own target
    (one joint model instance per data set from the one compiled library) and its own
    chain; the prior_only = 1 instance of data set 0 serves them all when the prior
    does not read the simulated data (its log prior bit-identical on data set 1).

The test.  The kernels are reversible (HMC and NUTS, with momentum refresh), so if the
start is an exact draw of the kernel's invariant distribution the pair (start, end) is
exchangeable and the difference ``f(end) - f(start)`` of any function f is symmetric
about zero, independently over chains.  The **Wilcoxon signed-rank test** of those
paired differences is therefore exact under the null, with no assumption on how
dependent the end is on the start (it is, the chains are only k transitions long).
The functions f are, for every scalar parameter (constrained scale), its value (does
it drift up or down?) and its distance from a centre (does it drift inward or
outward?; the centre is the median of an independent batch of simulator draws), and
the log prior density (with the log-Jacobian of the unconstrained scale) and the log
likelihood.  The p-values are Bonferroni-corrected over all quantities of both stages
and the simulator is flagged when one falls below ``alpha``.  The message names the
quantity that moved most significantly and which way, and what that says about the
simulator ("tau drifts inward after 10 prior transitions, p = 2e-12: the simulator's
prior for tau is wider than the model's").

Draws a simulator makes outside the model's support (a negative scale, say) are
flagged at once.  Hyperparameters are always drawn from their prior here (the
``hyper_given`` inputs are off): the check is of the program, not of fixed values.

The kernel is the sampler's (:class:`~bread_stan.SamplerSettings`, NUTS by default,
with its rescue transitions), and the message names it and the number of transitions.
``CheckSettings(prior_max_depth=D)`` caps NUTS's trees at depth D in the prior stage
(a fixed cap keeps the kernel reversible, so the test stays exact; only power changes):
where a funnel prior makes every tree at beta = 0 reach the maximum depth it bounds the
stage's cost; ``scripts/bench/bench_pilot_levers.py`` measures cost and power.
``scripts/studies/simulator_check_power.py`` measures power and false alarms for HMC and NUTS
(``scripts/figures/simulator_check_power/power.md``).

What the check cannot see.  It sees a wrong simulator only through a drift, within
``transitions`` steps, of the tested quantities: each parameter's value and distance
from the centre, the log prior and the log likelihood.  So it misses a bug that leaves
all of these distributed as the model says (a wrong dependence between parameters
that keeps every margin and both densities' distributions), a bug in a direction the
kernel barely moves in ``transitions`` steps (a slowly mixing parameter; the message
warns when few chains moved at all), a departure too small for the sample sizes (with
the default 2000 prior draws and 100 data sets a prior scale off by 1.2x is flagged at 10
of 10 seeds, a scale off by 1.1x at 7 of 10; with 1000 draws the 1.2x scale still at 10 of
10 but a funnel prior's group spread off by 1.2x (eight schools centred) at 6 of 10, and
with 500 draws the 1.2x scale at 6 of 10: ``power_prior1000.md``, ``power_prior500.md``
beside ``power.md``), and
anything in the simulator the model never reads (generated quantities, data the
likelihood ignores).  Hyperparameters given by the user (``hyper_given``) are not
checked at their fixed values.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from ..deadline import keep_pace
from ..errors import BreadStanError, InputError
from ..progress import PaceLog, duration
from ..kernels.base import initial_state
from ..rng import ChainRandom, Purpose, Stream, chain_seed_sequences, derived_seed
from ..stan.data import load_data
from ..stan.simulator import Simulator, compile_with_simulator, split_draw
from ..stan.tempered import StanTarget
from ..ais.tuning import TunedKernel
from .common import tune_kernel
from .problem import prior_draws, simulate_problem
from .programs import prepared
from .settings import SamplerSettings

__all__ = ["CheckDraws", "CheckSettings", "SimulatorCheck", "check_simulator",
           "simulate_check_draws"]

log = logging.getLogger(__name__)

_CENTRE_DRAWS = 200  # simulator draws whose median centres each parameter


@dataclass(frozen=True)
class CheckSettings:
    """Sizes of the check: prior draws (stage a), simulated data sets (stage b), frozen
    transitions per chain, and the family-wise significance level."""

    # 2000, kept (issue 42): 1000 passes the power study's planted bugs (10/10,
    # power_prior1000.md) but flags a funnel's theta spread 1.2x (eight schools centred,
    # bench_pilot_levers.py) at 6/10 seeds, against 10/10 at 2000
    prior_draws: int = 2000
    datasets: int = 100
    transitions: int = 10
    alpha: float = 0.01
    seed: int = 0
    # NUTS only: the prior stage's trees capped at this depth (None: the kernel's own).
    # Any fixed depth keeps the kernel reversible, so the test stays exact; a funnel
    # prior, whose trees all reach the maximum depth at beta = 0, then costs
    # 2^depth - 1 leapfrog steps a transition at most, at some loss of power.
    prior_max_depth: int | None = None

    def __post_init__(self):
        if self.prior_draws < 20 or self.datasets < 20:
            raise InputError("the simulator check needs at least 20 prior draws and 20 "
                             "data sets (the signed-rank test has no power below that)")
        if self.transitions < 1:
            raise InputError("transitions must be at least 1")
        if self.prior_max_depth is not None and self.prior_max_depth < 1:
            raise InputError("prior_max_depth must be at least 1 (or None)")
        if not 0.0 < self.alpha < 1.0:
            raise InputError(f"alpha must be in (0, 1), got {self.alpha}")


@dataclass
class SimulatorCheck:
    """Outcome of :func:`check_simulator`.

    ``tests`` has one row per quantity and stage: stage ("prior"/"joint"), quantity,
    kind ("value", "spread", "log_prior", "log_lik"), Bonferroni-adjusted p-value,
    direction (+1: rose / moved outward; -1: fell / moved inward; 0: no move) and the
    share of chains that moved.  ``ran`` is False when the check was skipped.
    """

    ran: bool
    passed: bool
    message: str
    alpha: float = 0.01
    tests: list[dict] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    seconds: float = 0.0
    n_grad: int = 0
    programs: dict | None = None  # the programs generated for the check (programs.record)
    redraws: dict | None = None   # parameter draws redrawn where the model rejects them

    @property
    def min_p(self) -> float:
        return min((t["p"] for t in self.tests), default=1.0)

    def p_values(self) -> dict[str, float]:
        """Adjusted p-value per "stage:quantity:kind"."""
        return {f"{t['stage']}:{t['quantity']}:{t['kind']}": t["p"] for t in self.tests}

    def to_dict(self) -> dict:
        """Plain JSON: ran, passed, message, alpha, min_p, p-values, settings, cost."""
        return {"ran": self.ran, "passed": self.passed, "message": self.message,
                "alpha": self.alpha, "min_p": self.min_p, "p_values": self.p_values(),
                "tests": self.tests, "settings": self.settings, "seconds": self.seconds,
                "n_grad": self.n_grad, **({"redraws": self.redraws} if self.redraws else {})}

    @classmethod
    def skipped(cls, reason: str = "the simulator check was skipped (--no-check, "
                                   "check_simulator=False)"
                ) -> "SimulatorCheck":
        return cls(ran=False, passed=False, message=reason)


def _pretty(name: str) -> str:
    """Stan's flat name "beta.2.1" as "beta[2,1]"."""
    base, _, rest = name.partition(".")
    return f"{base}[{rest.replace('.', ',')}]" if rest else base


@dataclass
class _Snapshot:
    """Quantities of every chain at one moment: constrained values, log prior, log lik."""

    values: np.ndarray
    log_prior: np.ndarray
    log_lik: np.ndarray


def _snapshot(target: StanTarget, position: np.ndarray, evaluation) -> _Snapshot:
    return _Snapshot(np.atleast_2d(target.param_constrain(position)),
                     np.asarray(evaluation.log_prior, float).copy(),
                     np.asarray(evaluation.log_lik, float).copy())


def _concat(snapshots: list[_Snapshot]) -> _Snapshot:
    return _Snapshot(*(np.concatenate([getattr(s, f) for s in snapshots])
                       for f in ("values", "log_prior", "log_lik")))


def _signed_rank(diff: np.ndarray) -> tuple[float, int, float]:
    """Two-sided Wilcoxon signed-rank p-value of paired differences, the direction of
    the shift (+1, -1, 0) and the share of non-zero differences."""
    diff = diff[np.isfinite(diff)]
    moved = diff[diff != 0.0]
    if moved.size < 10:
        return 1.0, 0, moved.size / max(diff.size, 1)
    ranks = stats.rankdata(np.abs(moved))
    excess = ranks[moved > 0].sum() - ranks.sum() / 2.0
    p = float(stats.wilcoxon(moved, zero_method="wilcox", method="approx").pvalue)
    return p, int(np.sign(excess)), moved.size / diff.size


def _stage_tests(stage: str, names: list[str], before: _Snapshot, after: _Snapshot,
                 centre: np.ndarray) -> list[dict]:
    rows = []

    def add(quantity, kind, diff):
        p, direction, moved = _signed_rank(diff)
        rows.append({"stage": stage, "quantity": quantity, "kind": kind, "p_raw": p,
                     "direction": direction, "moved": moved})

    for j, name in enumerate(names):
        add(_pretty(name), "value", after.values[:, j] - before.values[:, j])
        add(_pretty(name), "spread", np.abs(after.values[:, j] - centre[j])
            - np.abs(before.values[:, j] - centre[j]))
    with np.errstate(invalid="ignore"):
        add("log prior", "log_prior", after.log_prior - before.log_prior)
        add("log likelihood", "log_lik", after.log_lik - before.log_lik)
    return rows


def _explain(row: dict, transitions: int) -> str:
    """One sentence: what moved, which way, and what that says about the simulator."""
    stage, q, kind, up = row["stage"], row["quantity"], row["kind"], row["direction"] > 0
    when = f"after {transitions} {'prior' if stage == 'prior' else 'posterior'} transitions"
    p = f"p = {row['p']:.2g}"
    if stage == "prior":
        meaning = {
            ("value", True): f"the simulator's prior for {q} sits lower than the model's",
            ("value", False): f"the simulator's prior for {q} sits higher than the model's",
            ("spread", True): f"the simulator's prior for {q} is narrower than the model's",
            ("spread", False): f"the simulator's prior for {q} is wider than the model's",
            ("log_prior", True): "the simulator draws where the model's prior density is "
                                 "low: its prior is wider than the model's, or shifted",
            ("log_prior", False): "the simulator's prior is narrower than the model's",
            ("log_lik", True): "the simulator's prior differs from the model's",
            ("log_lik", False): "the simulator's prior differs from the model's",
        }[(kind, up)]
    else:
        meaning = {
            ("value", True): f"given its simulated data the model puts {q} higher than "
                             "the simulator drew it: the simulator's data-generating step "
                             f"(or prior) for {q} differs from the model's",
            ("value", False): f"given its simulated data the model puts {q} lower than "
                              "the simulator drew it: the simulator's data-generating step "
                              f"(or prior) for {q} differs from the model's",
            ("spread", True): f"the model's posterior spreads {q} wider than the "
                              "simulator's draws: the simulator's data or prior differ",
            ("spread", False): f"the model's posterior pulls {q} in: the simulator's data "
                               "or prior differ from the model's",
            ("log_lik", True): "the simulated data fit the simulator's parameters worse "
                               "than the model's likelihood allows: the simulator's data "
                               "noise is larger than the model's, or its likelihood differs",
            ("log_lik", False): "the simulated data fit the simulator's parameters better "
                                "than the model's likelihood allows: the simulator's data "
                                "noise is smaller than the model's, or its likelihood differs",
            ("log_prior", True): "the simulator's parameters sit where the model's prior "
                                 "is low: its prior or its data step differ from the model's",
            ("log_prior", False): "the simulator's prior or data step differ from the model's",
        }[(kind, up)]
    if kind == "spread":
        motion = "drifts outward" if up else "drifts inward"
    elif kind == "value":
        motion = "drifts up" if up else "drifts down"
    else:
        motion = "rises" if up else "falls"
    return f"{q} {motion} {when}, {p}: {meaning}"


def _kernel_phrase(sampler: SamplerSettings, transitions: int) -> str:
    """"10 frozen NUTS transitions (tree depth <= 8, 10% rescue)" for messages."""
    shape = (f"tree depth <= {sampler.max_depth}" if sampler.kernel == "nuts"
             else f"{sampler.n_leapfrog} leapfrog steps")
    rescue = f", {sampler.rescue_prob:.0%} rescue" if sampler.rescue_prob > 0 else ""
    return f"{transitions} frozen {sampler.kernel.upper()} transitions ({shape}{rescue})"


def _flag_support(what: str, started: float, settings: CheckSettings) -> SimulatorCheck:
    message = f"flagged: {what}"
    return SimulatorCheck(True, False, message, settings.alpha,
                          [{"stage": "support", "quantity": "support", "kind": "support",
                            "p_raw": 0.0, "p": 0.0, "direction": 0, "moved": 0.0}],
                          asdict(settings), time.perf_counter() - started)


def _unconstrained(target: StanTarget, params: Mapping[str, np.ndarray]) -> np.ndarray:
    try:
        return target.param_unconstrain_batch(params)
    except InputError:
        raise  # a shape or name problem, not a draw outside the support
    except BreadStanError as error:
        raise _OutsideSupport("the simulator draws parameters outside the model's "
                              f"constraints: {_first_line(error)}") from None


def _first_line(error: Exception) -> str:
    return next((line for line in str(error).splitlines() if line.strip()), repr(error))


class _OutsideSupport(Exception):
    """A simulator draw the model cannot even evaluate: flagged without a test."""


def _run_chains(kernel, params, target: StanTarget, start: np.ndarray, beta: float,
                transitions: int, seed: int, chains: np.ndarray | None = None,
                paced: str | None = None):
    """``transitions`` frozen kernel steps from ``start``; returns (state0, state, n_grad).
    ``paced``: the stage's name, to stop it when it would overrun a run's budget
    (:func:`~bread_stan.deadline.keep_pace`)."""
    state0 = initial_state(target, start, gradient=kernel.needs_gradient)
    bad = ~np.isfinite(state0.evaluation.log_prior)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise _OutsideSupport(f"{int(bad.sum())} simulator draw(s) have zero prior density "
                              "under the model (first: "
                              f"{target.last_errors.get(first, 'log prior -inf')})")
    n = start.shape[0]
    index = np.arange(n) if chains is None else chains
    rng = ChainRandom(chain_seed_sequences(seed, Stream.SIMULATOR_CHECK, index))
    state, n_grad, began = state0, 0, time.monotonic()
    for t in range(transitions):
        state, info = kernel.step(rng, state, target, np.full(n, beta), params)
        n_grad += int(info.n_grad.sum())
        if paced:
            keep_pace(paced, t + 1, transitions, began)
    return state0, state, n_grad


def _share_prior(target: StanTarget, x: np.ndarray, compiled, values: Mapping):
    """(target, prior instance to share): ``target`` (built on data set 0's prior
    instance) and that instance if the log prior at ``x`` is bit-identical with a
    fresh prior instance on this data set's values (the prior does not read the
    simulated data), else a fresh target and None (every data set builds its own)."""
    fresh = StanTarget(compiled, values, threads=1)
    same = np.array_equal(target.evaluate(x, gradient=False).log_prior,
                          fresh.evaluate(x, gradient=False).log_prior, equal_nan=True)
    return (target, target.prior_model) if same else (fresh, None)


# The check's simulator draws by (number of draws, seed), as simulate_check_draws
# returns them for check_simulator to reuse.
CheckDraws = Mapping[tuple[int, int], Mapping[str, np.ndarray]]


def simulate_check_draws(simulator, data=None, settings: CheckSettings = CheckSettings(),
                         threads: int | None = None, model=None) -> CheckDraws:
    """Simulate every draw :func:`check_simulator` will use with these arguments (same
    seeds, same draws), and nothing else: a simulator that fails on one of them (an _rng
    refusing an overflowing argument, data outside their declared bounds, and with the
    ``model`` given, a parameter or datum drawn infinite) then fails in seconds, before
    any pilot, with the error the check would raise.  Returns the draws, which
    ``check_simulator(..., draws=)`` then uses instead of simulating them again."""
    if isinstance(simulator, Simulator):
        simulator = simulator.compiled
    sim = Simulator(simulator, load_data(data), threads=threads)
    drawn = {}
    if model is not None:
        sim.honour(model, load_data(data))    # draws the model rejects too are redrawn
    for n, purpose in ((_CENTRE_DRAWS, Purpose.CHECK_CENTRE), (settings.prior_draws,
                       Purpose.CHECK_PRIOR_DRAWS), (settings.datasets, Purpose.CHECK_DATASETS)):
        seed = derived_seed(settings.seed, purpose)
        # the prior stage starts from the prior itself (beta = 0), draws the model
        # rejects included; the joint stage from the model's joint (redrawn)
        prior = purpose is not Purpose.CHECK_DATASETS
        drawn[n, seed] = (sim.simulate_prior if prior else sim.simulate)(n, seed)
        if model is not None:
            split_draw(drawn[n, seed], model)
    return drawn


def _simulated(sim: Simulator, n: int, seed: int, drawn: CheckDraws | None, *,
               prior: bool = False):
    """``sim.simulate(n, seed)`` (``prior``: ``sim.simulate_prior``, the prior's own
    draws, none redrawn), taken from ``drawn`` when simulated there already."""
    if drawn is not None and (n, seed) in drawn:
        return drawn[n, seed]
    return (sim.simulate_prior if prior else sim.simulate)(n, seed)


def check_simulator(model, simulator=None, data=None, *,
                    sampler: SamplerSettings = SamplerSettings(),
                    settings: CheckSettings = CheckSettings(), tuned: TunedKernel | None = None,
                    threads: int | None = None, draws: CheckDraws | None = None,
                    likelihood: str | Sequence[str] | None = None) -> SimulatorCheck:
    """Test whether ``simulator`` draws from the joint distribution of ``model``.

    ``model`` and ``simulator`` are Stan programs (paths, text, a
    ``cmdstanpy.CmdStanModel`` or compiled) following ``stan_models/README.md``; a model
    without ``prior_only`` is split and, without a ``simulator``, one is drafted, as
    :func:`bread_stan.bread` does (``likelihood``; the generated programs, in a temporary
    folder, are kept in ``programs``).  ``data`` the model's data (the simulator reads
    it too).
    ``sampler`` chooses the kernel; ``tuned`` reuses a kernel already tuned along beta
    on this model (as :func:`bread_stan.bread` does), else one is tuned here on pilot
    chains exactly as BREAD tunes.  See the module docstring for the method and the
    test (paired Wilcoxon signed-rank, exact under the null by reversibility,
    Bonferroni over all quantities at ``settings.alpha``).  ``draws``, from
    :func:`simulate_check_draws` with the same simulator, data and settings, are used
    instead of simulating them again (the same draws).  Returns a
    :class:`SimulatorCheck`; it never raises for a flagged simulator.
    """
    with prepared([model], simulator, None, ["model"], likelihood) as programs:
        check = _check_simulator(programs.models[0], programs.simulator,
                                 programs.run_data(data), sampler, settings, tuned, threads,
                                 draws)
    own = programs.records["model"]
    if own["split"] != "own" or own["drafted"]:
        check.programs = own
    return check


def _check_simulator(model, simulator, data, sampler: SamplerSettings, settings: CheckSettings,
                     tuned: TunedKernel | None, threads: int | None,
                     draws: "CheckDraws | None") -> SimulatorCheck:
    """:func:`check_simulator` on the programs that run (split, with a simulator)."""
    started = time.perf_counter()
    data = load_data(data)
    if isinstance(simulator, Simulator):
        simulator = simulator.compiled
    (compiled,), sim_compiled = compile_with_simulator([model], simulator)
    sim = Simulator(sim_compiled, data, threads=threads)  # hyperparameters drawn
    seed = settings.seed
    kernel, base = sampler.make()
    k = settings.transitions
    try:
        problem = simulate_problem("check", compiled, sim, data,
                                    derived_seed(seed, Purpose.CHECK_TUNE), threads)
        if tuned is None:
            pilot = prior_draws(problem, sim, sampler.pilot_chains,
                                 derived_seed(seed, Purpose.CHECK_TUNE))
            tuned = tune_kernel(problem.target, kernel, base, pilot,
                                seed=derived_seed(seed, Purpose.CHECK_TUNE),
                                config=sampler.tuning_config())
        schedule = tuned.schedule(np.array([0.0, 1.0]))
        target = problem.target
        names = target.param_names()

        centre = _centre(target, sim, compiled, seed, draws)
        log.info("simulator check: %d prior draws x %d transitions at beta = 0, then %d "
                 "simulated data sets x %d transitions at beta = 1 (one chain each)",
                 settings.prior_draws, k, settings.datasets, k)
        # (a) prior: frozen beta = 0 transitions from simulator draws.
        before, after, n_grad = _prior_chains(kernel, _at_zero(schedule, settings), target,
                                              compiled, sim, settings, draws)
        rows = _stage_tests("prior", names, before, after, centre)

        log.info("simulator check: prior stage done after %s", duration(
            time.perf_counter() - started))
        # (b) joint: one data set, one target and one chain per simulated (x_j, y_j).
        before, after, g = _joint_chains(kernel, schedule.params_at(1), compiled, sim, data,
                                         settings, draws)
        n_grad += g
        rows += _stage_tests("joint", names, _concat(before), _concat(after), centre)
    except _OutsideSupport as error:
        return _flag_support(str(error), started, settings)

    for row in rows:
        row["p"] = min(1.0, row["p_raw"] * len(rows))
    phrase = _kernel_phrase(sampler, k)
    if settings.prior_max_depth is not None and sampler.kernel == "nuts":
        phrase += f", tree depth <= {settings.prior_max_depth} at beta = 0"
    passed, message = _verdict(rows, settings, phrase, k)
    if sim.redraws is not None and sim.redraws.rejected:
        message += f"; {sim.redraws.describe()}"
        log.info("simulator check: %s", sim.redraws.describe())
    result = SimulatorCheck(True, passed, message, settings.alpha, rows,
                            {**asdict(settings), "kernel": sampler.kernel,
                             "max_depth": sampler.max_depth, "n_leapfrog": sampler.n_leapfrog,
                             "rescue_prob": sampler.rescue_prob},
                            time.perf_counter() - started, n_grad,
                            redraws=(sim.redraws.to_dict()
                                     if sim.redraws and sim.redraws.rejected else None))
    log.log(logging.INFO if passed else logging.WARNING, "simulator check %s (%.1f s)",
            message, result.seconds)
    return result


def _at_zero(schedule, settings: CheckSettings):
    """The frozen kernel's parameters at beta = 0, NUTS's depth capped at
    ``settings.prior_max_depth`` if given (a fixed cap: still reversible)."""
    params = schedule.params_at(0)
    if settings.prior_max_depth is None or not hasattr(params, "max_depth"):
        return params
    return replace(params, max_depth=min(int(params.max_depth), settings.prior_max_depth))


def _centre(target: StanTarget, sim: Simulator, compiled, seed: int,
            drawn: CheckDraws | None = None) -> np.ndarray:
    """Centre of each parameter: median of an independent batch of simulator draws."""
    centre_params, _ = split_draw(_simulated(
        sim, _CENTRE_DRAWS, derived_seed(seed, Purpose.CHECK_CENTRE), drawn, prior=True),
        compiled)
    return np.median(np.atleast_2d(target.param_constrain(
        _unconstrained(target, centre_params))), axis=0)


def _prior_chains(kernel, at_zero, target: StanTarget, compiled, sim: Simulator,
                  settings: CheckSettings, drawn: CheckDraws | None = None
                  ) -> tuple[_Snapshot, _Snapshot, int]:
    """The prior stage's chains: frozen beta = 0 transitions from simulator draws; the
    snapshots before and after, and the gradients used."""
    params, _ = split_draw(_simulated(
        sim, settings.prior_draws, derived_seed(settings.seed, Purpose.CHECK_PRIOR_DRAWS),
        drawn, prior=True), compiled)
    start = _unconstrained(target, params)
    s0, s1, n_grad = _run_chains(kernel, at_zero, target, start, 0.0, settings.transitions,
                                 derived_seed(settings.seed, Purpose.CHECK_PRIOR_CHAINS),
                                 paced="the simulator check's prior stage")
    return (_snapshot(target, s0.position, s0.evaluation),
            _snapshot(target, s1.position, s1.evaluation), n_grad)


def _joint_chains(kernel, at_one, compiled, sim: Simulator, data: Mapping,
                  settings: CheckSettings, drawn: CheckDraws | None = None
                  ) -> tuple[list[_Snapshot], list[_Snapshot], int]:
    """The joint stage's chains: for each simulated (x_j, y_j), one chain of frozen
    beta = 1 transitions from x_j on a target of its own data y_j; the snapshots before
    and after, and the gradients used.  Raises :class:`_OutsideSupport` for simulated
    data the model refuses."""
    k = settings.transitions
    pace = PaceLog("simulator check, joint stage", settings.datasets, "data sets")
    draws = _simulated(sim, settings.datasets,
                       derived_seed(settings.seed, Purpose.CHECK_DATASETS), drawn)
    before, after, n_grad, began = [], [], 0, time.monotonic()
    joint_seed = derived_seed(settings.seed, Purpose.CHECK_JOINT_CHAINS)
    shared_prior = None  # data set 0's prior instance, reused if the prior ignores y
    for j in range(settings.datasets):
        draw = {key: value[j] for key, value in draws.items()}
        params_j, overrides = split_draw(draw, compiled)
        try:
            target_j = StanTarget(compiled, {**data, **overrides}, threads=1,
                                  prior_model=shared_prior)
        except BreadStanError as error:
            raise _OutsideSupport(f"simulated data set {j} is not valid data for the "
                                  f"model: {_first_line(error)}") from None
        x_j = _unconstrained(target_j, {key: np.asarray(v)[None] for key, v in
                                        params_j.items()})
        if j == 0:
            shared_prior = target_j.prior_model
        elif j == 1:
            target_j, shared_prior = _share_prior(target_j, x_j, compiled,
                                                  {**data, **overrides})
        a, b, g = _run_chains(kernel, at_one, target_j, x_j, 1.0, k, joint_seed,
                              chains=np.array([j]))
        n_grad += g
        before.append(_snapshot(target_j, a.position, a.evaluation))
        after.append(_snapshot(target_j, b.position, b.evaluation))
        pace.tick(j + 1)
        keep_pace("the simulator check's joint stage", j + 1, settings.datasets, began)
    return before, after, n_grad


def _verdict(rows: list[dict], settings: CheckSettings, kernel_phrase: str,
             transitions: int) -> tuple[bool, str]:
    """Whether the check passed (every Bonferroni p at least alpha) and its message."""
    worst = min(rows, key=lambda r: r["p"])
    moved = {stage: np.mean([r["moved"] for r in rows if r["stage"] == stage])
             for stage in ("prior", "joint")}
    if worst["p"] >= settings.alpha:
        message = (f"passed: no quantity moved under {kernel_phrase} at beta = 0 from "
                   f"{settings.prior_draws} prior draws and at beta = 1 from "
                   f"{settings.datasets} simulated data sets (smallest Bonferroni p = "
                   f"{worst['p']:.2g} over {len(rows)} tests, alpha = {settings.alpha}; "
                   "it tests drifts of each parameter, the log prior and the log "
                   "likelihood, not every possible difference)")
        weak = [s for s, m in moved.items() if m < 0.2]
        if weak:
            message += (f"; but the kernel moved few {' and '.join(weak)} chains "
                        f"({', '.join(f'{moved[s]:.0%}' for s in weak)}), so the check "
                        "had little power there")
        return True, message
    flagged = sorted((r for r in rows if r["p"] < settings.alpha), key=lambda r: r["p"])
    # Name a parameter when one moved: "tau drifts inward" says more than "log prior".
    lead = next((r for r in flagged if r["kind"] in ("value", "spread")), worst)
    others = [r for r in flagged if r is not lead][:3]
    message = "flagged: " + _explain(lead, transitions)
    if others:
        message += " (also moved: " + ", ".join(
            f"{r['quantity']} {'up' if r['direction'] > 0 else 'down'}"
            f"{' in spread' if r['kind'] == 'spread' else ''} under {r['stage']} "
            f"transitions, p = {r['p']:.2g}" for r in others) + ")"
    message += (f" [{kernel_phrase} from {settings.prior_draws} prior draws and "
                f"{settings.datasets} simulated data sets]")
    return False, message

"""The real-data protocol (SPEC section 4): is simulated data a fair proxy for the real data?

Bounds are rigorous only on simulated data.  :func:`protocol` does, for one
model, simulator and real data set:

1. **Fit**: NUTS on the real data (:mod:`bread_stan.fit`); the fitted
   hyperparameters eta_hat are the posterior medians of the simulator's
   ``*_given`` variables (``ProtocolSettings.fit.hyper_summary``).
2. **Simulate**: theta ~ p(theta | eta_hat), D_sim ~ p(D | eta_hat, theta), with
   the simulator's given-hyperparameters mode.
3. **Forward AIS** on D_sim and on D_real, both from exact draws of the *full*
   prior p(eta, theta) (the same prior draws for both, which pairs the curves),
   each with a kernel tuned along beta on its own data set on never-scored
   pilot chains and frozen.
4. **Reverse start**: from (eta_hat, theta), ``S`` transitions of the sampler's
   kernel tuned at beta = 1 on D_sim (frozen, so they leave p(eta, theta | D_sim)
   invariant), one independent chain per reverse AIS chain, snapshotted at
   every S of the sweep; reverse AIS on D_sim from each snapshot.
5. **Outputs**: (a) quartile curves of forward (real, simulated) and reverse
   (simulated) estimates against the number of distributions, each shifted by
   its largest forward estimate, with an :class:`Agreement` score and flag;
   (b) the :class:`SweepTest` of whether the reverse curves move with S;
   (c) the Jeffreys bound on D_sim against steps and wall time (a
   :class:`~bread_stan.results.BreadResult` of the simulated data, forward
   chains with the reverse chains of the largest S).

Everything is saved as it finishes into ``out_dir`` and a rerun with the same
settings resumes (the fit, the tuned kernels, the reverse starts and each
number of distributions are reused); every random choice is a pure function
of ``run.seed`` and its purpose.

Agreement score.  Let m(T) be the median forward estimate over chains after T
distributions and d(T) = m(T) - max_T' m(T') the shifted curve (the *deficit*,
<= 0).  The reference is not one simulated data set but n = 1 + ``replicates``
of them (D_sim and replicates D_1..D_K, each drawn afresh with eta_hat and
run exactly as the real data are: its own tuned kernel, forward AIS from the
same prior draws).  If the model fits, the real data set is one more draw
from the same distribution, so d_real(T) should fall in the prediction band of
the simulated curves: centre c(T), their mean; sd s(T), their sample sd (no
smaller than the Monte Carlo error of one curve); half-width
``t_{n-1}(1 - alpha / 2m) * s(T) * sqrt(1 + 1/n)`` with m the number of T
(Bonferroni: a well-specified model leaves the band anywhere with probability
about ``agreement_alpha`` = 0.05).  The relative difference at T is the part
of ``|d_real - c|`` outside the band divided by ``max(|d_real|, |c|, floor)``
(floor 1 nat, so two converged curves cannot disagree through tiny numbers):
how far, as a fraction of the deficit, the real curve is from anything the
model produces.  The score is its largest value over T, and the curves are
flagged when it exceeds ``agreement_threshold`` (0.1, the practical tolerance
that the S-sweep test uses too).  The band measures both Monte Carlo error and
how much the deficit varies between data sets of the model, which an earlier
score built on Monte Carlo error alone could not tell apart (a single simulated
data set scored 0 to 0.14 on well-specified runs of one test model, by seed).
``replicate_max_steps`` limits the replicates to cheaper T; the score uses the
T that all curves ran.  Calibration (5 replicates, so 6 simulated curves):
on a test model (``scripts/agreement_calibration.py``, 10 seeds each) real
noise that fits was flagged 0 of 10 times, noise twice what the prior allows 3
of 10, twenty times 10 of 10 (scores 0.95 to 1); in ``scripts/protocol_study.py``
linear and logistic regression, AR(1), the mixture and centred MovieLens score
0, and the misspecified uncentred MovieLens ratings score 0.21 (flagged: at 10
and 100 distributions the real deficit is 4288 and 882 nats against simulated
means of 1938 and 631, beyond bands of 1452 and 86).

S-sweep test.  The reference is the largest S.  For every T and every other S,
Welch's z-test compares the mean reverse estimates (the bound uses means);
p-values are Bonferroni-corrected over all comparisons.  A pair disagrees when
the corrected p-value is below ``sweep_alpha`` (0.01) *and* the difference
exceeds ``max(sweep_floor, sweep_tolerance * gap(T))`` (0.5 nats, 10% of the
gap at T): the test asks whether the reverse curve moves by an amount that
matters for the bound, not whether it moves at all.  The gap is the robust
version of the Jeffreys bound, median reverse minus median forward estimate on
D_sim (a few forward chains started deep in a prior's tail can stall and drag
the mean-based bound to thousands of nats, which would make any tolerance
proportional to it vacuous).  Snapshots of
one chain at different S are positively correlated, which makes the test
conservative (the variance of a difference is overstated).
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from . import ais
from .data import load_data
from .fit import FitResult, FitSettings, fit
from .kernels.base import initial_state
from .results import BreadResult, DirectionResult, StepResult, _jsonable
from .rng import ChainRandom
from .simulate import Simulator, draw_at, split_draw
from .stan_target import StanTarget, compile_tempered
from .tuning import TunedKernel, tune
from .workflow import (_CHAINS, _PILOT, _PRIOR, _TRUTH, ResumeMismatchError, RunSettings,
                       SamplerSettings, _constrained, _default_name, _fingerprint,
                       _prior_draws, _program_text, _simulate_problem, derived_seed)

__all__ = ["ProtocolSettings", "ProtocolResult", "Agreement", "SweepTest", "protocol",
           "agreement_score", "deficit_curve", "s_sweep_test", "shifted_quartiles"]

log = logging.getLogger(__name__)

# Purposes of derived seeds, beyond workflow's truth / pilot / prior / chains.
_FIT_INIT, _FIT, _REAL_PILOT, _REAL_CHAINS, _REV_START = 10, 11, 12, 13, 14
_REP_TRUTH, _REP_PILOT, _REP_CHAINS = 15, 16, 17
_REV_START_STREAM = 3_000_000
_HEADER = "protocol.json"


@dataclass(frozen=True)
class ProtocolSettings:
    """The protocol's own settings (the AIS runs use SamplerSettings / RunSettings).

    ``s_sweep``: numbers of beta = 1 transitions from (eta_hat, theta) before
    reverse AIS; the curves (a) and the bound (c) use the largest.
    ``replicates``: further simulated data sets whose forward curves make the
    agreement score's reference band (each costs one forward AIS run per T up
    to ``replicate_max_steps``, None for all, and one tuning); 0 turns the
    score off.  ``agreement_*``: see the module docstring.
    """

    s_sweep: tuple[int, ...] = (10, 100, 1000, 10000)
    fit: FitSettings = field(default_factory=FitSettings)
    replicates: int = 5
    replicate_max_steps: int | None = None
    agreement_threshold: float = 0.1
    agreement_alpha: float = 0.05
    agreement_floor: float = 1.0
    sweep_alpha: float = 0.01
    sweep_tolerance: float = 0.1
    sweep_floor: float = 0.5

    def __post_init__(self):
        sweep = tuple(sorted(set(int(s) for s in self.s_sweep)))
        if not sweep or min(sweep) < 0:
            raise ValueError("s_sweep must be non-negative numbers of transitions")
        object.__setattr__(self, "s_sweep", sweep)
        if self.replicates < 0:
            raise ValueError("replicates must be >= 0 (the agreement score needs >= 1, "
                             "and is well calibrated from about 4)")
        if self.replicate_max_steps is not None and self.replicate_max_steps < 1:
            raise ValueError("replicate_max_steps must be a positive number of distributions "
                             "(or None for all)")
        if not 0 < self.agreement_alpha < 1:
            raise ValueError("agreement_alpha must lie in (0, 1)")

    @property
    def s_main(self) -> int:
        return self.s_sweep[-1]


# --------------------------------------------------------------------------- #
# The two validation statistics, on plain arrays.

def _median_se(x: np.ndarray) -> float:
    """Standard error of a sample median, from the IQR (normal approximation)."""
    q25, q75 = np.percentile(x, [25, 75])
    return float(1.2533 * (q75 - q25) / 1.349 / np.sqrt(x.size))


def shifted_quartiles(curves: Mapping[str, Mapping[int, np.ndarray]],
                      shifts: Mapping[str, float]) -> pd.DataFrame:
    """Quartiles over chains of each curve at each T, minus that curve's shift."""
    rows = []
    for name, by_steps in curves.items():
        for T in sorted(by_steps):
            x = np.asarray(by_steps[T], dtype=float)
            q25, q50, q75 = np.percentile(x, [25, 50, 75])
            s = shifts[name]
            rows.append({"curve": name, "steps": T, "q25": q25 - s, "median": q50 - s,
                         "q75": q75 - s, "shift": s, "chains": x.size})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Agreement:
    """How alike the shifted forward curves on real and simulated data are."""

    score: float
    threshold: float
    flagged: bool
    worst_steps: int
    n_simulated: int
    table: pd.DataFrame

    @property
    def message(self) -> str:
        if self.flagged:
            return (f"real and simulated forward curves disagree (score {self.score:.2f} > "
                    f"{self.threshold:g} at {self.worst_steps} distributions, outside the "
                    f"band of {self.n_simulated} simulated data sets): the simulated data "
                    "are not a fair proxy for the real data; suspect model misspecification")
        return (f"real and simulated forward curves agree (score {self.score:.2f}, "
                f"threshold {self.threshold:g}, {self.n_simulated} simulated data sets)")

    def to_dict(self) -> dict:
        return {"score": self.score, "threshold": self.threshold, "flagged": self.flagged,
                "worst_steps": self.worst_steps, "n_simulated": self.n_simulated,
                "message": self.message,
                "table": json.loads(self.table.to_json(orient="records"))}


def deficit_curve(by_steps: Mapping[int, np.ndarray], steps) -> np.ndarray:
    """Median forward estimate at each T in ``steps`` minus the largest of them."""
    med = np.array([np.median(by_steps[T]) for T in steps])
    return med - med.max()


def agreement_score(real: Mapping[int, np.ndarray], sims: Sequence[Mapping[int, np.ndarray]],
                    *, threshold: float = 0.1, alpha: float = 0.05,
                    floor: float = 1.0) -> Agreement:
    """Is the real deficit curve inside the spread of simulated data sets' curves?

    ``real`` and each of ``sims`` (at least two simulated data sets drawn with
    the fitted hyperparameters) map numbers of distributions to per-chain
    forward log estimates.  See the module docstring for the definition.
    """
    sims = list(sims)
    if len(sims) < 2:
        raise ValueError("the agreement score needs at least two simulated data sets (the "
                         "protocol's D_sim and >= 1 replicate; set ProtocolSettings.replicates "
                         "or --replicates, 4 or more for a useful band)")
    steps = sorted(set(real).intersection(*sims))
    if len(steps) < 2:
        raise ValueError("the agreement score needs at least two common numbers of steps")
    n = len(sims)
    d_real = deficit_curve(real, steps)
    d_sims = np.array([deficit_curve(c, steps) for c in sims])
    centre = d_sims.mean(axis=0)
    spread = d_sims.std(axis=0, ddof=1)
    # A chance-low sample sd cannot go below the Monte Carlo error of one curve.
    mc = np.sqrt(np.mean([[_median_se(np.asarray(c[T])) ** 2 for T in steps] for c in sims],
                         axis=0))
    spread = np.maximum(spread, mc)
    quantile = stats.t.ppf(1 - alpha / (2 * len(steps)), df=n - 1)
    half_width = quantile * spread * np.sqrt(1 + 1 / n)
    excess = np.maximum(np.abs(d_real - centre) - half_width, 0.0)
    rel = excess / np.maximum(np.maximum(np.abs(d_real), np.abs(centre)), floor)
    worst = int(np.argmax(rel))
    flagged = bool(rel[worst] > threshold)
    table = pd.DataFrame({"steps": steps, "real_shifted_median": d_real,
                          "sim_shifted_median": d_sims[0], "sims_mean": centre,
                          "sims_sd": spread, "half_width": half_width,
                          "unexplained": excess, "relative_difference": rel})
    return Agreement(float(rel.max()), float(threshold), flagged, int(steps[worst]), n, table)


@dataclass(frozen=True)
class SweepTest:
    """Whether reverse AIS curves depend on the number S of start transitions."""

    passed: bool
    reference_s: int
    table: pd.DataFrame

    @property
    def message(self) -> str:
        if self.passed:
            return (f"reverse curves do not move with S (reference S = {self.reference_s}): "
                    "the approximate reverse start is adequate")
        bad = self.table[self.table["disagree"]]
        where = ", ".join(f"S={int(r.S)} at {int(r.steps)} steps ({r.difference:+.3g} nats)"
                          for r in bad.itertuples())
        return (f"reverse curves move with S (reference S = {self.reference_s}): {where}; "
                "the reverse start is not yet a posterior draw, run more transitions")

    def to_dict(self) -> dict:
        return {"passed": self.passed, "reference_s": self.reference_s,
                "message": self.message,
                "table": json.loads(self.table.to_json(orient="records"))}


def s_sweep_test(reverse: Mapping[tuple[int, int], np.ndarray],
                 gap: Mapping[int, float] | None = None, *, alpha: float = 0.01,
                 tolerance: float = 0.1, floor: float = 0.5) -> SweepTest:
    """Test that mean reverse estimates agree across S at every T.

    ``reverse`` maps (S, T) to per-chain reverse log estimates; ``gap`` maps T
    to the size of the forward-reverse gap there (sets the practical tolerance).  See the module
    docstring for the definition.
    """
    sweep = sorted({S for S, _ in reverse})
    steps = sorted({T for _, T in reverse})
    ref = sweep[-1]
    rows = []
    for T in steps:
        u_ref = np.asarray(reverse[(ref, T)], dtype=float)
        for S in sweep[:-1]:
            u = np.asarray(reverse[(S, T)], dtype=float)
            finite = np.all(np.isfinite(u)) and np.all(np.isfinite(u_ref))
            diff = float(np.mean(u) - np.mean(u_ref)) if finite else np.inf
            se = float(np.sqrt(np.var(u, ddof=1) / u.size + np.var(u_ref, ddof=1) / u_ref.size))
            p = float(2 * stats.norm.sf(abs(diff) / se)) if finite and se > 0 else (
                1.0 if finite and diff == 0 else 0.0)
            b = abs(float(gap[T])) if gap is not None and T in gap else 0.0
            rows.append({"steps": T, "S": S, "mean": float(np.mean(u)),
                         "reference_mean": float(np.mean(u_ref)), "difference": diff,
                         "se": se, "p_value": p, "tolerance": max(floor, tolerance * b)})
    table = pd.DataFrame(rows, columns=["steps", "S", "mean", "reference_mean", "difference",
                                        "se", "p_value", "tolerance"])
    m = max(len(table), 1)
    table["p_adjusted"] = np.minimum(1.0, table["p_value"] * m)
    table["disagree"] = (table["p_adjusted"] < alpha) & (table["difference"].abs()
                                                         > table["tolerance"])
    return SweepTest(not bool(table["disagree"].any()), ref, table)


# --------------------------------------------------------------------------- #
# The result.

@dataclass
class ProtocolResult:
    """Everything the protocol produced; see the module docstring.

    ``sim`` is the BREAD result on the simulated data (forward, and reverse
    from the largest S); ``real_forward`` maps T to forward AIS on the real
    data; ``reverse_sweep`` maps (S, T) to reverse AIS from S start transitions;
    ``replicate_forward`` maps k = 1, 2, ... to {T: forward AIS} on the k-th
    replicate simulated data set (the agreement score's reference band).
    """

    model: str
    settings: dict[str, Any]
    fit: FitResult | None
    hyper: dict[str, float]
    sim: BreadResult
    real_forward: dict[int, DirectionResult] = field(default_factory=dict)
    reverse_sweep: dict[tuple[int, int], DirectionResult] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    replicate_forward: dict[int, dict[int, DirectionResult]] = field(default_factory=dict)

    @property
    def steps(self) -> list[int]:
        done = {s.n_steps for s in self.sim.steps} & set(self.real_forward)
        return sorted(done)

    @property
    def s_sweep(self) -> list[int]:
        return sorted({S for S, _ in self.reverse_sweep})

    def _curves(self) -> tuple[dict, dict]:
        steps = self.steps
        sim_fwd = {T: self.sim.step(T).forward.log_estimates for T in steps}
        real = {T: self.real_forward[T].log_estimates for T in steps}
        sim_rev = {T: self.sim.step(T).reverse.log_estimates for T in steps}
        curves = {"real forward": real, "simulated forward": sim_fwd,
                  "simulated reverse": sim_rev}
        for S in self.s_sweep:
            curves[f"simulated reverse S={S}"] = {
                T: self.reverse_sweep[(S, T)].log_estimates for T in steps
                if (S, T) in self.reverse_sweep}
        shift_real = max(np.median(v) for v in real.values())
        shift_sim = max(np.median(v) for v in sim_fwd.values())
        shifts = {name: (shift_real if name.startswith("real") else shift_sim)
                  for name in curves}
        for k, by_steps in sorted(self.replicate_forward.items()):
            rep = {T: by_steps[T].log_estimates for T in steps if T in by_steps}
            if rep:
                curves[f"replicate {k} forward"] = rep
                shifts[f"replicate {k} forward"] = max(np.median(v) for v in rep.values())
        return curves, shifts

    def curves(self) -> pd.DataFrame:
        """(a) Shifted quartile curves: one row per curve and number of distributions.

        Real forward is shifted by its largest median forward estimate,
        simulated forward and every simulated reverse curve by the simulated
        data's largest median forward estimate, each replicate's forward curve
        by its own.
        """
        if len(self.steps) == 0:
            return pd.DataFrame(columns=["curve", "steps", "q25", "median", "q75", "shift",
                                         "chains"])
        return shifted_quartiles(*self._curves())

    @property
    def has_agreement(self) -> bool:
        """Whether the agreement score can be computed (>= 2 common T, >= 1 replicate)."""
        return len(self._agreement_steps()) >= 2 and bool(self.replicate_forward)

    def _agreement_steps(self) -> list[int]:
        steps = set(self.steps)
        for by_steps in self.replicate_forward.values():
            steps &= set(by_steps)
        return sorted(steps)

    def agreement(self) -> Agreement:
        """(a) The agreement score and flag of the real forward curve against the
        band of the simulated data sets' curves (D_sim and the replicates), on
        the numbers of distributions that all of them ran."""
        s = self.settings.get("protocol", {})
        steps = self._agreement_steps()
        sims = [{T: self.sim.step(T).forward.log_estimates for T in steps}]
        sims += [{T: by_steps[T].log_estimates for T in steps}
                 for _, by_steps in sorted(self.replicate_forward.items())]
        real = {T: self.real_forward[T].log_estimates for T in steps}
        return agreement_score(real, sims, threshold=s.get("agreement_threshold", 0.1),
                               alpha=s.get("agreement_alpha", 0.05),
                               floor=s.get("agreement_floor", 1.0))

    def sweep_test(self) -> SweepTest:
        """(b) Whether the reverse curves move with the number of start transitions."""
        s = self.settings.get("protocol", {})
        steps = set(self.steps)
        gaps = {st.n_steps: float(np.median(st.reverse.log_estimates)
                                  - np.median(st.forward.log_estimates))
                for st in self.sim.steps}
        reverse = {k: v.log_estimates for k, v in self.reverse_sweep.items() if k[1] in steps}
        return s_sweep_test(reverse, gaps, alpha=s.get("sweep_alpha", 0.01),
                            tolerance=s.get("sweep_tolerance", 0.1),
                            floor=s.get("sweep_floor", 0.5))

    def bound_table(self) -> pd.DataFrame:
        """(c) The Jeffreys bound on the simulated data against steps and seconds."""
        return self.sim.summary()

    @property
    def ok(self) -> bool:
        """Consistent simulated run, agreeing curves and a passed S-sweep test."""
        if len(self.steps) < 2:
            return self.sim.consistent
        return (self.sim.consistent
                and not (self.has_agreement and self.agreement().flagged)
                and (len(self.s_sweep) < 2 or self.sweep_test().passed))

    def problems(self) -> list[str]:
        out = list(self.sim.problems())
        if len(self.steps) >= 2:
            if self.has_agreement and (a := self.agreement()).flagged:
                out.append(a.message)
            if len(self.s_sweep) >= 2 and not (t := self.sweep_test()).passed:
                out.append(t.message)
        return out

    def summary(self) -> pd.DataFrame:
        """One row per T: the bound on D_sim (and the robust median gap), shifted
        medians of the curves, cost of every part."""
        table = self.bound_table()
        if table.empty:
            return table
        curves = self.curves()
        for name, col in (("real forward", "real_forward_shifted"),
                          ("simulated forward", "sim_forward_shifted"),
                          ("simulated reverse", "sim_reverse_shifted")):
            med = curves[curves["curve"] == name].set_index("steps")["median"]
            table[col] = table["steps"].map(med)
        table["median_gap"] = table["steps"].map(
            {st.n_steps: float(np.median(st.reverse.log_estimates)
                               - np.median(st.forward.log_estimates)) for st in self.sim.steps})
        table["real_seconds"] = table["steps"].map(
            {T: d.wall_time for T, d in self.real_forward.items()})
        table["mean_real_lower"] = table["steps"].map(
            {T: float(np.mean(d.log_estimates)) for T, d in self.real_forward.items()})
        return table

    def to_dataframe(self) -> pd.DataFrame:
        """Tidy per-chain data: data set, direction, S, steps, chain, log_estimate."""
        frames = []

        def add(dataset, direction, S, T, d):
            frames.append(pd.DataFrame({
                "dataset": dataset, "direction": direction, "S": S, "steps": T,
                "chain": np.arange(d.log_estimates.size), "log_estimate": d.log_estimates}))

        for s in self.sim.steps:
            add("simulated", "forward", -1, s.n_steps, s.forward)
        for T, d in sorted(self.real_forward.items()):
            add("real", "forward", -1, T, d)
        for (S, T), d in sorted(self.reverse_sweep.items()):
            add("simulated", "reverse", S, T, d)
        for k, by_steps in sorted(self.replicate_forward.items()):
            for T, d in sorted(by_steps.items()):
                add(f"replicate {k}", "forward", -1, T, d)
        if not frames:
            return pd.DataFrame(columns=["dataset", "direction", "S", "steps", "chain",
                                         "log_estimate"])
        return pd.concat(frames, ignore_index=True)

    def summary_json(self) -> dict[str, Any]:
        out = {"model": self.model, "settings": self.settings, "hyper": self.hyper,
               "ok": self.ok, "problems": self.problems(), "extra": _jsonable(self.extra),
               "summary": json.loads(self.summary().to_json(orient="records")),
               "curves": json.loads(self.curves().to_json(orient="records"))}
        if self.fit is not None:
            out["fit"] = {"method": self.fit.method, "seconds": self.fit.seconds,
                          "max_rhat": self.fit.max_rhat, "min_ess_bulk": self.fit.min_ess_bulk,
                          "diagnostics": self.fit.diagnostics}
        if len(self.steps) >= 2:
            if self.has_agreement:
                out["agreement"] = self.agreement().to_dict()
            if len(self.s_sweep) >= 2:
                out["sweep_test"] = self.sweep_test().to_dict()
        return out

    # -- persistence -----------------------------------------------------
    def save(self, out_dir: Path) -> None:
        """Write everything (header, fit, all runs, summary.json/csv) into ``out_dir``."""
        out_dir = Path(out_dir)
        _write_header(out_dir, self)
        if self.fit is not None:
            self.fit.save(out_dir / "fit")
        self.sim.save(out_dir / "sim")
        for T, d in self.real_forward.items():
            _save_direction(out_dir / "real" / f"forward_{T}", d)
        for (S, T), d in self.reverse_sweep.items():
            _save_direction(out_dir / "sweep" / f"reverse_S{S}_T{T}", d)
        for k, by_steps in self.replicate_forward.items():
            for T, d in by_steps.items():
                _save_direction(_replicate_path(out_dir, k, T), d)
        (out_dir / "summary.json").write_text(json.dumps(_jsonable(self.summary_json()),
                                                          indent=1, default=float))
        self.summary().to_csv(out_dir / "summary.csv", index=False)

    @classmethod
    def load(cls, out_dir: Path) -> "ProtocolResult":
        """Read a result saved by :meth:`save` (or the finished parts of a run)."""
        out_dir = Path(out_dir)
        path = out_dir / _HEADER
        if not path.exists():
            raise FileNotFoundError(f"{out_dir} holds no protocol results (no {_HEADER})")
        header = json.loads(path.read_text())
        fit_res = FitResult.load(out_dir / "fit") if FitResult.exists(out_dir / "fit") else None
        sim = (BreadResult.load(out_dir / "sim") if (out_dir / "sim" / "run.json").exists()
               else BreadResult(header["model"], header["settings"]))
        real = {}
        for p in sorted((out_dir / "real").glob("forward_*.npz")):
            real[int(p.stem.split("_")[1])] = _load_direction(p.with_suffix(""))
        sweep = {}
        for p in sorted((out_dir / "sweep").glob("reverse_S*_T*.npz")):
            s_part, t_part = p.stem[len("reverse_"):].split("_")
            sweep[(int(s_part[1:]), int(t_part[1:]))] = _load_direction(p.with_suffix(""))
        replicates: dict[int, dict[int, DirectionResult]] = {}
        for p in sorted((out_dir / "replicates").glob("r*/forward_*.npz")):
            k, T = int(p.parent.name[1:]), int(p.stem.split("_")[1])
            replicates.setdefault(k, {})[T] = _load_direction(p.with_suffix(""))
        return cls(header["model"], header["settings"], fit_res, header.get("hyper", {}),
                   sim, real, sweep, header.get("extra", {}), replicates)

    def __repr__(self) -> str:
        return (f"ProtocolResult(model={self.model!r}, steps={self.steps}, "
                f"s_sweep={self.s_sweep}, hyper={self.hyper})")


def _write_header(out_dir: Path, result: ProtocolResult) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    header = {"model": result.model, "settings": result.settings, "hyper": result.hyper,
              "extra": _jsonable(result.extra)}
    tmp = out_dir / (_HEADER + ".tmp")
    tmp.write_text(json.dumps(header, indent=1, default=float))
    tmp.replace(out_dir / _HEADER)


def _replicate_path(out_dir: Path, k: int, T: int) -> Path:
    return out_dir / "replicates" / f"r{k}" / f"forward_{T}"


def _save_direction(path: Path, d: DirectionResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **d._arrays("x"))
    path.with_suffix(".json").write_text(json.dumps(d._meta(), indent=1))
    tmp.replace(path.with_suffix(".npz"))


def _load_direction(path: Path) -> DirectionResult:
    meta = json.loads(path.with_suffix(".json").read_text())
    with np.load(path.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    return DirectionResult._load(arrays, meta, "x")


# --------------------------------------------------------------------------- #
# The workflow.

def _reverse_starts(target: StanTarget, kernel, params, x_star: np.ndarray, n: int,
                    sweep: tuple[int, ...], seed: int) -> tuple[dict[int, np.ndarray], dict]:
    """Snapshots after S transitions at beta = 1 of n chains started at ``x_star``."""
    rng = ChainRandom.from_seed(seed, n, stream=_REV_START_STREAM)
    state = initial_state(target, np.repeat(x_star[None, :], n, axis=0), gradient=True)
    beta = np.ones(n)
    snaps = {0: state.position.copy()} if 0 in sweep else {}
    accept, divergent, n_grad = 0.0, 0, 0
    t0 = time.perf_counter()
    for i in range(1, max(sweep) + 1):
        state, info = kernel.step(rng, state, target, beta, params)
        accept += float(np.nanmean(info.accept_stat))
        divergent += int(np.sum(info.divergent))
        n_grad += int(np.sum(info.n_grad))
        if i in sweep:
            snaps[i] = state.position.copy()
    total = max(max(sweep), 1)
    return snaps, {"accept_stat": accept / total, "divergences": float(divergent),
                   "gradients": float(n_grad), "seconds": time.perf_counter() - t0}


def _prior_unconstrained(target: StanTarget, simulator: Simulator, n: int, seed: int
                         ) -> np.ndarray:
    """Unconstrained exact draws of the full prior (hyperparameters drawn too)."""
    params, _ = split_draw(simulator.simulate(n, seed), target.compiled)
    return target.param_unconstrain_batch(params)


def _tuned(path: Path | None, target, kernel, base, pilot, seed, sampler) -> TunedKernel:
    if path is not None and path.exists():
        return TunedKernel.from_json(path.read_text())
    tuned = tune(target, kernel, base, pilot, seed=seed, config=sampler.tuning_config())
    if path is not None:
        path.write_text(tuned.to_json())
    return tuned


def _header(name, model, simulator, data, sampler, run, settings) -> dict:
    scored = {k: v for k, v in asdict(run).items() if k not in ("steps", "progress", "threads")}
    pset = asdict(settings)
    pset["s_sweep"] = list(settings.s_sweep)
    # Only what changes numbers already computed: the sweep, the step counts and the
    # replicates may grow on resume, and the agreement / sweep-test thresholds act at
    # analysis time.
    fingerprint = _fingerprint("protocol", _program_text(model), _program_text(simulator),
                               {k: np.asarray(v).tolist() for k, v in data.items()},
                               asdict(sampler), asdict(sampler.tuning_config()), scored,
                               pset["fit"])
    return {"model": name, "fingerprint": fingerprint, "steps": list(run.steps),
            "sampler": asdict(sampler), "run": {**scored, "schedule": asdict(run.schedule)},
            "protocol": pset}


def protocol(model, simulator, real_data, *, sampler: SamplerSettings = SamplerSettings(),
             run: RunSettings = RunSettings(), settings: ProtocolSettings = ProtocolSettings(),
             out_dir: str | Path | None = None, name: str | None = None) -> ProtocolResult:
    """Run the real-data protocol of SPEC section 4 (see the module docstring).

    ``model`` and ``simulator`` are Stan programs (paths or text) following
    ``stan_models/README.md``; the simulator must have the given-hyperparameters
    inputs.  ``real_data`` is the model's data (dict or JSON path).  With
    ``out_dir`` every finished part is saved at once and a rerun with the same
    settings resumes; adding step counts or S values to a finished run only
    computes what is new (the reverse starts are snapshots of one seeded chain
    per reverse chain, so a longer sweep reproduces the saved snapshots).

    Wall time in the bound against seconds (c): the simulated forward chains and
    the reverse chains of every S share one batch per temperature; each group is
    charged its share of the batch's time in proportion to its gradients, so a
    step's time is what one forward plus one reverse run cost.
    """
    data = load_data(real_data)
    name = name or _default_name(model)
    header = _header(name, model, simulator, data, sampler, run, settings)
    out = Path(out_dir) if out_dir is not None else None
    previous = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if (out / _HEADER).exists():
            saved = json.loads((out / _HEADER).read_text())
            if saved.get("settings", {}).get("fingerprint") != header["fingerprint"]:
                raise ResumeMismatchError(
                    f"{out} holds protocol results with different settings (model, data, "
                    "seed, sampler, schedule or protocol settings); use a new output "
                    "directory or delete it")
            previous = ProtocolResult.load(out)

    compiled = compile_tempered(model)
    kernel, base = sampler.make()
    prior_sim = Simulator(simulator, data, threads=run.threads)
    real_target = StanTarget(compiled, data, threads=run.threads)

    # 1. Fit on the real data.
    fit_dir = out / "fit" if out is not None else None
    if fit_dir is not None and FitResult.exists(fit_dir):
        fitted = FitResult.load(fit_dir)
        log.info("%s: fit loaded from %s", name, fit_dir)
    else:
        inits = _prior_unconstrained(real_target, prior_sim, settings.fit.chains,
                                     derived_seed(run.seed, _FIT_INIT))
        fitted = fit(real_target, inits, settings=settings.fit,
                     seed=derived_seed(run.seed, _FIT), data=data)
        if fit_dir is not None:
            fitted.save(fit_dir)
    hyper = fitted.hyperparameters(prior_sim.hyperparameters, settings.fit.hyper_summary)
    hyper_rhat = {h: float(fitted.summary.loc[h, "r_hat"]) for h in hyper
                  if h in fitted.summary.index}
    if any(r > 1.1 for r in hyper_rhat.values()):
        # Only the hyperparameters matter here: label switching or rotations of
        # other parameters (mixtures, factorisations) inflate R-hat harmlessly.
        log.warning("%s: the fit's hyperparameters have R-hat %s (> 1.1); the fitted values "
                    "may be unreliable (longer warmup, more draws?)", name,
                    {h: round(r, 3) for h, r in hyper_rhat.items()})
    log.info("%s: fitted hyperparameters (posterior %s): %s", name,
             settings.fit.hyper_summary, {k: round(v, 4) for k, v in hyper.items()})

    # 2. Simulate with the fitted hyperparameters.
    fixed_sim = Simulator(simulator, data, hyper=hyper, threads=run.threads)
    truth = draw_at(fixed_sim.simulate(1, derived_seed(run.seed, _TRUTH)), 0)
    _, overrides = split_draw(truth, compiled)
    problem = _simulate_problem(name + " (simulated)", model, fixed_sim, data, run.seed,
                                run.threads, truth)

    extra = {"simulated_data": {k: np.asarray(v).tolist() for k, v in overrides.items()},
             "truth": problem.truth, "fit_method": fitted.method,
             "fit_max_rhat": fitted.max_rhat, "fit_min_ess_bulk": fitted.min_ess_bulk,
             "fit_hyper_rhat": hyper_rhat,
             "hyper_summary": settings.fit.hyper_summary}
    sim = BreadResult(name, header, [], {"truth": problem.truth, "known_log_ml_bounds": {}})
    result = ProtocolResult(name, header, fitted, hyper, sim, {}, {}, extra)
    if previous is not None:
        result.sim.steps = [s for s in previous.sim.steps if s.n_steps in run.steps]
        result.real_forward = {T: d for T, d in previous.real_forward.items() if T in run.steps}
        result.reverse_sweep = {k: d for k, d in previous.reverse_sweep.items()
                                if k[0] in settings.s_sweep and k[1] in run.steps}
        result.replicate_forward = {
            k: {T: d for T, d in by_steps.items() if T in run.steps}
            for k, by_steps in previous.replicate_forward.items() if k <= settings.replicates}
        result.extra.update({k: v for k, v in previous.extra.items() if k not in extra})
    if out is not None:
        _write_header(out, result)

    # 3. Kernels tuned along beta on each data set (pilot chains from the full prior).
    t0 = time.perf_counter()
    pilot = _prior_draws(problem, prior_sim, sampler.pilot_chains,
                         derived_seed(run.seed, _PILOT))
    tuned_sim = _tuned(out / "tuning_sim.json" if out else None, problem.target, kernel, base,
                       pilot, derived_seed(run.seed, _PILOT), sampler)
    tuned_real = _tuned(out / "tuning_real.json" if out else None, real_target, kernel, base,
                        pilot, derived_seed(run.seed, _REAL_PILOT), sampler)
    result.extra.setdefault("tuning_seconds", time.perf_counter() - t0)
    result.sim.extra["tuning"] = tuned_sim.to_dict()

    @functools.cache
    def replicate(k: int) -> tuple[Any, TunedKernel]:
        """The k-th replicate data set (eta_hat, fresh theta and data) and a kernel
        tuned on it; built on first use, so a resumed run that needs none pays nothing."""
        truth_k = draw_at(fixed_sim.simulate(1, derived_seed(run.seed, _REP_TRUTH, k)), 0)
        problem_k = _simulate_problem(f"{name} (replicate {k})", model, fixed_sim, data,
                                      run.seed, run.threads, truth_k)
        path = None
        if out is not None:
            (out / "replicates").mkdir(parents=True, exist_ok=True)
            path = out / "replicates" / f"tuning_r{k}.json"
        return problem_k, _tuned(path, problem_k.target, kernel, base, pilot,
                                 derived_seed(run.seed, _REP_PILOT, k), sampler)

    # 4. Reverse starts: S frozen beta = 1 transitions from (eta_hat, theta) on D_sim.
    starts_path = out / "reverse_starts.npz" if out is not None else None
    starts: dict[int, np.ndarray] = {}
    if starts_path is not None and starts_path.exists():
        with np.load(starts_path) as z:
            starts = {int(k[1:]): z[k] for k in z.files}
    if not set(settings.s_sweep) <= set(starts):
        # The snapshots are a deterministic function of the seed, so recomputing
        # for a larger sweep reproduces the saved ones.
        at_one = tuned_sim.schedule(np.array([0.0, 1.0])).params_at(1)
        starts, info = _reverse_starts(problem.target, kernel, at_one, problem.x_star,
                                       run.chains, settings.s_sweep,
                                       derived_seed(run.seed, _REV_START))
        result.extra["reverse_start"] = info
        log.info("%s: reverse starts after S = %s transitions at beta = 1 (%.1f s, "
                 "acceptance %.2f)", name, list(settings.s_sweep), info["seconds"],
                 info["accept_stat"])
        if starts_path is not None:
            tmp = starts_path.with_name("reverse_starts.tmp.npz")
            np.savez_compressed(tmp, **{f"S{S}": v for S, v in starts.items()})
            tmp.replace(starts_path)
    if out is not None:
        _write_header(out, result)
        result.sim.save_header(out / "sim")

    # 5. AIS for each number of distributions.
    for T in run.steps:
        betas = run.schedule.betas(T)
        every = (None if run.increment_blocks is None
                 else max(1, math.ceil((T - 1) / run.increment_blocks)))
        prior = _prior_draws(problem, prior_sim, run.chains, derived_seed(run.seed, _PRIOR, T))
        fwd_done = {st.n_steps: st for st in result.sim.steps}.get(T)
        missing = [S for S in settings.s_sweep if (S, T) not in result.reverse_sweep]
        chain_seed = derived_seed(run.seed, _CHAINS, T)
        groups = [] if fwd_done is not None else [ais._Group("forward", prior, chain_seed, 0)]
        # Stream 1 + S: a reverse chain's randomness depends on its S, not on the sweep.
        groups += [ais._Group("reverse", starts[S], chain_seed, 1 + S) for S in missing]
        if groups:
            runs = ais._anneal(problem.target, kernel,
                               tuned_sim.schedule(betas, sampler.steps_per_temperature), groups,
                               increments_every=every, progress=run.progress)
            if fwd_done is None:
                fwd = runs.pop(0)
                fwd_done = StepResult(T, fwd.to_direction_result(), None, betas,
                                      _constrained(problem, fwd.final_positions))
            for S, r in zip(missing, runs):
                result.reverse_sweep[(S, T)] = r.to_direction_result()
                if out is not None:
                    _save_direction(out / "sweep" / f"reverse_S{S}_T{T}",
                                    result.reverse_sweep[(S, T)])
        step = StepResult(T, fwd_done.forward, result.reverse_sweep[(settings.s_main, T)],
                          betas, fwd_done.draws)
        result.sim.steps = [st for st in result.sim.steps if st.n_steps != T] + [step]
        if groups:
            if out is not None:
                result.sim.save_step(out / "sim", step)
            check = step.consistency()
            if not check.passed:
                log.warning("%s, simulated data, %d distributions: %s", name, T, check.message)
            log.info("%s: simulated data, T=%d: bound %.4g nats, %.1f s", name, T,
                     step.bound().estimate, step.wall_time)
        def forward_only(target, tuned: TunedKernel, seed: int, path: Path | None,
                         label: str) -> DirectionResult:
            fwd = ais._anneal(target, kernel, tuned.schedule(betas, sampler.steps_per_temperature),
                              [ais._Group("forward", prior, seed, 0)],
                              increments_every=every, progress=run.progress)[0]
            done = fwd.to_direction_result()
            if path is not None:
                _save_direction(path, done)
            log.info("%s: %s, T=%d: median forward estimate %.4g, %.1f s", name, label, T,
                     float(np.median(fwd.log_estimates)), fwd.wall_time)
            return done

        if T not in result.real_forward:
            result.real_forward[T] = forward_only(
                real_target, tuned_real, derived_seed(run.seed, _REAL_CHAINS, T),
                out / "real" / f"forward_{T}" if out is not None else None, "real data")
        if settings.replicate_max_steps is not None and T > settings.replicate_max_steps:
            continue
        for k in range(1, settings.replicates + 1):
            done = result.replicate_forward.setdefault(k, {})
            if T not in done:
                rep_problem, rep_tuned = replicate(k)
                done[T] = forward_only(
                    rep_problem.target, rep_tuned, derived_seed(run.seed, _REP_CHAINS, k, T),
                    _replicate_path(out, k, T) if out is not None else None,
                    f"replicate {k} of {settings.replicates}")
    result.sim.steps.sort(key=lambda s: s.n_steps)
    if out is not None:
        result.save(out)
    for problem_text in result.problems():
        log.warning("%s: %s", name, problem_text)
    return result


class _CallableModule(type(json)):
    """Lets ``bread_stan.protocol(...)`` (the module) call :func:`protocol` itself,
    so the spelling of the issue works without a function shadowing its module."""

    def __call__(self, *args, **kwargs):
        return protocol(*args, **kwargs)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallableModule

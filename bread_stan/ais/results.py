"""Results of a BREAD run: per-chain estimates for each number of AIS steps.

A :class:`BreadResult` holds one :class:`StepResult` per number of
distributions T.  Each step result keeps the raw per-chain log estimates of
both directions, timings, gradient counts, kernel diagnostics and (thinned)
cumulative log weights, so every summary and figure can be recomputed from
what is saved.  Results are saved one step count at a time (``save_step``); the files
and how they are read back are :mod:`.result_files`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..stan.draws import to_arviz
from ..store import jsonable
from . import result_files
from .budget import Prediction, budget_sentence, predict_steps
from .betas import Betas
from .estimators import (Sandwich, bidirectional_log_ml, consistency_check, grouped_bound,
                         jeffreys_bound, log_ml_sandwich, one_sided_bounds)
from .verdict import StepVerdict, VerdictSettings, judge_step
from ..errors import InputError

__all__ = ["DirectionResult", "StepResult", "BreadResult", "SubjectiveResult"]


@dataclass
class DirectionResult:
    """One direction (forward or reverse) of AIS at one number of steps.

    ``log_estimates`` are L_i (forward) or U_j = -logw_rev (reverse).
    ``cumulative`` (optional, (n, k)) is the running estimate after the
    temperatures ``cumulative_at`` (indices into the schedule), used for the
    per-temperature decomposition of the gap.  ``problems`` (optional, (n,))
    labels each chain with its simulated problem in multi-draw runs.
    """

    log_estimates: np.ndarray
    wall_time: float
    n_grad: int
    diagnostics: dict[str, float] = field(default_factory=dict)
    cumulative: np.ndarray | None = None
    cumulative_at: np.ndarray | None = None
    problems: np.ndarray | None = None


@dataclass
class StepResult:
    """Forward and reverse AIS at one number of distributions ``n_steps``."""

    n_steps: int
    forward: DirectionResult
    reverse: DirectionResult
    betas: np.ndarray | Betas | None = None  # lazy Betas from runs: flat in T
    draws: dict[str, np.ndarray] = field(default_factory=dict)
    fingerprint: str | None = None  # settings of the run that saved it (None: unsaved)

    @property
    def wall_time(self) -> float:
        return self.forward.wall_time + self.reverse.wall_time

    @property
    def exact_draws(self) -> int:
        """How many simulated problems (exact draws x*_k, data y*_k) the chains cover."""
        if self.forward.problems is None:
            return 1
        return int(np.unique(self.forward.problems).size)

    def _by_problem(self):
        f, r = self.forward, self.reverse
        for k in np.unique(f.problems):
            yield k, f.log_estimates[f.problems == k], r.log_estimates[r.problems == k]

    def bound(self, *, level: float = 0.95, **kwargs):
        """The Jeffreys bound B = mean(U) - mean(L) with its interval.

        With one exact draw the interval is conditional on it (chain-to-chain
        spread only); with several it is the multi-draw interval over problems.
        """
        f, r = self.forward, self.reverse
        if self.exact_draws > 1:
            return grouped_bound(f.log_estimates, r.log_estimates, f.problems, r.problems,
                                 level=level)[0]
        return jeffreys_bound(f.log_estimates, r.log_estimates, level=level, **kwargs)

    def problem_bounds(self) -> pd.DataFrame:
        """Per simulated problem: chains, mean forward and reverse estimate, bound B_k."""
        rows = [{"problem": int(k), "chains": int(L.size), "mean_lower": float(np.mean(L)),
                 "mean_upper": float(np.mean(U)), "bound": float(np.mean(U) - np.mean(L))}
                for k, L, U in (self._by_problem() if self.exact_draws > 1 else
                                [(0, self.forward.log_estimates, self.reverse.log_estimates)])]
        return pd.DataFrame(rows)

    def sandwich(self):
        """The log-ML sandwich from this step count's chains (multi-draw runs have one
        log p(y*_k) per problem, so their sandwich is NaN: see :meth:`problem_bounds`)."""
        if self.exact_draws > 1:
            nan = float("nan")
            return Sandwich(nan, nan, nan, nan)
        return log_ml_sandwich(self.forward.log_estimates, self.reverse.log_estimates)

    def consistency(self, alpha: float = 1e-3):
        """The tail-bound test that reverse estimates do not undercut forward ones
        (per problem in multi-draw runs, Bonferroni over problems)."""
        if self.exact_draws == 1:
            return consistency_check(self.forward.log_estimates, self.reverse.log_estimates,
                                     alpha=alpha)
        checks = [consistency_check(L, U, alpha=alpha) for _, L, U in self._by_problem()]
        worst = min(checks, key=lambda c: c.p_value)
        p = min(1.0, worst.p_value * len(checks))
        return replace(worst, p_value=p, passed=p >= alpha)

    def verdict(self, settings: VerdictSettings = VerdictSettings(), *,
                n_step_counts: int = 1) -> StepVerdict:
        """Consistent? Converged? In words, with the evidence (:mod:`.verdict`)."""
        return judge_step(self, settings, n_step_counts=n_step_counts)

    def stranded_forward_chains(self, spread: float = 10.0) -> np.ndarray:
        """Indices of forward chains whose log estimate lies more than ``spread``
        interquartile ranges (at least 1 nat each) below the median: typically chains
        started far in the prior's tails that the kernel never moved.  They are part
        of the sampler's output, so the bound rightly counts them, but a user should
        know that a few chains dominate it."""
        L = np.asarray(self.forward.log_estimates, dtype=float)
        q1, median, q3 = np.nanpercentile(L, [25, 50, 75])
        return np.flatnonzero(L < median - spread * max(q3 - q1, 1.0))

    def gap_by_temperature(self) -> pd.DataFrame | None:
        """Where along the path the gap arises: mean reverse minus mean forward
        contribution of each block of temperatures (they add up to B)."""
        f, r = self.forward, self.reverse
        if f.cumulative is None or r.cumulative is None:
            return None
        if not np.array_equal(f.cumulative_at, r.cumulative_at):
            raise InputError("forward and reverse increments were recorded at different temperatures")
        mean_f = np.diff(np.concatenate([[0.0], f.cumulative.mean(axis=0)]))
        mean_r = np.diff(np.concatenate([[0.0], r.cumulative.mean(axis=0)]))
        at = np.asarray(f.cumulative_at)
        beta = self.betas[at] if self.betas is not None else np.full(at.size, np.nan)
        return pd.DataFrame({"temperature_index": at, "beta": beta,
                             "forward": mean_f, "reverse": mean_r, "gap": mean_r - mean_f})

    def save(self, path: Path, fingerprint: str | None = None) -> None:
        """Write this step count to the one file ``path`` (.npz), atomically;
        ``fingerprint`` names the run settings it belongs to."""
        result_files.write_step(path, self, fingerprint)

    @classmethod
    def load(cls, path: Path) -> "StepResult":
        """Read a step saved by :meth:`save`; CorruptFileError if it is damaged."""
        return cls._from_fields(result_files.read_step(path))

    @classmethod
    def _from_fields(cls, fields: dict) -> "StepResult":
        return cls(**{**fields, "forward": DirectionResult(**fields["forward"]),
                      "reverse": DirectionResult(**fields["reverse"])})


@dataclass
class BreadResult:
    """A BREAD run: settings, seeds and one :class:`StepResult` per number of steps.

    ``summary()`` is the table a user reads; ``to_dataframe()`` the tidy per-chain
    data; ``save``/``load`` persist everything; ``to_inference_data()`` exports
    the final forward draws to ArviZ.
    """

    model: str
    settings: dict[str, Any]
    steps: list[StepResult] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def step(self, n_steps: int) -> StepResult:
        for s in self.steps:
            if s.n_steps == n_steps:
                return s
        raise KeyError(f"no results for {n_steps} steps; have {[s.n_steps for s in self.steps]}")

    # -- typed views of what ``extra`` records --------------------------------------

    @property
    def truth(self) -> dict[str, Any] | None:
        """The exact draw x* the reverse chains start from (constrained; None when the
        reverse chains start elsewhere, as in a subjective run)."""
        return self.extra.get("truth")

    @property
    def simulated_data(self) -> dict[str, Any] | None:
        """The simulated data y* the model was run on (None for real data)."""
        return self.extra.get("simulated_data")

    @property
    def tuning(self) -> dict[str, Any] | None:
        """The frozen kernel's tuning (:meth:`~bread_stan.ais.tuning.TunedKernel.to_dict`)."""
        return self.extra.get("tuning")

    @property
    def tuning_seconds(self) -> float | None:
        """Wall time of the pilot tuning (None when the tuning was loaded)."""
        return self.extra.get("tuning_seconds")

    @property
    def executor(self) -> dict[str, Any] | None:
        """Where the chains ran (:meth:`~bread_stan.parallel.executor.Executor.describe`)."""
        return self.extra.get("executor")

    def verdict_settings(self) -> VerdictSettings:
        """The levels and scales the verdict uses (saved with the run, else defaults)."""
        return VerdictSettings(**self.extra.get("verdict_settings", {}))

    def verdicts(self, settings: VerdictSettings | None = None) -> list[StepVerdict]:
        """One :class:`~.verdict.StepVerdict` per number of steps, in order of steps; the
        sign test is Bonferroni-corrected over the step counts."""
        settings = settings or self.verdict_settings()
        steps = sorted(self.steps, key=lambda s: s.n_steps)
        return [s.verdict(settings, n_step_counts=len(steps)) for s in steps]

    def setup_problems(self) -> list[str]:
        """Signs of a broken set-up seen while tuning (an improper prior, a density that
        does not depend on a parameter): each makes the run fail its checks."""
        return list(self.extra.get("setup_warnings") or [])

    def simulator_check(self) -> dict | None:
        """What the simulator check recorded (None when it did not run)."""
        check = self.extra.get("simulator_check")
        return check if check and check.get("ran", True) else None

    @property
    def status(self) -> str:
        """``"inconsistent"`` when any step count or the simulator check failed,
        ``"converged"`` when some step count converged, else ``"not converged"``
        (``"empty"`` before any step count has finished)."""
        if not self.steps:
            return "empty"
        verdicts = self.verdicts()
        check = self.simulator_check()
        if (any(not v.consistent for v in verdicts) or (check and not check.get("passed"))
                or self.setup_problems()):
            return "inconsistent"
        return "converged" if any(v.converged for v in verdicts) else "not converged"

    def prediction(self, settings: VerdictSettings | None = None) -> Prediction | None:
        """Where every step count is consistent and none converged: the T at which the
        decay of their bounds' upper limits reaches ``converged_nats`` (the fit ``--steps
        auto`` makes), with its minutes at the seconds a step of the largest step count
        took; None otherwise, or when the bounds do not fall to the level."""
        settings = settings or self.verdict_settings()
        return self._prediction(self.verdicts(settings), settings)

    def _prediction(self, verdicts: list[StepVerdict], settings: VerdictSettings
                    ) -> Prediction | None:
        if not verdicts or any(v.converged or not v.consistent for v in verdicts):
            return None
        largest = max(self.steps, key=lambda s: s.n_steps)
        rate = largest.wall_time / (largest.n_steps - 1) if largest.n_steps > 1 else None
        return predict_steps([v.n_steps for v in verdicts],
                             [v.bound.estimate for v in verdicts],
                             [v.bound.ci_high for v in verdicts], settings.converged_nats,
                             seconds_per_step=rate)

    def last_message(self) -> str:
        """The verdict's message at the largest T; with fixed step counts of which none
        converged, the T the bounds predict and the ``--steps`` that runs it, in place of
        the advice to run ten times more (a run with ``--steps auto`` names its T in
        :func:`~.budget.budget_sentence`)."""
        settings = self.verdict_settings()
        verdicts = self.verdicts(settings)
        last = verdicts[-1]
        predicted = None if self.extra.get("auto_steps") else self._prediction(verdicts,
                                                                               settings)
        if predicted is None:
            return last.message
        return (f"{last.message_before_steps()} "
                + predicted.sentence(v.n_steps for v in verdicts))

    def headline(self) -> str:
        """The one sentence a user reads: the verdict at the largest T, and what the
        checks that ran can and cannot support."""
        if not self.steps:
            return "No step count has finished yet."
        verdicts = self.verdicts()
        last = verdicts[-1]
        check = self.simulator_check()
        if self.status == "inconsistent":
            bad = [v for v in verdicts if not v.consistent]
            where = ", ".join(str(v.n_steps) for v in bad)
            text = (f"CHECK FAILED: the bound is not a divergence at {where} distributions "
                    f"(reverse estimates undercut forward ones).") if bad else ""
            if check and not check.get("passed"):
                text += f" The simulator check failed: {check.get('message', '')}"
            for problem in self.setup_problems():
                text += f" SET-UP PROBLEM: {problem}."
            return text.strip()
        text = f"With {last.n_steps} distributions AIS is {self.last_message()}"
        if self.extra.get("auto_steps"):  # steps="auto": the budget's verdict first
            choice = self.extra.get("path_choice") or {}
            chosen = choice.get("path") if choice.get("requested") == "auto" else None
            text = (budget_sentence(self.extra["auto_steps"], last.bound.estimate, chosen,
                                    choice.get("pilot")) + " " + text).strip()
        if self.status == "converged" and not last.converged:
            best = min((v for v in verdicts if v.converged), key=lambda v: v.n_steps)
            text += f" (It converged at {best.n_steps} distributions.)"
        subjective = self.extra.get("subjective")
        if subjective is not None:
            text += " " + subjective.get("meaning", "")
        elif check is None:
            text += (" The simulator was not checked against the model, so a simulator bug "
                     "that the reverse chains repair (a prior or noise scale off by a "
                     "factor) would go unseen.")
        else:
            text += " The simulator check passed."
        return text

    def summary(self, settings: VerdictSettings | None = None) -> pd.DataFrame:
        """One row per number of steps: verdict, bound with interval, sandwich, cost.

        ``bound``, ``bound_ci_low`` and ``bound_ci_high`` are the reportable bound
        (NaN when the step is inconsistent; the low end truncated at 0);
        ``raw_*`` are the estimate and interval as computed.  ``log_ml_lower_limit``
        and ``log_ml_upper_limit`` are one-sided confidence limits on log p(y) at
        ``log_ml_level`` each, valid for any weight distribution (``*_se`` are spreads).
        ``log_ml_bidirectional`` is Bennett's acceptance-ratio estimate of log p(y) from
        both directions (:func:`~bread_stan.ais.estimators.bidirectional_log_ml`): a
        point estimate, usually much closer than either end, with no guarantee.
        """
        known = self.extra.get("known_log_ml_bounds") or {}
        settings = settings or self.verdict_settings()
        rows = []
        steps = sorted(self.steps, key=lambda s: s.n_steps)
        for s, v in zip(steps, self.verdicts(settings)):
            b, sw = v.bound, s.sandwich()
            ok = v.consistent
            row = {
                "steps": s.n_steps, "verdict": v.status,
                "bound": b.estimate if ok else np.nan,
                "bound_ci_low": max(b.ci_low, 0.0) if ok else np.nan,
                "bound_ci_high": b.ci_high if ok else np.nan,
                "raw_bound": b.estimate, "raw_ci_low": b.ci_low, "raw_ci_high": b.ci_high,
                "bound_se": b.std_error, "exact_draws": v.exact_draws,
                "consistent": ok, "converged": v.converged,
                "sign_p": v.sign.p_value, "tail_p": v.tail.p_value,
                "forward_median": v.forward_median, "reverse_median": v.reverse_median,
                "carriers": v.carriers, "stranded": v.stranded,
                "mean_lower": float(np.mean(s.forward.log_estimates)),
                "mean_upper": float(np.mean(s.reverse.log_estimates)),
                "log_ml_lower": sw.lower, "log_ml_lower_se": sw.lower_se,
                "log_ml_upper": sw.upper, "log_ml_upper_se": sw.upper_se,
                "log_ml_lower_limit": sw.lower_limit, "log_ml_upper_limit": sw.upper_limit,
                "log_ml_level": sw.level,
                "log_ml_bidirectional": bidirectional_log_ml(s.forward.log_estimates,
                                                             s.reverse.log_estimates),
                "seconds": s.wall_time,
                "gradients": s.forward.n_grad + s.reverse.n_grad,
            }
            if s.exact_draws == 1:
                row.update(one_sided_bounds(s.forward.log_estimates, s.reverse.log_estimates,
                                            known_upper=known.get("upper"),
                                            known_lower=known.get("lower"),
                                            alpha=settings.sign_alpha))
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def consistent(self) -> bool:
        """False when any step count fails either consistency test."""
        return all(v.consistent for v in self.verdicts())

    def problems(self) -> list[str]:
        """Messages of every failed check, one per step count (and the simulator check)."""
        out = [f"{v.n_steps} steps: {v.message}" for v in self.verdicts() if not v.consistent]
        check = self.simulator_check()
        if check and not check.get("passed"):
            out.append(f"simulator check: {check.get('message', 'failed')}")
        out += [f"set-up: {problem}" for problem in self.setup_problems()]
        return out + self.known_bound_problems()

    def known_bound_problems(self) -> list[str]:
        """One message per step count whose estimates contradict a given trusted bound on
        log p(y) (``known_log_ml_bounds``; its KL bound is then NaN in the summary)."""
        known = self.extra.get("known_log_ml_bounds") or {}
        out = []
        for row in self.summary().to_dict("records"):
            for key, side, mean, name in (
                    ("kl_q_p", "upper", "mean_lower", "forward estimates (lower bounds)"),
                    ("kl_p_q", "lower", "mean_upper", "reverse estimates (upper bounds)")):
                if key in row and np.isnan(row[key]):
                    out.append(f"{row['steps']} steps: the given {side} bound "
                               f"{known[side]:.6g} on log p(y*) contradicts the {name}, "
                               f"whose mean is {row[mean]:.6g} (p = {row[key + '_p']:.2g}): "
                               f"it is not {'an' if side == 'upper' else 'a'} {side} bound "
                               "on log p(y*) of the simulated data, "
                               f"so no {'KL(q||p)' if side == 'upper' else 'KL(p||q)'} bound "
                               "is reported")
        return out

    def to_dataframe(self) -> pd.DataFrame:
        """Tidy per-chain data: steps, direction, chain, log_estimate."""
        frames = []
        for s in self.steps:
            for direction, d in (("forward", s.forward), ("reverse", s.reverse)):
                frames.append(pd.DataFrame({
                    "steps": s.n_steps, "direction": direction,
                    "chain": np.arange(d.log_estimates.size),
                    "log_estimate": d.log_estimates}))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            columns=["steps", "direction", "chain", "log_estimate"])

    def summary_json(self) -> dict[str, Any]:
        """The summary, settings and problems as JSON-ready data."""
        table = self.summary()
        predicted = self.prediction()
        return {"model": self.model, "status": self.status,
                "predicted": None if predicted is None else predicted.as_dict(),
                "headline": self.headline(), "settings": self.settings,
                "consistent": self.consistent, "problems": self.problems(),
                "verdicts": [jsonable(v.as_dict()) for v in self.verdicts()],
                "extra": jsonable(self.extra),
                "summary": json.loads(table.to_json(orient="records"))}

    def to_inference_data(self, n_steps: int | None = None):
        """Final forward draws at ``n_steps`` (default: the largest) for ArviZ, with
        per-chain estimates in ``sample_stats``: an ``InferenceData`` with ArviZ
        0.x, an ``xarray.DataTree`` with ArviZ 1.x (both write NetCDF either reads)."""
        s = self.step(n_steps) if n_steps is not None else max(self.steps, key=lambda s: s.n_steps)
        posterior = {k: v[None, ...] for k, v in s.draws.items()}
        stats = {"log_ml_lower": s.forward.log_estimates[None, :]}
        v = s.verdict(self.verdict_settings())
        attrs = {"model": self.model, "n_steps": s.n_steps, "verdict": v.status,
                 "jeffreys_bound": v.bound.estimate,
                 "log_ml_lower": s.sandwich().lower, "log_ml_upper": s.sandwich().upper,
                 "consistent": int(v.consistent)}
        return to_arviz({"posterior": posterior, "sample_stats": stats}, attrs)

    # -- persistence -----------------------------------------------------
    def save_header(self, out_dir: Path) -> None:
        """Write settings and extras (``run.json``); steps are saved separately."""
        result_files.write_header(out_dir, self)

    def save_step(self, out_dir: Path, step: StepResult) -> None:
        """Write one step count (``steps_T.npz``), tagged with this run's fingerprint."""
        step.save(result_files.step_path(out_dir, step.n_steps), self.settings.get("fingerprint"))

    def save(self, out_dir: Path) -> None:
        """Write everything needed to re-plot and re-summarise into ``out_dir``."""
        self.save_header(out_dir)
        for s in self.steps:
            self.save_step(out_dir, s)
        self.save_summary(out_dir)

    def save_summary(self, out_dir: Path) -> None:
        """Write ``summary.json`` and ``summary.csv``, atomically."""
        result_files.write_summary(out_dir, self)

    @classmethod
    def load(cls, out_dir: Path) -> "BreadResult":
        """Read a result saved by :meth:`save` (or the completed steps of a run).

        A corrupt ``run.json`` raises CorruptFileError; a corrupt step file is
        set aside with a warning (a rerun recomputes it), and steps saved by a
        run with other settings are ignored.
        """
        model, settings, extra = result_files.read_header(out_dir)
        kind = SubjectiveResult if cls is BreadResult and "subjective" in extra else cls
        return kind(model, settings, load_steps(out_dir, settings.get("fingerprint")), extra)

    def plot(self, *, truth: float | None = None) -> dict:
        """All figures of the report (estimates, bound, per-temperature gap), by name
        (:func:`bread_stan.reporting.plots.plot_all`, a layer above this one, found
        through :func:`bread_stan.late`)."""
        from .. import late

        return late("plot_result")(self, truth=truth)

    def _repr_html_(self) -> str:
        """Jupyter's display: the HTML report's first screen (verdict banner, bound
        figure, results table: :func:`bread_stan.reporting.report.result_html`, a layer
        above this one, found through :func:`bread_stan.late`)."""
        from .. import late

        return late("result_html")(self)

    def __repr__(self) -> str:
        return f"BreadResult(model={self.model!r}, steps={[s.n_steps for s in self.steps]})"


def load_steps(out_dir: Path, fingerprint: str | None) -> list[StepResult]:
    """The readable ``steps_T.npz`` files of ``out_dir`` saved under ``fingerprint``,
    sorted by T; corrupt ones are set aside (logged), foreign ones skipped
    (:func:`.result_files.read_steps`)."""
    return [StepResult._from_fields(fields)
            for fields in result_files.read_steps(out_dir, fingerprint)]


@dataclass
class SubjectiveResult(BreadResult):
    """A subjective-divergence run (:func:`bread_stan.subjective`): its reverse chains
    start from a reference sampler's draws on the real data, not from an exact draw, so
    the bound means what :attr:`meaning` says given the reference's quality."""

    @property
    def reference(self) -> dict[str, Any]:
        """What the run recorded about its reference draws and base (source, chains,
        R-hat, ESS, thinning, base, warnings, checks)."""
        return self.extra["subjective"]

    @property
    def suspect(self) -> bool:
        """Whether the reference is suspect (its own diagnostics, or the AIS runs
        disagreeing with it)."""
        return bool(self.reference.get("suspect"))

    @property
    def meaning(self) -> str:
        """What the bound means, given the reference's quality, in words."""
        return self.reference.get("meaning", "")

    @property
    def base_kind(self) -> str:
        """AIS's initial distribution: ``"gaussian"`` or ``"prior"``."""
        return self.reference["base"]["kind"]

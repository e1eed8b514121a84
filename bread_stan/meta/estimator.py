"""The AIDE estimator of the symmetrised KL between two algorithms' outputs (SPEC 7.3).

With N_g gold runs x_n ~ g and N_t target runs x'_n ~ t,

    D = 1/N_g sum_n [ LME_m log xi_g(u_nm, x_n) - LME_m log xi_t(v_nm, x_n) ]
      + 1/N_t sum_n [ LME_m log xi_t(v'_nm, x'_n) - LME_m log xi_g(u'_nm, x'_n) ]

where the first of the M traces of an algorithm at its own output is the run's own and
the others come from its meta-inference, and all M traces of an algorithm at the other's
output come from meta-inference.  E[D] >= KL(g || t) + KL(t || g), and E[D] does not
increase with M_g or M_t.  A tractable algorithm needs one "trace" (log xi = log q).

:func:`gold_side` does the gold runs and gold meta-inference once (the expensive part with a
long AIS gold), so several targets share them; :func:`estimate_aide` finishes the estimate
for one target.  The interval is a bootstrap of Hall's skewness-corrected studentised
statistic over the runs of both terms, resampled independently from the runs with their
ceil(sqrt(n)) largest terms smoothed into an exponential tail, with the levels of its
ends calibrated by a double bootstrap of the same kind
(:func:`~bread_stan.ais.intervals.skew_corrected_interval`).  The per-run terms are log
density ratios with a long right tail (skewness about 2 between two Gaussians), which
20 runs rarely sample; resamples of the runs themselves never reach beyond the largest
term, and the previous interval (the same without the tail) missed high in 5.9% to 6.7%
of 2000 replications at 20 runs per side (nominal 5%).  E[exp(-term)] = 1 bounds each
term's lower tail, but nothing bounds the upper one, so the upper end rests on an
assumption: an upper tail no heavier than exponential beyond the k-th largest term
(docs/method/intervals.md has what it assumes and how often it misses).  It covers
the expectation of the estimate; with meta-inference (AIS, SMC, SIR) that lies above
the symmetric KL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..ais.intervals import skew_corrected_interval
from ..rng import Purpose, derived_seed
from .algorithms import Cost, InferenceAlgorithm
from ..errors import InputError

__all__ = ["GoldSide", "AIDEResult", "gold_side", "estimate_aide"]



def _lme(log_xi: np.ndarray) -> np.ndarray:
    """Log-mean-exp over the traces (axis 1)."""
    return logsumexp(log_xi, axis=1) - np.log(log_xi.shape[1])


def _traces(algorithm: InferenceAlgorithm, m: int) -> int:
    return 1 if algorithm.tractable else int(m)


def _check_count(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InputError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


@dataclass
class GoldSide:
    """The gold algorithm's runs and its log xi at them: outputs (N_g, d), log_xi (N_g, M_g)
    (column 0 from each run's own trace), the cost, and the seed and sizes used."""

    name: str
    outputs: np.ndarray
    log_xi: np.ndarray
    cost: Cost
    seed: int

    @property
    def n(self) -> int:
        return self.outputs.shape[0]

    @property
    def m(self) -> int:
        return self.log_xi.shape[1]


def gold_side(gold: InferenceAlgorithm, n_gold: int, m_gold: int = 1, *, seed: int = 0
              ) -> GoldSide:
    """Run the gold standard ``n_gold`` times and complete each output's M_g traces."""
    n = _check_count("n_gold", n_gold, 2)
    m = _traces(gold, _check_count("m_gold", m_gold, 1))
    own = gold.run(n, derived_seed(seed, Purpose.GOLD_RUN))
    log_xi, cost = own.log_xi[:, None], own.cost
    if m > 1:
        meta = gold.meta_log_xi(own.outputs, m - 1, derived_seed(seed, Purpose.GOLD_META))
        log_xi, cost = np.concatenate([log_xi, meta.log_xi], axis=1), cost + meta.cost
    return GoldSide(gold.name, own.outputs, log_xi, cost, int(seed))


@dataclass
class AIDEResult:
    """An AIDE estimate of the symmetrised KL (nats) between a gold and a target algorithm.

    ``gold_term`` (x ~ gold: LME log xi_g - LME log xi_t) and ``target_term`` (x ~ target:
    LME log xi_t - LME log xi_g) sum to ``estimate``; ``per_run_gold`` (N_g,) and
    ``per_run_target`` (N_t,) hold the per-run values; ``lower``/``upper`` a skewness-corrected
    bootstrap interval at ``level``, its ends' levels calibrated by a double bootstrap.
    ``cost`` maps "gold" and "target" to :class:`Cost` (all work done for each,
    meta-inference included) and "target_runs" to the target's N_t own runs alone (what
    running the target algorithm costs).  With an unnormalised gold (reference draws) the
    two terms are shifted by -log Z and +log Z; only the estimate is meaningful.
    """

    gold: str
    target: str
    estimate: float
    se: float
    lower: float
    upper: float
    level: float
    gold_term: float
    target_term: float
    per_run_gold: np.ndarray
    per_run_target: np.ndarray
    n_gold: int
    n_target: int
    m_gold: int
    m_target: int
    cost: dict[str, Cost]
    terms_meaningful: bool = True
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """Plain-JSON summary; the estimate is under ``"aide_nats"``."""
        return {"gold": self.gold, "target": self.target, "aide_nats": self.estimate,
                "se": self.se, "lower": self.lower, "upper": self.upper, "level": self.level,
                "gold_term": self.gold_term, "target_term": self.target_term,
                "terms_meaningful": self.terms_meaningful, "n_gold": self.n_gold,
                "n_target": self.n_target, "m_gold": self.m_gold, "m_target": self.m_target,
                "cost": {k: v.to_dict() for k, v in self.cost.items()},
                "settings": self.settings}

    def arrays(self) -> dict[str, np.ndarray]:
        return {"per_run_gold": self.per_run_gold, "per_run_target": self.per_run_target}

    @classmethod
    def from_saved(cls, arrays: dict[str, np.ndarray], summary: dict[str, Any]) -> "AIDEResult":
        """The result from :meth:`arrays` and :meth:`summary` (as saved in one unit)."""
        keep = {k: v for k, v in summary.items() if k not in ("aide_nats", "cost")}
        return cls(estimate=summary["aide_nats"],
                   cost={k: Cost(**v) for k, v in summary["cost"].items()},
                   per_run_gold=arrays["per_run_gold"], per_run_target=arrays["per_run_target"],
                   **keep)


def estimate_aide(gold: InferenceAlgorithm | GoldSide, target: InferenceAlgorithm, *,
                  gold_algorithm: InferenceAlgorithm | None = None, n_gold: int = 100,
                  n_target: int = 100, m_gold: int = 1, m_target: int = 1, seed: int = 0,
                  level: float = 0.95) -> AIDEResult:
    """AIDE of ``target`` against ``gold`` with N_g, N_t runs and M_g, M_t traces.

    ``gold`` is an algorithm, or a finished :class:`GoldSide` (then give the algorithm as
    ``gold_algorithm`` for its meta-inference at the target's outputs; ``n_gold`` and
    ``m_gold`` are the GoldSide's).  Random streams derive from ``seed`` and the purpose
    (gold runs, gold meta-inference, target runs, ...), so the gold side computed alone
    with the same seed is the same.
    """
    if isinstance(gold, GoldSide):
        side, algorithm = gold, gold_algorithm
        if algorithm is None:
            raise InputError("with a finished GoldSide, give the gold algorithm as "
                             "gold_algorithm (its meta-inference runs at the target's outputs)")
        if side.seed != seed:
            raise InputError(f"the GoldSide was made with seed {side.seed}, not {seed}")
    else:
        algorithm = gold
        side = gold_side(gold, n_gold, m_gold, seed=seed)
    if getattr(target, "normalised", True) is False:
        raise InputError(f"{target.name} (reference draws) can only be the gold standard: as a "
                         "target it would only assert its own exactness")
    if target.dim != algorithm.dim or side.outputs.shape[1] != target.dim:
        raise InputError(f"gold and target live in different spaces ({algorithm.dim} and "
                         f"{target.dim} unconstrained coordinates)")
    if not 0 < level < 1:
        raise InputError(f"level must be in (0, 1), got {level}")
    n_t = _check_count("n_target", n_target, 2)
    m_t = _traces(target, _check_count("m_target", m_target, 1))
    m_g = side.m

    t0 = time.perf_counter()
    at_gold = target.meta_log_xi(side.outputs, m_t, derived_seed(seed, Purpose.TARGET_META_AT_GOLD))
    own = target.run(n_t, derived_seed(seed, Purpose.TARGET_RUN))
    target_xi, target_cost = own.log_xi[:, None], own.cost + at_gold.cost
    if m_t > 1:
        meta = target.meta_log_xi(own.outputs, m_t - 1, derived_seed(seed, Purpose.TARGET_META))
        target_xi, target_cost = np.concatenate([target_xi, meta.log_xi], 1), target_cost + meta.cost
    at_target = algorithm.meta_log_xi(own.outputs, m_g,
                                      derived_seed(seed, Purpose.GOLD_META_AT_TARGET))

    with np.errstate(invalid="ignore"):
        per_gold = _lme(side.log_xi) - _lme(at_gold.log_xi)
        per_target = _lme(target_xi) - _lme(at_target.log_xi)
        estimate = float(per_gold.mean() + per_target.mean())
        finite = np.isfinite(estimate)
        if finite:
            estimate, se, lower, upper = skew_corrected_interval(
                [(per_gold, 1), (per_target, 1)], level=level, seed=derived_seed(seed, Purpose.AIDE_INTERVAL))
    if not finite:  # an output where the other algorithm has no density
        se, lower, upper = np.inf, estimate, estimate
    return AIDEResult(
        gold=side.name, target=target.name, estimate=estimate, se=se, lower=lower,
        upper=upper, level=level, gold_term=float(per_gold.mean()),
        target_term=float(per_target.mean()), per_run_gold=per_gold, per_run_target=per_target,
        n_gold=side.n, n_target=n_t, m_gold=m_g, m_target=m_t,
        cost={"gold": side.cost + at_target.cost, "target": target_cost,
              "target_runs": own.cost},
        terms_meaningful=getattr(algorithm, "normalised", True) is not False,
        settings={"seed": int(seed), "seconds": time.perf_counter() - t0})

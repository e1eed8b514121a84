"""The normaliser c of a program's prior density, by importance sampling.

A Stan program's prior density p0~(u) (in the unconstrained space, Jacobian included,
all constants kept) integrates to c, not 1, whenever a statement's density is not
normalised on the parameter's support: 1/2 for each ``normal`` or ``cauchy`` on a
``<lower=0>`` parameter, Phi(mu/sigma) for ``normal(mu, sigma)`` there, 1 for
``inv_gamma`` or ``lognormal`` (normalised on the positive half-line).  AIS from a
Gaussian base (SPEC section 7.1) estimates log(c p(y)); subtracting an estimate of
log c gives log p(y) (:mod:`bread_stan.ais.gaussian_path`).

Estimator.  With g a normalised proposal with exact draws,

    c = E_g[ p0~(u) / g(u) ],      c_hat = mean_i p0~(u_i) / g(u_i),  u_i ~ g,

unbiased for c given g and n.  g is fitted to exact prior draws (the simulator's
parameters, unconstrained; independent of the draws u_i) and is a defensive mixture
(:class:`DefensiveProposal`): a Gaussian at the draws' robust centre and scale (most
of the efficiency), a multivariate Cauchy of the same shape (tails decaying as
``|u|^-(d+1)`` in every direction: a funnel's mouth, where a hierarchical scale is large
and its effects spread with it), and a product of per-coordinate Cauchys (tails along
each axis).  Each heavy component has a quarter of the mass, so p0~/g is bounded when
the prior's coordinates are independent with exponential tails or polynomial tails no
heavier than Cauchy in the unconstrained space (a log-transformed half-normal,
half-Cauchy or inverse-gamma scale, a logit-transformed bounded parameter, normal
effects), and along every axis and diagonal of the funnel tested.  In a hierarchical
prior's mouth (many effects under one scale with a polynomial tail) the ratio can grow
slowly, but the multivariate Cauchy keeps the weights' tail light: on NHEFS's prior (six
coefficients under an inverse-gamma(1, 1) variance) the Pareto k is 0.33 to 0.40.

What it assumes, and when the standard error cannot be trusted: a prior whose density
is unbounded (a funnel's neck: effects ``normal(0, tau)`` with ``tau`` half-normal or
half-Cauchy, whose density at tau = 0 is positive, and two or more such effects) gives
weights of infinite variance, so the estimate is still unbiased but its standard error
is not an honest error bar.  The Pareto shape k of the weights' upper tail (PSIS's
estimate, computed here as arviz computes it) flags this: ``trustworthy`` is False when
k > 0.7 (PSIS's own threshold).  The number of draws n is chosen by a discarded pilot
(``TARGET_SE`` below), so it does not depend on the draws that are averaged.

Its error on the log p(y) sandwich.  ``se`` is the delta-method standard error of
log c_hat, sd(w) / (mean(w) sqrt(n)).  Because c_hat is unbiased for c,
exp(-U) c_hat is unbiased for 1/p(y) when exp(-U) is unbiased for 1/(c p(y)) (reverse
AIS), so the upper end U - log c_hat stays a stochastic upper bound.  The lower end
L - log c_hat is not exactly one: E[-log c_hat] >= -log c by Jensen, by about half the
relative variance of c_hat, se^2 / 2 (``jensen_gap``), the amount by which its
expectation may exceed log p(y).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from scipy import special

from ..errors import InputError

__all__ = ["DefensiveProposal", "NormaliserEstimate", "estimate_log_normaliser",
           "DEFAULT_DRAWS", "DEFAULT_FIT_DRAWS", "fit_draws", "PARETO_K_LIMIT"]

log = logging.getLogger(__name__)

# How many proposal draws: as many as make se(log c) about TARGET_SE, judged from a
# pilot of PILOT_DRAWS draws (then discarded, so that the number drawn does not depend on
# the draws scored and c_hat stays unbiased), between PILOT_DRAWS and MAX_DRAWS.  0.01
# nats is a tenth or less of the log p(y) sandwich's width in the runs of
# scripts/figures/bench_peers/gaussian (NHEFS: the weights' relative variance is about
# 9, so about 90,000 draws, 0.2 s; eight schools: below 1, the pilot's 4,096 suffice),
# and its Jensen gap is then 5e-5 nats.
TARGET_SE = 0.01
PILOT_DRAWS = 4_096
MAX_DRAWS = 262_144
DEFAULT_DRAWS = None  # adaptive, as above
DEFAULT_FIT_DRAWS = 512  # exact prior draws the proposal is fitted to (at least)


def fit_draws(dim: int) -> int:
    """Exact prior draws the proposal is fitted to in ``dim`` dimensions: at least
    ``DEFAULT_FIT_DRAWS``, and 8 (d + 1) so that its d x d correlations are estimated
    from many more draws than they have entries per row (a fit needs 2d + 2 at least)."""
    return max(DEFAULT_FIT_DRAWS, 8 * (int(dim) + 1))
PARETO_K_LIMIT = 0.7
_WEIGHTS = (0.5, 0.25, 0.25)  # Gaussian, multivariate Cauchy, product of Cauchys
# The components' scale, times the draws' robust scale: on the NHEFS prior (a funnel of
# six coefficients under an inverse-gamma variance) 1.0 gave weights of relative
# variance 8.9-11, 1.5 gave 19-34 (scripts/figures/prior_normaliser_study): a narrower
# bulk serves the funnel's dense neck.
_WIDEN = 1.0
_MAD = 1.482602218505602  # MAD to sd for a Gaussian


@dataclass(frozen=True)
class DefensiveProposal:
    """A normalised density on R^d with exact draws: ``weights`` of a Gaussian
    N(loc, shape), a multivariate Cauchy (t with 1 degree of freedom) with the same
    location and shape matrix, and a product of Cauchys with location ``loc`` and
    scales sqrt(diag(shape))."""

    loc: np.ndarray
    shape: np.ndarray
    weights: tuple[float, float, float] = _WEIGHTS

    def __post_init__(self):
        loc = np.asarray(self.loc, dtype=float).ravel()
        shape = np.atleast_2d(np.asarray(self.shape, dtype=float))
        if shape.shape != (loc.size, loc.size) or not np.all(np.isfinite(shape)):
            raise InputError(f"the proposal's shape matrix must be finite ({loc.size}, "
                             f"{loc.size}), got {shape.shape}")
        chol = np.linalg.cholesky(0.5 * (shape + shape.T))
        object.__setattr__(self, "loc", loc)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "_chol", chol)
        object.__setattr__(self, "_log_det", float(2 * np.sum(np.log(np.diag(chol)))))
        object.__setattr__(self, "_scale", np.sqrt(np.diag(shape)))

    @property
    def dim(self) -> int:
        return self.loc.size

    @classmethod
    def fit(cls, draws: np.ndarray, widen: float = _WIDEN) -> "DefensiveProposal":
        """Fitted to (n, d) exact prior draws: location the coordinates' medians, scales
        their median absolute deviations (as Gaussian sds) times ``widen``, correlations
        those of the draws winsorised at their 5% and 95% quantiles (robust to the
        heavy tails the draws may have)."""
        x = np.asarray(draws, dtype=float)
        if x.ndim != 2 or x.shape[0] < 2 * x.shape[1] + 2 or not np.all(np.isfinite(x)):
            raise InputError(f"fitting the prior normaliser's proposal needs at least "
                             f"2d + 2 finite prior draws of shape (n, d), got {x.shape}")
        loc = np.median(x, axis=0)
        scale = _MAD * np.median(np.abs(x - loc), axis=0)
        spread = np.std(x, axis=0)
        scale = np.where(scale > 0, scale, np.where(spread > 0, spread, 1.0))
        lo, hi = np.quantile(x, [0.05, 0.95], axis=0)
        clipped = np.clip(x, lo, hi)
        corr = np.corrcoef(clipped, rowvar=False) if x.shape[1] > 1 else np.ones((1, 1))
        corr = np.nan_to_num(np.atleast_2d(corr), nan=0.0)
        np.fill_diagonal(corr, 1.0)
        corr = 0.9 * corr + 0.1 * np.eye(x.shape[1])  # shrunk: positive definite
        s = widen * scale
        return cls(loc, corr * np.outer(s, s))

    def _components(self, u: np.ndarray) -> np.ndarray:
        """log density of each component (n, 3) at (n, d) points."""
        d = self.dim
        z = np.linalg.solve(self._chol, (u - self.loc).T).T  # whitened
        m = np.sum(z * z, axis=1)
        gauss = -0.5 * (m + d * np.log(2 * np.pi) + self._log_det)
        mv_cauchy = (special.gammaln((1 + d) / 2) - special.gammaln(0.5)
                     - 0.5 * d * np.log(np.pi) - 0.5 * self._log_det
                     - 0.5 * (1 + d) * np.log1p(m))
        r = (u - self.loc) / self._scale
        product = np.sum(-np.log(np.pi * self._scale) - np.log1p(r * r), axis=1)
        return np.column_stack([gauss, mv_cauchy, product])

    def log_density(self, points: np.ndarray) -> np.ndarray:
        """log g (n,) at (n, d) points."""
        u = np.atleast_2d(np.asarray(points, dtype=float))
        with np.errstate(divide="ignore"):
            log_weights = np.log(self.weights)
        return special.logsumexp(self._components(u) + log_weights, axis=1)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Exact draws (n, d): a component per draw, then its draw."""
        d = self.dim
        which = rng.choice(3, size=n, p=np.asarray(self.weights) / sum(self.weights))
        z = rng.standard_normal((n, d))
        out = np.empty((n, d))
        gauss = which == 0
        out[gauss] = z[gauss] @ self._chol.T
        mv = which == 1  # a Gaussian over |chi_1|: a multivariate t with 1 dof
        out[mv] = (z[mv] @ self._chol.T) / np.abs(rng.standard_normal(int(mv.sum())))[:, None]
        prod = which == 2
        out[prod] = self._scale * np.tan(np.pi * (rng.random((int(prod.sum()), d)) - 0.5))
        return self.loc + out

    def to_dict(self) -> dict:
        return {"loc": self.loc.tolist(), "shape": self.shape.tolist(),
                "weights": list(self.weights)}


@dataclass(frozen=True)
class NormaliserEstimate:
    """log c_hat, the delta-method standard error of it, and what the draws say about
    its reliability: the weights' relative variance (var w / mean(w)^2), the Pareto
    shape of their upper tail (``pareto_k``; above 0.7 the standard error is not
    trustworthy), the Jensen gap of the sandwich's lower end (about se^2 / 2).

    ``method``: "importance sampling" (here), or, from a drafted simulator's own account
    (:mod:`bread_stan.ais.known_normaliser`), "exact" (se 0; ``n_fit`` the draws that agreed on it) or
    "exact and rejection" (``n_draws`` the draws whose tries estimate the acceptance
    probability); ``pareto_k`` is NaN for those."""

    log_c: float
    se: float
    n_draws: int
    n_fit: int
    relative_variance: float
    pareto_k: float
    seconds: float
    failed: int = 0  # draws where the density was NaN (taken as 0: far out in a tail)
    proposal: dict | None = None
    method: str = "importance sampling"

    @property
    def jensen_gap(self) -> float:
        """About how far E[-log c_hat] exceeds -log c (so the lower end's expectation
        may exceed log p(y)): half c_hat's relative variance, se^2 / 2."""
        return 0.5 * self.se ** 2

    @property
    def trustworthy(self) -> bool:
        """Whether the standard error can be believed (Pareto k at most 0.7; no tail to
        judge for the simulator's own account)."""
        if self.method != "importance sampling":
            return bool(np.isfinite(self.se))
        return bool(np.isfinite(self.se) and self.pareto_k <= PARETO_K_LIMIT)

    @property
    def message(self) -> str:
        if self.method == "exact":
            return (f"prior normaliser log c = {self.log_c:.4f} (exact, computed by the "
                    "drafted simulator)")
        if self.method != "importance sampling":
            return (f"prior normaliser log c = {self.log_c:.4f} (se {self.se:.2g}: exact, "
                    "computed by the drafted simulator, times its rejection loop's "
                    f"acceptance probability estimated from the tries of {self.n_draws} "
                    "draws)")
        text = (f"prior normaliser log c = {self.log_c:.4f} (se {self.se:.2g}, "
                f"{self.n_draws} importance draws from a defensive mixture fitted to "
                f"{self.n_fit} prior draws; Pareto k {self.pareto_k:.2f})")
        if not self.trustworthy:
            text += ("; the weights' tail is too heavy for the standard error to be "
                     "trusted (a funnel-shaped prior?)")
        return text

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(jensen_gap=self.jensen_gap, trustworthy=self.trustworthy)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "NormaliserEstimate":
        keep = {k: values[k] for k in ("log_c", "se", "n_draws", "n_fit",
                                       "relative_variance", "pareto_k", "seconds",
                                       "failed")}
        return cls(**keep, proposal=values.get("proposal"),
                   method=values.get("method", "importance sampling"))


def _pareto_k(log_w: np.ndarray) -> float:
    """PSIS's estimate of the Pareto shape k of the weights' upper tail (Vehtari et al.,
    as arviz's ``psislw`` computes it, without importing arviz): a generalised Pareto fit
    (Zhang and Stephens 2009, with PSIS's weak prior on k) to the largest
    min(n/5, 3 sqrt(n)) weights' exceedances.  -inf for equal weights, inf when the
    tail is too short to fit."""
    x = np.asarray(log_w, dtype=float)
    x = x[np.isfinite(x)]
    if x.size and np.ptp(x) == 0:
        return float("-inf")  # equal weights: no tail at all
    if x.size < 100:
        return float("inf")
    x = np.sort(x - x.max())
    m = int(np.ceil(min(0.2 * x.size, 3 * np.sqrt(x.size))))
    cutoff = max(x[-m - 1], np.log(np.finfo(float).tiny))
    tail = np.exp(x[x > cutoff]) - np.exp(cutoff)
    if tail.size <= 4:
        return float("inf")
    n = tail.size
    grid = 30 + int(np.sqrt(n))
    b = 1 - np.sqrt(grid / (np.arange(1, grid + 1, dtype=float) - 0.5))
    b /= 3 * tail[int(n / 4 + 0.5) - 1]
    b += 1 / tail[-1]
    k = np.log1p(-b[:, None] * tail).mean(axis=1)
    profile = n * (np.log(-(b / k)) - k - 1)
    with np.errstate(over="ignore"):  # an overflow is a weight of 0, as it should be
        weights = 1 / np.exp(profile - profile[:, None]).sum(axis=1)
    keep = weights >= 10 * np.finfo(float).eps
    weights = weights[keep] / weights[keep].sum()
    k_post = np.log1p(-np.sum(b[keep] * weights) * tail).mean()
    return float((n * k_post + 10 * 0.5) / (n + 10))


def estimate_log_normaliser(log_prior: Callable[[np.ndarray], np.ndarray],
                            prior_draws: np.ndarray, rng: np.random.Generator,
                            n_draws: int | None = DEFAULT_DRAWS,
                            proposal: DefensiveProposal | None = None,
                            target_se: float = TARGET_SE) -> NormaliserEstimate:
    """log c of the density ``log_prior`` ((n, d) points -> (n,) values, -inf outside the
    support) by importance sampling from :class:`DefensiveProposal` fitted to the exact
    prior draws ``prior_draws`` (n, d) (or the ``proposal`` given), ``n_draws`` draws
    from ``rng`` (None: as many as a discarded pilot of ``PILOT_DRAWS`` says give a
    standard error of ``target_se``, at most ``MAX_DRAWS``).  NaN densities are refused."""
    t0 = time.perf_counter()
    draws = np.asarray(prior_draws, dtype=float)
    if n_draws is not None and int(n_draws) < 100:
        raise InputError(f"the prior normaliser needs at least 100 importance draws, "
                         f"got {n_draws}")
    g = proposal if proposal is not None else DefensiveProposal.fit(draws)
    if n_draws is None:
        pilot = _log_weights(log_prior, g, g.sample(rng, PILOT_DRAWS))[0]
        w = np.exp(pilot - np.max(pilot))
        rel_var = float(np.var(w) / np.mean(w) ** 2)
        n_draws = int(np.clip(np.ceil(rel_var / target_se ** 2), PILOT_DRAWS, MAX_DRAWS))
    log_w, failed = _log_weights(log_prior, g, g.sample(rng, int(n_draws)))
    top = np.max(log_w)
    w = np.exp(log_w - top)
    mean = float(np.mean(w))
    log_c = float(np.log(mean) + top)
    rel_var = float(np.var(w) / mean ** 2)
    se = float(np.sqrt(rel_var / w.size))
    out = NormaliserEstimate(log_c, se, int(w.size), int(draws.shape[0]), rel_var,
                             _pareto_k(log_w), time.perf_counter() - t0, int(failed.sum()),
                             g.to_dict())
    (log.info if out.trustworthy else log.warning)("%s", out.message)
    return out


def _log_weights(log_prior, g: DefensiveProposal, u: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """log p0~(u) - log g(u) (NaN densities, far out in a tail, as 0) and where the
    density was NaN; refused when more than 1% are NaN or all are zero."""
    with np.errstate(over="ignore", invalid="ignore"):
        lp = np.asarray(log_prior(u), dtype=float)
    if lp.shape != (u.shape[0],):
        raise InputError(f"the prior's log density gave shape {lp.shape} for "
                         f"{u.shape[0]} points; it must give one value per point")
    failed = np.isnan(lp)
    if np.mean(failed) > 0.01:
        raise InputError(f"the prior's log density is NaN at {int(failed.sum())} of "
                         f"{lp.size} proposal draws; a prior must be finite or -inf "
                         "(outside its support) at every unconstrained point")
    lp = np.where(failed, -np.inf, lp)  # far out in a Cauchy tail: the transform overflowed
    log_w = lp - g.log_density(u)
    if not np.any(np.isfinite(log_w)):
        raise InputError("the prior's density is zero at every proposal draw: cannot "
                         "estimate its normaliser")
    return log_w, failed

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

unbiased for c given g.  g is fitted to exact prior draws (the simulator's parameters,
unconstrained; independent of the draws u_i) and is a defensive mixture
(:class:`DefensiveProposal`): a Gaussian at the draws' robust centre and scale (most
of the efficiency), a multivariate Cauchy of the same shape (tails decaying as
|u|^-(d+1) in every direction: a funnel's mouth, where a hierarchical scale is large
and its effects spread with it), and a product of per-coordinate Cauchys (tails along
each axis).  Each heavy component has a quarter of the mass, so p0~/g is bounded
wherever the prior's tails in the unconstrained space are exponential or polynomial no
heavier than Cauchy (a log-transformed half-normal, half-Cauchy or inverse-gamma scale,
a logit-transformed bounded uniform, normal effects).

What it assumes, and when the standard error cannot be trusted: a prior whose density
is unbounded (a funnel's neck: effects ``normal(0, tau)`` with ``tau`` half-normal or
half-Cauchy, whose density at tau = 0 is positive, and two or more such effects) gives
weights of infinite variance, so the estimate is still unbiased but its standard error
is not an honest error bar.  The Pareto shape k of the weights' upper tail (arviz's
PSIS) flags this: ``trustworthy`` is False when k > 0.7 (PSIS's own threshold).

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
import warnings
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from scipy import special

from ..errors import InputError

__all__ = ["DefensiveProposal", "NormaliserEstimate", "estimate_log_normaliser",
           "DEFAULT_DRAWS", "DEFAULT_FIT_DRAWS", "PARETO_K_LIMIT"]

log = logging.getLogger(__name__)

# 16,384 proposal draws: on NHEFS and eight schools the weights' relative variance is
# below 1 (results in scripts/figures/bench_peers_gaussian), so se(log c) < 0.008 nats,
# ten times below the sandwich widths of those runs, and the Jensen gap < 1e-4 nats.
DEFAULT_DRAWS = 16_384
DEFAULT_FIT_DRAWS = 512  # exact prior draws the proposal is fitted to
PARETO_K_LIMIT = 0.7
_WEIGHTS = (0.5, 0.25, 0.25)  # Gaussian, multivariate Cauchy, product of Cauchys
_WIDEN = 1.5  # the Gaussian's and the Cauchys' scale, times the draws' robust scale
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
    trustworthy), the Jensen gap of the sandwich's lower end (about se^2 / 2)."""

    log_c: float
    se: float
    n_draws: int
    n_fit: int
    relative_variance: float
    pareto_k: float
    seconds: float
    failed: int = 0  # draws where the density was NaN (taken as 0: far out in a tail)
    proposal: dict | None = None

    @property
    def jensen_gap(self) -> float:
        """About how far E[-log c_hat] exceeds -log c (so the lower end's expectation
        may exceed log p(y)): half c_hat's relative variance, se^2 / 2."""
        return 0.5 * self.se ** 2

    @property
    def trustworthy(self) -> bool:
        """Whether the standard error can be believed (Pareto k at most 0.7)."""
        return bool(np.isfinite(self.se) and self.pareto_k <= PARETO_K_LIMIT)

    @property
    def message(self) -> str:
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
        return cls(**keep, proposal=values.get("proposal"))


def _pareto_k(log_w: np.ndarray) -> float:
    """PSIS's Pareto shape of the weights' upper tail (arviz), or inf if it fails."""
    finite = log_w[np.isfinite(log_w)]
    if finite.size and np.ptp(finite) == 0:
        return float("-inf")  # equal weights: no tail at all
    if finite.size < 100:
        return float("inf")
    import arviz  # deferred: importing arviz costs about a second

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, k = arviz.psislw(finite)
    return float(np.asarray(k).ravel()[0])


def estimate_log_normaliser(log_prior: Callable[[np.ndarray], np.ndarray],
                            prior_draws: np.ndarray, rng: np.random.Generator,
                            n_draws: int = DEFAULT_DRAWS,
                            proposal: DefensiveProposal | None = None) -> NormaliserEstimate:
    """log c of the density ``log_prior`` ((n, d) points -> (n,) values, -inf outside the
    support) by importance sampling from :class:`DefensiveProposal` fitted to the exact
    prior draws ``prior_draws`` (n, d) (or the ``proposal`` given), ``n_draws`` draws
    from ``rng``.  NaN densities are refused."""
    t0 = time.perf_counter()
    draws = np.asarray(prior_draws, dtype=float)
    if int(n_draws) < 100:
        raise InputError(f"the prior normaliser needs at least 100 importance draws, "
                         f"got {n_draws}")
    g = proposal if proposal is not None else DefensiveProposal.fit(draws)
    u = g.sample(rng, int(n_draws))
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

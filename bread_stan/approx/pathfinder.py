"""Single-path Pathfinder (Zhang, Carpenter, Gelman and Vehtari 2022, JMLR 23(306)).

L-BFGS runs on minus the log density (with the Jacobian) from the initial point; at each
iterate x_l the inverse-Hessian estimate Sigma_l of L-BFGS (the last ``history_size``
accepted (s, y) pairs over a diagonal estimate updated as in the paper's Algorithm 3 and
Stan's ``form_diag``; a pair is accepted when y.s > 0 and |y.y / y.s| <= 1e12, Stan's
``check_curve``; as in the paper, a rejected pair is left out of the history, where Stan's
code keeps it) gives the Gaussian N(x_l + Sigma_l grad log p(x_l), Sigma_l); its ELBO is
estimated with ``elbo_draws`` draws and the Gaussian with the largest ELBO is returned.

Sigma_l is never formed while the path is searched: it is diag(alpha) plus a rank-2m
correction (the compact form of the BFGS inverse update; Byrd, Nocedal and Schnabel 1994),
and its draws, log density and ELBO take O(d m^2) per iterate through a thin QR of the
correction, as in the paper's Algorithm 4.  Only the chosen Gaussian's covariance is made
dense (d, d).  The importance resampling of the paper's multi-path variant is not done:
the output is the Gaussian itself.

With ``seconds`` (a run's budget), a run that has not ended when they are spent stops at
once with :class:`PathfinderOutOfTime`: nothing of a stopped path is returned, so the
Gaussian a run gets never depends on how fast the machine is.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy import linalg, optimize

from ..ais.gaussian_base import joint_density
from .gaussian import ApproximationError, GaussianApproximation, initial_point
from ..errors import InputError

__all__ = ["pathfinder", "PathfinderOutOfTime"]


class PathfinderOutOfTime(ApproximationError):
    """Pathfinder stopped: it would not end within the seconds it was given."""


def _curvature_ok(y: np.ndarray, s: np.ndarray) -> bool:
    ys = float(y @ s)
    return ys > 0 and abs(float(y @ y) / ys) <= 1e12


def _update_diagonal(alpha: np.ndarray, y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The paper's diagonal inverse-Hessian estimate after the pair (s, y)."""
    y_alpha_y = float(y @ (alpha * y))
    y_s = float(y @ s)
    s_alpha_s = float(s @ (s / alpha))
    return y_s / (y_alpha_y / alpha + y ** 2 - (y_alpha_y / s_alpha_s) * (s / alpha) ** 2)


def _inverse_hessian(alpha: np.ndarray, pairs: list[tuple[np.ndarray, np.ndarray]]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``W`` (d, 2m) and ``M`` (2m, 2m) with the L-BFGS inverse Hessian (BFGS inverse
    updates of diag(alpha), oldest pair first) equal to ``diag(alpha) + W M W'``."""
    d = alpha.size
    if not pairs:
        return np.zeros((d, 0)), np.zeros((0, 0))
    s = np.column_stack([p[0] for p in pairs])
    y = np.column_stack([p[1] for p in pairs])
    sy = s.T @ y
    r_inv = linalg.solve_triangular(np.triu(sy), np.eye(len(pairs)))
    middle = r_inv.T @ (np.diag(np.diag(sy)) + y.T @ (alpha[:, None] * y)) @ r_inv
    zero = np.zeros_like(r_inv)
    return (np.hstack([alpha[:, None] * y, s]),
            np.block([[zero, -r_inv], [-r_inv.T, middle]]))


class _LowRankGaussian:
    """N(mean, diag(alpha) + W M W') drawn and scored through a thin QR of W, O(d m^2)."""

    def __init__(self, point, grad, alpha, w, m):
        self.alpha, self.w, self.m = alpha, w, m
        self.mean = point + alpha * grad + w @ (m @ (w.T @ grad))
        self.root = np.sqrt(alpha)
        self.q, r = np.linalg.qr(w / self.root[:, None])
        chol = np.linalg.cholesky(np.eye(r.shape[0]) + r @ m @ r.T)  # LinAlgError: not PD
        self.l_minus_eye = chol - np.eye(chol.shape[0])
        self.log_det = 2 * float(np.sum(np.log(self.root))) + 2 * float(
            np.sum(np.log(np.diag(chol))))

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(n, d) draws and their log densities."""
        z = rng.standard_normal((n, self.mean.size))
        x = self.mean + self.root * (z + ((z @ self.q) @ self.l_minus_eye.T) @ self.q.T)
        log_q = -0.5 * (self.mean.size * np.log(2 * np.pi) + self.log_det
                        + np.sum(z * z, axis=1))
        return x, log_q

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """The mean and the (d, d) covariance."""
        cov = np.diag(self.alpha) + self.w @ self.m @ self.w.T
        return self.mean, 0.5 * (cov + cov.T)


def _iterate_gaussians(points: np.ndarray, grads: np.ndarray, history_size: int):
    """The Gaussian of each iterate after the first, in order (None where its
    inverse-Hessian estimate is singular), from the (s, y) pairs of the path up to it."""
    alpha, pairs = np.ones(points.shape[1]), []
    for l in range(1, len(points)):
        s, y = points[l] - points[l - 1], grads[l - 1] - grads[l]
        if _curvature_ok(y, s):
            alpha = _update_diagonal(alpha, y, s)
            pairs = (pairs + [(s, y)])[-int(history_size):]
        try:
            yield _LowRankGaussian(points[l], grads[l], alpha, *_inverse_hessian(alpha, pairs))
        except np.linalg.LinAlgError:
            yield None


def pathfinder(model: Any, *, seed: int = 0, start: np.ndarray | None = None,
               history_size: int = 5, elbo_draws: int = 25, max_lbfgs_iter: int = 1000,
               gtol: float = 1e-8, ftol: float = 1e-12,
               seconds: float | None = None) -> GaussianApproximation:
    """Single-path Pathfinder on ``model``'s posterior in the unconstrained space.

    ``start`` defaults to Stan's uniform(-2, 2) draw from ``seed``; ``history_size`` and
    ``elbo_draws`` default to Stan's (5 and 25).  Diagnostics: ``iterations`` (L-BFGS
    iterates), ``converged`` (L-BFGS's own criterion), ``elbo_trace`` (one per iterate,
    -inf where the Gaussian was not usable), ``best_iteration``, ``gradient_evaluations``,
    ``density_evaluations``, ``seconds``.  ``seconds`` (None: no limit): raise
    :class:`PathfinderOutOfTime` once so many have passed before the end.
    """
    for name, value in (("history_size", history_size), ("elbo_draws", elbo_draws)):
        if int(value) != value or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x0 = initial_point(model, start, rng)
    density = joint_density(model)
    seen: dict[bytes, tuple[float, np.ndarray]] = {}
    calls = [0]

    def negative(u):
        calls[0] += 1
        lp, grad = density(u[None, :], True)
        seen[u.tobytes()] = (float(lp[0]), grad[0].copy())
        if not np.isfinite(lp[0]) or not np.all(np.isfinite(grad[0])):
            return np.inf, np.zeros_like(u)
        return -float(lp[0]), -grad[0]

    path = [x0.copy()]

    def in_time(where: str) -> None:
        if seconds is not None and time.perf_counter() - t0 > seconds:
            raise PathfinderOutOfTime(f"pathfinder: not ended after {seconds:.3g} s ({where})")

    def keep(xk):
        path.append(np.array(xk, dtype=float))
        in_time(f"L-BFGS at iterate {len(path) - 1}")

    result = optimize.minimize(negative, x0, jac=True, method="L-BFGS-B", callback=keep,
                               options={"maxiter": int(max_lbfgs_iter), "maxcor":
                                        int(history_size), "gtol": gtol, "ftol": ftol})
    points = np.array(path)
    if np.max(np.abs(points[-1])) > 1e6 * max(1.0, float(np.max(np.abs(x0)))):
        raise ApproximationError("pathfinder: L-BFGS ran off to infinity (is the posterior "
                                 "improper or its density unbounded?)")
    grads = np.empty_like(points)
    for i, u in enumerate(points):
        if u.tobytes() not in seen:
            negative(u)
        grads[i] = seen[u.tobytes()][1]

    candidates, trace = [], []
    for l, q in enumerate(_iterate_gaussians(points, grads, history_size), start=1):
        candidates.append(q)
        if q is None:
            trace.append(-np.inf)
            continue
        in_time(f"the ELBO of iterate {l} of {len(points) - 1}")
        draws, log_q = q.sample(rng, int(elbo_draws))
        lp, _ = density(draws, False)
        with np.errstate(invalid="ignore"):
            elbo = float(np.mean(lp - log_q))
        trace.append(elbo if np.isfinite(elbo) else -np.inf)
    if not trace or not np.any(np.isfinite(trace)):
        raise ApproximationError("pathfinder: no iterate of the L-BFGS path gave a Gaussian "
                                 "with a finite ELBO (the start may already be the mode, the "
                                 "density may be flat (improper), or not finite near the "
                                 "path); try another start")
    best = int(np.argmax(trace))
    mean, cov = candidates[best].dense()
    diagnostics = {"iterations": len(points) - 1, "converged": bool(result.success),
                   "message": str(result.message), "elbo_trace": np.asarray(trace),
                   "best_iteration": best + 1, "gradient_evaluations": calls[0],
                   "density_evaluations": len(trace) * int(elbo_draws),
                   "seconds": time.perf_counter() - t0}
    return GaussianApproximation(mean, cov, method="pathfinder",
                                 diagnostics=diagnostics)

"""log p(y) of posteriordb's radon_hierarchical_intercept_centered on a data set, by
quadrature: given the two scales the model is linear-Gaussian, so

    y | sigma_alpha, sigma_y ~ N(0, sigma_y^2 I + U D U'),   U = [Z, 1, X],
    D = diag(sigma_alpha^2 (J times), 10^2, 10^2, 10^2)

(Z the county indicator, X the two covariates; alpha = mu_alpha + sigma_alpha z), and
log p(y) = log of the double integral of that density against two half-normal(0, 1)
densities, on a grid in (log sigma_alpha, log sigma_y) centred at the mode (+-10 of the
curvature's sds; a grid twice as fine must agree to 1e-6 nats).  With the normalised
half-normals, this is the log p(y) the Gaussian path's sandwich is on after subtracting
log c = log(1/4).

    PYTHONPATH=$PWD nice python scripts/studies/radon_exact_log_ml.py DATA.json RUN_DIR

reads the model's data (county_idx, log_uppm, floor_measure) and the run's simulated
log_radon (RUN_DIR/run.json), and prints log p(y) with the run's sandwich.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from scipy import linalg, optimize, special


def log_lik_factory(data: dict, y: np.ndarray):
    idx = np.asarray(data["county_idx"]) - 1
    n, J = y.size, int(data["J"])
    U = np.zeros((n, J + 3))
    U[np.arange(n), idx] = 1.0
    U[:, J] = 1.0
    U[:, J + 1] = data["log_uppm"]
    U[:, J + 2] = data["floor_measure"]
    UtU, Uty, yty = U.T @ U, U.T @ y, float(y @ y)

    def log_lik(log_sa: float, log_sy: float) -> float:
        sa2, sy2 = np.exp(2 * log_sa), np.exp(2 * log_sy)
        d = np.concatenate([np.full(J, sa2), [100.0, 100.0, 100.0]])
        inner = np.diag(1 / d) + UtU / sy2
        chol = linalg.cholesky(inner, lower=True)
        b = linalg.solve_triangular(chol, Uty / sy2, lower=True)
        logdet = n * np.log(sy2) + np.sum(np.log(d)) + 2 * np.sum(np.log(np.diag(chol)))
        quad = yty / sy2 - b @ b
        return float(-0.5 * (n * np.log(2 * np.pi) + logdet + quad))
    return log_lik


def log_half_normal(log_s: float) -> float:   # density of log s, s ~ half-normal(0, 1)
    s = np.exp(log_s)
    return float(np.log(2) - 0.5 * np.log(2 * np.pi) - 0.5 * s * s + log_s)


def log_ml(data: dict, y: np.ndarray, points: int) -> float:
    log_lik = log_lik_factory(data, y)

    def neg(v):
        return -(log_lik(*v) + log_half_normal(v[0]) + log_half_normal(v[1]))
    mode = optimize.minimize(neg, x0=[np.log(0.3), np.log(0.7)], method="Nelder-Mead",
                             options={"xatol": 1e-8, "fatol": 1e-10}).x
    h = 1e-3
    sds = []
    for k in range(2):
        e = np.zeros(2)
        e[k] = h
        curv = (neg(mode + e) - 2 * neg(mode) + neg(mode - e)) / h ** 2
        sds.append(1 / np.sqrt(curv))
    grids = [np.linspace(m - 10 * s, m + 10 * s, points) for m, s in zip(mode, sds)]
    values = np.array([[-neg((a, b)) for b in grids[1]] for a in grids[0]])
    da, db = grids[0][1] - grids[0][0], grids[1][1] - grids[1][0]
    w0 = np.full(points, da)
    w0[[0, -1]] /= 2
    w1 = np.full(points, db)
    w1[[0, -1]] /= 2
    return float(special.logsumexp(values + np.log(w0)[:, None] + np.log(w1)[None, :]))


def main(data_path: str, run_dir: str) -> None:
    data = json.load(open(data_path))
    run = json.load(open(f"{run_dir}/run.json"))
    y = np.asarray(run["extra"]["simulated_data"]["log_radon"], dtype=float)
    coarse, fine = log_ml(data, y, 41), log_ml(data, y, 81)
    assert abs(coarse - fine) < 1e-6, (coarse, fine)
    print(f"log p(y) = {fine:.4f} (grid 81 x 81; 41 x 41 gives {coarse:.6f})")


if __name__ == "__main__":
    main(*sys.argv[1:])

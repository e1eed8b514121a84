"""Stan's default starting points (:func:`bread_stan.workflows.fit.stan_inits`): uniform(-2,
2) on the unconstrained scale, a chain drawing again where the density or its gradient is
not finite, as Stan does.  Exact, on a target that is finite only where x[0] > 1 (a
quarter of the box): every start is there, the draws where all are finite are the plain
uniform ones, and a target finite nowhere is refused in one line.  Break tried: no
redraw (the first draws returned as they are) fails the first test."""

from __future__ import annotations

import numpy as np
import pytest

from bread_stan.errors import InputError
from bread_stan.target import Evaluation
from bread_stan.workflows.fit import INIT_TRIES, stan_inits


class _HalfLine:
    """A standard normal in d dimensions, restricted to x[0] > ``edge``."""

    def __init__(self, dim: int, edge: float):
        self.dim, self.edge = dim, edge

    def evaluate(self, points, *, gradient=True):
        x = np.asarray(points, dtype=float)
        inside = x[:, 0] > self.edge
        lp = np.where(inside, -0.5 * np.sum(x ** 2, axis=1), -np.inf)
        grad = np.where(inside[:, None], -x, np.nan) if gradient else None
        return Evaluation(lp, np.zeros(len(x)), grad, np.zeros_like(x) if gradient else None)


def test_every_start_is_where_the_density_is_finite_and_the_rest_are_plain_uniform():
    target = _HalfLine(3, 1.0)
    inits = stan_inits(target, 200, np.random.default_rng(4))
    assert inits.shape == (200, 3) and np.all(inits[:, 0] > 1.0)
    assert np.all(np.abs(inits) <= 2.0)
    # the redrawn coordinate is uniform on (1, 2): its mean is 1.5 (sd of the mean 0.02)
    assert abs(np.mean(inits[:, 0]) - 1.5) < 4 * (1 / np.sqrt(12)) / np.sqrt(200)
    everywhere = _HalfLine(3, -np.inf)
    np.testing.assert_array_equal(stan_inits(everywhere, 5, np.random.default_rng(1)),
                                  np.random.default_rng(1).uniform(-2, 2, size=(5, 3)))


def test_a_model_finite_nowhere_in_the_box_is_refused_in_one_line():
    with pytest.raises(InputError, match=f"in {INIT_TRIES} draws of uniform\\(-2, 2\\)"):
        stan_inits(_HalfLine(2, 3.0), 4, np.random.default_rng(0))

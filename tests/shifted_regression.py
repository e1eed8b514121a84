"""The conjugate regression with an unnormalised prior, shared by the waypoint and
Gaussian-path tests: the program prior's density times c, log c = LOG_C."""

from __future__ import annotations

from bread_stan.exact.conjugate import simulate_regression
from bread_stan.target import Evaluation

LOG_C = -3.0  # the program prior's normaliser, log c


class ShiftedPrior:
    """The regression with its prior density times c (an unnormalised program prior)."""

    def __init__(self, model):
        self.model = model

    @property
    def dim(self):
        return self.model.dim

    def evaluate(self, points, *, gradient=True):
        ev = self.model.evaluate(points, gradient=gradient)
        return Evaluation(ev.log_prior + LOG_C, ev.log_lik, ev.grad_prior, ev.grad_lik)


def regression_model():
    """The tests' regression: 20 observations, 3 correlated predictors."""
    model, _ = simulate_regression(20, 3, correlation=0.6, prior_sd=1.5, noise_sd=0.7, seed=5)
    return model

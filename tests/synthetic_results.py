"""Small synthetic BREAD results for the report and display tests: two directions of 30
chains around log p(y) = -10 with a chosen gap, nothing run."""

from __future__ import annotations

import numpy as np

from bread_stan.ais.results import DirectionResult, StepResult


def synthetic_step(n_steps: int, gap: float, seed: int, n: int = 30) -> StepResult:
    """A step at ``n_steps`` distributions whose forward and reverse estimates sit
    ``gap`` apart around -10 (sd 0.05 each)."""
    rng = np.random.default_rng(seed)
    lower = -10.0 - gap / 2 + 0.05 * rng.standard_normal(n)
    upper = -10.0 + gap / 2 + 0.05 * rng.standard_normal(n)
    at = np.array([n_steps - 1])
    return StepResult(n_steps,
                      DirectionResult(lower, 0.1 * n_steps, 100 * n_steps, {}, lower[:, None], at),
                      DirectionResult(upper, 0.1 * n_steps, 100 * n_steps, {}, upper[:, None], at),
                      np.linspace(0, 1, n_steps))

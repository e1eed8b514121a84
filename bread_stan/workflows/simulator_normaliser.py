"""The Gaussian path's prior normaliser from the simulator, when it computes it.

A drafted simulator reports log c of the model's prior (:mod:`bread_stan.stan.draft.normaliser`:
exact factors, and the tries of its rejection loop when a prior is truncated by its
bounds); :func:`simulator_normaliser` turns that into the run's
:class:`~bread_stan.ais.prior_normaliser.NormaliserEstimate`
(:func:`~bread_stan.ais.known_normaliser.known_log_normaliser`), or says it cannot:
a simulator that does not report it (written by hand, or one whose prior the drafter
could not account for exactly), one drafted from another program (``compare`` runs the
first program's simulator beside the others; the drafter's digest of the prior's blocks
must match the program run), or one run with given hyperparameters (its draws are then
not from the model's prior), where c is estimated by importance sampling as before.
"""

from __future__ import annotations

import logging
from typing import Mapping

import numpy as np

from ..ais.known_normaliser import known_log_normaliser, tries_needed
from ..ais.prior_normaliser import NormaliserEstimate
from ..stan.draft import DIGEST_TAG, LOG_C_EXACT, PRIOR_TRIES, prior_digest
from ..stan.simulator import Simulator

__all__ = ["simulator_normaliser"]

log = logging.getLogger(__name__)


def simulator_normaliser(simulator: Simulator, draws: Mapping[str, np.ndarray], seed: int,
                         model_code: str) -> NormaliserEstimate | None:
    """log c of the program ``model_code`` from the simulator's own account in ``draws``
    (its prior draws; with a rejection loop they are the pilot that sets how many fresh
    draws, seeded ``seed``, estimate the acceptance probability), or None when it gives
    none for that program."""
    if LOG_C_EXACT not in draws:
        return None
    digest = prior_digest(model_code)
    if digest is None or f"{DIGEST_TAG} {digest}\n" not in simulator.compiled.program.code:
        log.info("the simulator's exact prior normaliser is not used: it was drafted from "
                 "a program whose prior blocks differ from this one's")
        return None
    if simulator.hyper_given:
        log.info("the simulator's exact prior normaliser is not used: the hyperparameters "
                 "are given, so its draws are not from the model's prior")
        return None
    if PRIOR_TRIES not in draws:
        return known_log_normaliser(draws[LOG_C_EXACT])
    n = tries_needed(draws[PRIOR_TRIES])
    exact, tries = _columns(simulator, n, seed, [LOG_C_EXACT, PRIOR_TRIES]).T
    return known_log_normaliser(exact, tries)


def _columns(simulator: Simulator, n: int, seed: int, names: list[str]) -> np.ndarray:
    """The scalar outputs ``names`` of draws 0 .. n - 1 (n, len(names)), simulated in
    batches so that the simulated data of many draws are never held at once."""
    where = [simulator.names.index(name) for name in names]
    batch = simulator.batch_size
    return np.concatenate([simulator.simulate_flat(min(batch, n - start), seed,
                                                   first=start)[:, where]
                           for start in range(0, n, batch)])

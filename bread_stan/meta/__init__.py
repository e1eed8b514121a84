"""AIDE's algorithms and estimator: how far an inference algorithm's output is from a
gold standard's.

The algorithms (:mod:`.algorithms`; MCMC in :mod:`.mcmc`) and the estimator (:mod:`.estimator`) work on any
:class:`~bread_stan.target.Target` or Stan model.  The one call a user makes on a Stan
program and data is :func:`bread_stan.aide` (:func:`bread_stan.workflows.aide.aide`),
which builds these algorithms and runs the estimator.
"""

from .algorithms import (AISAlgorithm, AlgorithmRuns, Cost, InferenceAlgorithm, MetaInference,
                         ReferenceAlgorithm, SIRAlgorithm, SMCAlgorithm, TractableAlgorithm)
from .estimator import AIDEResult, GoldSide, estimate_aide, gold_side
from .mcmc import MCMC_STARTS, MCMCAlgorithm, StartDistribution, density_start, uniform_start

__all__ = ["AISAlgorithm", "AlgorithmRuns", "Cost", "InferenceAlgorithm", "MetaInference",
           "ReferenceAlgorithm", "SIRAlgorithm", "SMCAlgorithm", "TractableAlgorithm", "AIDEResult",
           "GoldSide",
           "estimate_aide", "gold_side", "MCMCAlgorithm", "MCMC_STARTS", "StartDistribution",
           "density_start", "uniform_start"]


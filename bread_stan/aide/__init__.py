"""AIDE: how far an inference algorithm's output is from a gold standard's (SPEC 7.3).

The algorithms (:mod:`.algorithms`) and the estimator (:mod:`.estimator`) work on any
:class:`~bread_stan.target.Target` or Stan model.  The package itself is callable:
``bread_stan.aide(model, data, gold=..., target=...)`` is
:func:`bread_stan.workflows.aide.aide` (Stan program and data in, result saved), so the
subpackage and the one call a user makes share their name without shadowing each other.
"""

import sys
import types

from .algorithms import (AISAlgorithm, AlgorithmRuns, Cost, InferenceAlgorithm, MetaInference,
                         ReferenceAlgorithm, SIRAlgorithm, SMCAlgorithm, TractableAlgorithm)
from .estimator import AIDEResult, GoldSide, estimate_aide, gold_side

__all__ = ["AISAlgorithm", "AlgorithmRuns", "Cost", "InferenceAlgorithm", "MetaInference",
           "ReferenceAlgorithm", "SIRAlgorithm", "SMCAlgorithm", "TractableAlgorithm", "AIDEResult", "GoldSide",
           "estimate_aide", "gold_side"]


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        """``bread_stan.aide(...)``: :func:`bread_stan.workflows.aide.aide`."""
        from ..workflows.aide import aide  # the workflow sits above this package
        return aide(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

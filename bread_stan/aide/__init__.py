"""AIDE: how far an inference algorithm's output is from a gold standard's (SPEC 7.3)."""

from .algorithms import (AISAlgorithm, AlgorithmRuns, Cost, InferenceAlgorithm, MetaInference,
                         ReferenceAlgorithm, SIRAlgorithm, TractableAlgorithm)
from .estimator import AIDEResult, GoldSide, estimate_aide, gold_side

__all__ = ["AISAlgorithm", "AlgorithmRuns", "Cost", "InferenceAlgorithm", "MetaInference",
           "ReferenceAlgorithm", "SIRAlgorithm", "TractableAlgorithm", "AIDEResult", "GoldSide",
           "estimate_aide", "gold_side"]

"""Fast Gaussian approximations of a posterior in the unconstrained space.

Laplace (:func:`laplace`), ADVI mean-field and full-rank (:func:`advi`) and single-path
Pathfinder (:func:`pathfinder`) each return a :class:`GaussianApproximation`: a normalised
Gaussian N(mean, cov) in the model's unconstrained space with exact draws, its log
density, draws in Stan's shapes and an ArviZ export.  ``model`` is a
:class:`~bread_stan.stan.model.StanModel` (its log density with the Jacobian, all
constants) or any :class:`~bread_stan.target.Target` (log prior plus log likelihood).
"""

from .advi import advi
from .gaussian import ApproximationError, GaussianApproximation
from .laplace import laplace
from .methods import METHODS, approximate
from .pathfinder import PathfinderOutOfTime, pathfinder

__all__ = ["GaussianApproximation", "ApproximationError", "laplace", "advi", "pathfinder",
           "PathfinderOutOfTime", "METHODS", "approximate"]

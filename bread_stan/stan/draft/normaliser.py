"""The prior's normaliser c, computed by the drafted simulator where the drafter can
prove it.

c is the integral of the program's prior density (the ``~`` statements on parameters,
all constants, over the declared support; the Jacobian does not change it).  The
drafter draws every prior from a normalised distribution, and for each statement it
knows the ratio of the program's density to the one it draws from, a constant per
element whose count only the program knows at run time (sizes are data).  So the
simulator computes log c itself: ``bread_log_c_exact_`` (a generated quantity, the
same in every draw) sums, over the statements as they run (inside their loops):

* a half distribution, ``|draw|`` of a distribution symmetric about 0 on a
  ``<lower=0>`` parameter: log(1/2) per element (with ``T[0, ]`` Stan divides by the
  mass above 0 itself: 0);
* sorted iid draws of an ``ordered`` or ``positive_ordered`` vector of K elements:
  -log K! (the iid density on the ordered cone, not renormalised);
* a parameter bounded on both sides without a density (density 1): log(U - L) per
  element; a simplex of K elements without a density: -log Gamma(K) (the volume of the
  simplex in the first K - 1 coordinates: Stan 2.35's stick-breaking coordinates, and
  the isometric log-ratio ones of Stan 2.39, whose Jacobian keeps that measure: checked
  by importance sampling, -1.7926 +- 0.0012 against -log 3! for K = 4);
* a constant term that reading ``target += ... - 1 * student_t_lccdf(0 | 3, 0, 2.5)``
  as a ``~`` statement dropped (:mod:`.targets`; brms's normaliser of a half
  distribution): the term itself, once per run of its statement;
* everything else: 0 (a normalised density on exactly the declared support, a
  ``uniform(a, b)`` whose interval the bounds do not cut, the constrained matrices and
  vectors with their own densities: checked by importance sampling in Stan 2.35's
  coordinates, ``scripts/figures/constrained_normalisers/results.md``).

A prior truncated by its declared bounds (:func:`.restrict.rejection_loop`) loses the
mass the bounds cut away: the simulator redraws until they hold, and the acceptance
probability is exactly the remaining factor of c.  ``bread_prior_tries_`` records how
many tries each draw took (Geometric with that probability), for the caller to
estimate it.  What the drafter cannot prove (a ``corr_matrix`` without a density, a
name clash) leaves both quantities out; the caller then estimates c as before.
"""

from __future__ import annotations

import hashlib

from ...errors import DraftError
from .parse import Decl, Stmt, parse_program, tokenize
from .support import Type

__all__ = ["LOG_C_EXACT", "PRIOR_TRIES", "DIGEST_TAG", "Normaliser", "prior_digest"]

LOG_C_EXACT = "bread_log_c_exact_"
PRIOR_TRIES = "bread_prior_tries_"
# The simulator's comment naming the program its c belongs to (compare runs one drafted
# simulator beside other programs, whose priors may differ).
DIGEST_TAG = "// prior normaliser drafted for the program with prior digest"
_PRIOR_BLOCKS = ("functions", "transformed data", "parameters", "transformed parameters",
                 "model")


def prior_digest(source: str) -> str | None:
    """A digest of the blocks that define a program's prior (all but data and generated
    quantities, whitespace aside), or None when the drafter cannot parse it."""
    try:
        program = parse_program(source)
    except DraftError:
        return None
    text = "\n".join(f"{b}:{' '.join(program.block_text(b).split())}" for b in _PRIOR_BLOCKS
                     if b in program.spans)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
# Constrained types whose Stan densities integrate to 1 in Stan's coordinates (checked
# by importance sampling: scripts/studies/constrained_normalisers.py).
NORMALISED = {"simplex", "cholesky_factor_corr", "corr_matrix", "cov_matrix",
              "cholesky_factor_cov"}


class Normaliser:
    """What the translator learns of log c, statement by statement: the simulator's
    lines adding each factor, or why c is not known exactly."""

    def __init__(self, source: str, constants: dict[int, list[str]]):
        names = {t.text for t in tokenize(source) if t.kind == "id"}
        clash = sorted({LOG_C_EXACT, PRIOR_TRIES} & names)
        self.unavailable: str | None = (f"the program uses the name {clash[0]}"
                                        if clash else None)
        self.constants = {k: list(v) for k, v in constants.items()}

    def refuse(self, why: str) -> None:
        if self.unavailable is None:
            self.unavailable = why

    def tilde(self, s: Stmt, decl: Decl, half: bool, ordered: bool, lhs_type: Type,
              lhs: str) -> list[str]:
        """The lines adding the log factor of the prior statement ``s`` on ``decl`` (its
        left side ``lhs``, of type ``lhs_type``, drawn with ``|draw|`` when ``half``,
        sorted when ``ordered``) and the constant terms its ``target +=`` had (brms's
        ``- 1 * student_t_lccdf(0 | 3, 0, 2.5)``), added once per statement."""
        lines = []
        for term in self.constants.pop(s.line, []):
            names = {t.text for t in tokenize(term) if t.kind == "id"}
            if len(names) != 1:   # the cdf alone: no variable the simulator may lack
                self.refuse(f"line {s.line}'s constant term {term} reads variables")
            lines.append(f"{LOG_C_EXACT} += {term};")
        factor = self._factor(s, decl, half, ordered, lhs_type, lhs)
        return lines + ([factor] if factor else [])

    def _factor(self, s: Stmt, decl: Decl, half: bool, ordered: bool, lhs_type: Type,
                lhs: str) -> str | None:
        count = "" if lhs_type.scalar else f"num_elements({lhs}) * "
        if ordered:
            if decl.bounds:
                self.refuse(f"{decl.name} is {decl.base} with bounds")
            # a real argument: Stan 2.39's lgamma of an integer is ambiguous in C++
            return f"{LOG_C_EXACT} -= lgamma(num_elements({lhs}) + 1.0);"
        if half:
            return None if s.truncation is not None else \
                f"{LOG_C_EXACT} += {count}log(0.5);"
        if decl.base not in NORMALISED and decl.base not in (
                "real", "vector", "row_vector", "matrix"):
            self.refuse(f"the density of {decl.base} {decl.name} is not known to "
                        "integrate to 1 in Stan's coordinates")
        return None

    def uniform(self, decl: Decl) -> str | None:
        """The line adding the log normaliser of a parameter without a density (drawn
        uniformly by :func:`.units.uniform_unit`)."""
        count = "".join(f"({d.text}) * " for d in decl.dims)
        if decl.base == "simplex":
            return f"{LOG_C_EXACT} -= {count}lgamma(1.0 * ({decl.sizes[0].text}));"
        if decl.base in ("real", "vector", "row_vector"):
            low, high = decl.bounds["lower"].text, decl.bounds["upper"].text
            n = "" if not decl.dims and not decl.sizes else f"num_elements({decl.name}) * "
            return f"{LOG_C_EXACT} += {n}log(({high}) - ({low}));"
        self.refuse(f"{decl.base} {decl.name} has no density (the volume of its support "
                    "is not computed)")
        return None

    def finish(self, lines: list[str]) -> list[str]:
        """The simulator's lines without the factors when c is not known exactly."""
        if self.unavailable is None:
            return lines
        return [x for x in lines if LOG_C_EXACT not in x]

    def outputs(self, rejection: bool) -> list[str]:
        """The generated quantities' declarations (none when c is not known exactly)."""
        if self.unavailable is not None:
            return []
        return [f"  real {LOG_C_EXACT};"] + ([f"  int<lower=1> {PRIOR_TRIES};"]
                                             if rejection else [])

    def note(self, rejection: bool) -> str:
        """The simulator's comment on c."""
        if self.unavailable is not None:
            return (f"// The prior's normaliser c is not computed here ({self.unavailable}):"
                    " estimate it otherwise.")
        text = f"// log c of the model's prior: {LOG_C_EXACT} (exact)"
        if rejection:
            text += (f", plus the log of the acceptance probability of the rejection loop "
                     f"(each draw's tries in {PRIOR_TRIES})")
        return text + "."

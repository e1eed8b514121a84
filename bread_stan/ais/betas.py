"""Inverse-temperature schedules 0 = b_1 < ... < b_T = 1 for the annealing path.

- :func:`linear`: equal steps in beta.
- :func:`sigmoidal`: the sigmoid schedule of the AIS/BDMC papers (Grosse et al.
  2015, Wu et al. 2017): ``b_t ∝ sigmoid(delta * (2 t / (T - 1) - 1))``, rescaled
  to run from exactly 0 to exactly 1; larger ``sharpness`` (delta) puts more
  temperatures near both ends.
- :func:`geometric`: 0 followed by ``T - 1`` log-spaced values from ``start`` to 1,
  for likelihoods that dominate the prior already at small beta.
- :func:`thermodynamic`: equal shares of the path's thermodynamic length, from a
  curve of the log likelihood's standard deviation along beta (measured by the
  pilot chains: the "adaptive" schedule).
- :func:`validate`: any user array, checked.
- :class:`Betas`: any of the families above computed on demand, block by
  block, bit for bit equal to the arrays: memory flat in T.

:class:`ScheduleSpec` names a schedule family and its settings so a run can
build one schedule per number of temperatures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..errors import InputError

__all__ = ["ScheduleError", "linear", "sigmoidal", "geometric", "thermodynamic", "validate",
           "ScheduleSpec", "Betas", "thermodynamic_length", "length_so_far"]


class ScheduleError(InputError):
    """A schedule that does not run strictly upwards from 0 to 1."""


def _check_count(n_temperatures: int) -> int:
    if int(n_temperatures) != n_temperatures or n_temperatures < 2:
        raise ScheduleError(f"a schedule needs at least 2 temperatures, got {n_temperatures}")
    return int(n_temperatures)


def validate(betas) -> np.ndarray:
    """Return ``betas`` as a float array after checking it is a valid schedule.

    Valid: one-dimensional, at least two entries, finite, starting at exactly 0,
    ending at exactly 1, strictly increasing.
    """
    b = np.asarray(betas, dtype=float)
    if b.ndim != 1 or b.size < 2:
        raise ScheduleError(f"a schedule must be a 1-d array of at least 2 betas, got shape {b.shape}")
    if not np.all(np.isfinite(b)):
        raise ScheduleError(f"schedule has non-finite betas at positions {np.flatnonzero(~np.isfinite(b))[:5].tolist()}")
    if b[0] != 0.0:
        raise ScheduleError(f"schedule must start at beta = 0 (the prior), starts at {b[0]!r}")
    if b[-1] != 1.0:
        raise ScheduleError(f"schedule must end at beta = 1 (the posterior), ends at {b[-1]!r}")
    steps = np.diff(b)
    if np.any(steps <= 0):
        i = int(np.flatnonzero(steps <= 0)[0])
        raise ScheduleError(f"schedule must be strictly increasing; b[{i}] = {b[i]!r} >= b[{i + 1}] = {b[i + 1]!r}")
    return b


def linear(n_temperatures: int) -> np.ndarray:
    """Equally spaced betas from 0 to 1."""
    return np.asarray(Betas("linear", n_temperatures))


def sigmoidal(n_temperatures: int, sharpness: float = 4.0) -> np.ndarray:
    """The sigmoid schedule, rescaled to [0, 1]; ``sharpness`` > 0."""
    return np.asarray(Betas("sigmoid", n_temperatures, sharpness=sharpness))


def geometric(n_temperatures: int, start: float = 1e-4) -> np.ndarray:
    """0, then ``T - 1`` geometrically spaced betas from ``start`` to 1."""
    return np.asarray(Betas("geometric", n_temperatures, start=start))


def _linspace_at(start: float, stop: float, num: int, index: np.ndarray) -> np.ndarray:
    """Entries ``index`` of ``np.linspace(start, stop, num)``, bit for bit (the same
    operations: ``i * ((stop - start) / (num - 1)) + start``, the last set to stop)."""
    y = index.astype(float) * np.float64((stop - start) / (num - 1)) + start
    y[index == num - 1] = stop
    return y


def _segment_lengths(grid: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, float]:
    """Lengths of the grid intervals under the interpolated sd curve, and the
    first interval's crossover beta (inf: sd taken linear there)."""
    g, s = grid, sd
    lengths = np.empty(g.size - 1)
    # [0, g_1]: s(b) = s_0 / (1 + b / b*) through both ends when s falls (the
    # shape of a Gaussian posterior narrowing as b grows), else linear.
    if s[0] > s[1]:
        crossover = g[1] / (s[0] / s[1] - 1.0)
        lengths[0] = s[0] * crossover * np.log1p(g[1] / crossover)
    else:
        crossover = np.inf
        lengths[0] = 0.5 * (s[0] + s[1]) * g[1]
    # Later intervals: a power law s(b) = s_i (b / g_i)^k through both ends.
    k = np.log(s[2:] / s[1:-1]) / np.log(g[2:] / g[1:-1])
    ratio = g[2:] / g[1:-1]
    near_log = np.abs(k + 1.0) < 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        power = (ratio ** (k + 1.0) - 1.0) / (k + 1.0)
    lengths[1:] = s[1:-1] * g[1:-1] * np.where(near_log, np.log(ratio), power)
    return lengths, crossover


def thermodynamic(n_temperatures: int, grid_betas, loglik_sd) -> np.ndarray:
    """Betas at equal increments of the thermodynamic length of the path.

    The length is ``L = int_0^1 sqrt(Var_b[log lik]) db`` (Var_b under the
    tempered posterior at b).  The AIS log weight gains ``(b_t - b_{t-1}) *
    log_lik`` at each step; to first order in the step, the variance of that
    increment is ``(b_t - b_{t-1})^2 Var_b[log lik]``, and so is twice the
    step's contribution to the gap (the bound), which is its squared length.
    For a fixed total length, a sum of squared increments is smallest when they
    are all equal (Cauchy-Schwarz), giving the gap about ``L^2 / (2 T)``: the
    schedule places its betas so each step carries ``L / (T - 1)``.

    ``loglik_sd`` is the standard deviation of the log likelihood at the
    ``grid_betas`` (0 = g_0 < g_1 < ... < 1, as the pilot's).  Between grid
    points after g_1 it is taken as a power law in beta (the posterior's spread
    shrinks like a power of beta once the likelihood dominates); on [0, g_1],
    below the pilot's first nonzero beta, as ``s_0 / (1 + b / b*)`` through both
    measured ends, the shape for a Gaussian whose prior gives way to the
    likelihood around ``b*`` (linear if the sd rises instead).  Both integrate
    and invert in closed form, so the schedule is a deterministic function of
    ``T`` and the curve.
    """
    return np.asarray(Betas("adaptive", n_temperatures, grid_betas=grid_betas,
                            loglik_sd=loglik_sd))


def thermodynamic_length(grid_betas, loglik_sd) -> float:
    """The path's thermodynamic length ``L = int_0^1 sd_b(log lik) db`` from a
    measured sd curve, interpolated as :func:`thermodynamic` does (its gap at T
    distributions is about ``L^2 / (2 T)``)."""
    return float(_LengthCurve(grid_betas, loglik_sd).edges[-1])


def length_so_far(grid_betas, loglik_sd) -> float:
    """The thermodynamic length of the part of the path a pilot has measured so far:
    ``grid_betas`` from 0 upward (not yet at 1), interpolated as :func:`thermodynamic`
    does.  The rest of the path can only add to it."""
    g = np.asarray(grid_betas, dtype=float)
    s = np.asarray(loglik_sd, dtype=float)
    if g.size < 2 or s.shape != g.shape or not np.all(np.isfinite(s) & (s >= 0)) \
            or not s.max() > 0:
        return 0.0
    lengths, _ = _segment_lengths(g, np.maximum(s, 1e-6 * s[s > 0].min()))
    return float(np.sum(lengths))


class _LengthCurve:
    """The thermodynamic length along beta of one measured sd curve, inverted
    elementwise (see :func:`thermodynamic`)."""

    def __init__(self, grid_betas, loglik_sd):
        g = np.asarray(grid_betas, dtype=float)
        s = np.asarray(loglik_sd, dtype=float)
        if g.ndim != 1 or g.size < 2 or s.shape != g.shape:
            raise ScheduleError(f"need matching 1-d grid betas and sds, got {g.shape} and "
                                f"{s.shape}")
        validate(g)
        if not np.all(np.isfinite(s) & (s >= 0)) or not s.max() > 0:
            raise ScheduleError("the log likelihood's sd along beta must be finite, "
                                "non-negative and not all zero; the pilot chains did not "
                                "measure it")
        self.grid, self.sd = g, s
        # A floor keeps every step of positive length (a constant log likelihood
        # somewhere gives sd 0 and would stack betas together); it sits far below the
        # smallest measured sd, so it never flattens a curve spanning many decades.
        self.s = np.maximum(s, 1e-6 * s[s > 0].min())
        lengths, self.crossover = _segment_lengths(g, self.s)
        self.edges = np.concatenate([[0.0], np.cumsum(lengths)])

    def interior(self, n: int, index: np.ndarray) -> np.ndarray:
        """Betas at interior positions ``index`` (1 .. n - 2) of an ``n``-beta
        schedule."""
        g, s, edges = self.grid, self.s, self.edges
        targets = edges[-1] * index / (n - 1)
        seg = np.clip(np.searchsorted(edges, targets, side="right") - 1, 0, g.size - 2)
        r = targets - edges[seg]
        b = np.empty(targets.size)
        first = seg == 0
        if np.isfinite(self.crossover):
            b[first] = self.crossover * np.expm1(r[first] / (s[0] * self.crossover))
        else:  # s(b) = s_0 + c b: solve s_0 b + c b^2 / 2 = r
            c = (s[1] - s[0]) / g[1]
            rf = r[first]
            b[first] = (2.0 * rf / (s[0] + np.sqrt(s[0] ** 2 + 2.0 * c * rf)) if c > 0
                        else rf / s[0])
        i = seg[~first]
        gi, si = g[i], s[i]
        k = np.log(s[i + 1] / si) / np.log(g[i + 1] / gi)
        x = r[~first] / (si * gi)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            b[~first] = np.where(np.abs(k + 1.0) < 1e-9, gi * np.exp(x),
                                 gi * np.maximum(1.0 + x * (k + 1.0), 0.0) ** (1.0 / (k + 1.0)))
        return np.clip(b, 0.0, 1.0)


class Betas:
    """The betas of one schedule family, computed on demand in blocks.

    Memory does not grow with the number of temperatures: entries are computed
    from the family's settings in blocks of ``BLOCK`` (the last few kept), with
    the same floating-point operations as the whole array, so every entry equals
    the full schedule's bit for bit.  ``len``, integer, slice and integer-array
    indexing work as on the array; ``np.asarray(betas)`` builds the whole array
    (T floats).  The schedule is validated (0 first, 1 last, strictly increasing,
    finite) in one streaming pass at construction.  Kinds and settings as
    :class:`ScheduleSpec`; "adaptive" takes ``grid_betas`` and ``loglik_sd``
    (:func:`thermodynamic`).
    """

    BLOCK = 4096
    _CACHED = 4

    def __init__(self, kind: str, n_temperatures: int, *, sharpness: float = 4.0,
                 start: float = 1e-4, grid_betas=None, loglik_sd=None):
        self.kind = kind
        self.n = _check_count(n_temperatures)
        self.sharpness, self.start = float(sharpness), float(start)
        self._curve = None
        if kind == "sigmoid" and not sharpness > 0:
            raise ScheduleError(f"sigmoid sharpness must be positive, got {sharpness}")
        if kind == "geometric" and not 0 < start < 1:
            raise ScheduleError(f"geometric start must lie in (0, 1), got {start}")
        if kind == "sigmoid":
            self._ends = self._sigmoid(np.array([0, self.n - 1]))
        if kind == "adaptive":
            self._curve = _LengthCurve(grid_betas, loglik_sd)
        elif kind not in ("linear", "sigmoid", "geometric"):
            raise ScheduleError(f"unknown schedule kind {kind!r}; use 'linear', 'sigmoid', "
                                "'geometric' or 'adaptive'")
        self._cache: dict[int, np.ndarray] = {}
        self._check()

    def _sigmoid(self, index: np.ndarray) -> np.ndarray:
        x = _linspace_at(-1.0, 1.0, self.n, index)
        return 1.0 / (1.0 + np.exp(-self.sharpness * x))

    def _raw(self, index: np.ndarray) -> np.ndarray:
        """Entries at ``index`` (one block)."""
        n = self.n
        if self.kind == "linear":
            b = _linspace_at(0.0, 1.0, n, index)
        elif self.kind == "sigmoid":
            s0, s1 = self._ends
            b = (self._sigmoid(index) - s0) / (s1 - s0)
        elif self.kind == "geometric":
            if n == 2:
                b = index.astype(float)
            else:  # np.geomspace(start, 1, n - 1) after a leading 0
                m = index - 1
                b = np.power(10.0, _linspace_at(np.log10(self.start), 0.0, n - 1, m))
                b[m == 0] = self.start
        else:
            inner = (index > 0) & (index < n - 1)
            b = np.empty(index.size)
            b[inner] = self._curve.interior(n, index[inner])
        b[index == 0] = 0.0
        b[index == n - 1] = 1.0
        return b

    def _block(self, j: int) -> np.ndarray:
        """Block ``j``: entries ``j * BLOCK`` up to the next block (cached)."""
        block = self._cache.get(j)
        if block is None:
            lo = j * self.BLOCK
            block = self._raw(np.arange(lo, min(lo + self.BLOCK, self.n)))
            if len(self._cache) >= self._CACHED:
                self._cache.pop(next(iter(self._cache)))
            self._cache[j] = block
        return block

    def _check(self) -> None:
        """Validate in one pass over the blocks.  Rounding where an adaptive
        curve is extreme can make neighbouring betas coincide: refused with advice."""
        previous = -np.inf
        for j in range(-(-self.n // self.BLOCK)):
            block = self._block(j)
            if not np.all(np.isfinite(block)):
                raise ScheduleError("schedule has non-finite betas")
            steps = np.diff(np.concatenate([[previous], block]))
            if np.any(steps <= 0):
                i = j * self.BLOCK + int(np.flatnonzero(steps <= 0)[0]) - 1
                if self._curve is not None:
                    raise ScheduleError(
                        f"the adaptive schedule with {self.n} betas has coinciding betas "
                        f"(first at {self[i]:.3g}); use fewer temperatures or another "
                        "schedule")
                raise ScheduleError(f"schedule must be strictly increasing; b[{i}] = "
                                    f"{self[i]!r} >= b[{i + 1}] = {self[i + 1]!r}")
            previous = block[-1]

    def __len__(self) -> int:
        return self.n

    @property
    def size(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and 0 <= key < self.n:
            return float(self._block(int(key) // self.BLOCK)[int(key) % self.BLOCK])
        if isinstance(key, slice):
            return self._gather(np.arange(*key.indices(self.n)))
        index = np.asarray(key)
        if index.ndim == 0:
            i = int(index)
            if not -self.n <= i < self.n:
                raise IndexError(f"beta index {i} out of range for {self.n} temperatures")
            i %= self.n
            return float(self._block(i // self.BLOCK)[i % self.BLOCK])
        return self._gather(index)

    def _gather(self, index: np.ndarray) -> np.ndarray:
        index = np.asarray(index, dtype=np.int64)
        if np.any((index < -self.n) | (index >= self.n)):
            raise IndexError(f"beta index out of range for {self.n} temperatures")
        index = index % self.n
        out = np.empty(index.shape)
        blocks = index // self.BLOCK
        for j in np.unique(blocks):
            at = blocks == j
            out[at] = self._block(int(j))[index[at] % self.BLOCK]
        return out

    def __array__(self, dtype=None, copy=None):
        out = np.concatenate([self._block(j) for j in range(-(-self.n // self.BLOCK))])
        return out if dtype is None else out.astype(dtype)

    def to_dict(self) -> dict:
        """Plain-JSON description from which :meth:`from_dict` rebuilds the schedule."""
        out = {"kind": self.kind, "n_temperatures": self.n, "sharpness": self.sharpness,
               "start": self.start}
        if self._curve is not None:
            out.update(grid_betas=self._curve.grid.tolist(),
                       loglik_sd=self._curve.sd.tolist())
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Betas":
        return cls(data["kind"], data["n_temperatures"], sharpness=data["sharpness"],
                   start=data["start"], grid_betas=data.get("grid_betas"),
                   loglik_sd=data.get("loglik_sd"))

    def __repr__(self) -> str:
        return f"Betas({self.kind!r}, {self.n})"


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule family: ``kind`` is "linear", "sigmoid", "geometric" or "adaptive".

    "adaptive" places betas at equal thermodynamic length (:func:`thermodynamic`)
    using the curve the pilot measured, so it needs the tuned kernel.
    """

    kind: str = "sigmoid"
    sharpness: float = 4.0
    start: float = 1e-4

    def betas(self, n_temperatures: int, tuned=None) -> np.ndarray:
        """The schedule with ``n_temperatures`` betas, as an array.

        ``tuned`` (a :class:`~bread_stan.ais.tuning.TunedKernel`) supplies the
        pilot's log-likelihood curve for the adaptive kind; others ignore it.
        """
        return np.asarray(self.lazy(n_temperatures, tuned))

    def lazy(self, n_temperatures: int, tuned=None) -> Betas:
        """The same schedule as :meth:`betas`, computed on demand (:class:`Betas`):
        what the runs use, so memory does not grow with ``n_temperatures``."""
        if self.kind == "adaptive":
            curve = getattr(tuned, "loglik_sd", None)
            if curve is None:
                raise ScheduleError("the adaptive schedule is chosen from the pilot chains: "
                                    "give the tuned kernel (a pilot-tuned TunedKernel), or "
                                    "use the 'sigmoid' schedule")
            return Betas("adaptive", n_temperatures, grid_betas=tuned.grid_betas,
                         loglik_sd=curve)
        return Betas(self.kind, n_temperatures, sharpness=self.sharpness, start=self.start)

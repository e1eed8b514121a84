"""Per-chain random streams that make results depend on the seed alone.

Every chain owns a ``numpy.random.Generator`` spawned from one
``SeedSequence``: chain ``i`` of stream ``s`` uses the seed sequence with
spawn key ``(s, i)``.  What a chain draws therefore depends only on (seed,
stream, chain index) and on its own history, never on which other chains share
its batch, the batch size, or the number of threads.

Drawing from 100 generators one by one costs a Python call each; to keep the
samplers' overhead small the draws are buffered: each chain fills a block of
numbers from its own generator and hands them out in order.  Buffering does not
change the sequence a chain sees.

A third stream per chain, of log-uniforms, has a generator of its own so that
it can be looked ahead into: :meth:`ChainRandom.peek_log_uniform` shows the
next k values without consuming them and :meth:`ChainRandom.advance_log_uniform`
consumes as many as were used.  A NUTS transition uses a number of them known
only at its end; the native (C++) NUTS is handed a view of the next k and says
how many it used, so the Python and native kernels consume the same numbers.
Because nothing else draws from that generator, how far ahead one looks never
changes the values.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

__all__ = ["ChainRandom", "Purpose", "Stream", "chain_seed_sequences", "derived_seed"]

_BLOCK = 4096
_LOG_UNIFORM_KEY = 7_919  # spawn-key suffix of each chain's log-uniform stream


@enum.unique
class Stream(enum.IntEnum):
    """The spawn-key streams of per-chain generators (the ``stream`` of
    :func:`chain_seed_sequences`); every random stream of the toolkit is named here.

    Scored AIS uses the small streams: step count i of :func:`bread_stan.ais.runs.run`
    uses ``2i`` (forward) and ``2i + 1`` (reverse), so its first step count uses
    ``FORWARD`` and ``REVERSE``.  The others sit a million apart, far above any
    number of step counts, so no two purposes ever draw the same numbers.
    ``SIMULATOR_CHECK`` once shared the fit's number, 2,000,000.
    """

    FORWARD = 0
    REVERSE = 1
    PILOT = 1_000_000            # the tuning's pilot chains
    FIT = 2_000_000              # the NUTS fit's chains
    REVERSE_START = 3_000_000    # the protocol's chain to the reverse starts
    SIMULATOR_CHECK = 4_000_000  # the simulator check's chains
    # Sequential Monte Carlo (bread_stan.ais.smc), s the run's AIS stream: a conditional
    # run's free particles use SMC_FREE + s, each run's ancestor draws SMC_RESAMPLE + 2 s
    # (forward) or + 2 s + 1 (conditional).
    SMC_FREE = 20_000_000
    SMC_RESAMPLE = 30_000_000
    # AIS through a Gaussian waypoint (bread_stan.ais.waypoint): the second leg's chains
    # use WAYPOINT + s (s the first leg's stream); the second leg's pilot chains, and
    # the base's exact draws that start them, their own streams.
    WAYPOINT = 40_000_000
    WAYPOINT_PILOT = 5_000_000
    WAYPOINT_BASE_DRAWS = 6_000_000
    # The IMH kernel's SMC pilot (bread_stan.ais.imh_tuning): its particles' moves use
    # PILOT; its resampling draws this stream's chain 0.
    IMH_PILOT_RESAMPLE = 7_000_000
    # The Gaussian-base path (bread_stan.ais.gaussian_path): the prior normaliser's
    # importance draws (chain 0), and the exact draws of q that start forward chains
    # (chain i of GAUSSIAN_BASE_STARTS + s for forward chain i of stream s).
    PRIOR_NORMALISER = 8_000_000
    GAUSSIAN_BASE_STARTS = 50_000_000
    # The pilot chains that tune the simulator check's kernel at the prior for the
    # Gaussian-base path (whose own pilot never visits the prior).
    CHECK_PRIOR_END = 9_000_000


@enum.unique
class Purpose(enum.Enum):
    """What a seed from :func:`derived_seed` is for: ``(scope, number)``.

    ``number`` is what is hashed with the seed; ``scope`` names the seed it is
    hashed with.  ``run``: the user's seed in ``bread``, ``compare``, ``protocol``
    and ``aide`` (unique numbers, as these meet: protocol uses bread's purposes).
    ``subjective``: the user's seed in ``subjective``, which never runs beside the
    protocol in one job; its numbers 10-14 are the protocol's, kept so that seeded
    results stay as they were.  ``check``: the simulator check's own seed (itself
    ``derived_seed(seed, CHECK)``).  ``aide``: the seed of one AIDE estimate;
    ``algorithm``: the seed of one run of an AIDE algorithm; ``simulator``: the seed of
    one simulator draw (its redraws where the model rejects its parameters).
    """

    # run: bread / compare
    TRUTH = ("run", 0)
    PILOT = ("run", 1)
    PRIOR = ("run", 2)
    CHAINS = ("run", 3)
    CHECK = ("run", 4)
    # run: protocol
    FIT_INIT = ("run", 10)
    FIT = ("run", 11)
    REAL_PILOT = ("run", 12)
    REAL_CHAINS = ("run", 13)
    REVERSE_START = ("run", 14)
    REPLICATE_TRUTH = ("run", 15)
    REPLICATE_PILOT = ("run", 16)
    REPLICATE_CHAINS = ("run", 17)
    PROTOCOL_CHECK = ("run", 18)
    DATA_CHECK = ("run", 19)
    # run: aide
    AIDE_PILOT = ("run", 20)
    AIDE_BASE_FIT = ("run", 21)
    AIDE_APPROXIMATION = ("run", 22)
    AIDE = ("run", 23)
    # run: bread / compare on the Gaussian-base path
    NORMALISER_PRIOR = ("run", 24)  # the exact prior draws the normaliser's proposal fits
    NORMALISER_TRIES = ("run", 25)  # the draws whose rejection tries estimate its factor
    PATHFINDER_BASE = ("run", 26)  # q by Pathfinder where the posterior has no Laplace fit
    # subjective
    SUBJECTIVE_FIT = ("subjective", 10)
    SUBJECTIVE_PILOT = ("subjective", 11)
    SUBJECTIVE_BASE = ("subjective", 12)
    SUBJECTIVE_CHAINS = ("subjective", 13)
    SUBJECTIVE_PICK = ("subjective", 14)
    # check: the simulator check
    CHECK_PRIOR_DRAWS = ("check", 0)
    CHECK_CENTRE = ("check", 1)
    CHECK_PRIOR_CHAINS = ("check", 2)
    CHECK_DATASETS = ("check", 3)
    CHECK_JOINT_CHAINS = ("check", 4)
    CHECK_TUNE = ("check", 5)
    # aide: one AIDE estimate
    GOLD_RUN = ("aide", 1)
    GOLD_META = ("aide", 2)
    TARGET_RUN = ("aide", 3)
    TARGET_META_AT_GOLD = ("aide", 4)
    TARGET_META = ("aide", 5)
    GOLD_META_AT_TARGET = ("aide", 6)
    AIDE_INTERVAL = ("aide", 7)  # the interval's bootstrap
    # algorithm: one run of an AIDE algorithm
    ALGORITHM_BASE = ("algorithm", 0)
    ALGORITHM_CHAINS = ("algorithm", 1)
    ALGORITHM_REVERSE_START = ("algorithm", 2)
    ALGORITHM_REVERSE = ("algorithm", 3)
    ALGORITHM_FREE_PARTICLES = ("algorithm", 4)  # conditional SMC's free particles
    # simulator: the seed of a simulator draw (stan.redraw)
    SIMULATOR_REDRAW = ("simulator", 0)  # the redraws of a draw the model rejects

    @property
    def scope(self) -> str:
        """The seed this purpose is hashed with."""
        return self.value[0]

    @property
    def number(self) -> int:
        """The number hashed with the seed."""
        return self.value[1]

    def __int__(self) -> int:
        return self.value[1]


def chain_seed_sequences(seed: int | np.random.SeedSequence, stream: int,
                         chains: Sequence[int] | np.ndarray) -> list[np.random.SeedSequence]:
    """Seed sequences for the given chain indices of one stream."""
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    base_key = tuple(root.spawn_key)
    return [np.random.SeedSequence(root.entropy, spawn_key=base_key + (int(stream), int(i)))
            for i in chains]


def derived_seed(seed: int, *purpose: int | Purpose) -> int:
    """A 31-bit seed for one purpose, a pure function of (seed, purpose); the first
    element of ``purpose`` is a :class:`Purpose`, the rest (step count, problem
    index...) plain integers."""
    return int(np.random.SeedSequence([int(seed), *map(int, purpose)]).generate_state(1)[0]
               & 0x7FFFFFFF)


class _Buffered:
    """A block of one kind of draw per chain, refilled from that chain's generator.

    ``growable`` lets a look-ahead longer than the block widen it (only for a
    stream whose generator nothing else draws from: then when a refill happens
    does not change the values).
    """

    def __init__(self, generators: list[np.random.Generator], draw, *, growable: bool = False):
        self._generators = generators
        self._draw = draw  # draw(generator, size) -> 1-d array
        self._growable = growable
        n = len(generators)
        self._buffer = np.empty((n, _BLOCK))
        self._cursor = np.full(n, _BLOCK, dtype=np.int64)

    def _refill(self, c: int, width: int) -> np.ndarray:
        rest = self._buffer[c, self._cursor[c]:]
        fresh = self._draw(self._generators[c], width - rest.size)
        self._cursor[c] = 0
        return np.concatenate([rest, fresh])

    def peek(self, chains: np.ndarray, k: int) -> np.ndarray:
        """The next k draws of each chain in ``chains``, (len(chains), k), not consumed."""
        width = self._buffer.shape[1]
        if k > width and not self._growable and np.all(self._cursor == width):
            # Every chain's block is used up (as before its first draw: a model with more
            # than _BLOCK coordinates asks for that many normals at once), so a wider
            # block changes no value drawn so far; each chain refills it when it next
            # draws, as it would have refilled the narrow one.
            width = max(k, 2 * width)
            self._buffer = np.empty((len(self._generators), width))
            self._cursor[:] = width
        if k > width:
            if not self._growable:
                raise ValueError(f"cannot draw {k} numbers at once per chain (limit {width})")
            width = max(k, 2 * width)
            rows = [self._refill(c, width) for c in range(len(self._generators))]
            self._buffer = np.stack(rows)
        short = chains[self._cursor[chains] + k > width]
        for c in short:  # rare: once every block / k draws per chain
            self._buffer[c] = self._refill(c, width)
        first = chains * width + self._cursor[chains]  # flat index: a 1-d take is faster
        return np.take(self._buffer.ravel(), first[:, None] + np.arange(k))

    def advance(self, chains: np.ndarray, counts: np.ndarray | int) -> None:
        """Consume ``counts`` draws (per chain, at most what was last peeked)."""
        cursor = self._cursor[chains] + counts
        if np.any(cursor > self._buffer.shape[1]):
            raise ValueError("cannot consume more draws than were looked at")
        self._cursor[chains] = cursor

    def take(self, chains: np.ndarray, k: int) -> np.ndarray:
        out = self.peek(chains, k)
        self._cursor[chains] += k
        return out


class ChainRandom:
    """Independent, buffered random streams for a batch of chains.

    ``normal(d, chains)`` returns a (len(chains), d) array of standard normals,
    ``uniform(chains)`` a (len(chains),) array on [0, 1).  ``chains`` selects
    which chains draw (default: all), so chains that have left a batch consume
    nothing.
    """

    def __init__(self, seed_sequences: Sequence[np.random.SeedSequence]):
        self._seed_sequences = list(seed_sequences)
        self.generators = [np.random.Generator(np.random.PCG64(ss)) for ss in seed_sequences]
        self.n_chains = len(self.generators)
        self._normal = _Buffered(self.generators, lambda g, n: g.standard_normal(n))
        self._uniform = _Buffered(self.generators, lambda g, n: g.random(n))
        self._log_uniform_stream: _Buffered | None = None  # created when first used

    @classmethod
    def from_seed(cls, seed: int | np.random.SeedSequence, n_chains: int, *,
                  stream: int = 0, first_chain: int = 0) -> "ChainRandom":
        """Streams for chains ``first_chain .. first_chain + n_chains - 1`` of ``stream``."""
        chains = range(first_chain, first_chain + n_chains)
        return cls(chain_seed_sequences(seed, stream, chains))

    def _chains(self, chains) -> np.ndarray:
        if chains is None:
            return np.arange(self.n_chains)
        return np.asarray(chains, dtype=np.int64)

    def normal(self, d: int, chains: np.ndarray | None = None) -> np.ndarray:
        """Standard normal draws, shape (n_selected, d)."""
        return self._normal.take(self._chains(chains), d)

    def uniform(self, chains: np.ndarray | None = None) -> np.ndarray:
        """Uniform draws on [0, 1), one per selected chain."""
        return self._uniform.take(self._chains(chains), 1)[:, 0]

    def log_uniform(self, chains: np.ndarray | None = None) -> np.ndarray:
        """``log(U)`` for U uniform on (0, 1], one per selected chain (never -inf)."""
        return np.log1p(-self.uniform(chains))

    def _log_uniforms(self) -> _Buffered:
        if self._log_uniform_stream is None:
            own = [np.random.Generator(np.random.PCG64(np.random.SeedSequence(
                ss.entropy, spawn_key=(*ss.spawn_key, _LOG_UNIFORM_KEY), pool_size=ss.pool_size)))
                for ss in self._seed_sequences]
            self._log_uniform_stream = _Buffered(
                own, lambda g, n: np.log1p(-g.random(n)), growable=True)
        return self._log_uniform_stream

    def peek_log_uniform(self, k: int, chains: np.ndarray | None = None) -> np.ndarray:
        """The next k values ``log(U)`` (U uniform on (0, 1]) of each selected chain's
        look-ahead stream, shape (n_selected, k), without consuming them."""
        return self._log_uniforms().peek(self._chains(chains), int(k))

    def advance_log_uniform(self, counts: np.ndarray | int,
                            chains: np.ndarray | None = None) -> None:
        """Consume ``counts`` values (per selected chain) of the look-ahead stream;
        at most as many as the last :meth:`peek_log_uniform` showed."""
        chains = self._chains(chains)
        counts = np.broadcast_to(np.asarray(counts, dtype=np.int64), chains.shape)
        if np.any(counts < 0):
            raise ValueError("cannot advance a random stream by a negative count")
        self._log_uniforms().advance(chains, counts)

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

from collections.abc import Sequence

import numpy as np

__all__ = ["ChainRandom", "chain_seed_sequences", "derived_seed", "SMC_FREE_STREAM",
           "SMC_RESAMPLE_STREAM"]

# Stream purposes of sequential Monte Carlo (bread_stan.ais.smc), numbered apart from
# the engine's small per-step streams, the pilot's (1_000_000) and the log-uniform
# key: a conditional run's free particles use SMC_FREE_STREAM + s and each run's
# ancestor draws SMC_RESAMPLE_STREAM + 2 s (forward) or + 2 s + 1 (conditional), s the
# run's AIS stream.
SMC_FREE_STREAM = 20_000_000
SMC_RESAMPLE_STREAM = 30_000_000

_BLOCK = 4096
_LOG_UNIFORM_KEY = 7_919  # spawn-key suffix of each chain's log-uniform stream


def chain_seed_sequences(seed: int | np.random.SeedSequence, stream: int,
                         chains: Sequence[int] | np.ndarray) -> list[np.random.SeedSequence]:
    """Seed sequences for the given chain indices of one stream."""
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    base_key = tuple(root.spawn_key)
    return [np.random.SeedSequence(root.entropy, spawn_key=base_key + (int(stream), int(i)))
            for i in chains]


def derived_seed(seed: int, *purpose: int) -> int:
    """A 31-bit seed for one purpose, a pure function of (seed, purpose)."""
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

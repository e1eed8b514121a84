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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ChainRandom", "chain_seed_sequences", "derived_seed"]

_BLOCK = 4096


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
    """A block of one kind of draw per chain, refilled from that chain's generator."""

    def __init__(self, generators: list[np.random.Generator], draw):
        self._generators = generators
        self._draw = draw  # draw(generator, size) -> 1-d array
        n = len(generators)
        self._buffer = np.empty((n, _BLOCK))
        self._cursor = np.full(n, _BLOCK, dtype=np.int64)

    def take(self, chains: np.ndarray, k: int) -> np.ndarray:
        if k > _BLOCK:
            raise ValueError(f"cannot draw {k} numbers at once per chain (limit {_BLOCK})")
        short = chains[self._cursor[chains] + k > _BLOCK]
        for c in short:  # rare: once every _BLOCK / k draws per chain
            rest = self._buffer[c, self._cursor[c]:].copy()
            fresh = self._draw(self._generators[c], _BLOCK - rest.size)
            self._buffer[c, :rest.size] = rest
            self._buffer[c, rest.size:] = fresh
            self._cursor[c] = 0
        start = self._cursor[chains]
        out = self._buffer[chains[:, None], start[:, None] + np.arange(k)]
        self._cursor[chains] = start + k
        return out


class ChainRandom:
    """Independent, buffered random streams for a batch of chains.

    ``normal(d, chains)`` returns a (len(chains), d) array of standard normals,
    ``uniform(chains)`` a (len(chains),) array on [0, 1).  ``chains`` selects
    which chains draw (default: all), so chains that have left a batch consume
    nothing.
    """

    def __init__(self, seed_sequences: Sequence[np.random.SeedSequence]):
        self.generators = [np.random.Generator(np.random.PCG64(ss)) for ss in seed_sequences]
        self.n_chains = len(self.generators)
        self._normal = _Buffered(self.generators, lambda g, n: g.standard_normal(n))
        self._uniform = _Buffered(self.generators, lambda g, n: g.random(n))

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

"""The Statistics Manager's window R_stat over a stream's recent delays (Ji Sec. 3.4.1), sized
by ADWIN (Bifet and Gavaldà, SDM 2007, as Ji cites [BG07]): it grows while the delays keep their
mean, and drops its older part when that part's mean delay differs from the newer part's by
more than chance allows, so that K follows a change in the disorder instead of averaging it away.

The window is a list of chunks, one per unit of the stream that the caller adds (a landed file,
a second of event time: units that wall time does not decide, so that a resumed run keeps the
same window and makes the same decisions). Each chunk keeps its units' mean delays (their
number, sum and sum of squares), its tuples and the histogram of their coarse-grained delays, so
that cuts are tested at chunk boundaries and the histogram f_D of the window is the sum of its
chunks'.

ADWIN's observations are the units' mean delays, not the tuples' delays: its bound holds for
independent observations, and a stream's out-of-order tuples come in correlated runs (most of
them, Ji's Table 4.1), so that within a unit the delays are far from independent. Tested per
tuple, a run of late tuples reads as a change, the window is cut every few units, and K, a
quantile of a window a few units long, jumps from one unit to the next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from kslack.delays import GRANULARITY, coarse, trimmed

# ADWIN's confidence δ (Bifet and Gavaldà's experiments, and MOA's and River's default).
CHANGE_CONFIDENCE = 0.002
MOST_CHUNKS = 512  # beyond it the two oldest merge: older parts are tested more coarsely


@dataclass
class Chunk:
    units: int
    total: float  # the sum of the units' mean delays
    squares: float  # the sum of their squares
    largest_mean: float  # the largest of them
    count: int  # tuples
    counts: np.ndarray  # tuples per coarse-grained delay
    largest: float

    @classmethod
    def of(cls, delays: np.ndarray, granularity: float, counts: np.ndarray | None = None
           ) -> Chunk:
        """One unit's chunk; ``counts``: its tuples per coarse-grained delay, where they are
        known."""
        delays = np.asarray(delays, dtype=np.float64)
        mean = float(delays.mean())
        counts = np.bincount(coarse(delays, granularity)) if counts is None else counts
        return cls(1, mean, mean * mean, mean, int(delays.size), counts,
                   float(delays.max(initial=0.0)))

    def to_json(self) -> list:
        """As stored with a run's progress: the counts sparse (most delays lie in a few
        granules, the tail in a few more)."""
        where = np.flatnonzero(self.counts)
        return [self.units, self.total, self.squares, self.largest_mean, self.count,
                self.largest, where.tolist(), self.counts[where].tolist()]

    @classmethod
    def from_json(cls, data: list) -> Chunk:
        units, total, squares, largest_mean, count, largest, where, found = data
        counts = np.zeros(max(where, default=-1) + 1, np.int64)
        counts[where] = found
        return cls(units, total, squares, largest_mean, count, counts, largest)

    def __add__(self, other: Chunk) -> Chunk:
        size = max(self.counts.size, other.counts.size)
        return Chunk(self.units + other.units, self.total + other.total,
                     self.squares + other.squares, max(self.largest_mean, other.largest_mean),
                     self.count + other.count,
                     np.pad(self.counts, (0, size - self.counts.size))
                     + np.pad(other.counts, (0, size - other.counts.size)),
                     max(self.largest, other.largest))


@dataclass
class StatisticsWindow:
    """R_stat: the recent delays of one stream, in chunks, cut by ADWIN."""

    granularity: float = GRANULARITY
    confidence: float = CHANGE_CONFIDENCE
    chunks: list[Chunk] = field(default_factory=list)

    def __post_init__(self):
        # The chunks' counts summed, kept as they come and go: the histogram is asked for at
        # every decision, and summing 512 chunks each time takes milliseconds.
        self._counts = np.zeros(0, np.int64)
        for chunk in self.chunks:
            self._count(chunk.counts, 1)

    def add(self, delays: np.ndarray, counts: np.ndarray | None = None) -> int:
        """Add one unit's delays (seconds; ``counts`` its tuples per coarse-grained delay,
        where they are known) and cut the window where its mean changed; returns the chunks
        dropped."""
        if not np.asarray(delays).size:
            return 0
        self.chunks.append(Chunk.of(delays, self.granularity, counts))
        self._count(self.chunks[-1].counts, 1)
        if len(self.chunks) > MOST_CHUNKS:
            self.chunks[:2] = [self.chunks[0] + self.chunks[1]]
        dropped = 0
        while (cut := self._cut()) is not None:
            for chunk in self.chunks[:cut]:
                self._count(chunk.counts, -1)
            del self.chunks[:cut]
            dropped += cut
        return dropped

    def _count(self, counts: np.ndarray, sign: int) -> None:
        if counts.size > self._counts.size:
            self._counts = np.pad(self._counts, (0, counts.size - self._counts.size))
        self._counts[:counts.size] += sign * counts

    def to_json(self) -> list:
        return [c.to_json() for c in self.chunks]

    @classmethod
    def from_json(cls, data: list, granularity: float = GRANULARITY) -> StatisticsWindow:
        return cls(granularity, chunks=[Chunk.from_json(c) for c in data])

    @property
    def tuples(self) -> int:
        return sum(c.count for c in self.chunks)

    def histogram(self) -> np.ndarray:
        """f_D over the window (``delays.histogram``'s, from the chunks' counts)."""
        if not self.chunks:
            return np.ones(1)
        counts = trimmed(self._counts)
        return counts / counts.sum()

    def max_delay(self) -> float:
        """MaxD^R: the largest delay in the window (Alg. 4.4 line 1)."""
        return max((c.largest for c in self.chunks), default=0.0)

    def _cut(self) -> int | None:
        """The number of oldest chunks to drop: the first boundary where the older part's mean
        delay and the newer part's differ by more than ADWIN's ε_cut,

            ε_cut = sqrt(2 · σ²_W · ln(2/δ') / m) + 2 · R · ln(2/δ') / (3 · m),
            1/m = 1/n₀ + 1/n₁, δ' = δ / ln n,

        n being the window's units, σ²_W the variance of their mean delays, R the largest of
        them (the observations lie in [0, R]: Bifet and Gavaldà's bound for values in [0, 1],
        scaled), n₀ and n₁ the parts' (module docstring); None if none."""
        counts = np.array([c.units for c in self.chunks], dtype=np.float64)
        totals = np.array([c.total for c in self.chunks])
        n = counts.sum()
        if len(self.chunks) < 2 or n < 3:
            return None
        variance = max(sum(c.squares for c in self.chunks) / n - (totals.sum() / n) ** 2, 0.0)
        spread = max(c.largest_mean for c in self.chunks)
        log_term = math.log(2 * math.log(n) / self.confidence)
        n0, s0 = np.cumsum(counts)[:-1], np.cumsum(totals)[:-1]
        n1, s1 = n - n0, totals.sum() - s0
        inverse_m = 1 / n0 + 1 / n1
        cut = (np.sqrt(2 * variance * log_term * inverse_m)
               + 2 / 3 * spread * log_term * inverse_m)
        changed = np.flatnonzero(np.abs(s0 / n0 - s1 / n1) > cut)
        return int(changed[0]) + 1 if changed.size else None

"""Window coverage measured at run time (Ji Sec. 4.1.4, Alg. 4.3): the Window-Coverage Runtime
Calculator and the Statistics Manager's map M^w of received and missing tuples per window.

A window is built once the buffer's output has passed its end. In Ji's operator a tuple that
arrives after a window it belongs to was built is missing from it and received by those built
after; Tandem quarantines such a tuple, so it is missing from all its windows. Either way the
coverage measured of a window only falls as later tuples arrive (Fig. 4.3b), and Alg. 4.3 reads
that of a window M seconds old, M being the q-quantile of the delays of the out-of-order tuples
seen so far: old enough to be nearly settled, recent enough to say how the stream is now.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kslack.delays import GRANULARITY, units

# Ji's Table 4.2: the retrospect parameter q.
RETROSPECT = 0.99


@dataclass
class WindowCounts:
    """M^w for windows of ``window`` seconds ending every ``slide`` seconds: per window end
    (index j, the end j·slide), the tuples it received, N_rcv, and those it missed, N_miss."""

    window: float
    slide: float
    first: int = 0  # the index of the first end held
    received: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    missing: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def add(self, ts: np.ndarray, late: np.ndarray) -> None:
        """Count tuples with timestamps ``ts`` (µs): each is received by all its windows or,
        ``late``, missed by all (Tandem quarantines a late tuple, where Ji's operator still
        counts it in the windows not yet built). Binned by first window, not spread tuple by
        tuple: a unit holds hundreds of thousands of tuples."""
        ts, late = np.asarray(ts, dtype=np.int64), np.asarray(late, dtype=bool)
        if not ts.size:
            return
        slide = round(self.slide * 1e6)
        per_tuple = round(self.window / self.slide)
        start = ts // slide + 1  # the first end after ts (docs/design.md, Semantics)
        low, high = int(start.min()), int(start.max()) + per_tuple
        self._extend(low, high)
        every = np.bincount(start - low, minlength=high - low)
        missed = (np.bincount(start[late] - low, minlength=high - low) if late.any()
                  else np.zeros_like(every))  # few or none: a bincount of those alone
        for counts, first in ((self.missing, missed), (self.received, every - missed)):
            # A tuple whose first end is j counts in the ends j … j + per_tuple − 1.
            running = np.cumsum(first)
            running[per_tuple:] -= running[:-per_tuple].copy()
            counts[low - self.first:high - self.first] += running

    def to_json(self) -> list:
        return [self.first, self.received.tolist(), self.missing.tolist()]

    @classmethod
    def from_json(cls, window: float, slide: float, data: list) -> WindowCounts:
        first, received, missing = data
        return cls(window, slide, first, np.array(received, np.int64),
                   np.array(missing, np.int64))

    def coverage(self, end: float) -> float | None:
        """N_rcv / (N_rcv + N_miss) of the window ending at ``end``; None where it holds no tuple."""
        j = round(end / self.slide) - self.first
        if not 0 <= j < self.received.size:
            return None
        total = self.received[j] + self.missing[j]
        return float(self.received[j] / total) if total else None

    def at(self, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """N_rcv and N_miss of the windows whose end indices are ``ends``; 0 where none is held."""
        at = np.asarray(ends, dtype=np.int64) - self.first
        held = (at >= 0) & (at < self.received.size)
        received, missing = np.zeros(at.size, np.int64), np.zeros(at.size, np.int64)
        received[held], missing[held] = self.received[at[held]], self.missing[at[held]]
        return received, missing

    def purge(self, before: float) -> None:
        """Forget the windows ending before ``before`` (Ji purges those before T − MaxD)."""
        drop = min(max(int(units(before, self.slide, up=False)) - self.first, 0),
                   self.received.size)
        self.received, self.missing = self.received[drop:], self.missing[drop:]
        self.first += drop

    def _extend(self, low: int, high: int) -> None:
        if not self.received.size:
            self.first = low
        before, after = max(self.first - low, 0), max(high - (self.first + self.received.size), 0)
        if before or after:
            self.received = np.pad(self.received, (before, after))
            self.missing = np.pad(self.missing, (before, after))
            self.first -= before


def retrospect(late: np.ndarray, q: float = RETROSPECT, granularity: float = GRANULARITY
               ) -> float:
    """M, Alg. 4.3 line 1: the q-quantile of the delays of the out-of-order tuples so far, from
    ``late``, their count per coarse-grained delay (``delays.coarse``): a run keeps the counts,
    not every delay. 0 before there are any."""
    late = np.asarray(late)
    if not late.sum():
        return 0.0
    return float(np.searchsorted(np.cumsum(late), q * late.sum())) * granularity


def measured(counts: WindowCounts, high_water: float, lookback: float) -> float | None:
    """Cvrg(w), Alg. 4.3 lines 2–4: the coverage of the window whose end is the latest at or
    before ``high_water`` less ``lookback`` (M), as counted so far."""
    end = float(units(high_water - lookback, counts.slide, up=False)) * counts.slide
    return counts.coverage(end)

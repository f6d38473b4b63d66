"""Out-of-order arrival shaped like the sensor streams of Ji's Table 4.1 (lines 1195-1208).

Those streams hold about 50 % out-of-order tuples, most of them delayed by less than 100 ms,
a long tail up to several seconds (4.49 s and 16.95 s at most), and most out-of-order tuples
follow another one (correlated). Here a reading's arrival time is its event time plus a delay
shared by a *run*: the readings of one 5-ms slot of event time arrive together, at the slot's
end plus a delay (a gateway that flushes late), which makes late readings come in correlated
runs. A delayed run waits 20-100 ms, or, for a small share of the runs, up to ``max_delay``
seconds. Sorting by arrival
time gives the order in which readings land; files cut by arrival time then hold readings of
earlier files' event time (late readings cross file boundaries).

Every random number is a hash of (seed, purpose, run), as in ``workload/smart_plugs.py``: the same
readings arrive in the same order whatever is generated around them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workload.draws import uniform
from workload.schema import file_name

RUN_SECONDS = 0.005  # the readings of one slot of event time arrive together
MAIN_DELAY = (0.02, 0.1)  # the bulk of the delays, seconds
# Purposes of the hash, apart from the workload's (1-7).
_DELAYED, _TAIL, _SIZE = 11, 12, 13


@dataclass(frozen=True)
class Disorder:
    """How readings arrive out of order. ``delayed``: the share of runs that arrive late;
    ``tail``: the share of those that wait longer than 100 ms, up to ``max_delay`` seconds."""

    delayed: float = 0.5
    tail: float = 0.02
    max_delay: float = 4.5  # Ji Table 4.1: 4.49 s in the first stream
    seed: int = 2014

    def flush_delays(self, run: np.ndarray) -> np.ndarray:
        """How long after its end each run arrives, seconds (0 for a run that arrives in
        order)."""
        delayed = uniform(self.seed, _DELAYED, run) < self.delayed
        in_tail = uniform(self.seed, _TAIL, run) < self.tail
        size = uniform(self.seed, _SIZE, run)
        low, high = MAIN_DELAY
        main = low + (high - low) * size
        # Skewed towards the short end of the tail: most long delays are well under the maximum.
        long = high + (self.max_delay - high) * size**3
        return np.where(delayed, np.where(in_tail, long, main), 0.0)

    def arrivals(self, table: pa.Table) -> pa.Table:
        """The readings with their ``arrival`` time (µs), in arrival order; a run keeps its
        event-time order."""
        ts = table.column("ts").cast(pa.int64()).to_numpy()
        run_us = round(RUN_SECONDS * 1e6)
        run = ts // run_us
        delay = self.flush_delays(run)
        arrival = np.where(delay > 0, (run + 1) * run_us + np.round(delay * 1e6), ts)
        # The readings come in event-time order: a stable sort keeps each run's.
        order = np.argsort(arrival.astype(np.int64), kind="stable")
        return table.append_column("arrival", pa.array(arrival.astype(np.int64))).take(order)


def landed_parts(between: Callable[[float, float], pa.Table], prefix: str, start: int,
                 duration: float, file_seconds: float, disorder: Disorder | None = None,
                 begin: float = 0.0) -> Iterator[tuple[str, pa.Table]]:
    """A generated stream's landed files, each a name and its readings, ``file_seconds`` of
    event time each from ``begin`` to ``duration`` (``between(a, b)``: the readings of
    event-time seconds [a, b) after ``start``, Unix seconds). With ``disorder`` the files are
    cut by arrival time instead and hold the readings in arrival order: a late reading lands
    in a file after the one its event time belongs to."""
    spill = disorder.max_delay if disorder else 0.0
    count = math.ceil((duration + spill - begin) / file_seconds - 1e-9)
    for n in range(count):
        first, end = begin + n * file_seconds, begin + (n + 1) * file_seconds
        if disorder is None:
            table = between(first, min(end, duration))
        else:  # the readings that arrive in [first, end), of event time before the end
            table = disorder.arrivals(between(max(first - spill, begin), min(end, duration)))
            arrival = table.column("arrival")
            table = table.filter(pc.and_(
                pc.greater_equal(arrival, round((start + first) * 1e6)),
                pc.less(arrival, round((start + end) * 1e6))))
        yield file_name(prefix, start + first, file_seconds), table


def out_of_order(ts: np.ndarray) -> np.ndarray:
    """Which readings, in arrival order, arrive after a reading of a later event time (Ji's
    definition of an out-of-order tuple), and by how much (seconds; 0 when in order)."""
    seen = np.maximum.accumulate(ts)
    before = np.concatenate([ts[:1], seen[:-1]])
    return np.maximum(before - ts, 0) / 1e6

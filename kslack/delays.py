"""How late a stream's tuples arrive, in coarse-grained delays (Ji Sec. 3.4.1).

A tuple's delay is the stream's local current time when it arrives (the largest timestamp seen
so far, itself included) less its timestamp. Its coarse-grained delay D is 0 for a delay of 0,
1 for a delay in (0, g], 2 for one in (g, 2g], and so on, g being the K-search granularity.
"""

from __future__ import annotations

import numpy as np

# Ji's Table 4.2: the K-search granularity g and the basic window b, both 10 ms.
GRANULARITY = 0.010
BASIC_WINDOW = 0.010


def arrival_delays(ts: np.ndarray) -> np.ndarray:
    """Each tuple's delay, in the time unit of ``ts`` (in arrival order): the local current time
    at its arrival, the running maximum of the timestamps, less its own timestamp."""
    ts = np.asarray(ts, dtype=np.float64)
    return np.maximum.accumulate(ts) - ts if ts.size else ts


def units(x: float | np.ndarray, unit: float, *, up: bool) -> np.ndarray:
    """How many ``unit``s ``x`` makes (seconds in granules, in slides), rounded up or down; a
    quotient within 1e-9 of a whole number counts as it, whatever the division's last bit
    (0.07 / 0.01 is 7.000000000000001 in binary floating point). Floats: ±inf stays."""
    quotient = np.asarray(x, dtype=np.float64) / unit
    return np.ceil(quotient - 1e-9) if up else np.floor(quotient + 1e-9)


def coarse(delays: np.ndarray, granularity: float = GRANULARITY) -> np.ndarray:
    """The coarse-grained delays D of ``delays`` (Sec. 3.4.1): 0 for none, else ⌈delay / g⌉."""
    return units(delays, granularity, up=True).astype(np.int64)


def coarse_micros(delays: np.ndarray, granularity: float = GRANULARITY) -> np.ndarray:
    """``coarse`` of delays in whole µs, in integers: the same granules (g is whole µs, and
    ``coarse``'s tolerance lies far below a µs), in a quarter of the time."""
    g = round(granularity * 1e6)
    return (np.asarray(delays, dtype=np.int64) + (g - 1)) // g


def trimmed(counts: np.ndarray) -> np.ndarray:
    """``counts`` without its trailing zeros (``np.trim_zeros(counts, "b")``, ten times as
    fast: it is asked for at every decision)."""
    found = np.flatnonzero(counts)
    return counts[:found[-1] + 1] if found.size else counts[:0]


def histogram(delays: np.ndarray, granularity: float = GRANULARITY) -> np.ndarray:
    """f_D, the probability of each coarse-grained delay 0, 1, 2, … among ``delays``: the
    histogram H_i that approximates it."""
    counts = np.bincount(coarse(delays, granularity))
    return counts / counts.sum() if counts.size else np.ones(1)


def after_buffer(f: np.ndarray, slots: int) -> np.ndarray:
    """f_{D^K}: the coarse-grained delays after a buffer of ``slots`` granules (K + K^sync over
    g), Eq. (3.4): a buffer of K handles every delay up to K, and leaves the others K shorter."""
    if slots < 0:
        raise ValueError(f"a buffer of {slots} granules: K is at least 0")
    return np.concatenate([[f[:slots + 1].sum()], f[slots + 1:]])

"""Counter-based random draws: any event's numbers can be drawn alone, in any order, so the
generator and its disorder are deterministic from a seed however a stream is split into
micro-batches."""

from __future__ import annotations

import numpy as np

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64: a counter-based hash, so any event's random numbers can be drawn alone."""
    with np.errstate(over="ignore"):
        z = (x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return z ^ (z >> np.uint64(31))


def uniform(seed: int, purpose: int, counter: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) numbers for (seed, purpose, counter)."""
    with np.errstate(over="ignore"):
        key = _mix(np.asarray(counter, dtype=np.uint64)
                   ^ _mix(np.array([seed * 1_000_003 + purpose], dtype=np.uint64)))
    return (key >> np.uint64(11)).astype(np.float64) * 2.0**-53

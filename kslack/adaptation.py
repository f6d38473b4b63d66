"""Choosing a K-slack buffer's size each adaptation interval (Ji Sec. 3.4, 4.1.5, 4.1.6).

AM-adt searches the analytical model for the least K whose expected window coverage meets the
threshold (Alg. 4.4). PD-adt treats the model as a black box: a proportional-derivative
controller moves α, K = α · MaxD, by the measured coverage's distance from the threshold
(Eq. 3.7, Fig. 3.7).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kslack import coverage
from kslack.delays import GRANULARITY, after_buffer, units

# Ji's Table 4.2: the PD controller's weights for sliding-window aggregates.
PROPORTIONAL, DERIVATIVE = 0.2, 4.0


def am_adt(f: np.ndarray, threshold: float, max_delay: float,
           covered: Callable[[np.ndarray], float], granularity: float = GRANULARITY,
           sync_slots: int = 0) -> float:
    """κ, Alg. 4.4: the least K in steps of g whose expected coverage ``covered`` of the
    delays after the buffer (``f`` the delays seen in the statistics window, less what a
    buffer of K and a synchronisation buffer's ``sync_slots`` granules handle, Eq. 3.4) reaches
    ``threshold``, or the first K past ``max_delay``, the largest delay seen there (a larger
    buffer would wait for no tuple). ``covered``: Eq. (4.2) over a window
    (``coverage.expected``), or the share admitted where a late tuple misses every window
    (``coverage.admitted``)."""
    if covered is coverage.admitted:
        # The share admitted is the delays' running sum at K (and the synchronisation
        # buffer's slots): the least K is where it reaches the threshold.
        return least_reaching(np.cumsum(f), threshold, max_delay, granularity, sync_slots)
    low, high = 0, int(units(max_delay, granularity, up=False)) + 1  # K past MaxD: enough
    # The coverage only grows with K, so the least K is bisected: a few evaluations where a
    # 17-s tail would take 1,700 one granule at a time.
    while low < high:
        middle = (low + high) // 2
        if covered(after_buffer(f, middle + sync_slots)) >= threshold:
            high = middle
        else:
            low = middle + 1
    return low * granularity


def least_reaching(admitted: np.ndarray, threshold: float, max_delay: float,
                   granularity: float = GRANULARITY, sync_slots: int = 0) -> float:
    """The least K, in steps of g, whose share admitted (``admitted[k]``, non-decreasing in
    the granules k of K plus ``sync_slots``) reaches ``threshold``, or the first K past
    ``max_delay``, where no tuple waits longer."""
    high = int(units(max_delay, granularity, up=False)) + 1
    reach = int(np.searchsorted(admitted, threshold)) - sync_slots
    return min(max(reach, 0), high) * granularity


@dataclass
class PdAdt:
    """PD-adt (Sec. 3.4.2 and 4.1.6): α in [0, 1] moves by u(j) = U_p · err(j) + U_d ·
    (err(j) − err(j − 1)), Eq. (3.7), err being the threshold less the measured coverage, and
    K = α · MaxD, so that a larger delay seen later stretches K without a jump in α. No
    integral term: a stream without disorder keeps the coverage above the threshold for long
    spells, and an integral would wind up over them."""

    proportional: float = PROPORTIONAL
    derivative: float = DERIVATIVE
    alpha: float = 0.0
    error: float | None = None

    def size(self, threshold: float, measured: float, max_delay: float) -> float:
        """K for the next interval, from this interval's measured coverage."""
        error = threshold - measured
        change = self.proportional * error + self.derivative * (
            error - (self.error if self.error is not None else error))
        self.alpha, self.error = min(max(self.alpha + change, 0.0), 1.0), error
        return self.alpha * max_delay

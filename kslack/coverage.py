"""Window coverage (Ji Eq. 3.2): the share of an instantaneous window's tuples that it holds
when it is built. What a buffer of K gives (Eq. 3.5, 3.6, 4.2), and what a SUM's result needs to
be within a relative error ε with confidence 1 − δ (Eq. 4.1, Alg. 4.2).
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np

from kslack.delays import BASIC_WINDOW, GRANULARITY, units

# Ji's Table 4.2: the confidence level δ of an aggregate's error threshold.
CONFIDENCE_LEVEL = 0.05


def expected(f_k: np.ndarray, window: float, basic: float = BASIC_WINDOW,
             granularity: float = GRANULARITY) -> float:
    """Cvrg(w, K), Eq. (4.2): the expected coverage of the next window of ``window`` seconds
    over a stream whose coarse-grained delays after the buffer are ``f_k`` (``delays.after_buffer``).
    The window is cut into n = ⌈W / b⌉ basic windows; the l-th most recent has waited (l − 1)·b
    since its end, so it holds the tuples delayed by at most (l − 1)·b / g granules, Eq. (3.5).
    Eq. (3.6) sums them; the rate cancels against the window's true count r·W."""
    n = int(units(window, basic, up=True))
    held = np.cumsum(f_k)  # F(x): the share delayed by at most x granules
    # F((l − 1)·b / g) for l = 1 … n. Past the largest delay F is the whole, so only the basic
    # windows that waited less than it are looked up: AM-adt asks this per K it tries, every
    # adaptation, and a 5-minute window has 30,000 basic windows of 10 ms.
    short = min(n, int(units(held.size * granularity, basic, up=True)) + 1)
    waited = units(np.arange(short) * basic, granularity, up=False).astype(np.int64)
    within = held[np.minimum(waited, held.size - 1)]
    before_last = within[:n - 1].sum() + max(n - 1 - short, 0) * held[-1]
    last = within[-1] if short == n else held[-1]
    return float(basic * before_last + (window - (n - 1) * basic) * last) / window


def admitted(f_k: np.ndarray) -> float:
    """The coverage of every window where a tuple the buffer does not hold back is late and
    misses all its windows, as Tandem quarantines it (docs/design.md, Disorder handling): the
    share of tuples left no delay after the buffer, f_{D^K}(0) of Eq. (3.4). Ji forwards such
    a tuple to the windows not yet built, which Eq. (4.2) counts; here the window's length
    does not help."""
    return float(f_k[0])


@functools.cache
def critical_value(confidence_level: float = CONFIDENCE_LEVEL) -> float:
    """c_δ: a normal variable lies farther than c_δ standard deviations from its mean with
    probability δ (both sides, as Sec. 4.1.3's range [Cvrg·A − c_δ·σ_e, Cvrg·A + c_δ·σ_e])."""
    return NormalDist().inv_cdf(1 - confidence_level / 2)


def sum_threshold(max_error: float, tuples: float, mean: float, variance: float,
                  confidence_level: float = CONFIDENCE_LEVEL) -> float:
    """Cvrg_thr for a SUM (Alg. 4.2): the least coverage at which the result's relative error
    exceeds ``max_error`` with probability at most δ, for a window of ``tuples`` values of that
    mean and variance, Eq. (4.1):

        (1 − Cvrg) + c_δ · sqrt((Cvrg − Cvrg²) · (σ² + μ²) / (N · μ²)) ≤ ε_thr

    With x = 1 − Cvrg and s = (σ² + μ²) / (N · μ²), that is c_δ · sqrt(x (1 − x) s) ≤ ε_thr − x:
    for x ≤ ε_thr, squared, (1 + c_δ² s) x² − (2 ε_thr + c_δ² s) x + ε_thr² ≥ 0, which holds
    from x = 0 up to the quadratic's smaller root (at x = ε_thr its left side is c_δ² s ε_thr
    (ε_thr − 1) < 0). So Cvrg_thr is 1 less that root. A SUM whose values average 0 has no
    relative error: it needs every tuple."""
    if max_error >= 1:
        return 0.0
    if mean == 0 or tuples <= 0:
        return 1.0
    spread = (variance + mean * mean) / (tuples * mean * mean)
    c2s = critical_value(confidence_level) ** 2 * spread
    a, b = 1 + c2s, 2 * max_error + c2s
    # The smaller root, as 2c / (b + sqrt(b² − 4ac)): the textbook form loses its digits
    # to cancellation where c_δ² s is small.
    root = 2 * max_error * max_error / (b + math.sqrt(max(b * b - 4 * a * max_error ** 2, 0.0)))
    return 1 - root

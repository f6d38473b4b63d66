"""The Recall-Requirement Calibrator (Ji Sec. 4.2.4, Eq. 4.9): the recall the buffers must
reach next so that the recall measured over a period P_meas meets Γ.

Γ applies to the results of the last P_meas. What the period before produced is known, so what
comes next needs only what makes a period whole, Eq. (4.9):

    (N_prod(P_meas − L_adt) + N_true(L_adt) · Γ') / (N_true(P_meas − L_adt) + N_true(L_adt)) ≥ Γ

A period that produced more than Γ lets the buffers wait less; one that fell short makes them
wait longer, up to Γ' = 1.

Tandem evaluates a join's windows once its watermark passes their ends, and the buffers count
each window's tuples received and missed (``measured.WindowCounts``; a late tuple misses all its
windows). With EqSel a window's results are its inputs' cross join times one selectivity, so a
window's N_true is the product of its inputs' tuples and its N_prod the product of those
received; the selectivity cancels.

The next interval is as long as the period, not one L_adt. A K decided now acts on every window
still open, and shows in the counts only as those windows are evaluated: solved for one
interval (Γ' moves by P_meas / L_adt, 60 times, the period's surplus or shortfall), Eq. (4.9)
swings K between 0 and the largest delay, and a watermark never moves back, so each swing to 0
loses the tuples of a whole buffer. Measured while this was built, over the two streams of
tests/test_kslack.py's Same-K tests (Γ = 0.95, periods of 60 windows), that met Γ in 26 % of the
periods, with a mean K 3.4 times the uncalibrated one. Made up over a period, Γ' = 2Γ −
γ(P_meas): every period met Γ, with a mean K 13 % below the uncalibrated one (the test holds it
to Φ(Γ) ≥ 0.97 and a mean K below 0.95 times).
"""

from __future__ import annotations

import numpy as np

from kslack.delays import units
from kslack.measured import WindowCounts

# Ji's Table 4.2: the result-quality measurement period P_meas.
PERIOD = 60.0


def instant_recall(requirement: float, produced: float, true: float) -> float:
    """Γ', Eq. (4.9) with the next interval as long as the period (module docstring), from the
    last period's N_prod and N_true: 2Γ − γ(P_meas), at most 1 (Ji writes max{Γ', 1}; a recall
    above 1 cannot be reached, and the least K that reaches 1 is the answer). Γ itself while
    the period holds no result."""
    if true <= 0:
        return requirement
    return min(2 * requirement - produced / true, 1.0)


def period_results(counts: list[WindowCounts], evaluated: float, period: float
                   ) -> tuple[float, float]:
    """N_prod and N_true of the join's windows evaluated in the last ``period`` (those ending
    in (``evaluated`` − period, ``evaluated``], ``evaluated`` the join's watermark in seconds),
    in cross-join results (EqSel: module docstring). ``counts``: each input stream's, over the
    same windows."""
    slide = counts[0].slide
    last = int(units(evaluated, slide, up=False))
    held = min(stream.first for stream in counts)  # none before: a long period costs nothing
    ends = np.arange(max(last - int(round(period / slide)) + 1, held), last + 1)
    produced, true = np.ones(ends.size), np.ones(ends.size)
    for stream in counts:
        received, missing = stream.at(ends)
        produced *= received
        true *= received + missing
    return float(produced.sum()), float(true.sum())

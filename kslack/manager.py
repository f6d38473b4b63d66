"""The Buffer Manager of one query over one stream (Ji Sec. 4.1.2, Alg. 4.1): it keeps the
statistics of the stream's delays and values, measures the windows' coverage, and sizes the
K-slack buffer after every unit of the stream.

Ji adapts K at every new instantaneous window. Tandem's stream lands in units (a file), each
judged as a whole against the watermark of the units before it (``rowstream/by_reference.py``),
so K is decided at each unit's end, from the units so far, and judges the next one. A decision
reads the stream's timestamps and values only, never the wall clock: the state after a unit is
stored with the unit's progress, and a replayed or resumed unit makes the same decision.

The watermark a unit is judged against is the high-water mark in whole milliseconds less K
(``rowstream/eventtime.py``), never moving back: a K that grows holds back the windows not yet
evaluated, and a row at or before the watermark of the units before it is late, as with a fixed
lateness. The window state is the buffer (docs/design.md, Disorder handling).

Policies: ``fixed`` (K = the stream's allowed lateness L, today's), ``none`` and ``max`` (Ji's
baselines No-K-slack, K = 0, and Max-K-slack, K = the largest delay seen so far, Sec. 4.3.2),
``am`` and ``pd`` (AM-adt and PD-adt, Sec. 4.1.5 and 4.1.6, for a relative-error requirement, or
Sec. 4.2.4 and 4.2.5 for a join's recall).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from kslack import coverage
from kslack.adaptation import PdAdt, am_adt, least_reaching
from kslack.calibration import PERIOD, instant_recall, period_results
from kslack.delays import GRANULARITY, coarse_micros, trimmed
from kslack.measured import WindowCounts, measured, retrospect
from kslack.statistics import StatisticsWindow

POLICIES = ("fixed", "none", "max", "am", "pd")
ADAPTIVE = ("am", "pd")
# Ji leaves the warm-up L_warmup open. Until ten seconds of event time have passed, an adaptive
# policy keeps K at the largest delay seen (Max-K-slack): the statistics are thin, and a result
# that waits a little longer is better than one that misses its requirement.
WARMUP = 10.0
# The units whose values estimate μ, σ² and the tuples per window of Eq. (4.1).
VALUE_UNITS = 60
US = 1_000_000


@dataclass(frozen=True)
class Requirement:
    """An aggregate's result quality (Sec. 4.1.1): a relative error of at most ``max_error``
    with probability at least ``confidence`` (1 − δ). ``max_error`` 0 asks for every tuple."""

    max_error: float
    confidence: float = 1 - coverage.CONFIDENCE_LEVEL

    def __post_init__(self):
        if not 0 <= self.max_error < 1:
            raise ValueError(f"max_error {self.max_error:g}: give a relative error in [0, 1), "
                             "such as 0.01 for 1 %")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence {self.confidence:g}: give a probability in (0, 1), "
                             "such as 0.95")

    def describe(self) -> str:
        return (f"relative error ≤ {self.max_error:.4g} with confidence "
                f"{self.confidence:.4g}")


@dataclass(frozen=True)
class Recall:
    """A join's result quality (Sec. 4.2.1): a recall of at least ``min_recall``, the share of
    the true join results produced.

    A late tuple misses every window (docs/design.md, Disorder handling), so a result of a
    join of m windows is produced iff each of its m tuples was admitted, and with delays
    independent of a tuple's productivity (Ji's EqSel) the recall is the product of the m
    inputs' admitted shares, f_{D_i^K}(0) (Eq. 4.6 with each window either whole or missed).
    AM-adt sizes one K for all the streams (``same_k``) for the recall over the last ``period``
    (P_meas, Sec. 4.2.1) to meet Γ (``kslack.calibration``); PD-adt sizes each stream's buffer
    apart, for the share Γ^{1/m}, so that the product meets Γ."""

    min_recall: float
    inputs: int = 2  # m: the windows the join reads, a stream's as often as it is read
    period: float = PERIOD  # P_meas, seconds

    def __post_init__(self):
        if not 0 < self.min_recall <= 1:
            raise ValueError(f"min_recall {self.min_recall:g}: give a recall in (0, 1], such as "
                             "0.99")
        if not self.period > 0:
            raise ValueError(f"period {self.period:g}: give the seconds over which the recall "
                             "is measured, such as 60")

    @property
    def share(self) -> float:
        """The share of its tuples each stream's buffer must admit."""
        return self.min_recall ** (1 / self.inputs)

    def describe(self) -> str:
        return f"recall ≥ {self.min_recall:.4g} over {self.period:g} s"


def check(method: str, requirement: Requirement | Recall | None) -> None:
    """A ValueError unless ``method`` is a way to size K that ``requirement`` serves."""
    if method not in POLICIES:
        raise ValueError(f"disorder {method!r}: give one of {', '.join(POLICIES)}")
    if method in ADAPTIVE and requirement is None:
        raise ValueError(f"disorder {method} sizes K for a result quality: state one, such as "
                         "max_error = 0.01 or min_recall = 0.99")


@dataclass(frozen=True)
class Policy:
    """How one query's K is chosen: ``method`` (``POLICIES``), its requirement (for ``am``
    and ``pd``), the fixed lateness L, and what of the query Eq. (4.1) needs: its first windowed
    aggregate's window and slide, and the groups each window's tuples split into."""

    method: str
    requirement: Requirement | Recall | None = None
    lateness: float = 0.0
    window: float = 1.0
    slide: float = 1.0
    groups: float = 1.0
    warmup: float = WARMUP

    def __post_init__(self):
        check(self.method, self.requirement)


@dataclass(frozen=True)
class Decision:
    """K after a unit, and what it was decided from; ``seconds``: how long deciding took (a
    measurement, not an input)."""

    unit: int
    k: float
    high_water: int  # µs
    watermark: int  # µs: what the next unit is judged against
    threshold: float | None = None  # Cvrg_thr
    measured: float | None = None  # the coverage Alg. 4.3 read
    seconds: float = 0.0


@dataclass
class BufferManager:
    """The state of one query's K-slack buffer between units (module docstring)."""

    policy: Policy
    k: float = 0.0
    units: int = 0
    high_water: int | None = None  # µs: the local current time, the latest timestamp so far
    mark: int | None = None  # µs: the watermark the next unit is judged against
    first: int | None = None  # µs: the first unit's earliest timestamp (the warm-up's start)
    largest: float = 0.0  # the largest delay so far, seconds (Max-K-slack's K)
    stats: StatisticsWindow = field(default_factory=StatisticsWindow)
    counts: WindowCounts | None = None
    # The out-of-order tuples so far per coarse-grained delay (Alg. 4.3's M reads them).
    out_of_order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # Per unit: n, Σv, Σv², the span it moved the high-water mark (s), its out-of-order tuples
    # and the runs they come in, its late tuples and their runs.
    values: list[list[float]] = field(default_factory=list)
    pd: PdAdt = field(default_factory=PdAdt)
    # One of a join's streams whose K the join sizes for all of them (``same_k``, ``impose``):
    # its own decisions keep the statistics only. Not state: the gateway says it every batch.
    joint: bool = False

    def __post_init__(self):
        if self.counts is None:
            self.counts = WindowCounts(self.policy.window, self.policy.slide)
        if self.units == 0 and self.policy.method == "fixed":
            self.k = self.policy.lateness

    def observe(self, ts: np.ndarray, late: np.ndarray, values: np.ndarray | None = None
                ) -> Decision:
        """One unit's rows that passed the input suite, in arrival order: timestamps (µs),
        which were late (quarantined), and, where the requirement is on a column's SUM or AVG,
        its values. Returns the decision for the next unit."""
        ts = np.asarray(ts, dtype=np.int64)
        self.units += 1
        if not ts.size:
            return self._decide()
        before = self.high_water
        seen = np.maximum.accumulate(ts if before is None else np.maximum(ts, before))
        waited = seen - ts  # µs
        delays = waited / US
        counts = np.bincount(coarse_micros(waited))
        self.stats.add(delays, counts)
        self.largest = max(self.largest, float(delays.max()))
        disordered = waited > 0
        found = trimmed(np.concatenate([[0], counts[1:]]))  # a delay > 0 is grain ≥ 1
        size = max(found.size, self.out_of_order.size)
        self.out_of_order = (np.pad(self.out_of_order, (0, size - self.out_of_order.size))
                             + np.pad(found, (0, size - found.size)))
        late = np.asarray(late, dtype=bool)
        self.counts.add(ts, late)
        self.high_water = int(seen[-1])
        self.first = int(ts.min()) if self.first is None else self.first
        v = np.asarray(values if values is not None else np.ones(ts.size), dtype=np.float64)
        span = 0.0 if before is None else (self.high_water - before) / US
        self.values = [*self.values, [float(v.size), float(v.sum()), float(np.square(v).sum()),
                                      span, *_runs(disordered), *_runs(late)]][-VALUE_UNITS:]
        return self._decide()

    def _decide(self) -> Decision:
        started = time.perf_counter()
        method, threshold, found = self.policy.method, None, None
        if method == "none":
            self.k = 0.0
        elif method == "max":
            self.k = self.largest
        elif self.joint:
            pass  # the join decides (``same_k``)
        elif method in ADAPTIVE:
            if self.warming_up:
                self.k = self.largest
            else:
                threshold = self.threshold()
                if method == "am":
                    self.k = am_adt(self.stats.histogram(), threshold,
                                    self.stats.max_delay(), coverage.admitted)
                else:
                    found = measured(self.counts, self.high_water / US,
                                     retrospect(self.out_of_order))
                    if found is not None:
                        self.k = self.pd.size(threshold, found, self.stats.max_delay())
        if not self.joint:
            self._mark()
        return Decision(self.units - 1, self.k, self.high_water, self.mark, threshold, found,
                        time.perf_counter() - started)

    @property
    def warming_up(self) -> bool:
        return (self.high_water is None
                or (self.high_water - self.first) / US < self.policy.warmup)

    def impose(self, k: float) -> None:
        """K as the join sized it for all its streams (``same_k``)."""
        self.k = k
        self._mark()

    def _mark(self) -> None:
        if self.high_water is not None:
            mark = (self.high_water // 1000) * 1000 - round(self.k * US)
            self.mark = mark if self.mark is None else max(self.mark, mark)
            # Alg. 4.3 reads windows at most the largest delay old, Eq. (4.9) those of a
            # join's measurement period: older counts are done with.
            requirement = self.policy.requirement
            kept = max(self.largest,
                       requirement.period if isinstance(requirement, Recall) else 0.0)
            self.counts.purge(self.high_water / US - kept - self.policy.slide)

    def threshold(self) -> float:
        """Cvrg_thr, Eq. (4.1), for the requirement over the recent units' values: N the
        tuples of one group's window, μ and σ² their values' (a COUNT's are all 1). For a
        join's recall, the share of its tuples the stream must admit (``Recall``).

        Eq. (4.1) takes each tuple to be missing independently of the others. Out-of-order
        tuples come in runs (Ji's Table 4.1: 83 % of them follow another), and a buffer that
        misses one misses its run: a sum sampled in clusters of r tuples has r times the
        variance of one sampled tuple by tuple (Kish's design effect), so N counts runs,
        N / r, r being the tuples of one run in one group (a run's tuples spread over the
        groups). The runs are those the buffer missed in the recent units (late tuples in a
        row), or, while it missed none, the out-of-order tuples' (longer: delayed runs
        that follow one another make one)."""
        if isinstance(self.policy.requirement, Recall):
            return self.policy.requirement.share
        units = np.array(self.values).reshape(-1, 8)
        n, total, squares, _, disordered, runs, late, late_runs = units.sum(axis=0)
        if not n:
            return 1.0
        # The rate over the units that moved the high-water mark (the first moves none).
        moved = units[units[:, 3] > 0]
        rate = moved[:, 0].sum() / moved[:, 3].sum() if moved.size else n
        mean, requirement, groups = total / n, self.policy.requirement, self.policy.groups
        if late_runs:
            disordered, runs = late, late_runs
        run = 1 + (disordered / runs - 1) / groups if runs else 1.0
        tuples = rate * self.policy.window / groups / run
        return coverage.sum_threshold(requirement.max_error, tuples, mean,
                                      max(squares / n - mean * mean, 0.0),
                                      1 - requirement.confidence)

    def to_json(self) -> dict:
        """The state after a unit, as a run's progress stores it; ``from_json`` reads it back
        exactly (JSON keeps a float's every bit)."""
        return {"k": self.k, "units": self.units, "high_water": self.high_water,
                "mark": self.mark, "first": self.first, "largest": self.largest,
                "stats": self.stats.to_json(), "counts": self.counts.to_json(),
                "out_of_order": self.out_of_order.tolist(), "values": self.values,
                "pd": [self.pd.alpha, self.pd.error]}

    @classmethod
    def from_json(cls, policy: Policy, data: dict | None) -> BufferManager:
        """The manager after the units ``data`` (``to_json``) saw; a new one for None."""
        if data is None:
            return cls(policy)
        alpha, error = data["pd"]
        return cls(policy, data["k"], data["units"], data["high_water"], data["mark"],
                   data["first"], data["largest"],
                   StatisticsWindow.from_json(data["stats"], GRANULARITY),
                   WindowCounts.from_json(policy.window, policy.slide, data["counts"]),
                   np.array(data["out_of_order"], np.int64), data["values"],
                   PdAdt(alpha=alpha, error=error))


def joins_same_k(policies: list[Policy | None]) -> bool:
    """Do a join's streams share one K (``same_k``)? Where each sizes it by AM-adt for the
    join's recall."""
    return len(policies) > 1 and all(
        p is not None and p.method == "am" and isinstance(p.requirement, Recall)
        for p in policies)


def same_k(managers: list[BufferManager]) -> tuple[float, float | None, float]:
    """Ji's Same-K policy (Sec. 4.2.3, Theorem 4.1) with AM-adt (Alg. 4.7) and EqSel: the
    least K, in steps of g, at which the product of the streams' admitted shares f_{D_i^K}(0)
    (``Recall``: a late tuple misses every window) meets the instant recall Γ' (Eq. 4.9,
    ``kslack.calibration``), up to the first K past the largest delay seen; while any stream
    warms up, the largest delay of all (Max-K-slack). Returns K, Γ' (None while warming up)
    and how long deciding took."""
    started = time.perf_counter()
    largest = max(m.largest for m in managers)
    if any(m.warming_up for m in managers):
        return largest, None, time.perf_counter() - started
    shares = [np.cumsum(m.stats.histogram()) for m in managers]
    size = max(s.size for s in shares)
    product = np.prod([np.pad(s, (0, size - s.size), constant_values=1.0) for s in shares],
                      axis=0)
    requirement, marks = managers[0].policy.requirement, [m.mark for m in managers]
    target = requirement.min_recall if None in marks else instant_recall(
        requirement.min_recall, *period_results([m.counts for m in managers], min(marks) / US,
                                                requirement.period))
    k = least_reaching(product, target, max(m.stats.max_delay() for m in managers))
    return k, target, time.perf_counter() - started


def _runs(flags: np.ndarray) -> tuple[float, float]:
    """How many of a unit's tuples (in arrival order) are flagged, and in how many runs."""
    runs = np.count_nonzero(flags[1:] & ~flags[:-1]) + flags[:1].sum()
    return float(flags.sum()), float(runs)

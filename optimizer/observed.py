"""Statistics observed over a running query, for re-optimising it (issue: adaptive plans).

The runtime feeds one ``BatchObservation`` per micro-batch: the stream tuples it held, how far it
advanced the stream's event time, the wall seconds it took, and how many rows each relation
crossing to DuckDB held. ``Monitor`` turns the recent ones into the catalog's statistics (the
arrival rate, the selectivities of the selections before the crossings) and into the running
plan's observed load. A re-optimisation is due only when the observed rate has left a band
around the rate the running plan was chosen for, on ``confirm`` checks in a row: a rate that
crosses the band's edge for one batch is noise (this machine's timings vary by 15-20 %), and
without the band a rate near a plan boundary would flip the plan back and forth.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from optimizer.expressions import predicate_key
from optimizer.logical import LogicalPlan, Project, Select, Window, windows
from optimizer.statistics import Statistics


@dataclass(frozen=True)
class BatchObservation:
    tuples: int  # stream tuples in the batch
    event_seconds: float  # how far the batch advanced the stream's latest event time
    wall_seconds: float  # the batch's processing time, Spark's job and the MIG's evaluation
    crossings: dict[str, int] = field(default_factory=dict)  # relation id -> rows it moved


@dataclass(frozen=True)
class Observed:
    rate: float  # tuples per second of event time over the recent batches
    load: float  # wall seconds per second of event time (a plan keeps up while it is <= 1)
    selectivity: dict[str, float]  # relation id -> its rows per stream tuple
    batches: int  # how many batches the estimate rests on


class Monitor:
    """The recent micro-batches of one running plan."""

    def __init__(self, recent: int = 5, band: float = 0.25, confirm: int = 3):
        """``recent`` batches make an estimate; a re-optimisation is due after ``confirm``
        estimates in a row put the rate more than ``band`` (relative) off the planned rate."""
        if recent < 1 or confirm < 1 or band <= 0:
            raise ValueError("recent and confirm must be 1 or more, band above 0")
        self.batches: deque[BatchObservation] = deque(maxlen=recent)
        self.band, self.confirm = band, confirm
        self.outside = 0  # estimates in a row outside the band

    def observe(self, batch: BatchObservation) -> None:
        if batch.event_seconds > 0 or batch.tuples:  # an idle trigger says nothing
            self.batches.append(batch)

    def estimate(self) -> Observed | None:
        """The statistics of the recent batches, once there are as many as ``recent``. Sums,
        not a median of per-batch ratios: a batch that advanced event time by little has a
        ratio that means little."""
        if len(self.batches) < (self.batches.maxlen or 1):
            return None
        seconds = sum(b.event_seconds for b in self.batches)
        tuples = sum(b.tuples for b in self.batches)
        if seconds <= 0:
            return None
        moved: dict[str, int] = {}
        for b in self.batches:
            for relation, rows in b.crossings.items():
                moved[relation] = moved.get(relation, 0) + rows
        return Observed(tuples / seconds, sum(b.wall_seconds for b in self.batches) / seconds,
                        {r: n / tuples for r, n in moved.items()} if tuples else {},
                        len(self.batches))

    def due(self, planned_rate: float, planned_selectivity: dict[str, float] | None = None
            ) -> bool:
        """Whether to re-optimise: the observed rate has stayed outside [r/(1+band), r·(1+band)]
        of the plan's rate r, or a selection's selectivity outside the band around the one the
        plan was chosen with (``planned_selectivity``, relation id -> rows per stream tuple),
        for ``confirm`` estimates in a row; or the plan falls behind."""
        observed = self.estimate()
        if observed is None:
            return False
        planned = {"": planned_rate, **(planned_selectivity or {})}
        seen = {"": observed.rate, **observed.selectivity}
        off = any(abs(math.log(max(seen[k], 1e-9) / max(v, 1e-9))) > math.log1p(self.band)
                  for k, v in planned.items() if k in seen)
        self.outside = self.outside + 1 if off or observed.load > 1 else 0
        return self.outside >= self.confirm

    def reset(self) -> None:
        """After a migration: the new plan's batches are its own."""
        self.batches.clear()
        self.outside = 0



def selections(plan: LogicalPlan) -> dict[str, Select]:
    """The relations (by id) that are one selection of a single stream's windowed rows, under
    projections or not: their rows per stream tuple are the predicate's selectivity (Eq. 6.1,
    with the window's rate as λ_in). Other crossings (aggregates, joins, chained selections)
    say nothing of one predicate."""
    if len({w.stream for w in windows(plan.root)}) != 1:
        return {}

    def below(node):
        while isinstance(node, Project):
            node = node.input
        return node

    found = {}
    for node, rid in plan.relation_ids.items():
        selection = below(node)
        if isinstance(selection, Select) and isinstance(below(selection.input), Window):
            found[rid] = selection
    return found


def planned_selectivities(plan: LogicalPlan, stats: Statistics) -> dict[str, float]:
    """The selectivities a plan was chosen with, by relation id (``selections``)."""
    return {rid: stats.selectivity(s) for rid, s in selections(plan).items()}


def catalog_selectivities(plan: LogicalPlan, observed: Observed) -> dict[str, float]:
    """Observed selectivities as the catalog keys them, by predicate (``selections``)."""
    return {predicate_key(s.predicate): observed.selectivity[rid]
            for rid, s in selections(plan).items() if rid in observed.selectivity}

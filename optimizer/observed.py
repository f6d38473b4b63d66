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
from optimizer.logical import Aggregate, LogicalPlan, Project, Select, Window, windows
from optimizer.statistics import Statistics


@dataclass(frozen=True)
class BatchObservation:
    tuples: int  # stream tuples in the batch
    event_seconds: float  # how far the batch advanced the stream's latest event time
    wall_seconds: float  # the batch's processing time, Spark's job and the MIG's evaluation
    crossings: dict[str, int] = field(default_factory=dict)  # relation id -> rows it moved
    # Aggregates whose rows the batch saw (crossing from Spark, or the root's results):
    # relation id -> (rows, window_ends they belong to).
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # part of the plan -> wall seconds


@dataclass(frozen=True)
class Observed:
    rate: float  # tuples per second of event time over the recent batches
    load: float  # wall seconds per second of event time (a plan keeps up while it is <= 1)
    selectivity: dict[str, float]  # relation id -> its rows per stream tuple
    batches: int  # how many batches the estimate rests on
    groups: dict[str, float] = field(default_factory=dict)  # relation id -> rows per window_end
    # Each part of the plan's wall seconds per second of event time (Spark's, each DB-op's).
    work: dict[str, float] = field(default_factory=dict)

    def statistics(self) -> dict[str, float]:
        """Selectivities and groups by relation id (an id is one or the other)."""
        return {**self.selectivity, **self.groups}


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
        grouped: dict[str, tuple[int, int]] = {}
        work: dict[str, float] = {}
        for b in self.batches:
            for part, spent in b.timings.items():
                work[part] = work.get(part, 0.0) + spent / seconds
            for relation, rows in b.crossings.items():
                moved[relation] = moved.get(relation, 0) + rows
            for relation, (rows, ends) in b.groups.items():
                total = grouped.get(relation, (0, 0))
                grouped[relation] = (total[0] + rows, total[1] + ends)
        return Observed(tuples / seconds, sum(b.wall_seconds for b in self.batches) / seconds,
                        {r: n / tuples for r, n in moved.items()} if tuples else {},
                        len(self.batches),
                        {r: rows / ends for r, (rows, ends) in grouped.items() if ends}, work)

    def due(self, planned_rate: float, planned: dict[str, float] | None = None) -> bool:
        """Whether to re-optimise: the observed rate has stayed outside [r/(1+band), r·(1+band)]
        of the plan's rate r, or a selectivity or an aggregate's groups outside the band around
        the one the plan was chosen with (``planned``, by relation id: ``planned_statistics``),
        for ``confirm`` estimates in a row; or the plan falls behind."""
        observed = self.estimate()
        if observed is None:
            return False
        planned = {"": planned_rate, **(planned or {})}
        seen = {"": observed.rate, **observed.statistics()}
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


def aggregations(plan: LogicalPlan) -> dict[str, tuple[str, list[str]]]:
    """The aggregates (by relation id) of one stream's windowed rows, selected and projected or
    not, that group by columns of the stream: their rows per window_end are the distinct values
    of those columns (Eq. 6.3's groups), as (stream, columns)."""
    if len({w.stream for w in windows(plan.root)}) != 1:
        return {}
    found = {}
    for node, rid in plan.relation_ids.items():
        if not isinstance(node, Aggregate):
            continue
        below = node.input
        while isinstance(below, Select | Project):
            below = below.input
        keys = [k for k in node.group_by if k not in ("window_end", "window_start")]
        if isinstance(below, Window) and keys and set(keys) <= set(below.columns):
            found[rid] = (below.stream, keys)
    return found


def planned_statistics(plan: LogicalPlan, stats: Statistics) -> dict[str, float]:
    """The selectivities (``selections``) and groups (``aggregations``) a plan was chosen with,
    by relation id."""
    nodes = {rid: node for node, rid in plan.relation_ids.items()}
    return {**{rid: stats.selectivity(s) for rid, s in selections(plan).items()},
            **{rid: stats.groups(nodes[rid]) for rid in aggregations(plan)}}


def catalog_statistics(plan: LogicalPlan, observed: Observed) -> dict:
    """Observed statistics as the catalog keeps them (``Catalog.with_statistics``): the
    selectivities by predicate, the groups as distinct counts of the grouping columns."""
    distinct: dict[str, dict[str, float]] = {}
    for rid, (stream, keys) in aggregations(plan).items():
        if rid in observed.groups:
            distinct.setdefault(stream, {})[", ".join(sorted(keys))] = observed.groups[rid]
    return {"selectivity": {predicate_key(s.predicate): observed.selectivity[rid]
                            for rid, s in selections(plan).items()
                            if rid in observed.selectivity},
            "distinct": distinct}


def merged(statistics: dict, observed: dict) -> dict:
    """``observed`` statistics over earlier ones (both ``Catalog.with_statistics``' form)."""
    distinct = {s: dict(c) for s, c in statistics.get("distinct", {}).items()}
    for stream, counts in observed.get("distinct", {}).items():
        distinct.setdefault(stream, {}).update(counts)
    return {"selectivity": {**statistics.get("selectivity", {}),
                            **observed.get("selectivity", {})}, "distinct": distinct}

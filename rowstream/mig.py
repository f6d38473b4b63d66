"""The MIG operator (Ji Sec. 6.2, Fig. 6.2): the bridge from Spark micro-batches to a DB-op.

It runs inside the Spark query as ``foreachBatch``. For every micro-batch it

1. runs the Spark-side operators of each DB-op input on the batch and moves their rows to
   DuckDB as Arrow (``toArrow``; DuckDB scans the Arrow buffers);
2. evaluates the DB-op for every window_end the batch completes, all in one query: the input
   is in event-time order, so every window ending at or before the batch's latest event is
   complete;
3. commits the result rows and its progress together, keyed by the batch id, so that Spark's
   replay of a batch after a restart neither loses nor duplicates rows;
4. purges the rows no open window needs.

It counts the tuples and bytes it moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from columnar.fragment_sql import Fragment, fragments
from columnar.store import ColumnarStore
from optimizer.cost import DUCKDB
from optimizer.errors import TandemError
from optimizer.logical import Project, Select
from optimizer.physical import PhysicalPlan
from rowstream.dsps import relation

EPOCH = datetime(1970, 1, 1)


@dataclass
class Transfers:
    """Tuples and bytes moved from Spark to DuckDB (calibration needs them). Nothing moves back
    yet: the runtime runs no Spark operator after a DB-op."""

    to_duckdb_tuples: int = 0
    to_duckdb_bytes: int = 0


@dataclass
class BatchReport:
    batch_id: int
    tuples: int  # stream tuples in the batch
    event_time: datetime | None  # latest event time seen
    window_ends: int  # window_ends evaluated
    result_rows: int
    seconds: float
    final: bool  # the heartbeat that ends a finite stream


@dataclass
class Mig:
    """foreachBatch callable that runs the DB-op of a plan whose Spark side is the gateway plus
    selections and projections of the windowed stream (``mig_fragment`` checks that)."""

    query: str
    physical: PhysicalPlan
    fragment: Fragment
    store: ColumnarStore
    on_batch: Callable[[BatchReport], None] | None = None
    final_end: datetime | None = None  # a finite stream's last window_end
    transfers: Transfers = field(default_factory=Transfers)
    finished: bool = False

    def __post_init__(self):
        by_id = self.physical.logical.by_id
        self.inputs = [(table.table, by_id[table.table.removeprefix("in_")])
                       for table in self.fragment.inputs]
        self.step = timedelta(seconds=self.physical.logical.root.slide)
        self._prepared = False

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        batch = batch.persist()  # the stream is read once, whatever the number of inputs
        try:
            report = self._process(batch, batch_id)
        finally:
            batch.unpersist()
        report.seconds = time.perf_counter() - started
        self.finished = self.finished or report.final
        if self.on_batch:
            self.on_batch(report)

    def _process(self, batch: DataFrame, batch_id: int) -> BatchReport:
        data = batch.where(~F.col("heartbeat"))
        # Event times as microseconds: collected timestamps would come back in local time.
        latest, first, tuples, final = batch.agg(
            F.unix_micros(F.max("ts")), F.unix_micros(F.min(F.when(~F.col("heartbeat"), F.col("ts")))),
            F.count(F.when(~F.col("heartbeat"), 1)), F.max(F.col("heartbeat").cast("int")),
        ).first()
        latest, first = _utc(latest), _utc(first)
        arrows = {table: naive(relation(node, data).toArrow()) for table, node in self.inputs}
        if not self._prepared:
            self.store.prepare(self.query, [self.fragment], {t: a.schema for t, a in arrows.items()})
            self._prepared = True
        for table, rows in arrows.items():
            self.store.append(self.query, table, rows, batch_id)
            self.transfers.to_duckdb_tuples += rows.num_rows
            self.transfers.to_duckdb_bytes += rows.nbytes

        first_ts, last_end = self.store.progress(self.query, before=batch_id)
        first_ts = first_ts or first
        ends: list[datetime] = []
        if first_ts is not None and latest is not None:
            end = last_end + self.step if last_end else _first_end(first_ts, self.step)
            last = min(latest, self.final_end) if self.final_end else latest
            while end <= last:  # complete: every event before it has arrived
                ends.append(end)
                end += self.step
        results = self.store.evaluate(self.query, self.fragment, ends) if ends else None
        rows = self.store.commit(self.query, batch_id, results, first_ts,
                                 ends[-1] if ends else last_end)
        if ends:
            # One batch behind: a replay of this batch still finds the rows it needs.
            self.store.purge(self.query, self.fragment, ends[0])
        return BatchReport(batch_id, tuples, latest, len(ends), rows, 0.0, bool(final))


def mig_fragment(physical: PhysicalPlan) -> Fragment:
    """This runtime runs in Spark the gateway and stateless operators of the windowed stream,
    and everything else in one DB-op at the root. Other placements are refused by name."""
    plan = physical.logical
    # A selection or projection of rows not yet tagged with a window has only such below it.
    stateful = [plan.ids[op] for op in plan.operators if physical.engine_of(op) != DUCKDB
                and (op.instantiated or not isinstance(op, (Select, Project)))]
    if not plan.operators or stateful or physical.engine_of(plan.root) != DUCKDB:
        where = ", ".join(stateful) or plan.ids[plan.root]
        raise TandemError(
            f"this placement runs {where} in Spark; the runtime runs in Spark only the selections "
            "and projections of a windowed stream, with the rest in DuckDB (Spark's stateful "
            "operators come next): place them in DuckDB, e.g. --placement duckdb")
    [fragment] = fragments(physical)
    return fragment


def naive(table: pa.Table) -> pa.Table:
    """Spark hands timestamps as UTC instants; DuckDB's window state holds UTC wall time."""
    fields = [pa.field(f.name, pa.timestamp("us")) if pa.types.is_timestamp(f.type) else f
              for f in table.schema]
    return table.cast(pa.schema(fields))


def _utc(micros: int | None) -> datetime | None:
    """UTC wall time of microseconds since the epoch."""
    return None if micros is None else EPOCH + timedelta(microseconds=micros)


def _first_end(first_ts: datetime, step: timedelta) -> datetime:
    """The first window_end after the first event (DESIGN.md)."""
    step_us = step // timedelta(microseconds=1)
    since = (first_ts - EPOCH) // timedelta(microseconds=1)
    return EPOCH + timedelta(microseconds=(since // step_us + 1) * step_us)

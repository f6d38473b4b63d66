"""The MIG operator (Ji Sec. 6.2, Fig. 6.2): the bridge between Spark micro-batches and DuckDB.

It runs inside the Spark query as ``foreachBatch``, over one streaming DataFrame that holds
every relation leaving Spark's streaming operators (a *crossing*, ``optimizer/deployment.py``)
and the event times of the stream: the source's rows, scanned once, carry each stateless
crossing as a column, and the rows of Spark's stateful operators are unioned to them. Every
relation is a struct column named by its relation id, null in the rows that are not its own.
For every micro-batch it

1. has the gateway judge the batch (``rowstream/gateway.py``: its admitted rows, its quarantined
   rows, its high-water mark), moves the admitted rows of each crossing to its DuckDB table as
   Arrow (``toArrow``; DuckDB scans the Arrow buffers), and records how far each crossing is
   complete: the stream up to its latest event less the allowed lateness (its watermark,
   ``rowstream/eventtime.py``; the gateway has quarantined the rows that came later than that),
   a relation of Spark's stateful operators up to the last window its heartbeat rows closed;
2. evaluates the part of the plan after the MIG for every window_end that all crossings have
   completed, bottom-up: each DB-op as one DuckDB query over all those window_ends, each Spark
   operator after a DB-op on DataFrames of DuckDB's rows (``createDataFrame`` from Arrow);
3. commits the result rows and the last window_end evaluated together, keyed by the batch id,
   so that Spark's replay of a batch after a restart neither loses nor duplicates rows;
4. purges the rows no open window needs.

Steps 2–4 run in a thread of their own, one batch at a time, while Spark prepares the next
micro-batch: on two cores Spark's per-batch work and DuckDB's evaluation overlap. Step 1 stays
in ``foreachBatch``: once Spark has committed a batch, its rows and how far they complete the
crossings are in DuckDB, and an evaluation a restart interrupted is redone from the last
committed window_end (``ColumnarStore.arrived`` / ``commit``). Where DuckDB reads the batch's
files by reference (``rowstream/by_reference.py``), no Spark job reads the batch and step 1
runs on the thread too: Spark's control of the next batch overlaps all of DuckDB's work, and
a batch Spark committed before its rows reached DuckDB is read again from the files Spark's
checkpoint lists (``recover``).

When the whole plan runs in Spark, the root is the only crossing and, once Spark has tagged its
rows with their window, they are the results as they come; with the "buckets" design
(``rowstream/buckets.py``) one stateful operator evaluates the whole plan and hands over the root.
It counts the tuples and bytes it moves in each direction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructField, StructType

from columnar.fragment_sql import (
    Fragment,
    FragmentInput,
    PaneTable,
    input_table,
    read_sql,
    rows_kept,
)
from columnar.store import ColumnarStore, Progress
from optimizer.deployment import Deployment
from optimizer.errors import TandemError
from optimizer.keys import partition_keys
from optimizer.logical import Aggregate, LogicalPlan, Node, signature
from rowstream.buckets import WHOLE_PLAN
from rowstream.by_reference import FileReferences, Read
from rowstream.dsps import HEARTBEAT, Streaming, apply
from rowstream.eventtime import EPOCH, watermark
from rowstream.gateway import (
    QUARANTINE,
    STREAM,
    Gateway,
    Judge,
    Quarantined,
    Slack,
    admitted_rows,
    quarantined_rows,
)
from rowstream.landing import committed_batches
from rowstream.native import NativeJudge
from rowstream.partitioned import (
    FILE_READ,
    SUMMARY,
    PartitionedOp,
    any_of,
    judged_in_executors,
    partitioned_op,
    stream_summary,
)
from rowstream.relations import naive, relation_rows, utc_instants
from rowstream.suite_spark import CHECKS, file_checks, judged_in_jvm, passed

SPARK_PART = "spark"  # BatchReport.timings: Spark's part of a micro-batch
# The stream's latest admitted event, where the gateway, not its Spark source, keeps it (progress).
HIGH_WATER = "high_water"


@dataclass
class Transfers:
    """Tuples and bytes moved between the engines (calibration needs them)."""

    to_duckdb_tuples: int = 0
    to_duckdb_bytes: int = 0
    to_spark_tuples: int = 0
    to_spark_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, rows: pa.Table, to_spark: bool = False) -> None:
        self.add(rows.num_rows, rows.nbytes, to_spark)

    def add(self, tuples: int, size: int, to_spark: bool = False) -> None:
        with self._lock:  # the arrivals' thread and the evaluations' thread both move rows
            if to_spark:
                self.to_spark_tuples += tuples
                self.to_spark_bytes += size
            else:
                self.to_duckdb_tuples += tuples
                self.to_duckdb_bytes += size


@dataclass
class BatchReport:
    batch_id: int
    tuples: int  # stream tuples in the batch
    event_time: datetime | None  # latest event time seen
    window_ends: int  # window_ends evaluated
    result_rows: int
    quarantined: Quarantined  # rows the gateway could not read or that arrived late
    seconds: float  # from the batch's arrival to its evaluation's commit
    # Rows of each relation of the stream's rows that crossed to DuckDB (the monitor's
    # selectivities, optimizer/observed.py), by relation id.
    crossed: dict[str, int] = field(default_factory=dict)
    # Rows of each aggregate that crossed from Spark, or of the root aggregate's results, and
    # the window_ends they belong to (the monitor's groups), by relation id.
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Wall seconds of each part of the plan: "spark" (its job and the rows' way into DuckDB,
    # on the micro-batch thread) and each DB-op evaluated in the driver's DuckDB.
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class Arrival:
    """A micro-batch whose rows are in DuckDB, to be evaluated."""

    batch_id: int
    started: float  # perf_counter when foreachBatch began
    tuples: int
    latest: datetime | None
    quarantined: Quarantined
    first_ts: datetime | None  # the run's first event
    frontiers: dict[str, datetime]  # how far the crossings are complete after the batch
    results: pa.Table | None  # the root's rows, when Spark computed them (``Mig.direct``)
    # With duckdb-partitioned DB-ops: the window_ends the batch completes, and each such
    # DB-op's rows for them (evaluated in the executors during the batch's job).
    ends: list[datetime] | None = None
    partitioned: dict[str, pa.Table] | None = None
    crossed: dict[str, int] = field(default_factory=dict)  # as in BatchReport
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)  # as in BatchReport
    timings: dict[str, float] = field(default_factory=dict)  # as in BatchReport


@dataclass(frozen=True)
class Gathered:
    """What the driver holds of a judged micro-batch once its rows have crossed (or, on
    duckdb-partitioned, stayed in the executors)."""

    everything: pa.Table  # the admitted rows of the relations the driver reads, struct columns
    tuples: int  # stream tuples
    latest: datetime | None  # the latest event time (heartbeats' too)
    first: datetime | None  # the earliest tuple's
    quarantined: pa.Table  # gateway.QUARANTINE_TABLE
    high_water: datetime | None  # the gateway's, after the batch
    read: Read | None = None  # the stream's rows, where DuckDB read the batch's files itself
    slack: Slack | None = None  # where a K-slack buffer judged the batch

    @classmethod
    def of(cls, read: Read) -> Gathered:
        """A batch DuckDB read itself (the by-reference gateway)."""
        return cls(pa.table({}), read.tuples, read.latest, read.first, read.quarantine_rows(),
                   read.high_water, read, read.slack)


@dataclass(frozen=True)
class Layout:
    """Where a deployed plan keeps its window state in the driver's DuckDB."""

    plan: LogicalPlan
    crossings: dict[str, Node]  # relation id -> every relation leaving Spark's operators
    fragments: dict[str, Fragment]
    panes: list[PaneTable]  # the central DB-ops' partial aggregates per pane
    kept: set[str]  # the input tables whose rows the store keeps (``rows_kept``)
    central: dict[str, Node]  # the crossings whose rows the driver needs
    tables: list[FragmentInput]  # every table the evaluations read and purge

    def stored(self, rid: str) -> tuple:
        """How the rows of the stream's relation ``rid`` are kept: the relation's structure,
        its table if its rows are kept, and the pane tables they feed. A plan that a run
        migrates to takes over the tables of a relation stored alike (Zhu's state matching)."""
        node = self.crossings[rid]
        table = input_table(node, self.plan)
        return (signature(node), table if table.table in self.kept else None,
                tuple(p for p in self.panes if p.source.table == table.table))


def layout(deployment: Deployment, db_ops: list[Fragment]) -> Layout:
    """``db_ops``: the plan's DB-ops as ``runtime.explain`` generated them, once: the SQL
    that runs is the SQL that ``tandem explain`` and the Airflow page show."""
    plan = deployment.physical.logical
    crossings = {deployment.relation_id(n): n for n in deployment.crossings}
    found = {f.id: f for f in db_ops}
    on_partitions = {s.db_op for s in deployment.steps if s.partitioned}
    central = [f for f in found.values() if f.id not in on_partitions]
    # Every table of the part after the MIG in the driver's DuckDB: the crossings', and
    # those of Spark operators' rows that a DB-op reads.
    panes = [p for f in central for p in f.panes]
    kept = rows_kept(deployment, central)
    # The rows the driver appends: those a DB-op reads, those its pane tables keep partials of
    # (but a split aggregate's, whose partials Spark computes), and the rows kept.
    sources = ({t.table for f in central for t in f.inputs} | kept
               | {p.source.table for p in panes if p.spark_sql is None})
    elsewhere = ({t.table for f in found.values() if f.id in on_partitions for t in f.sources}
                 | {p.source.table for p in panes if p.spark_sql is not None}) - sources
    tables = {t.table: t for t in (input_table(n, plan) for n in crossings.values())
              if t.table in kept}
    for fragment in central:
        tables.update({t.table: t for t in fragment.inputs})
    tables.update({p.table.table: p.table for p in panes})
    # The crossings whose rows the driver needs: all but those only partitions read.
    return Layout(plan, crossings, found, panes, kept,
                  {rid: n for rid, n in crossings.items()
                   if input_table(n, plan).table not in elsewhere},
                  list(tables.values()))


class Interrupted(Exception):
    """The micro-batch a run interrupted on purpose refuses (``Mig.stop_after``)."""


@dataclass
class Mig:
    """The ``foreachBatch`` callable of a deployed plan; ``stream`` builds what it reads."""

    query: str
    deployment: Deployment
    store: ColumnarStore
    spark: SparkSession
    db_ops: list[Fragment]  # the explained plan's fragment SQL (``layout``)
    gateway: Gateway  # how the stream is read and each micro-batch judged
    on_batch: Callable[[BatchReport], None] | None = None
    final_end: datetime | None = None  # a finite stream's last window_end
    lateness: float = 0.0  # the stream's allowed lateness L, seconds (rowstream/eventtime.py)
    checkpoint: str | None = None  # Spark's: duckdb-partitioned DB-ops keep their files there
    spark_design: str = "built-in"  # one of SPARK_DESIGNS ("buckets": pure-Spark plans only)
    # A plan a run migrated to (``runtime/migration.py``) keeps its state under its own name and
    # writes its results into the run's (``results``), numbering its batches from
    # ``batch_base``; it evaluates the window_ends after ``floor``, the last its run evaluated.
    results: str | None = None
    batch_base: int = 0
    floor: datetime | None = None
    # The stream relations whose tables it took over from the plan before, which hold their
    # rows before ``taken_until``: the rows it reads again, to rebuild its other states, skip them.
    taken: frozenset[str] = frozenset()
    taken_until: datetime | None = None
    transfers: Transfers = field(default_factory=Transfers)
    finished: bool = False
    failure: Exception | None = None  # what stopped a micro-batch
    paused: bool = False  # takes no more batches: its run stops
    # A run interrupted on purpose (a test's restart) after this many micro-batches: the next
    # one is refused, not skipped, so that Spark does not commit it and the resumed run reads it.
    stop_after: int | None = None
    interrupted: bool = False

    def __post_init__(self):
        plan = self.deployment.physical.logical
        self.plan = plan
        self.step = timedelta(seconds=plan.root.slide)
        found = layout(self.deployment, self.db_ops)
        self.crossings, self.fragments, self.panes = found.crossings, found.fragments, found.panes
        self.kept, self.central, self.tables = found.kept, found.central, found.tables
        # SQL that reads a crossing's rows for the window_ends, built once, not per micro-batch.
        self.reads = {rid: read_sql(node, plan) for rid, node in self.crossings.items()}
        self.root = plan.relation_ids[plan.root]
        self.direct = self.root in self.crossings and plan.root.instantiated
        self.partitioned = {s.db_op: self._partitioned_op(self.fragments[s.db_op], s.node)
                            for s in self.deployment.steps if s.partitioned}
        # The split aggregates' pane tables, each with the crossing whose rows Spark aggregates.
        sourced = {input_table(n, plan).table: rid for rid, n in self.crossings.items()}
        self.split = {p: sourced[p.source.table] for p in self.panes if p.spark_sql}
        self.driver_panes = [p for p in self.panes if p not in self.split]  # appended here
        # Split aggregates that read every row of the stream the driver needs: a clean batch
        # is judged in the JVM, in the job of their partials (``_split_at_once``).
        self._split_only = bool(self.split) and not (self.partitioned or self.central)
        self._planned: dict[int, datetime | None] = {}  # batch -> last window_end it evaluates
        self.evaluator = self.store.cursor()
        self._releasing = threading.Lock()  # results go where ``release`` says, all or none
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"tandem-{self.query}")
        self._pending: Future | None = None
        self._taken = 0  # micro-batches this MIG took (``stop_after``)

    def stream(self, source: DataFrame) -> DataFrame:
        """What ``foreachBatch`` receives. The source is scanned once for its event times, its
        quarantined rows and every stateless crossing (a struct column each, null where a row
        is not in it); each crossing of Spark's stateful operators is unioned to that scan as a
        struct column of its own. Operators see only the rows that the source did not
        quarantine; the stream's relation holds the columns the gateway judges. A gateway that
        hands DuckDB the files by reference has Spark read nothing: the batch is its plan."""
        if self.gateway.by_reference:
            return source
        bad = F.col("reason").isNotNull()
        # The watermark sees only admitted rows and heartbeats: a quarantined row's timestamp,
        # however far off, moves no engine's event time.
        admitted = source.where(~bad).withWatermark(self.gateway.schema.time_column,
                                                    f"{round(self.lateness * 1000)} milliseconds")
        operators = Streaming(admitted, self.final_end, panes=self.spark_design == "panes")
        scan = [F.when(~bad, F.struct(*self.gateway.judged, HEARTBEAT)).alias(STREAM),
                F.when(bad, F.struct(*self.gateway.schema.quarantined.names)).alias(QUARANTINE)]
        parts = []
        for rid, node in self.crossings.items():
            if node.instantiated:
                rows = operators.tagged(node)
                if self.direct and (whole := WHOLE_PLAN.get(self.spark_design)):
                    buckets = int(self.spark.conf.get("spark.sql.shuffle.partitions"))
                    rows = whole(admitted, node, rows.schema, buckets, self.final_end,
                                 self.lateness)
                parts.append(rows.select(F.struct(*rows.columns).alias(rid)))
            else:
                scan.append(F.when(~bad, operators.row_struct(node)).alias(rid))
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True),
                      parts, source.select(*scan))

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.paused:  # the run stops here for a migration: this batch is the next plan's
            return
        if self.stop_after is not None and self._taken >= self.stop_after:
            self.interrupted = True
            raise Interrupted(f"the run stops after {self.stop_after} micro-batches, as asked")
        self._taken += 1
        try:
            if self.gateway.by_reference:
                # No Spark job reads the batch: DuckDB reads its files on the MIG's thread
                # while Spark plans the next one. Spark may commit the batch before its rows
                # reach DuckDB; its files stay in the landing directory and in Spark's
                # checkpoint, and ``recover`` reads such a batch again.
                self._wait()
                self._pending = self._thread.submit(self._arrive_and_evaluate,
                                                    self.batch_base + batch_id,
                                                    time.perf_counter())
                return
            arrival = self.arrive(batch, self.batch_base + batch_id, time.perf_counter())
            self._wait()  # one evaluation at a time, in batch order
            self._pending = self._thread.submit(self.evaluate_batch, arrival)
            if self.direct:
                # Spark's rows are the results and exist only in this batch: they are in
                # DuckDB before Spark commits the batch, or Spark replays it.
                self._wait()
        except Exception as err:
            # Spark wraps it in a Java exception whose message begins with the Py4J proxy's.
            self.failure = self.failure or err
            raise

    def _wait(self) -> None:
        """Wait for the pending evaluation; raise what stopped one (it fails the query)."""
        if self._pending is not None:
            self._pending.result()
        if self.failure is not None:
            raise self.failure

    def recover(self) -> None:
        """Evaluate what a stopped run left arrived but unevaluated. Spark may have committed
        that batch and will not replay it; if it has not, its replay takes these results back
        and evaluates again. By reference, also read the batches Spark committed whose rows
        never reached DuckDB (``__call__``), from the files its checkpoint lists."""
        pending = self.store.unevaluated(self.query)
        if pending is not None:
            batch_id, progress = pending
            self._pending = self._thread.submit(self.evaluate_batch, Arrival(
                batch_id, time.perf_counter(), 0, None, Quarantined(), progress.first_ts,
                progress.frontiers, None))
            self._wait()
        if self.gateway.by_reference and self.checkpoint is not None:
            last = self.store.last_arrival(self.query)
            for batch in sorted(committed_batches(self.checkpoint)):
                if last is None or self.batch_base + batch > last:
                    self._pending = self._thread.submit(
                        self._arrive_and_evaluate, self.batch_base + batch, time.perf_counter())
                    self._wait()

    def _arrive_and_evaluate(self, batch_id: int, started: float) -> None:
        """Steps 1–4 of a batch DuckDB reads by reference, on the MIG's thread."""
        try:
            arrival = self.arrive(None, batch_id, started)
        except Exception as err:
            self.failure = err
            raise
        self.evaluate_batch(arrival)

    def release(self, results: str) -> int:
        """Move the results held in this plan's own table into ``results``'s, and write there
        from now on: Parallel Track's new plan, once the old one has emitted its last window
        (``runtime/migration.py``). Returns the rows released."""
        with self._releasing:
            # Its run may have ended (the stream did) and closed its connection.
            with (self.store.cursor() if self.store.con is not None
                  else ColumnarStore(self.store.path)) as store:
                released = store.move_results(self.query, results)
            self.results = results
        return released

    def busy(self) -> bool:
        """An evaluation is pending."""
        return self._pending is not None and not self._pending.done()

    def drain(self) -> None:
        """Wait for the pending evaluation; what stopped it stays in ``failure``."""
        if self._pending is not None:
            self._pending.exception()

    def close(self) -> None:
        self.drain()
        self._thread.shutdown()
        self.evaluator.close()

    def _partitioned_op(self, fragment: Fragment, root: Node) -> PartitionedOp:
        if self.checkpoint is None:
            raise TandemError(f"{fragment.id} runs on duckdb-partitioned, whose DuckDB files "
                              "live under the checkpoint: give the run a checkpoint")
        sources = {t.table for t in fragment.sources}
        tables = {rid: input_table(n, self.plan) for rid, n in self.crossings.items()}
        crossings = {rid: t for rid, t in tables.items() if t.table in sources}
        return partitioned_op(self.query, fragment, crossings, partition_keys(root),
                              self.checkpoint, self.spark)

    def judge_of(self, batch_id: int, before: Progress | None = None) -> Judge:
        """The gateway's judge of micro-batch ``batch_id``, after the state the batches before
        left (their high-water mark and K-slack buffer, in ``before``, the progress of the
        one before)."""
        before = before or self.store.progress(self.query, before=batch_id)
        return self.gateway.judge(batch_id - self.batch_base,
                                  before.frontiers.get(HIGH_WATER), before.slack)

    def arrive(self, batch: DataFrame, batch_id: int, started: float,
                read: Gathered | None = None) -> Arrival:
        """Step 1: the batch judged by the gateway, its admitted rows into DuckDB, and how far
        they complete the crossings. ``read``: the batch as DuckDB read it already for several
        queries (``rowstream/shared.py``), which closes it once all have appended it."""
        before = self.store.progress(self.query, before=batch_id)
        frontiers = dict(before.frontiers)
        judge = None if read is not None else self.judge_of(batch_id, before)
        partials: dict[PaneTable, pa.Table] = {}
        if read is not None:
            spread, got = None, read
        elif self.gateway.by_reference:
            spread, got = None, self.read(judge)
        elif self._split_only and judged_in_jvm(judge) and (
                at_once := self._split_at_once(batch, judge)) is not None:
            spread, (got, partials) = None, at_once
        elif self.partitioned or self.split:
            spread = judged_in_executors(batch, judge)
            # read by the driver's job, then exchanged to the partitions or aggregated
            spread.persist()
            got = self._gather(spread, judge, frontiers.get(HIGH_WATER))
        else:
            spread, got = None, self._collect(batch, judge)
        if got.high_water is not None:
            frontiers[HIGH_WATER] = got.high_water
        if got.slack is not None:  # a K-slack buffer's watermark (``kslack/manager.py``)
            if got.slack.watermark is not None:
                frontiers[STREAM] = max(got.slack.watermark, frontiers.get(STREAM, EPOCH))
        elif got.latest is not None:  # the stream is complete up to its watermark
            mark = watermark((got.latest - EPOCH) // timedelta(microseconds=1), self.lateness)
            frontiers[STREAM] = max(EPOCH + timedelta(microseconds=mark),
                                    frontiers.get(STREAM, EPOCH))
        # Rows within the lateness may precede the first batch's; none precedes an evaluated
        # window_end, so the first window_end moves only while none has been evaluated.
        first_ts = min((t for t in (before.first_ts, got.first) if t is not None), default=None)
        self.store.quarantine(got.quarantined, query=self.query, batch_id=batch_id)

        results, crossed, groups = None, {}, {}
        for rid, node in self.central.items():
            if got.read is not None:  # a window of a stream itself (by_reference.fits)
                rows: pa.Table | str = got.read.rows_of(node.stream)
                crossed[rid] = got.read.tuples_of(node.stream)
            else:
                rows = relation_rows(got.everything, rid)
                self.transfers.count(rows)
            if node.instantiated:
                marks = rows.filter(rows.column(HEARTBEAT))
                rows = rows.filter(pc.invert(rows.column(HEARTBEAT))).drop_columns([HEARTBEAT])
                if marks.num_rows:
                    frontiers[rid] = max(pc.max(marks.column("window_end")).as_py(),
                                         frontiers.get(rid, EPOCH))
                if isinstance(node, Aggregate) and rows.num_rows:
                    groups[rid] = (rows.num_rows,
                                   pc.count_distinct(rows.column("window_end")).as_py())
            elif got.read is None:
                crossed[rid] = rows.num_rows
            if rid == self.root and self.direct:
                results = self._final(rows)
            else:
                table = input_table(node, self.plan)
                if rid in self.taken:
                    rows = rows.filter(pc.greater_equal(
                        rows.column(table.time_column),
                        pa.scalar(self.taken_until, rows.schema.field(table.time_column).type)))
                self.store.append_input(self.query, table, rows, batch_id, self.driver_panes,
                                        keep=table.table in self.kept)
        if got.read is not None and read is None:
            got.read.close(self.store.con)
        for pane, rid in self.split.items():
            rows = partials[pane] if pane in partials else naive(
                self._partials(spread, pane, rid).toArrow())
            self.transfers.count(rows)
            self.store.append(self.query, pane.table.table, rows, batch_id)
        ends = partitioned = None
        if self.partitioned:
            # The partitions evaluate now: their rows are in the executors, not here.
            last = self._planned.get(batch_id - 1, before.last_end or self.floor)
            ends = self._complete_ends(last, first_ts, frontiers)
            self._planned[batch_id] = ends[-1] if ends else last
            partitioned = {}
            for op_id, op in self.partitioned.items():
                partitioned[op_id], tuples, size = op.results(self.spark, spread, batch_id, ends)
                self.transfers.add(tuples, size)  # into the partitions' DuckDBs
        if spread is not None:
            spread.unpersist()
        with self._releasing:
            self.store.arrived(self.query, batch_id, first_ts, frontiers, self.results,
                               *((got.slack.state, got.slack.decisions) if got.slack else ()))
        return Arrival(batch_id, started, got.tuples, got.latest, Quarantined.of(got.quarantined),
                       first_ts, frontiers, results, ends, partitioned, crossed, groups,
                       {SPARK_PART: time.perf_counter() - started})

    def _collect(self, batch: DataFrame, judge: Judge) -> Gathered:
        """The whole micro-batch on the driver, in one Spark job, judged there; Arrow splits it
        by relation."""
        everything = batch.toArrow()
        verdict = judge(relation_rows(everything, STREAM))
        everything = admitted_rows(everything, verdict)
        quarantined = quarantined_rows(judge.schema, relation_rows(everything, QUARANTINE),
                                       verdict.quarantined, judge.unread(verdict.files))
        stats = stream_summary(relation_rows(everything, STREAM), judge.schema.time_column)
        return Gathered(everything, stats["tuples"], stats["latest"], stats["first"],
                        quarantined, verdict.high_water, slack=verdict.slack)

    def _partials(self, spread: DataFrame, pane: PaneTable, rid: str) -> DataFrame:
        """A split aggregate's partials per (group, pane) of the batch's admitted rows of
        ``rid``, computed by Spark in the executors: the rows stay there, the partials cross."""
        rows = spread.where(F.col(rid).isNotNull()).select(f"{rid}.*")
        if rid in self.taken:  # rows before taken_until are in the partials taken over
            since = (self.taken_until - EPOCH) // timedelta(microseconds=1)
            rows = rows.where(F.unix_micros(pane.source.time_column) >= since)
        # In the batch's own session (foreachBatch's), which holds the view of ``rows``.
        return rows.sparkSession.sql(pane.spark_sql, rows=rows)

    def _split_at_once(self, batch: DataFrame, judge: NativeJudge
                       ) -> tuple[Gathered, dict[PaneTable, pa.Table]] | None:
        """A batch of split aggregates judged in the JVM (``rowstream/suite_spark.py``) in the
        job that computes their partials: one Spark job, and no row leaves the JVM. None where
        a file may hold a row to quarantine: then the batch is judged row by row, and these
        partials, which would count its rows, are dropped."""
        panes = {pane: f"_pane_{i}" for i, pane in enumerate(self.split)}
        parts = [_as_struct(file_checks(batch, judge), CHECKS),
                 *(_as_struct(self._partials(batch, pane, self.split[pane]), column)
                   for pane, column in panes.items())]
        out = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts).toArrow()
        summary = passed(relation_rows(out, CHECKS), judge)
        if summary is None:
            return None
        return (Gathered(pa.table({}), summary.tuples, summary.latest, summary.first,
                         quarantined_rows(judge.schema, judge.unread(summary.files)),
                         summary.high_water),
                {pane: relation_rows(out, column) for pane, column in panes.items()})

    def read(self, judge: FileReferences) -> Gathered:
        """The micro-batch's files read by DuckDB, on the connection that appends them (the
        by-reference gateway): no Spark job runs."""
        return Gathered.of(judge.read(self.store.con))

    def _gather(self, rows: DataFrame, judge: Judge, high_water: datetime | None) -> Gathered:
        """What the driver needs of a batch judged in the executors, whose rows stay there: the
        quarantined rows, the files read and the rows of the crossings a central DB-op or Spark
        reads; and, from each task's summary, the stream's tuples, its first and latest event
        times and the gateway's high-water mark (``high_water`` before the batch)."""
        wanted = [QUARANTINE, FILE_READ, SUMMARY, *self.central]
        everything = rows.where(any_of(wanted)).select(*wanted).toArrow()
        tasks = relation_rows(everything, SUMMARY)
        read = everything.column(FILE_READ).drop_null().to_pylist()
        marks = [t for t in (high_water, *tasks.column("high_water").to_pylist()) if t is not None]
        return Gathered(everything, pc.sum(tasks.column("tuples")).as_py() or 0,
                        pc.max(tasks.column("latest")).as_py(),
                        pc.min(tasks.column("first")).as_py(),
                        quarantined_rows(judge.schema, relation_rows(everything, QUARANTINE),
                                         judge.unread(read)),
                        max(marks, default=None))

    def evaluate_batch(self, arrival: Arrival) -> None:
        """Steps 2–4 for the window_ends an arrived batch completes, on the evaluator thread."""
        try:
            store, batch_id = self.evaluator, arrival.batch_id
            # The evaluation of the batch before has committed: its last window_end is final.
            last = store.progress(self.query, before=batch_id).last_end or self.floor
            ends = arrival.ends if arrival.ends is not None else self._complete_ends(
                last, arrival.first_ts, arrival.frontiers)
            results = arrival.results
            if ends and not self.direct:
                partitioned = arrival.partitioned
                if partitioned is None:  # recovered: the partitions hold the batch's rows
                    partitioned = {op_id: op.results(self.spark, None, batch_id, ends)[0]
                                   for op_id, op in self.partitioned.items()}
                results = self._evaluate(ends, batch_id, partitioned, arrival.timings)
            last_end = ends[-1] if ends else last
            with self._releasing:
                count = store.commit(self.query, batch_id, results, last_end, self.results)
            if ends and not self.direct and isinstance(self.plan.root, Aggregate):
                arrival.groups[self.root] = (count, len(ends))
            if ends and not self.direct:
                # One batch behind: a replay of this batch still finds the rows it needs.
                store.purge(self.query, self.tables, ends[0])
            self.finished = bool(self.final_end and last_end and last_end >= self.final_end)
            if self.on_batch:
                self.on_batch(BatchReport(batch_id, arrival.tuples, arrival.latest, len(ends),
                                          count, arrival.quarantined,
                                          time.perf_counter() - arrival.started,
                                          arrival.crossed, arrival.groups, arrival.timings))
        except Exception as err:
            self.failure = err
            raise

    def _complete_ends(self, last_end: datetime | None, first_ts: datetime | None,
                       frontiers: dict[str, datetime]) -> list[datetime]:
        """The window_ends after the last evaluated one that every crossing has completed."""
        if first_ts is None:
            return []
        needed = [STREAM if not node.instantiated else rid for rid, node in self.crossings.items()]
        if any(rid not in frontiers for rid in needed):
            return []
        bound = min(frontiers[rid] for rid in needed)
        if self.final_end:
            bound = min(bound, self.final_end)
        end = last_end + self.step if last_end else _first_end(first_ts, self.step)
        ends = []
        while end <= bound:
            ends.append(end)
            end += self.step
        return ends

    def _evaluate(self, ends: list[datetime], batch_id: int, partitioned: dict[str, pa.Table],
                  timings: dict[str, float]) -> pa.Table:
        """The part of the plan after the MIG, bottom-up, for ``ends``: the root's rows.
        ``partitioned``: the rows of the DB-ops on duckdb-partitioned, evaluated already.
        Each DB-op's wall seconds are added to ``timings``."""
        if self.root in self.crossings:  # Spark's rows of a windowed stream, one per window
            return self._final(self.evaluator.evaluate(self.query, self.reads[self.root], ends))
        outputs: dict[str, pa.Table | DataFrame] = {}
        for step in self.deployment.steps:
            rid = self.plan.relation_ids[step.node]
            if rid in outputs or rid in self.crossings:
                continue  # a second copy of a relation already computed
            if step.partitioned:
                outputs[rid] = partitioned[step.db_op]
            elif step.in_duckdb:
                fragment = self.fragments[step.db_op]
                for table in fragment.inputs:
                    source = table.table.removeprefix("in_")
                    if source in outputs:  # rows of a Spark operator after the MIG
                        self.evaluator.append(self.query, table.table,
                                              self._arrow(outputs[source]), batch_id)
                began = time.perf_counter()
                outputs[rid] = self.evaluator.evaluate(self.query, fragment.sql, ends,
                                                      fragment.stacks)
                timings[step.db_op] = (timings.get(step.db_op, 0.0)
                                       + time.perf_counter() - began)
            else:
                outputs[rid] = apply(step.node, [self._dataframe(i, outputs, ends)
                                                 for i in step.node.inputs])
        return self._final(self._arrow(outputs[self.root]))

    def _dataframe(self, node: Node, outputs: dict, ends: list[datetime]) -> DataFrame:
        """A Spark operator's input after the MIG, for ``ends``."""
        rid = self.plan.relation_ids[node]
        if rid in self.crossings:
            value = self.evaluator.evaluate(self.query, self.reads[rid], ends)
        else:
            value = outputs[rid]
        if isinstance(value, DataFrame):
            return value
        self.transfers.count(value, to_spark=True)
        frame = self.spark.createDataFrame(utc_instants(value))
        if rid not in self.crossings:
            outputs[rid] = frame
        return frame

    def _arrow(self, value: pa.Table | DataFrame) -> pa.Table:
        return value if isinstance(value, pa.Table) else self._to_duckdb(value)

    def _to_duckdb(self, frame: DataFrame) -> pa.Table:
        rows = naive(frame.toArrow())
        self.transfers.count(rows)
        return rows

    def _final(self, rows: pa.Table) -> pa.Table:
        """The result columns, after the floor and up to a finite stream's last window_end:
        a plan that a run migrated to emits, while it rebuilds its state, windows that the
        plan before it evaluated."""
        rows = rows.select(list(self.plan.root.columns))
        instant = pa.timestamp("us")
        if self.final_end is not None and rows.num_rows:
            rows = rows.filter(pc.less_equal(rows.column("window_end"),
                                             pa.scalar(self.final_end, instant)))
        if self.floor is not None and rows.num_rows:
            rows = rows.filter(pc.greater(rows.column("window_end"),
                                          pa.scalar(self.floor, instant)))
        return rows


def _first_end(first_ts: datetime, step: timedelta) -> datetime:
    """The first window_end after the first event (docs/design.md, Semantics)."""
    step_us = step // timedelta(microseconds=1)
    since = (first_ts - EPOCH) // timedelta(microseconds=1)
    return EPOCH + timedelta(microseconds=(since // step_us + 1) * step_us)


def _as_struct(rows: DataFrame, name: str) -> DataFrame:
    """``rows`` as one struct column ``name``, to be unioned with others (null in their rows):
    every field nullable, or Arrow refuses the nulls of the other rows' structs."""
    return rows.select(F.struct("*").cast(_nullable(rows.schema)).alias(name))


def _nullable(kind: DataType) -> DataType:
    if isinstance(kind, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in kind])
    if isinstance(kind, ArrayType):
        return ArrayType(_nullable(kind.elementType), True)
    return kind

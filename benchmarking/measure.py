"""Capacity of a deployed plan, as docs/design.md defines it (Benchmarks): tuples processed / wall seconds, with
the windows holding what they hold at the rate. `tandem calibrate` and `tandem bench` both
measure this way.

The windows are filled before the measured micro-batches in one of two ways. A plan whose Spark
part keeps no state (selections and projections, then the MIG) and runs no DB-op on
duckdb-partitioned has all its window state in the driver's DuckDB: the rows the MIG would have appended are loaded there directly, computed by DuckDB from
the generator's rows with the Spark part's own expressions, and the stream resumes after them,
with the window_ends of the last lateness seconds still to evaluate, as in a run that got there:
every measured micro-batch then evaluates its window_end.
Any other plan runs the warm-up through Spark in one-minute micro-batches; one that cannot keep
up with the arrivals even so is stopped, its capacity bounded by what it reached.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from columnar.fragment_sql import input_table, rows_kept
from columnar.store import ColumnarStore
from optimizer.deployment import deploy
from optimizer.errors import TandemError
from optimizer.logical import stateless_rows, windows
from rowstream.by_reference import FileReferences, ReferencedFiles, reads_no_rows
from rowstream.gateway import STREAM
from rowstream.generator_source import WARMUP_SPAN
from rowstream.landing import landed_files
from rowstream.mig import EPOCH, Mig
from rowstream.session import spark_session
from runtime import settings
from runtime.explain import Explanation
from runtime.run import catalog_streams, default_lateness, run, scratch, stream_schema
from runtime.spec import FILES_PER_BATCH, RunSpec
from workload.smart_plugs import DEBS_START, SmartPlugs

SETTLE = 2  # measured micro-batches dropped first: the query's first jobs compile and warm up
STARTUP = 30.0  # wall seconds a query may take to start before the warm-up must keep pace
# A measurement whose JVM answers nothing, or finishes no micro-batch, for this long has failed
# (a run's own default is 10 min): a plan that kept up would have finished many batches.
STALL = 300.0
# Event seconds generated and loaded at a time: 30, fewer above a million tuples/s, so that a
# part holds at most 30M readings (a process held 5 GB per million tuples/s of 30-s parts, and
# the kernel killed one at 5M tuples/s).
PRELOAD_PART, PRELOAD_ROWS = 30.0, 30e6
HANDOVER_ROWS = 3e6  # window rows a warm-up micro-batch may hand between the engines (below)
# A measurement lasts at least this many wall seconds at the capacity the cost model expects:
# at 20k tuples/s, 20 one-second batches of a plan that keeps up 12 times over took 2-6 s, and
# the same plan's capacity moved 3.6x between sweeps of one day (bench/results/2026-11-29/
# stretch/notes.md). Up to MEASURE_ROWS arrivals, landed before the clock starts.
MIN_WALL, MEASURE_ROWS = 10.0, 20e6


def event_seconds(measure: float, rate: float, expected: float | None) -> float:
    """Event seconds to measure: ``measure`` at least, and what a plan whose capacity is
    ``expected`` tuples/s (None: not modelled) processes in MIN_WALL wall seconds, up to
    MEASURE_ROWS arrivals at ``rate``."""
    if not expected:
        return measure
    return max(measure, min(MIN_WALL * expected, MEASURE_ROWS) / rate)


@dataclass(frozen=True)
class Capacity:
    tuples: int
    seconds: float
    batches: int  # measured micro-batches; 0: stopped in the warm-up (an upper bound)
    preloaded: bool  # the warm-up went straight into DuckDB

    @property
    def tuples_per_second(self) -> float:
        return self.tuples / self.seconds if self.seconds else 0.0

    @property
    def bound(self) -> bool:
        return self.batches == 0


def preloadable(plan: Explanation) -> bool:
    """Does the plan's Spark part hold no state, so that its windows live in the driver's
    DuckDB alone (not in the partitions of a duckdb-partitioned DB-op, which are Spark's hash
    partitions)?"""
    deployment = deploy(plan.optimization.plan)
    return not (any(n.instantiated for n in deployment.crossings)
                or any(step.partitioned for step in deployment.steps))


def preload(store: ColumnarStore, plan: Explanation, stream: Iterable[pa.Table],
            seconds: float, lateness: float = 0.0) -> None:
    """Put into the store what the MIG holds after ``seconds`` of ``stream`` (which starts at
    the generator's start; in parts of whole slides, so that the window state, not the
    generator's rows, is what fills the memory): each crossing's rows, computed by DuckDB with
    the Spark part's predicates and projections, and the progress of a run with the allowed
    ``lateness``: complete, and evaluated, up to the window_end ``lateness`` before the last
    event. A run that resumes after it evaluates a window_end per slide from its first
    micro-batch on, as in the steady state a capacity measures."""
    physical = plan.optimization.plan
    name, logical = plan.query.stem, physical.logical
    store.create(name, fresh=True)
    panes = [p for f in plan.fragments for p in f.panes]
    deployment = deploy(physical)
    kept = rows_kept(deployment, plan.fragments)
    crossings = []
    for node in deployment.crossings:
        predicates, columns = stateless_rows(node)
        select = ", ".join(f'{e.sql(dialect="duckdb")} AS "{c}"' for c, e in columns.items())
        where = " AND ".join(f"({p.sql(dialect='duckdb')})" for p in predicates) or "TRUE"
        crossings.append((input_table(node, logical), f"SELECT {select} FROM __rows WHERE {where}"))
    for part, rows in enumerate(stream):  # batch ids -1, -2, ...: before the run's first
        for table, source in crossings:
            store.append_input(name, table, rows, -1 - part, panes, source=source,
                               keep=table.table in kept)
    slide = logical.root.slide
    start = EPOCH + timedelta(seconds=DEBS_START)
    end = start + timedelta(seconds=math.floor((seconds - lateness) / slide) * slide)
    store.arrived(name, -1, start, {STREAM: end})
    store.commit(name, -1, None, end)


def warmup_span(plan: Explanation, rate: float, files_per_batch: int = 1) -> float:
    """Event seconds per warm-up micro-batch: a minute (WARMUP_SPAN), unless part of the plan
    after the MIG runs in Spark, as a Spark operator over DuckDB's rows or a DB-op on
    duckdb-partitioned. Each window_end a batch completes then hands its windows' rows between
    the engines inside Spark's driver, up to the rate times the window, and a minute of them ran
    the JVM out of memory (Q2's 5-minute windows at 20,000 tuples/s: 180M rows in a batch).
    Such a plan warms up in whole slides that hand over at most HANDOVER_ROWS a batch of
    ``files_per_batch`` files, one slide at least."""
    physical = plan.optimization.plan
    if not any(step.partitioned or not step.in_duckdb for step in deploy(physical).steps):
        return WARMUP_SPAN
    root = physical.logical.root
    per_slide = rate * max(w.size for w in windows(root)) * files_per_batch
    return max(1, min(math.floor(WARMUP_SPAN / root.slide),
                      math.floor(HANDOVER_ROWS / per_slide))) * root.slide


def warmup_stream(rate: float, warmup: float) -> Iterator[pa.Table]:
    """The generator's first ``warmup`` seconds at ``rate``, in parts of whole seconds."""
    return SmartPlugs(rate=rate).batches(
        warmup, max(1.0, min(PRELOAD_PART, math.floor(PRELOAD_ROWS / rate))))


def land(directory: Path, rate: float, warmup: float, measure: float, span: float,
         file_format: str, preloaded: bool, warmup_span: float = WARMUP_SPAN) -> Path:
    """The files a measurement reads: the warm-up in files of ``warmup_span`` (unless it was
    preloaded), then a file per ``span`` of the measured event time."""
    plugs = SmartPlugs(rate=rate)
    if not preloaded:
        plugs.write_files(directory, warmup, warmup_span, file_format=file_format)
    plugs.write_files(directory, warmup + measure, span, file_format=file_format, begin=warmup)
    return directory


def capacity(plan: Explanation, rate: float, *, warmup: float, measure: float,
             span: float = 1.0, stream: list[pa.Table] | None = None,
             spark_design: str = "built-in", lateness: float | None = None,
             landed: str | None = "parquet", gateway: str = "auto",
             files_per_batch: int = FILES_PER_BATCH) -> Capacity:
    """Fill the windows with ``warmup`` seconds of event time, then run ``measure`` seconds in
    micro-batches of ``span`` and count the measured ones after the first SETTLE. ``landed``:
    the stream arrives as files of that format in a landing directory, one per ``span``,
    written before the clock starts (the path users run), read by ``gateway``
    (``runtime.run.landing_gateway``), up to ``files_per_batch`` a batch by reference; None:
    from the generator source.
    ``stream``:
    the generator's first ``warmup`` seconds at ``rate`` (``warmup_stream``), if the caller has
    them already; ``spark_design``: how Spark evaluates a pure-Spark plan
    (``rowstream.dsps.SPARK_DESIGNS``)."""
    marks: list[tuple[float, int, object]] = []  # (wall clock, tuples, event time) per batch
    warm = EPOCH + timedelta(seconds=DEBS_START + warmup)  # where the warm-up ends
    loaded = preloadable(plan)
    fill = warmup_span(plan, rate, files_per_batch if plan.optimization.plan.by_reference else 1)
    if lateness is None:
        lateness = default_lateness(catalog_streams(plan))

    def mark(report) -> None:
        marks.append((time.perf_counter(), report.tuples, report.event_time))

    def falling_behind() -> bool:
        """The warm-up runs slower than the arrivals (its batches hold ``fill`` seconds each)."""
        done = sum(1 for m in marks if m[2] and m[2] <= warm)
        if done and marks[done - 1][2] >= warm:
            return False
        return time.perf_counter() - started > STARTUP + fill * (done + 1)

    # The runs' stores are scratch: Spark's JVM, which the first starts, logs where it stays.
    spark_session(log=settings.spark_log_path(settings.store_path()), master=settings.spark_master())
    with scratch("tandem-measure-") as tmp:
        store_path = Path(tmp) / "m.duckdb"
        if loaded:
            with ColumnarStore(store_path) as store:
                preload(store, plan, stream if stream is not None else warmup_stream(rate, warmup),
                        warmup, lateness)
        source = "generator"
        if landed:
            source = str(land(Path(tmp) / "landing", rate, warmup, measure, span, landed,
                              preloaded=loaded, warmup_span=fill))
        started = time.perf_counter()
        run(RunSpec(plan.query.stem, rate=rate, duration=warmup + measure, batch=span,
                    source=source, available_now=bool(landed), warmup=warmup, warmup_span=fill,
                    begin=warmup if loaded else 0.0, resume=loaded, store=store_path,
                    checkpoint=Path(tmp) / "checkpoint", spark_design=spark_design,
                    lateness=lateness, gateway=gateway, files_per_batch=files_per_batch,
                    stall_timeout=STALL),
            explanation=plan, on_batch=mark, stop_when=None if loaded else falling_behind)
    after = [i for i, m in enumerate(marks) if m[2] and m[2] > warm and m[1]]
    if len(after) <= SETTLE:  # stopped in the warm-up: what it reached bounds the capacity
        return Capacity(sum(m[1] for m in marks), time.perf_counter() - started, 0, loaded)
    first, last = after[SETTLE], after[-1]
    tuples = sum(m[1] for m in marks[first:last + 1])
    return Capacity(tuples, marks[last][0] - marks[first - 1][0], last - first + 1, loaded)


@dataclass(frozen=True)
class _LandedFiles(ReferencedFiles):
    """The crossing by reference without Spark: micro-batch k holds the k-th ``files_per_batch``
    landed files, as Spark's file source plans them where they landed before the run (in name
    order)."""

    files: tuple[Path, ...] = ()

    def judge(self, batch_id: int, high_water, slack: dict | None = None) -> FileReferences:
        first = batch_id * self.files_per_batch
        return self.references(self.files[first:first + self.files_per_batch], high_water,
                               slack)


def duckdb_alone(plan: Explanation, rate: float, *, warmup: float, measure: float,
                 span: float = 1.0, stream: list[pa.Table] | None = None,
                 lateness: float | None = None,
                 files_per_batch: int = FILES_PER_BATCH) -> Capacity:
    """The DuckDB-alone limit of a plan whose operators all run in the driver's DuckDB: the
    same landed Parquet files, the same generated SQL and the same MIG (its judging, appends,
    evaluation thread, commits and purges), fed the files ``files_per_batch`` a micro-batch in a
    loop, as Spark's file source would, with no Spark. Tandem by reference differs from it only
    in Spark's control of each batch, so it is the figure Tandem's capacity is held against.
    Windows filled and batches counted as ``capacity`` does."""
    deployment = deploy(plan.optimization.plan)
    if not reads_no_rows(deployment):
        raise TandemError(f"{plan.query.stem}: the DuckDB-alone limit runs plans whose operators "
                          "over the stream all run in DuckDB: give placement duckdb")
    if lateness is None:
        lateness = default_lateness(catalog_streams(plan))
    name, slide = plan.query.stem, plan.optimization.plan.logical.root.slide
    with scratch("tandem-alone-") as tmp:
        landing = land(Path(tmp) / "landing", rate, warmup, measure, span, "parquet",
                       preloaded=True)
        files = tuple(landing / name for name in landed_files(landing))
        with ColumnarStore(Path(tmp) / "m.duckdb") as store:
            preload(store, plan, stream if stream is not None else warmup_stream(rate, warmup),
                    warmup, lateness)
            marks: list[tuple[float, int]] = []
            gateway = _LandedFiles(stream_schema(plan, "a capacity measurement"), str(landing), "", lateness, slide,
                                   files_per_batch, files)
            mig = Mig(name, deployment, store, None, plan.fragments, gateway,
                      lambda report: marks.append((time.perf_counter(), report.tuples)),
                      lateness=lateness)
            try:
                for batch_id in range(math.ceil(len(files) / files_per_batch)):
                    mig(None, batch_id)
                mig.drain()
            finally:
                mig.close()
    if mig.failure is not None:
        raise mig.failure
    first, last = SETTLE, len(marks) - 1
    tuples = sum(n for _, n in marks[first:last + 1])
    return Capacity(tuples, marks[last][0] - marks[first - 1][0], last - first + 1, True)

"""duckdb-partitioned: a DB-op evaluated inside Spark's executors, over one hash partition of the
stream each (``optimizer/partitioning.py`` says where the placement is allowed).

A central DB-op funnels every tuple through one ``toArrow`` to the driver and one DuckDB. A
partitioned one keeps its rows in the executors: for every micro-batch, inside the MIG's
``foreachBatch``,

1. the executors run the gateway's judge (``rowstream/gateway.py``) on the rows where Spark
   read them (``judged_in_executors``): the native gateway's judge needs whole files, and
   its gateway tells Spark never to split a file nor to put two in one task; lateness compares
   each row with the watermark of the batches before, a constant of the batch. Admitted rows
   go on; quarantined rows, the name of every file read and a summary of the task's stream (its
   tuples, first and latest event time, high-water mark) become rows of their own for the
   driver, collected in the same job;
2. the rows of the DB-op's crossings are exchanged by ``pmod(hash(key), P)``, the fragment's
   partition key (``keys.partition_keys``), together with one marker row per partition, so that
   every partition runs even when the batch brings it no rows: a window_end may still close in
   it (``PartitionedOp.results``, Spark's ``applyInArrow``);
3. each partition opens its own DuckDB file under the checkpoint (``partitions/<db-op>/<i>``,
   a path every worker reaches), appends its rows keyed by the batch (a replayed or retried
   task replaces them), evaluates the fragment's SQL for the window_ends the batch completes,
   purges one batch behind, as the MIG does, and returns its result rows as an Arrow IPC stream;
4. the driver concatenates the partitions' rows; the MIG's evaluation thread commits them with
   the batch, or hands them to the operators above.

Only the result rows, the quarantined rows and a few numbers per batch reach the driver. P is
the session's default parallelism when a run starts and is kept in the checkpoint: a hash
partition's state is only where its rows went.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StringType, StructField, StructType

from columnar.fragment_sql import Fragment, FragmentInput
from columnar.store import ColumnarStore, StoreBusy
from rowstream.gateway import QUARANTINE, STREAM, Judge, admitted_rows
from rowstream.relations import relation_rows

PART = "_part"  # the hash partition a row goes to
FILE_READ = "_file_read"  # a row that names a file the executors read
SUMMARY = "_summary"  # a row per task judged: its tuples, event times and high-water mark
# Each partition's answer: its result rows as an Arrow IPC stream (null when no window_end is
# evaluated), and the tuples and bytes it appended.
OUTPUT = f"{PART} int, rows binary, tuples long, bytes long"
LOCK_WAIT = 60.0  # seconds a task waits for its partition's DuckDB file (a lost task's retry)


@dataclass(frozen=True)
class PartitionedOp:
    """One DB-op on duckdb-partitioned, with what its partitions need to run."""

    query: str
    fragment: Fragment
    crossings: dict[str, FragmentInput]  # relation id -> the input table its rows go to
    keys: tuple[str, ...]  # the partition key
    directory: str  # its partitions' DuckDB files
    partitions: int

    def results(self, spark: SparkSession, rows: DataFrame | None, batch_id: int,
                ends: list[datetime]) -> tuple[pa.Table, int, int]:
        """Append the batch's ``rows`` in every partition (None: recovering a batch whose rows
        are there already), evaluate ``ends`` and purge: the result rows of all partitions, and
        the tuples and bytes appended to their DuckDBs."""
        markers = spark.range(self.partitions).select(F.col("id").cast("int").alias(PART))
        if rows is not None:
            rids = list(self.crossings)
            key = [F.coalesce(*[F.col(rid)[k] for rid in rids]) for k in self.keys]
            rows = (rows.where(any_of(rids))
                    .select(F.pmod(F.hash(*key), F.lit(self.partitions)).cast("int").alias(PART),
                            *rids))
            markers = rows.unionByName(markers, allowMissingColumns=True)
        run = _partition_runner(self, batch_id, ends, append=rows is not None)
        out = markers.groupBy(PART).applyInArrow(run, OUTPUT).toArrow()
        tables = [pa.ipc.open_stream(b).read_all() for b in out.column("rows").to_pylist()
                  if b is not None]
        return (pa.concat_tables(tables) if tables else _empty(self.fragment.columns),
                pc.sum(out.column("tuples")).as_py() or 0, pc.sum(out.column("bytes")).as_py() or 0)


def partitioned_op(query: str, fragment: Fragment, crossings: dict[str, FragmentInput],
                   keys: tuple[str, ...], checkpoint: str, spark: SparkSession) -> PartitionedOp:
    """The DB-op's partitions: as many as the checkpoint recorded, else the session's default
    parallelism (recorded now)."""
    directory = Path(checkpoint).resolve() / "partitions" / fragment.id
    record = directory / "partitions.json"
    if record.exists():
        partitions = json.loads(record.read_text())["partitions"]
    else:
        partitions = spark.sparkContext.defaultParallelism
        directory.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"partitions": partitions, "keys": list(keys)}))
    return PartitionedOp(query, fragment, crossings, keys, str(directory), partitions)


def any_of(columns: list[str]) -> Column:
    """The rows in which one of ``columns`` (relations held as struct columns) is not null."""
    return reduce(operator.or_, [F.col(c).isNotNull() for c in columns])


def _partition_runner(op: PartitionedOp, batch_id: int, ends: list[datetime], append: bool):
    """The function each partition runs in an executor (module docstring, step 3)."""
    # The store keeps the rows the fragment reads as rows, and its pane tables.
    kept = {t.table for t in op.fragment.inputs}
    tables = (*op.fragment.inputs, *(p.table for p in op.fragment.panes))

    def run(key: tuple, rows: pa.Table) -> pa.Table:
        part, tuples, size, encoded = key[0].as_py(), 0, 0, None
        with _open(Path(op.directory) / f"{part}.duckdb") as store:
            store.create(op.query)
            if append:
                for rid, table in op.crossings.items():
                    appended = relation_rows(rows, rid)
                    tuples, size = tuples + appended.num_rows, size + appended.nbytes
                    store.append_input(op.query, table, appended, batch_id, op.fragment.panes,
                                       keep=table.table in kept)
            if ends:
                result = store.evaluate(op.query, op.fragment.sql, ends, op.fragment.stacks)
                store.purge(op.query, tables, ends[0])  # one batch behind, as the MIG's
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, result.schema) as writer:
                    writer.write_table(result)
                encoded = sink.getvalue().to_pybytes()
        return pa.table({PART: pa.array([part], pa.int32()),
                         "rows": pa.array([encoded], pa.binary()),
                         "tuples": pa.array([tuples], pa.int64()),
                         "bytes": pa.array([size], pa.int64())})

    return run


def _open(path: Path) -> ColumnarStore:
    """The partition's DuckDB file, once the task before it (a lost executor's) lets go."""
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            return ColumnarStore(path, threads=1)  # the task has one core
        except StoreBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _empty(columns: tuple[str, ...]) -> pa.Table:
    return pa.table({c: pa.array([], pa.null()) for c in columns})


def judged_in_executors(batch: DataFrame, judge: Judge) -> DataFrame:
    """The batch judged in the executors, task by task (module docstring, step 1): the admitted
    rows as they were, then a row per quarantined row (the struct ``QUARANTINE``, beside those
    the source quarantined itself) and per file read (``FILE_READ``), and one that sums up the
    admitted stream (``SUMMARY``): the driver needs those numbers before the partitions
    evaluate, and a job of its own to count them would cost a round trip to the executors per
    batch."""
    summary_type = pa.struct([("tuples", pa.int64()), ("latest", pa.timestamp("us", tz="UTC")),
                              ("first", pa.timestamp("us", tz="UTC")),
                              ("high_water", pa.timestamp("us"))])
    schema = StructType([*batch.schema.fields, StructField(FILE_READ, StringType()),
                         StructField(SUMMARY, from_arrow_type(summary_type))])

    def judged(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        verdict = judge(relation_rows(table, STREAM))
        admitted = admitted_rows(table, verdict)
        out = table.schema.append(pa.field(FILE_READ, pa.string())).append(
            pa.field(SUMMARY, summary_type))
        summary = {**stream_summary(relation_rows(admitted, STREAM), judge.schema.time_column),
                   "high_water": verdict.high_water}
        for part in (_filled(out, admitted.num_rows, dict(zip(table.column_names,
                                                               admitted.columns, strict=True))),
                     _filled(out, verdict.quarantined.num_rows, {QUARANTINE: verdict.quarantined
                             .to_struct_array().cast(out.field(QUARANTINE).type)}),
                     _filled(out, len(verdict.files),
                             {FILE_READ: pa.array(verdict.files, pa.string())}),
                     _filled(out, 1, {SUMMARY: pa.array([summary], summary_type)})):
            yield from part.to_batches()

    return batch.mapInArrow(judged, schema)


def stream_summary(events: pa.Table, time_column: str) -> dict:
    """The stream's tuples, latest event time (a heartbeat's too) and first tuple's time."""
    ts = events.column(time_column)
    data = ts.filter(pc.invert(events.column("heartbeat")))
    return {"tuples": len(data), "latest": pc.max(ts).as_py(), "first": pc.min(data).as_py()}


def _filled(schema: pa.Schema, n: int, columns: dict) -> pa.Table:
    """``n`` rows of ``schema`` with ``columns``, null in every other column."""
    return pa.table({f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in schema},
                    schema=schema)

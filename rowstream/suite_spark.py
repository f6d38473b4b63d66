"""The input suite and the lateness rule in Spark's JVM, over a micro-batch that Spark's own
Parquet source read (``rowstream/native.py``), for plans whose rows should stay in the
executors: the split aggregates' (docs/execution.md, Split aggregates).

Judging a batch row by row in the executors (``partitioned.judged_in_executors``) sends every
row from the JVM to a Python worker and back. Here Spark computes, per file of the batch, what
DuckDB computes by reference (``suite_sql.may_fail``, generated from the same expectation
objects and rendered in Spark's dialect by sqlglot): aggregates that are 0 only where no row of
the file fails an expectation, the rows at or before the watermark of the batches before, and
the span of the file's event times, since the suite's parametrised expectation (the event time
near the file's median) holds for every row of a file that spans less than the distance it
allows. The aggregates may count a file whose rows all pass, never miss one that fails. Where
every file passes, the gateway would admit every row, and the verdict is known without a row
leaving the JVM; else the batch is judged row by row, which also words the quarantine.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache, reduce

import pyarrow as pa
import sqlglot
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from rowstream.eventtime import EPOCH, watermark
from rowstream.expectations import input_suite
from rowstream.gateway import STREAM, Judge
from rowstream.native import FILE, NativeJudge
from rowstream.suite_sql import identifier, may_fail, spark_nan, typed_landed
from workload.schema import StreamSchema

US = timedelta(microseconds=1)
CHECKS = "_checks"  # the struct column of the per-file checks, beside the partials
UNIQUE = ("expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique")


@dataclass(frozen=True)
class Passed:
    """What the MIG needs of a batch every row of which its judge admits."""

    tuples: int
    first: datetime | None  # the earliest event time
    latest: datetime | None
    high_water: datetime | None  # the gateway's, after the batch
    files: tuple[str, ...]  # the names of the files that gave rows


def judged_in_jvm(judge: Judge) -> bool:
    """Whether Spark can judge the batch: its own Parquet rows, which the native gateway judges
    (a CSV line's text, which the quarantine quotes, is judged the Python way)."""
    return isinstance(judge, NativeJudge) and all(p.suffix == ".parquet" for p in judge.files)


def file_checks(batch: DataFrame, judge: NativeJudge) -> DataFrame:
    """A row per file of the batch's stream rows (the MIG's ``STREAM`` relation): its name, its
    tuples, first and last event times, its late rows and the suite's counts (``failing``)."""
    schema = judge.schema
    suite, unique = _suite(schema)
    counts = [*map(F.expr, suite), *map(_repeated, unique)]
    ts = F.col(schema.time_column)
    before = None if judge.high_water is None else (judge.high_water - EPOCH) // US
    mark = watermark(before, judge.lateness)
    late = F.count_if(F.unix_micros(ts) <= mark) if mark is not None else F.lit(0)
    return (batch.where(F.col(STREAM).isNotNull()).select(f"{STREAM}.*").groupBy(FILE)
            .agg(F.count("*").alias("tuples"), F.min(ts).alias("first"),
                 F.max(ts).alias("last"), late.cast("long").alias("late"),
                 F.array(*(c.cast("long") for c in counts), F.lit(0).cast("long"))
                 .alias("failing")))


@cache
def _suite(schema: StreamSchema) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The suite's counts in Spark SQL but uniqueness, and the columns expected unique: once per
    stream, not per batch (rendering them takes sqlglot about 6 ms)."""
    suite = input_suite(schema)
    unique = [e for e in suite if e.type in UNIQUE]
    landed = typed_landed(schema, {c: identifier(c) for c in schema.names},
                          str(len(schema.names)), spark_nan)
    return (tuple(sqlglot.transpile(sql, read="duckdb", write="spark")[0]
                  for sql in may_fail(tuple(e for e in suite if e not in unique), landed)),
            tuple(tuple(e.arguments.get("column_list") or [e.arguments["column"]])
                  for e in unique))


def _repeated(columns: tuple[str, ...]) -> Column:
    """How many values of ``columns`` (one present at least) repeat one before them in the
    file: the values held less their set's size. A count of distinct values beside the suite's
    other aggregates would expand every row twice, and an aggregate by file and value of its own
    would take three more stages to join: either made the checks twice as dear (0.4-0.5 s
    against 0.2-0.25 s for a 100k-row file here)."""
    present = reduce(operator.or_, [F.col(c).isNotNull() for c in columns])
    values = F.when(present, F.struct(*columns) if len(columns) > 1 else F.col(columns[0]))
    return F.count(values) - F.size(F.collect_set(values))


def passed(checks: pa.Table, judge: NativeJudge) -> Passed | None:
    """The batch's summary where every file passes its ``checks`` (``file_checks``' rows, UTC
    wall times); None where a file may hold a row to quarantine."""
    distance = timedelta(seconds=judge.schema.time_distance)
    files = checks.to_pylist()
    if any(f["late"] or any(f["failing"]) or f["last"] - f["first"] > distance for f in files):
        return None
    first = min((f["first"] for f in files), default=None)
    latest = max((f["last"] for f in files), default=None)
    marks = [t for t in (judge.high_water, latest) if t is not None]
    return Passed(sum(f["tuples"] for f in files), first, latest, max(marks, default=None),
                  tuple(f[FILE] for f in files))

"""The by-reference gateway: Spark plans, DuckDB reads (docs/design.md, Gateway).

Spark's own file source stays the authority on which files form each micro-batch, as for the
native gateway (``rowstream/native.py``): its offsets and commit log, its replay and
exactly-once are unchanged. But no Spark job reads a row. The MIG takes the batch's file list
from Spark's checkpoint and DuckDB reads the files itself, with the stream's schema, on the
connection that appends the crossings. It serves plans in which every operator over the stream
runs in DuckDB (``fits``): each crossing is a window of the stream itself, so Spark has nothing
to compute, and its cost per micro-batch is its control plane alone.

DuckDB judges each file as every gateway does: by the input suite, in SQL
(``rowstream/suite_sql.py``), then by lateness against the high-water mark of the batches
before (``rowstream/eventtime.py``).

1. One aggregate pass over the file counts the rows that fail each expectation, the rows at
   or before the watermark, and the span of its event times.
2. Where no row fails, every row is admitted and the crossings read the file itself.
3. Else the file is judged row by row into a temporary table. The few rows that fail get their
   reasons from the polars suite, so that the quarantine words them as every gateway does.

DuckDB reads a CSV file with its own CSV reader, in parallel, where every line has the
canonical grammar, and none is blank or ends in a carriage return (``_Batch._csv_fields``).
The reader numbers no row, so a file with a row to quarantine, like any other CSV file, is
split into its lines as the Python source splits them (``_lines``), each numbered.

A file outside DuckDB's fast path is read as the Python source reads it
(``landing.read_landed``), and its admitted rows cross as Arrow. That covers a Parquet file
whose columns are not all of the stream's types or that holds a NaN, a CSV file with a line
off the canonical grammar (``native.canonical``: on it, DuckDB's casts and the Python
source's parse agree by construction), a carriage return or bytes that are not UTF-8, and a
file that cannot be read at all. The verdict is exact either way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import reduce
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kslack.manager import BufferManager, Decision, Policy, joins_same_k, same_k
from optimizer.deployment import Deployment
from optimizer.logical import Window
from rowstream.eventtime import EPOCH, admit, watermark
from rowstream.expectations import input_suite, parameters_at, reasons
from rowstream.gateway import (
    Gateway,
    Judge,
    Slack,
    buffer_of,
    observed,
    quarantined_rows,
    slack_of,
)
from rowstream.landing import EXTRA, ROW, csv_frame, is_header, read_landed, typed_frame
from rowstream.native import canonical, canonical_field, files_of, native_format, read_ddl
from rowstream.relations import naive
from rowstream.suite_sql import (
    Landed,
    identifier,
    literal,
    may_fail,
    rule,
    typed_landed,
    unique_columns,
)
from workload.schema import FLOATS, INTEGERS, StreamSchema

US = timedelta(microseconds=1)
# A CSV file's lines as DuckDB splits them: text, number and how many fields.
LINE, NUMBER, FIELDS = "line", "n", "__fields"
# Matches a CSV file's text against the grammar while DuckDB's reader types its fields
# (``_canonical_text``); a connection's cursor per file.
_MATCHING = ThreadPoolExecutor(2, thread_name_prefix="tandem-csv-grammar")
# Reads each file's times for a K-slack buffer while the file is checked (``_Batch._times_aside``).
_OBSERVER = ThreadPoolExecutor(1, thread_name_prefix="tandem-observe")


def reads_no_rows(deployment: Deployment) -> bool:
    """Whether a deployed plan needs none of the stream's rows from Spark: no Spark operator
    reads the stream (every crossing is a window of the stream itself), no DB-op runs in
    Spark's executors and Spark computes no split aggregate's partials."""
    return (all(isinstance(node, Window) for node in deployment.crossings)
            and not deployment.judged_in_executors)


def fits(directory: str | Path, deployment: Deployment) -> bool:
    """Whether DuckDB reads a run's landing directory by reference: its files are all Parquet
    or all CSV, and the plan needs none of the stream's rows from Spark."""
    return native_format(directory) is not None and reads_no_rows(deployment)


@dataclass
class Read:
    """A micro-batch DuckDB has read: SQL that gives its admitted rows (the stream's columns,
    over temporary tables and views that ``close`` drops), their count and event-time bounds,
    the quarantined rows (``StreamSchema.quarantined``) and the high-water mark after it."""

    schema: StreamSchema
    rows: str
    tuples: int
    first: datetime | None
    latest: datetime | None
    quarantined: pa.Table
    high_water: datetime | None
    temporary: list[str] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    python: tuple[str, ...] = ()  # the files read as the Python source reads them
    slack: Slack | None = None  # with a K-slack buffer (``FileReferences.slack``)

    def rows_of(self, stream: str) -> str:
        """SQL that gives the admitted rows of ``stream``, the one this batch read."""
        return self.rows

    def tuples_of(self, stream: str) -> int:
        return self.tuples

    def quarantine_rows(self) -> pa.Table:
        """The quarantined rows as the quarantine table holds them."""
        return quarantined_rows(self.schema, self.quarantined)

    def share(self, con: duckdb.DuckDBPyConnection) -> None:
        """Scan the files once into a temporary table, for several queries to append from
        (``rowstream/shared.py``): each of them would scan them again."""
        table = f"__shared_{self.schema.name}_{id(self):x}"
        con.execute(f"CREATE OR REPLACE TEMP TABLE {identifier(table)} AS {self.rows}")
        self.rows = f"SELECT * FROM {identifier(table)}"
        self.temporary.append(identifier(table))

    def close(self, con: duckdb.DuckDBPyConnection) -> None:
        for name in self.temporary:
            con.execute(f"DROP TABLE IF EXISTS {name}")
        for name in self.views:
            con.unregister(name)


@dataclass(frozen=True)
class _Scan:
    """One landed file as DuckDB reads it: a relation, its landed frame (``suite_sql.Landed``)
    and each row's number in the file."""

    source: str
    landed: Landed
    row: str | None  # None: a CSV file read by its fields (``_Batch._csv_fields``)
    # Counts and bounds come cheap, before the checks that need a scan: from a Parquet file's
    # statistics, or from two columns of a typed table.
    bounds_first: bool = False
    file: bool = False  # a scan of the file itself, which any connection reads


@dataclass(frozen=True)
class FileReferences(Judge):
    """A micro-batch's files, from Spark's checkpoint, and the high-water mark of the batches
    before it. DuckDB reads them (``read``); no row of Spark's is judged."""

    files: tuple[Path, ...]
    high_water: datetime | None
    lateness: float
    slide: float
    # A K-slack buffer sized per file (``kslack/manager.py``) instead of the fixed lateness,
    # as the batches before left it, and the stream column its requirement is on.
    slack: BufferManager | None = None
    value: str | None = None

    def read(self, con: duckdb.DuckDBPyConnection) -> Read:
        return read_together(con, (self,))[0]


def read_together(con: duckdb.DuckDBPyConnection, judges: Sequence[FileReferences]
                  ) -> list[Read]:
    """Several queries' judges of one micro-batch of one stream, alike but for their lateness
    or K-slack buffer: DuckDB reads and checks each file once, and each judge admits of it what
    its own watermark leaves (Ji's K-slack chain, Sec. 5.3: one disorder handling shared, each
    query with the buffer its requirement needs). Each read is the one the judge's own ``read``
    gives; the first holds the temporary tables all read from and closes them."""
    first = judges[0]
    if any((j.schema, j.files, j.high_water, j.slide)
           != (first.schema, first.files, first.high_water, first.slide) for j in judges):
        raise ValueError("judges read together judge one batch of one stream, after the same "
                         "batches")
    batch = _Batch(first, con, [_Admission(j) for j in judges])
    for number, path in enumerate(first.files):
        batch.add(number, path)
    return batch.result()


@dataclass
class _Admission:
    """One judge's verdicts on a batch's rows (``read_together``): by its lateness or K-slack
    buffer, the rows it admits and the late rows it quarantines, file by file."""

    judge: FileReferences
    mark: int | None = None  # the watermark the next file is judged against, µs
    pieces: list[str] = field(default_factory=list)
    quarantined: list[pl.DataFrame] = field(default_factory=list)
    counts: list[tuple[int, datetime | None, datetime | None]] = field(default_factory=list)
    decisions: list[tuple[str, str, Decision]] = field(default_factory=list)
    # The last file's rows for the buffer: times (µs), which came late, values.
    observed: tuple = ()

    @property
    def slack(self) -> BufferManager | None:
        return self.judge.slack

    @property
    def allowed(self) -> float:
        """The lateness the file is judged with: L, or the buffer's K."""
        return self.judge.lateness if self.slack is None else self.slack.k

    def passed(self, before: int | None) -> None:
        """The high-water mark before the next file is ``before`` (µs)."""
        self.mark = (watermark(before, self.judge.lateness) if self.slack is None
                     else self.slack.mark)

    def late(self, scan: _Scan) -> str:
        """SQL true for a row of ``scan`` at or before the watermark."""
        if self.mark is None:
            return "FALSE"
        ts = scan.landed.columns[self.judge.schema.time_column]
        return f"{ts} <= {literal(_instant(self.mark))}"

    def observe(self, times: tuple[np.ndarray, dict[str, np.ndarray]]) -> None:
        """What the buffer sees of a file's rows that passed the input suite (``_Batch._times``)."""
        ts, values = times
        late = ts <= self.mark if self.mark is not None else np.zeros(ts.size, bool)
        self.observed = (ts, late, values.get(self.judge.value))

    def read(self, batch: _Batch) -> Read:
        schema = batch.schema
        tuples = sum(n for n, _, _ in self.counts)
        firsts = [f for n, f, _ in self.counts if n]
        lasts = [last for n, _, last in self.counts if n]
        empty = (f"SELECT {', '.join(f'NULL::{t} AS {identifier(c)}' for c, t in schema.columns)}"
                 " WHERE FALSE")
        return Read(schema, " UNION ALL ".join(self.pieces) or empty, tuples,
                    min(firsts, default=None), max(lasts, default=None),
                    _quarantined(self.quarantined, schema),
                    None if batch.before is None else _instant(batch.before), [], [],
                    tuple(batch.python), slack_of(self.slack, self.decisions))


@dataclass
class _Batch:
    """A micro-batch being read, file by file, for one or more judges (``_Admission``). A batch
    of several files is judged as that many batches of one: each file's late rows are those at
    or before the watermark after the files before it (``before``), so a run's rows do not
    depend on how many files Spark gave each batch (``ReferencedFiles.files_per_batch``)."""

    judge: FileReferences  # the stream's and the batch's (the first admission's)
    con: duckdb.DuckDBPyConnection
    admissions: list[_Admission]
    before: int | None = field(init=False)  # the high-water mark so far, µs (the next file's)
    temporary: list[str] = field(default_factory=list)
    views: list[str] = field(default_factory=list)
    python: list[str] = field(default_factory=list)
    _cursor: duckdb.DuckDBPyConnection | None = field(default=None, init=False)

    @property
    def schema(self) -> StreamSchema:
        return self.judge.schema

    @property
    def observing(self) -> list[_Admission]:
        """The admissions with a K-slack buffer, which reads every row's time."""
        return [a for a in self.admissions if a.slack is not None]

    def __post_init__(self):
        high_water = self.judge.high_water
        self._passed(None if high_water is None else (high_water - EPOCH) // US)

    def _temporary(self, kind: str, *numbers: int) -> str:
        """The name of a temporary table or view of the batch's: the stream's in it, as the
        batches of a join's streams are read on one connection at once."""
        stream = re.sub(r"\W", "_", self.schema.name, flags=re.ASCII)
        return "_".join([f"__{kind}", stream, *map(str, numbers)])

    def _passed(self, before: int | None) -> None:
        """The high-water mark before the next file is ``before`` (µs): rows at or before each
        admission's watermark are late."""
        self.before = before
        for admission in self.admissions:
            admission.passed(before)

    def add(self, number: int, path: Path) -> None:
        self._add(number, path)
        for admission in self.observing:
            admission.decisions.append((self.schema.name, path.name,
                                        admission.slack.observe(*admission.observed)))
        # The latest admitted row is the file's latest, whoever judged it: a row later than
        # the high-water mark is late for nobody.
        lasts = [a.counts[-1][2] for a in self.admissions if a.counts[-1][2] is not None]
        if lasts:
            last = (max(lasts) - EPOCH) // US
            self._passed(last if self.before is None else max(self.before, last))

    def _add(self, number: int, path: Path) -> None:
        scan = (_parquet(path, self.schema) if path.suffix == ".parquet"
                else self._csv_fields(number, path) or self._csv(number, path))
        for admission in self.admissions:
            admission.observed = ()
        if scan is None:
            self._as_python_reads(number, path, self.admissions)
            return
        ts = scan.landed.columns[self.schema.time_column]
        suite = input_suite(self.schema)
        if scan.bounds_first:
            # What the bounds answer first (the late rows need a scan only where the file
            # begins at or before a watermark), then the rest.
            rows, first, last, ranges = self._bounds(scan, unique_columns(suite))
            checks = may_fail(suite, scan.landed, ranges)
            # A K-slack buffer reads every row's time, and they say which rows came late.
            times = self._times_aside(scan) if self.observing else None
            late = [0] * len(self.admissions)  # each admission's late rows
            counted = [] if times is not None else [
                i for i, a in enumerate(self.admissions)
                if first is not None and a.mark is not None and first <= _instant(a.mark)]
            checks += [f"count(*) FILTER (WHERE {self.admissions[i].late(scan)})"
                       for i in counted]
            found = self.con.execute(
                f"SELECT {', '.join(checks)} FROM {scan.source}").fetchall()[0] if checks else ()
            failing = found[:len(found) - len(counted)]
            for i, rows_late in zip(counted, found[len(failing):], strict=True):
                late[i] = rows_late
            if times is not None:
                times = times.result()
                for i, admission in enumerate(self.admissions):
                    admission.observe(times)
                    late[i] = int(admission.observed[1].sum())
        else:
            rows, first, last, *found = self.con.execute(
                f"SELECT count(*), min({ts}), max({ts}), "
                + "".join(f"count(*) FILTER (WHERE {a.late(scan)}), " for a in self.admissions)
                + f"{', '.join(may_fail(suite, scan.landed))} FROM {scan.source}").fetchall()[0]
            late, failing = found[:len(self.admissions)], found[len(self.admissions):]
        near = rows == 0 or last - first <= timedelta(seconds=self.schema.time_distance)
        rest = self.admissions
        if near and not any(failing):
            rest = []
            for admission, rows_late in zip(self.admissions, late, strict=True):
                if not rows_late:
                    admission.pieces.append(
                        f"SELECT {_columns(self.schema, scan.landed)} FROM {scan.source}")
                    admission.counts.append((rows, first, last))
                elif scan.row is not None:
                    self._late_only(admission, path, scan, first)
                else:
                    rest.append(admission)
            unseen = [a for a in self.observing if not a.observed]
            if unseen:
                times = self._times(self.con, scan, scan.source)
                for admission in unseen:
                    admission.observe(times)
            if not rest:
                return
        if scan.row is None:  # CSV read by its fields: only its lines number its rows
            scan = self._csv(number, path)
            if scan is None:
                self._as_python_reads(number, path, rest)
                return
        self._judged(number, path, scan, rest)

    def _late_only(self, admission: _Admission, path: Path, scan: _Scan, first: datetime
                   ) -> None:
        """A file whose only rows to quarantine came late (a K-slack buffer lets a few come
        late by design): its other rows are a scan of it, and the late ones, a few, are read
        for the quarantine, without judging each row into a table (``_judged``)."""
        schema, late = self.schema, admission.late(scan)
        admission.pieces.append(f"SELECT {_columns(schema, scan.landed)} FROM {scan.source} "
                                f"WHERE NOT ({late})")
        if admission.observed:  # the buffer read every row's time
            ts, is_late, _ = admission.observed
            on_time = ts[~is_late]
            admission.counts.append((on_time.size, *(
                (_instant(int(on_time.min())), _instant(int(on_time.max()))) if on_time.size
                else (None, None))))
        else:
            ts = scan.landed.columns[schema.time_column]
            admission.counts.append(self.con.execute(
                f"SELECT count(*), min({ts}), max({ts}) FROM {scan.source} "
                f"WHERE NOT ({late})").fetchall()[0])
        failed = pl.from_arrow(self.con.sql(
            f"SELECT *, {scan.row} AS __row, NULL::VARCHAR AS __rule FROM {scan.source} "
            f"WHERE {late}").to_arrow_table())
        # No row fails the suite: the parameters only word its rules.
        admission.quarantined.append(
            self._reasons(admission, failed, path.name, parameters_at(first, schema)))

    def _bounds(self, scan: _Scan, unique: list[str]) -> tuple:
        """A scan's rows, its first and last event times, and the bounds of the integer columns
        expected unique where a bitmap over them holds at most 64 bits per row
        (``suite_sql.may_fail``): from a Parquet file's statistics, or a typed table's columns.
        The time's conversion to UTC wall time (``_parquet``) keeps order, so it converts the
        bounds rather than every row (of a table's time, already wall time, it changes none)."""
        columns = [c for c in unique if self.schema.types[c] in INTEGERS]
        ts = identifier(self.schema.time_column)
        rows, first, last, *found = self.con.execute(
            f"SELECT count(*), make_timestamp(epoch_us(min({ts}))), "
            f"make_timestamp(epoch_us(max({ts})))" + "".join(
                f", min({identifier(c)}), max({identifier(c)}), count({identifier(c)})"
                for c in columns) + f" FROM {scan.source}").fetchall()[0]
        ranges = {}
        for i, column in enumerate(columns):
            low, high, count = found[3 * i:3 * i + 3]
            if count and high - low < 64 * count:
                ranges[column] = (low, high)
        return rows, first, last, ranges

    def _judged(self, number: int, path: Path, scan: _Scan, admissions: list[_Admission]
                ) -> None:
        """The file judged row by row: its admitted rows stay in DuckDB; the rows that fail a
        rule or come late get their reasons here."""
        schema = self.schema
        ts = scan.landed.columns[schema.time_column]
        median = self.con.execute(f"SELECT quantile_disc({ts}, 0.5) FROM {scan.source} "
                                  f"WHERE {ts} IS NOT NULL").fetchall()[0][0]
        parameters = parameters_at(median, schema)
        table = self._temporary("judged", number)
        self.temporary.append(table)
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT *, {scan.row} AS "
                         f"__row, {rule(input_suite(schema), scan.landed, parameters)} AS __rule "
                         f"FROM {scan.source}")
        for admission in admissions:
            late = admission.late(scan)
            admitted = f"FROM {table} WHERE __rule IS NULL AND NOT ({late})"
            admission.pieces.append(f"SELECT {_columns(schema, scan.landed)} {admitted}")
            admission.counts.append(self.con.execute(
                f"SELECT count(*), min({ts}), max({ts}) {admitted}").fetchall()[0])
            failed = pl.from_arrow(self.con.sql(
                f"SELECT * FROM {table} WHERE __rule IS NOT NULL OR ({late})").to_arrow_table())
            if failed.height:
                admission.quarantined.append(
                    self._reasons(admission, failed, path.name, parameters))
        observing = [a for a in admissions if a.slack is not None]
        if observing:
            times = self._times(self.con, scan, f"{table} WHERE __rule IS NULL ORDER BY __row")
            for admission in observing:
                admission.observe(times)

    def _times_aside(self, scan: _Scan) -> Future:
        """``_times`` of a whole file, on a connection of its own and a thread of the
        process's, while this one checks the file: DuckDB scans a file of one row group on one
        thread. A scan of a temporary table is read on this connection, which holds it."""
        if not scan.file:
            return _done(self._times(self.con, scan, scan.source))
        if self._cursor is None:
            self._cursor = self.con.cursor()
        return _OBSERVER.submit(self._times, self._cursor, scan, scan.source)

    def _times(self, con: duckdb.DuckDBPyConnection, scan: _Scan, source: str
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """For the K-slack buffers: the rows of ``source`` in the order they landed (DuckDB
        keeps a scan's order), their times in µs and the values of each stream column a
        requirement is on."""
        columns = scan.landed.columns
        values = sorted({a.judge.value for a in self.observing} - {None})
        found = con.execute(
            f"SELECT epoch_us({columns[self.schema.time_column]})"
            + "".join(f", CAST({columns[v]} AS DOUBLE)" for v in values) + f" FROM {source}"
        ).fetchnumpy()
        ts, *arrays = found.values()
        return ts, dict(zip(values, arrays, strict=True))

    def _reasons(self, admission: _Admission, failed: pl.DataFrame, name: str,
                 parameters: dict) -> pl.DataFrame:
        """The quarantined rows of a file judged in DuckDB, worded by the polars suite and the
        lateness rule (the stream's columns, ``EXTRA``)."""
        schema = self.schema
        if LINE in failed.columns:
            frame = csv_frame(failed[LINE], name, schema, numbers=failed[NUMBER])
        else:
            frame = typed_frame(failed.select(*schema.names, pl.col("__row").alias(ROW)), name,
                                schema)
        frame = frame.with_columns(failed["__rule"].alias("rule"))
        frame = frame.with_columns(reasons(input_suite(schema), parameters, pl.col("rule"))
                                   .alias("reason")).select(*schema.names, *EXTRA)
        frame, _ = admit(frame, self.before, admission.allowed, self.judge.slide,
                         schema.time_column, admission.mark)
        return frame

    def _as_python_reads(self, number: int, path: Path, admissions: list[_Admission]) -> None:
        """A file outside DuckDB's fast path, read and judged as the Python source does; its
        admitted rows cross as Arrow."""
        schema = self.schema
        self.python.append(path.name)
        landed = read_landed(path, schema)
        for i, admission in enumerate(admissions):
            frame, _ = admit(landed, self.before, admission.allowed, self.judge.slide,
                             schema.time_column, admission.mark)
            good = frame.filter(pl.col("reason").is_null())
            if admission.slack is not None:
                admission.observed = observed(frame, schema.time_column, admission.judge.value)
            admission.quarantined.append(frame.filter(pl.col("reason").is_not_null()))
            view = self._temporary("landed", number, i)
            self.views.append(view)
            self.con.register(view, naive(good.select(schema.names).to_arrow()))
            columns = Landed({c: identifier(c) for c in schema.names})
            admission.pieces.append(f"SELECT {_columns(schema, columns)} FROM {view}")
            ts = good[schema.time_column]
            admission.counts.append((good.height, ts.min(), ts.max()))

    def _csv(self, number: int, path: Path) -> _Scan | None:
        """A CSV file's lines in a temporary table, each parsed to the stream's types, where all
        are canonical (module docstring); None for a file outside that."""
        schema = self.schema
        table = self._temporary("lines", number)
        try:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {_lines(path, schema)}")
        except duckdb.Error:  # bytes that are not UTF-8, or a file that went away
            return None
        self.temporary.append(table)
        if not self.con.execute(f"SELECT coalesce(bool_and(clean), TRUE) FROM {table}"
                                ).fetchall()[0][0]:
            return None
        return _Scan(f"(SELECT * FROM {table} WHERE NOT header)",
                     typed_landed(schema, {c: identifier(c) for c in schema.names}, FIELDS),
                     NUMBER)

    def _csv_fields(self, number: int, path: Path) -> _Scan | None:
        """A CSV file read by DuckDB's own CSV reader, in parallel, into a temporary table of
        its rows typed, where every line is canonical, a time narrower still (``_read_value``);
        None for any other file, which its lines then judge (``_csv``). The file is read
        twice at once: by its fields, which the reader types itself, and in another thread as
        one text matched against the canonical grammar of all its lines (``_canonical_text``).
        Its rows are not numbered: a file with a row to quarantine is judged again by its lines
        (``add``)."""
        schema = self.schema
        try:
            with path.open("rb") as f:
                first = f.readline()
        except OSError:
            return None
        if not first:
            return None
        line = first.decode("utf-8", "replace").removesuffix("\n").removeprefix("\ufeff")
        header = is_header(line, schema)
        canonical_text = _MATCHING.submit(_canonical_text, self.con.cursor(), path, schema, header)
        options = (f"header = false, skip = {int(header)}, quote = '', escape = '', "
                   "new_line = '\\n', auto_detect = false, strict_mode = true, "
                   "null_padding = false")
        table = self._temporary("fields", number)
        fields = ", ".join(f"'f{i}': {literal(_READ_AS.get(t, t))}"
                           for i, (_, t) in enumerate(schema.columns))
        typed = ", ".join(f"{_read_value(f'f{i}', t)} AS {identifier(c)}"
                          for i, (c, t) in enumerate(schema.columns))
        try:
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {typed} FROM read_csv("
                f"{literal(str(path))}, columns = {{{fields}}}, delim = ',', {options})")
            read = True
        except duckdb.Error:  # a line with a field too many, a time from 2^32 s, a file gone
            read = False
        if not (canonical_text.result() and read):
            self.con.execute(f"DROP TABLE IF EXISTS {table}")
            return None
        self.temporary.append(table)
        return _Scan(table, typed_landed(schema, {c: identifier(c) for c in schema.names},
                                          str(len(schema.columns))), None, bounds_first=True)

    def result(self) -> list[Read]:
        if self._cursor is not None:
            self._cursor.close()
        reads = [admission.read(self) for admission in self.admissions]
        reads[0].temporary, reads[0].views = self.temporary, self.views
        return reads


def _quarantined(frames: list[pl.DataFrame], schema: StreamSchema) -> pa.Table:
    return pa.concat_tables([schema.quarantined.empty_table(), *(
        f.select(schema.quarantined.names).to_arrow().cast(schema.quarantined) for f in frames)])


def _done(value) -> Future:
    future = Future()
    future.set_result(value)
    return future


def _instant(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def _canonical_text(con: duckdb.DuckDBPyConnection, path: Path, schema: StreamSchema,
                    header: bool) -> bool:
    """Is every line of the CSV file at ``path`` after its header canonical, each ended by \\n
    but perhaps the last? Matched as one text, the grammar of all its lines at once, where a
    match per line costs the regular expression's call 120 ns a line. A blank line is off the
    grammar, and so is a carriage return but inside a text field: the Python source splits
    the rows on \\n alone. A byte-order mark is not text of the first line
    (``landing.csv_frame``)."""
    line = canonical(schema, _READ_NARROWER)[1:-1]
    body = f"(?:{line}\\n)*(?:{line})?"
    text = f"[^\\n]*(?:\\n{body})?" if header else f"\\x{{FEFF}}?{body}"
    try:
        with con:
            return con.execute(f"SELECT regexp_full_match(content, {literal(text)}) FROM "
                               f"read_text({literal(str(path))})").fetchall()[0][0]
    except duckdb.Error:  # not UTF-8, a file gone
        return False


def _columns(schema: StreamSchema, landed: Landed) -> str:
    """The stream's columns, typed as the store keeps them, from a landed frame."""
    return ", ".join(f"CAST({landed.columns[c]} AS {t}) AS {identifier(c)}"
                     for c, t in schema.columns)


def _parquet(path: Path, schema: StreamSchema) -> _Scan | None:
    """A Parquet file whose columns all have the stream's types as DuckDB reads it; None for
    another (module docstring)."""
    try:
        found = pq.read_schema(path)
    except Exception:  # the Python source's reader says why
        return None
    for column in schema.arrow:
        if column.name not in found.names:
            return None
        kind = found.field(column.name).type
        if pa.types.is_timestamp(column.type):
            if not (pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz in (None, "UTC")):
                return None
        elif kind != column.type and not (pa.types.is_string(column.type) and (
                pa.types.is_large_string(kind) or pa.types.is_string_view(kind))):
            return None  # (polars writes its text as large strings)
    types = schema.types
    # DuckDB 2.0 says a NaN of a dictionary-encoded page is no NaN where it projects ``isnan``
    # (``suite_sql.nan``): a file with one is read the Python way, so that in SQL no float of
    # the stream is NaN and a missing value is a null. Arrow reads the float columns in
    # milliseconds.
    floats = [c for c, t in types.items() if t in FLOATS]
    if floats and any(pc.any(pc.is_nan(values)).as_py()
                      for values in pq.read_table(path, columns=floats).columns):
        return None
    # The time as UTC wall time; a cast would convert it in the session's zone, at ten times
    # the cost.
    columns = {c: f"make_timestamp(epoch_us({identifier(c)}))" if t == "TIMESTAMP"
               else identifier(c) for c, t in types.items()}
    return _Scan(f"read_parquet({literal(str(path))}, file_row_number = true)",
                 typed_landed(schema, columns, str(len(types))), "file_row_number + 1",
                 bounds_first=True, file=True)


def _lines(path: Path, schema: StreamSchema) -> str:
    """SQL that splits a CSV file into its lines as the Python source does
    (``landing._read_csv``: a byte-order mark dropped, one line end at the end ignored), each
    with its number, whether it is the header, its field count, whether the fast path takes it
    (``clean``: no carriage return, and each of its fields up to the stream's of the canonical
    grammar, which a line of the right shape meets at once), and its fields typed where it is
    clean."""
    count = len(schema.columns)
    each = " AND ".join(f"({_field(i)} IS NULL OR regexp_full_match({_field(i)}, "
                        f"{literal(canonical_field(t))}))" for i, (_, t) in enumerate(schema.columns))
    parsed = ", ".join(f"CASE WHEN clean AND NOT header THEN {_value(_field(i), t)} END AS "
                       f"{identifier(c)}" for i, (c, t) in enumerate(schema.columns))
    header = ",".join(schema.fields)
    return (
        f"WITH text AS (SELECT CASE WHEN starts_with(content, chr(65279)) THEN substr(content, 2) "
        f"ELSE content END AS content FROM read_text({literal(str(path))})), "
        f"trimmed AS (SELECT CASE WHEN ends_with(content, chr(10)) THEN "
        f"left(content, length(content) - 1) ELSE content END AS content FROM text "
        f"WHERE content <> ''), "
        f"split AS (SELECT string_split(content, chr(10)) AS lines FROM trimmed), "
        f"numbered AS (SELECT unnest(lines) AS {LINE}, generate_subscripts(lines, 1) AS {NUMBER} "
        f"FROM split), "
        f"fielded AS (SELECT {LINE}, {NUMBER}, string_split({LINE}, ',') AS fields, "
        f"{NUMBER} = 1 AND lower(replace({LINE}, ' ', '')) = {literal(header)} AS header "
        f"FROM numbered), "
        f"judged AS (SELECT {LINE}, {NUMBER}, fields, header, header OR "
        f"NOT contains({LINE}, chr(13)) AND CASE WHEN regexp_full_match({LINE}, "
        f"{literal(canonical(schema)[1:-1])}) THEN TRUE WHEN len(fields) = {count} THEN FALSE "
        f"ELSE {each} END AS clean FROM fielded) "
        f"SELECT {LINE}, {NUMBER}, header, clean, len(fields) AS {FIELDS}, {parsed} FROM judged")


def _field(index: int) -> str:
    """A CSV line's field (from 0) as text, NULL where it is empty."""
    return f"nullif(fields[{index + 1}], '')"


# How DuckDB's CSV reader reads a canonical field that it cannot type as the Python source
# does (``_read_value``): a REAL is rounded from a double, and a time is Unix seconds, read as a
# double where its text is narrower than the canonical one (``_READ_NARROWER``) and its value
# below 2^32 s (a file with a later time is left to its lines).
_READ_AS = {"REAL": "DOUBLE", "TIMESTAMP": "DOUBLE"}
_READ_NARROWER = {"TIMESTAMP": "[0-9]{1,10}(\\.[0-9]{1,6})?",
                  "VARCHAR": "[^, \\t\\n\\r\\x0B\\f]([^,\\n]*[^, \\t\\n\\r\\x0B\\f])?"}


def _read_value(read: str, kind: str) -> str:
    """A canonical field's value from DuckDB's CSV reader (``_READ_AS``), which types the
    others itself as their casts do.

    A time of m µs, m < 2^32 · 10^6 < 2^52, written with at most six fractional digits, is the
    nearest double d to m / 10^6, and its product with 10^6 is rounded once more: both errors
    are at most half an ulp, so |fl(d · 10^6) − m| ≤ 10^6 · 2^-22 + 2^-1 · 2^-1 < 0.24 + 0.25 <
    1/2, and rounding gives m exactly. Rounding is monotone, so a time at or beyond 2^32 s
    reads as one, and the read fails there."""
    if kind == "TIMESTAMP":
        return (f"CASE WHEN {read} >= {2 ** 32} THEN error('a time from 2^32 s') "
                f"ELSE make_timestamp(CAST(round({read} * 1000000) AS BIGINT)) END")
    return _value(read, kind) if kind in _READ_AS else read


def _value(text: str, kind: str) -> str:
    """A canonical CSV field's value (``native.canonical``) as DuckDB casts it, which is the
    Python source's parse (``landing.parse_text``) on that grammar."""
    if kind == "TIMESTAMP":  # Unix seconds; microseconds truncated after the sixth digit
        return (f"make_timestamp(CAST(split_part({text}, '.', 1) AS BIGINT) * 1000000 + "
                f"CAST(rpad(left(split_part({text}, '.', 2), 6), 6, '0') AS BIGINT))")
    if kind == "REAL":  # a double, rounded once to a float
        return f"CAST(CAST({text} AS DOUBLE) AS REAL)"
    return f"CAST({text} AS {kind})"


@dataclass(frozen=True)
class ReferencedFiles(Gateway):
    """A landing directory whose batches Spark plans and DuckDB reads (module docstring). The
    batches' files are in Spark's ``checkpoint``."""

    name = "reference"
    by_reference = True
    schema: StreamSchema
    directory: str
    checkpoint: str
    lateness: float
    slide: float
    files_per_batch: int = 1
    # Quality-driven disorder handling: how K is sized, and the stream column whose values
    # the requirement is on (None: a COUNT's); None: the fixed lateness.
    policy: Policy | None = None
    value: str | None = None

    @property
    def reading(self) -> ReferencedFiles:
        """Less its lateness and K-slack buffer, which ``read_together`` keeps per judge."""
        return replace(self, lateness=0.0, policy=None, value=None)

    def stream(self, spark: SparkSession) -> DataFrame:
        """Spark's file source over the landing directory, up to ``files_per_batch`` files per
        micro-batch: it plans the batches and checkpoints them; no job reads its rows."""
        path = str(Path(self.directory).resolve())
        reader = spark.readStream.option("maxFilesPerTrigger", self.files_per_batch)
        if native_format(self.directory) == "csv":
            return reader.option("pathGlobFilter", "*.csv").text(path)
        return (reader.schema(read_ddl(self.schema)).option("pathGlobFilter", "*.parquet")
                .parquet(path))

    def judge(self, batch_id: int, high_water: datetime | None,
              slack: dict | None = None) -> FileReferences:
        return self.references(tuple(files_of(self.checkpoint, batch_id)), high_water, slack)

    def references(self, files: tuple[Path, ...], high_water: datetime | None,
                   slack: dict | None) -> FileReferences:
        """The judge of a batch of ``files``, after the batches that left the high-water mark
        ``high_water`` and the K-slack buffer's state ``slack``."""
        return FileReferences(self.schema, files, high_water, self.lateness, self.slide,
                              buffer_of(self.policy, slack), self.value)


@dataclass
class Reads:
    """A micro-batch of several streams, each read by DuckDB as a ``Read`` of its own, behind
    a synchronisation buffer (Ji Sec. 3.2): the batch's watermark (``slack.watermark``) is the
    earliest of the streams' watermarks, so a window is evaluated once every stream has passed
    it, and each stream's high-water mark and buffer go on in ``slack.state``."""

    parts: dict[str, Read]
    slack: Slack
    high_water = None  # each stream's is in ``slack.state``

    def rows_of(self, stream: str) -> str:
        return self.parts[stream].rows

    def tuples_of(self, stream: str) -> int:
        return self.parts[stream].tuples

    @property
    def tuples(self) -> int:
        return sum(p.tuples for p in self.parts.values())

    @property
    def first(self) -> datetime | None:
        return min((p.first for p in self.parts.values() if p.first is not None), default=None)

    @property
    def latest(self) -> datetime | None:
        return max((p.latest for p in self.parts.values() if p.latest is not None), default=None)

    @property
    def python(self) -> tuple[str, ...]:
        return tuple(name for p in self.parts.values() for name in p.python)

    def quarantine_rows(self) -> pa.Table:
        return pa.concat_tables([p.quarantine_rows() for p in self.parts.values()])

    def share(self, con: duckdb.DuckDBPyConnection) -> None:
        for part in self.parts.values():
            part.share(con)

    def close(self, con: duckdb.DuckDBPyConnection) -> None:
        for part in self.parts.values():
            part.close(con)


@dataclass(frozen=True)
class SynchronisedReferences:
    """The judge of a micro-batch of several streams: each stream's files judged by its own
    ``FileReferences``, with the stream's schema, high-water mark and lateness (or K-slack
    buffer), then synchronised (``Reads``).

    Where the streams share one K (Ji's Same-K, ``kslack.manager.same_k``), K after each file
    is decided from every stream's statistics, so the files are judged in an order the streams
    alone decide, whatever Spark batched: the stream furthest behind (the least high-water
    mark, then the first) gives its next file. Where it has none yet, the others' files wait,
    by name, in the batch's state (``pending``), as Ji's synchronisation buffer holds the
    leading streams' tuples: no window of theirs is evaluated before the stream behind passes
    it anyway."""

    streams: tuple[FileReferences, ...]
    pending: tuple[tuple[Path, ...], ...] = ()  # per stream, files the batches before held

    def read(self, con: duckdb.DuckDBPyConnection) -> Reads:
        joint = joins_same_k([j.slack.policy if j.slack else None for j in self.streams])
        for judge in self.streams if joint else ():
            judge.slack.joint = True
        batches = [_Batch(judge, con, [_Admission(judge)]) for judge in self.streams]
        queues = [[*(self.pending[i] if self.pending else ()), *judge.files]
                  for i, judge in enumerate(self.streams)]
        numbers = [0] * len(batches)
        while True:
            i = (min(range(len(batches)), key=lambda s: (
                batches[s].before is not None, batches[s].before or 0, s)) if joint
                else next((s for s, queue in enumerate(queues) if queue), 0))
            if not queues[i]:
                break
            batches[i].add(numbers[i], queues[i].pop(0))
            numbers[i] += 1
            if joint:
                _impose(batches, i)
        parts = {judge.schema.name: batch.result()[0]
                 for judge, batch in zip(self.streams, batches, strict=True)}
        marks = [_watermark_after(judge, parts[judge.schema.name]) for judge in self.streams]
        state = {judge.schema.name: {
            "high_water": None if read.high_water is None else read.high_water.isoformat(),
            "slack": None if read.slack is None else read.slack.state,
            **({"pending": [str(p) for p in queue]} if queue else {})}
            for judge, read, queue in zip(self.streams, parts.values(), queues, strict=True)}
        decisions = tuple(d for read in parts.values() if read.slack
                          for d in read.slack.decisions)
        synchronised = None if None in marks else min(marks)
        return Reads(parts, Slack(synchronised, decisions, state))


def _impose(batches: list[_Batch], last: int) -> None:
    """Same-K after a file of stream ``last``: the K every stream's next file is judged with,
    which is the file's decision."""
    managers = [batch.admissions[0].slack for batch in batches]
    k, target, seconds = same_k(managers)
    for manager, batch in zip(managers, batches, strict=True):
        manager.impose(k)
        batch._passed(batch.before)
    decisions = batches[last].admissions[0].decisions
    stream, name, decision = decisions[-1]
    decisions[-1] = (stream, name, replace(
        decision, k=k, watermark=managers[last].mark, seconds=decision.seconds + seconds,
        threshold=target))


def _watermark_after(judge: FileReferences, read: Read) -> datetime | None:
    """A stream's watermark after its part of a batch: its K-slack buffer's, else its
    high-water mark less its lateness; None before its first row."""
    if read.slack is not None:
        return read.slack.watermark
    if read.high_water is None:
        return None
    return _instant(watermark((read.high_water - EPOCH) // US, judge.lateness))


@dataclass(frozen=True)
class ReferencedStreams(Gateway):
    """Several streams' landing directories read by reference in one run, for a join between
    streams: one Spark file source each, in one query, so that one checkpoint plans the
    batches of all (its file source ``i`` is ``streams[i]``); DuckDB reads each stream's files
    as ``ReferencedFiles`` does. The state a batch leaves (each stream's high-water mark and
    buffer) is the batch's progress."""

    name = "reference"
    by_reference = True
    streams: tuple[ReferencedFiles, ...]

    @property
    def schema(self) -> StreamSchema:
        return self.streams[0].schema

    def stream(self, spark: SparkSession) -> DataFrame:
        """The streams' file sources, unioned: Spark plans a batch when any has new files."""
        sources = [part.stream(spark).select(F.lit(i).alias("source"))
                   for i, part in enumerate(self.streams)]
        return reduce(DataFrame.union, sources)

    def judge(self, batch_id: int, high_water: datetime | None,
              slack: dict | None = None) -> SynchronisedReferences:
        state = slack or {}
        judges, pending = [], []
        for i, part in enumerate(self.streams):
            mine = state.get(part.schema.name) or {}
            before = mine.get("high_water")
            judges.append(part.references(
                tuple(files_of(part.checkpoint, batch_id, i)),
                None if before is None else datetime.fromisoformat(before), mine.get("slack")))
            pending.append(tuple(Path(p) for p in mine.get("pending", ())))
        return SynchronisedReferences(tuple(judges), tuple(pending))

"""The native gateway: a landing directory read by Spark's own file sources, Parquet files by its
Parquet source and CSV files by its text source.

Spark's file source reads the files in the order they landed, ``files_per_batch`` per
micro-batch, and records them in its checkpoint: a replayed batch reads the same files. The
rows leave Spark's source typed, with each row's file and where in the file it lies; nothing of
them passes through Python until the MIG's ``toArrow``.

The input suite and the lateness rule cannot run inside a streaming plan: the suite's
parameters belong to a file (its median event time; ids unique within it) and lateness needs
the high-water mark of the batches before, state that stateless operators do not keep, while
Spark's own late-row filter is per window, not per row, and uses the watermark of the batch
before the previous one. So the gateway's judge (``NativeJudge``, ``admit_batch``) runs right
after Spark's job, on the driver or in the executors (``rowstream/gateway.py``), with the same
vectorised suite and the same lateness rule as the Python source: the crossings travel in the
same rows, and the rows that fail are taken out of them before they reach DuckDB. That is exact
only where Spark's operators are stateless (``fits``); a plan with a stateful Spark operator
reads through the Python source, which judges the rows before any operator
(``rowstream/landing_source.py``). Every task reads whole files (``WHOLE_FILES``): the input
suite's parameters are a file's.

**CSV.** Spark's CSV source skips blank lines and numbers no line, so the quarantine could not
name a bad line's origin; its text source gives every line, and ``_metadata.file_block_start``
says which block of the file a line came from. Spark splits the fields and parses them, and
marks each line ``CLEAN`` when it has the canonical grammar of the stream's types (plain
digits, a minus sign at most, no exponent; true or false; text without blanks at its ends), on
which Spark's casts and the Python source's parse agree by construction. The judge numbers the
lines (block by block, in the order Spark read them), and judges a file whose lines are all
clean from Spark's typed values. A file with any other line, or with a line the
suite quarantines, is judged from its lines' text as the Python source judges it
(``landing.csv_frame``), so that every rule, reason and origin is the Python source's; then
Spark's values of the rows it admits must equal the Python source's, or the batch fails rather
than be inexact. The file is read once, by Spark.

A file Spark cannot read (a truncated footer, a column of another type) gives no rows: the MIG
finds it among the batch's files in Spark's checkpoint and quarantines it whole, as the Python
source does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamReader

from kslack.manager import BufferManager, Policy
from optimizer.deployment import Deployment
from optimizer.errors import TandemError
from rowstream.eventtime import EPOCH, admit
from rowstream.gateway import Gateway, Judge, Verdict, buffer_of, observed, slack_of
from rowstream.landing import (
    EXTRA,
    ROW,
    batch_files,
    csv_frame,
    judged,
    landed_files,
    typed_frame,
    unreadable,
)
from workload.schema import StreamSchema

FILE = "file"  # the name of the file a row came from
BLOCK = "block"  # CSV: the byte offset of the block of the file Spark read the line in
KIND = "kind"  # CSV: CLEAN, HEADER or OTHER (module docstring)
CLEAN, HEADER, OTHER = 0, 1, 2
LINE = "line"  # CSV: the line's text

# The canonical grammar of each type (module docstring): few enough digits that no integer cast
# or product overflows; no blanks around a value, a text included.
_CANONICAL = {"BIGINT": "-?(0|[1-9][0-9]{0,17})", "INTEGER": "-?(0|[1-9][0-9]{0,8})",
              "SMALLINT": "-?(0|[1-9][0-9]{0,3})", "DOUBLE": "-?[0-9]+(\\.[0-9]+)?",
              "REAL": "-?[0-9]+(\\.[0-9]+)?", "BOOLEAN": "(true|false)",
              "TIMESTAMP": "[0-9]{1,12}(\\.[0-9]+)?",
              # Java's \s spelled out: DuckDB's regular expressions (RE2) leave out \x0B.
              "VARCHAR": "[^, \\t\\n\\r\\x0B\\f]([^,]*[^, \\t\\n\\r\\x0B\\f])?"}


# The types Spark's Parquet source reads a stream's numbers as (read_ddl).
WIDE = {"BIGINT": "BIGINT", "INTEGER": "BIGINT", "SMALLINT": "BIGINT", "REAL": "DOUBLE"}


def judged_columns(schema: StreamSchema) -> tuple[str, ...]:
    """What a native row is judged by: the stream's columns, its file and place in it, and for
    CSV its line's kind and text."""
    return (*schema.names, FILE, ROW, BLOCK, KIND, LINE)


def read_ddl(schema: StreamSchema) -> str:
    """The schema Spark's Parquet source reads with. Integers are read as BIGINT and REALs as
    DOUBLE (``WIDE``): Spark widens a file's narrower numbers to them, and a file written with
    64-bit numbers (pandas' default) is then readable too, as the Python source reads it. They
    become the stream's type (an integer null beyond its range, which the input suite then
    quarantines; a double rounded once to a float)."""
    return ", ".join(f"{c} {WIDE.get(t, schema.spark_type(c))}" for c, t in schema.columns)


def canonical_field(kind: str) -> str:
    """The canonical grammar of a CSV field of type ``kind`` (module docstring)."""
    return _CANONICAL[kind]


def canonical(schema: StreamSchema, narrower: Mapping[str, str] | None = None) -> str:
    """The canonical grammar of a CSV line of the stream (module docstring), in the syntax
    Java's and DuckDB's regular expressions share; an empty field is a missing value to both
    parsers. ``narrower``: a grammar within the canonical one for some types."""
    grammar = {**_CANONICAL, **(narrower or {})}
    return "^" + ",".join(f"({grammar[t]})?" for _, t in schema.columns) + "$"


# Every task reads whole files, one at a time: no file is larger.
WHOLE_FILES = {"spark.sql.files.maxPartitionBytes": str(1 << 40),
               "spark.sql.files.openCostInBytes": str(1 << 40)}


def native_format(directory: str | Path) -> str | None:
    """The one format ("parquet" or "csv") of the files landed in ``directory``, or None when
    there are none yet or both."""
    suffixes = {Path(n).suffix[1:] for n in landed_files(directory)}
    return suffixes.pop() if len(suffixes) == 1 else None


def fits(directory: str | Path, deployment: Deployment) -> bool:
    """Whether a run reads ``directory`` natively: its files are all Parquet or all CSV (and
    there is at least one, to know), and Spark runs no stateful operator below a crossing."""
    return (native_format(directory) is not None
            and not any(node.instantiated for node in deployment.crossings))


def native_stream(spark: SparkSession, schema: StreamSchema, directory: str, *,
                  files_per_batch: int = 1) -> DataFrame:
    """The stream's rows as Spark's own file source reads them: ``judged_columns`` and the
    columns the Python source adds (no heartbeats: the MIG finds the high-water mark)."""
    path = str(Path(directory).resolve())
    reader = spark.readStream.option("maxFilesPerTrigger", files_per_batch)
    if native_format(directory) == "csv":
        rows = _csv_rows(reader.option("pathGlobFilter", "*.csv").text(path), schema)
    else:
        rows = parquet_rows(reader.option("pathGlobFilter", "*.parquet"), schema, path)
    return rows.select(*judged_columns(schema), F.lit(False).alias("heartbeat"),
                       *[F.lit(None).cast("string").alias(c) for c in EXTRA])


def parquet_rows(reader: DataFrameReader | DataStreamReader, schema: StreamSchema,
                 path: str) -> DataFrame:
    """Parquet files as Spark reads them, streamed or not: ``judged_columns``."""
    # A file Spark cannot read is skipped here and quarantined by the MIG (module docstring).
    return (reader.schema(read_ddl(schema)).option("ignoreCorruptFiles", "true").parquet(path)
            .select(*[F.col(c).try_cast(schema.spark_type(c)).alias(c)
                      if t in WIDE and WIDE[t] != schema.spark_type(c) else c
                      for c, t in schema.columns],
                    F.col("_metadata.file_name").alias(FILE),
                    (F.col("_metadata.row_index") + 1).alias(ROW),
                    F.lit(None).cast("long").alias(BLOCK),
                    F.lit(None).cast("tinyint").alias(KIND),
                    F.lit(None).cast("string").alias(LINE)))


def _csv_rows(lines: DataFrame, schema: StreamSchema) -> DataFrame:
    """The lines of the stream's CSV files parsed by Spark (``landing.parse_text`` says how the
    Python source parses them; on canonical lines the two agree)."""
    line = F.regexp_replace(F.col("value"), "^\ufeff", "")  # as landing.csv_frame drops it
    fields = F.split(line, ",")
    # Spark's casts ignore the blanks around a number, as the Python source does.
    field = {c: F.get(fields, i) for i, c in enumerate(schema.names)}
    typed = {c: _typed(field[c], t) for c, t in schema.columns}
    header = F.lower(F.replace(line, F.lit(" "), F.lit(""))) == ",".join(schema.fields)
    kind = (F.when(line.rlike(canonical(schema)), CLEAN).when(header, HEADER).otherwise(OTHER)
            .cast("tinyint"))
    return lines.select(*[typed[c].alias(c) for c in schema.names],
                        F.col("_metadata.file_name").alias(FILE),
                        F.lit(None).cast("long").alias(ROW),
                        F.col("_metadata.file_block_start").alias(BLOCK), kind.alias(KIND),
                        F.make_valid_utf8(line).alias(LINE))


def _typed(text, kind: str):
    """A CSV field as Spark parses it: ``landing.parse_text`` in Spark's functions."""
    if kind == "TIMESTAMP":
        seconds = F.trim(text)
        # Unix seconds to microseconds, the fraction truncated after six digits, as the Python
        # source does; try_ arithmetic, since a line that is not canonical may hold anything.
        digits = F.rpad(F.substring_index(seconds, ".", -1).substr(1, 6), 6, "0")
        fraction = F.when(seconds.contains("."), digits).otherwise(F.lit("0")).try_cast("bigint")
        whole = F.substring_index(seconds, ".", 1)
        micros = F.try_add(F.try_multiply(whole.try_cast("bigint"), F.lit(1_000_000)),
                           F.when(whole.startswith("-"), -fraction).otherwise(fraction))
        return F.timestamp_micros(micros)
    if kind == "BOOLEAN":
        word = F.lower(F.trim(text))
        return F.when(word == "true", True).when(word == "false", False)
    if kind == "VARCHAR":  # without the blanks landing.BLANKS names
        stripped = F.regexp_replace(text, r"^[ \t\n\r\x0B\f]+|[ \t\n\r\x0B\f]+$", "")
        return F.when(stripped != "", stripped)
    if kind == "REAL":  # a double, rounded once to a float, as the Python source does
        return text.try_cast("double").cast("float")
    return text.try_cast({"BIGINT": "bigint", "INTEGER": "int", "SMALLINT": "smallint",
                          "DOUBLE": "double"}[kind])


def admit_batch(rows: pl.DataFrame, schema: StreamSchema, *, high_water: datetime | None,
                lateness: float, slide: float, slack: BufferManager | None = None,
                value: str | None = None, unit: str = "") -> Verdict:
    """Judge a batch's rows (``judged_columns``, in Spark's order) by the input suite, file by
    file, then by lateness against ``high_water``, the high-water mark of the batches before
    (``rowstream/eventtime.py``), or against the watermark of a K-slack buffer (``slack``, which
    then sizes K from the batch's rows, the file ``unit``, in the order Spark read them, and the
    values of the stream column ``value``). A CSV file's header is neither admitted nor
    quarantined."""
    rows = rows.with_row_index("position")
    names = schema.names
    parts = [_judged_csv(part, schema) if name.endswith(".csv") else
             judged(typed_frame(part.select(*names, ROW), name, schema), schema)
             .with_columns(part["position"])
             for (name,), part in rows.group_by(FILE, maintain_order=True)]
    frame = pl.concat(parts) if parts else judged(typed_frame(
        rows.select(*names), "", schema), schema).with_columns(rows["position"])
    before = None if high_water is None else (high_water - EPOCH) // timedelta(microseconds=1)
    frame, after = admit(frame, before, lateness if slack is None else slack.k, slide,
                         schema.time_column, None if slack is None else slack.mark)
    files = rows[FILE].unique(maintain_order=True).to_list()
    decisions = []
    if slack is not None:  # one file a batch (``native_stream``): one unit
        decisions.append((schema.name, unit, slack.observe(
            *observed(frame.sort("position"), schema.time_column, value))))
    bad = frame["reason"].is_not_null()
    admitted = pl.repeat(False, rows.height, eager=True).scatter(
        frame.filter(~bad)["position"], True)
    return Verdict(admitted.to_arrow(), frame.filter(bad).select(
        schema.quarantined.names).to_arrow().cast(schema.quarantined),
                   None if after is None else EPOCH + timedelta(microseconds=after),
                   tuple(files), slack_of(slack, decisions))


@dataclass(frozen=True)
class NativeJudge(Judge):
    """A micro-batch's judge: its files, from Spark's checkpoint, and the high-water mark of
    the batches before it."""

    files: tuple[Path, ...]
    high_water: datetime | None
    lateness: float
    slide: float
    slack: BufferManager | None = None  # a K-slack buffer, as the batches before left it
    value: str | None = None

    def __call__(self, rows: pa.Table) -> Verdict:
        return admit_batch(pl.from_arrow(rows).drop("heartbeat", strict=False), self.schema,
                           high_water=self.high_water, lateness=self.lateness, slide=self.slide,
                           slack=self.slack, value=self.value,
                           unit=self.files[0].name if self.files else "")

    def unread(self, read) -> pa.Table:
        return pa.concat_tables([self.schema.quarantined.empty_table(), *(
            frame.to_arrow().cast(self.schema.quarantined)
            for frame in unread_files(list(self.files), set(read), self.schema))])


@dataclass(frozen=True)
class NativeFiles(Gateway):
    """A landing directory read by Spark's own Parquet or text source. The batches' files are
    in Spark's ``checkpoint``."""

    name = "native"
    schema: StreamSchema
    directory: str
    checkpoint: str
    lateness: float
    slide: float
    # Quality-driven disorder handling, as ``ReferencedFiles``'s: each batch is one file
    # (``native_stream``), judged on the driver.
    policy: Policy | None = None
    value: str | None = None

    @property
    def judged(self) -> tuple[str, ...]:
        return judged_columns(self.schema)

    def stream(self, spark: SparkSession) -> DataFrame:
        for name, value in WHOLE_FILES.items():
            spark.conf.set(name, value)
        return native_stream(spark, self.schema, self.directory)

    def judge(self, batch_id: int, high_water: datetime | None,
              slack: dict | None = None) -> NativeJudge:
        return NativeJudge(self.schema, tuple(files_of(self.checkpoint, batch_id)), high_water,
                           self.lateness, self.slide, buffer_of(self.policy, slack), self.value)


def files_of(checkpoint: str, batch_id: int, source: int = 0) -> list[Path]:
    """The landed files of micro-batch ``batch_id`` from file source ``source``, from Spark's
    ``checkpoint``; refused where files of another format landed beside them, which Spark's
    source of the one format skips."""
    files = batch_files(checkpoint, batch_id, source)
    if files and (strays := [n for n in landed_files(files[0].parent)
                             if Path(n).suffix != files[0].suffix]):
        raise TandemError(f"{strays[0]} landed in {files[0].parent}, which Spark reads as "
                          f"{files[0].suffix[1:]} files: land one format per directory")
    return files


def unread_files(files: list[Path], read: set[str], schema: StreamSchema) -> list[pl.DataFrame]:
    """The quarantined row of every file of a batch that Spark gave no row of (``read`` are the
    names of those it did) but that holds some: Spark skips what it cannot read."""
    return [unreadable(path, err, schema) for path in files
            if path.name not in read and (err := _unread(path, schema))]


def _judged_csv(rows: pl.DataFrame, schema: StreamSchema) -> pl.DataFrame:
    """One CSV file's lines judged (module docstring): the judged frame with each line's
    ``position`` in the batch; a header is not in it."""
    name = rows[FILE][0]
    rows = rows.sort(BLOCK, "position")  # the file's lines in order: blocks are read whole
    header = int(rows[KIND][0] == HEADER)
    lines = rows.slice(header).with_columns(pl.int_range(1 + header, rows.height + 1).alias(ROW))
    if (lines[KIND] == CLEAN).all():
        frame = judged(typed_frame(lines.select(*schema.names, ROW), name, schema, row_label=""),
                       schema)
        if frame["rule"].is_null().all():
            return frame.with_columns(lines["position"])
    frame = judged(csv_frame(rows[LINE], name, schema), schema)
    if frame.height != lines.height:  # the two tell a header line alike: they cannot differ
        raise TandemError(f"{name}: Spark's text source gave {lines.height} lines and the input "
                          f"suite reads {frame.height}: land it as Parquet, or run with "
                          "--gateway python")
    good = frame["reason"].is_null()
    spark = lines.select(*schema.names).cast(schema.polars).filter(good)
    differs = ~pl.all_horizontal(pl.col(c).eq_missing(spark[c]) for c in schema.names)
    if (wrong := frame.filter(good).filter(differs)).height:
        raise TandemError(f"{wrong['origin'][0]}: Spark's CSV source reads this line otherwise "
                          "than the input suite: write its numbers as plain digits, land it as "
                          "Parquet, or run with --gateway python")
    return frame.with_columns(lines["position"])


def _unread(path: Path, schema: StreamSchema) -> Exception | None:
    """Why Spark read no row of a file (it skips what it cannot read), or None for a file that
    has none."""
    try:
        if pq.ParquetFile(path).metadata.num_rows == 0:
            return None
    except Exception as err:
        return err
    columns = ", ".join(f"{f.name} {f.type}" for f in pq.read_schema(path))
    return ValueError(f"Spark's Parquet reader cannot read its columns ({columns}) as the "
                      f"stream's ({read_ddl(schema)})")


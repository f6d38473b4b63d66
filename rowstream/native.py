"""The native gateway: a landing directory of Parquet files read by Spark's own Parquet source.

Spark's file source reads the files in the order they landed, ``files_per_batch`` per
micro-batch, and records them in its checkpoint: a replayed batch reads the same files. The
rows leave Spark's source typed, with each row's file and row number; nothing of them passes
through Python until the MIG's ``toArrow``.

The input suite and the lateness rule cannot run inside a streaming plan: the suite's
parameters belong to a file (its median event time; ids unique within it) and lateness needs
the high-water mark of the batches before, state that stateless operators do not keep, while
Spark's own late-row filter is per window, not per row, and uses the watermark of the batch
before the previous one. So the MIG judges the rows right after Spark's job (``admit_batch``),
with the same vectorised suite and the same lateness rule as the Python source: the crossings
travel in the same rows, and the rows that fail are taken out of them before they reach DuckDB.
That is exact only where Spark's operators are stateless (``fits``); a plan with a stateful Spark
operator reads through the Python source, which judges the rows before any operator
(``rowstream/sources.py``).

A file Spark cannot read (a truncated footer, a column of another type) gives no rows: the MIG
finds it among the batch's files in Spark's checkpoint and quarantines it whole, as the Python
source does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from optimizer.deployment import Deployment
from rowstream.eventtime import EPOCH, admit
from rowstream.landing import ROW, judged, landed_files, parquet_frame, unreadable
from rowstream.sources import COLUMNS

# Integers are read as BIGINT: Spark widens a file's INT32 to it, and a file written with
# 64-bit integers (pandas' default) is then readable too. They become the stream's INT (null
# beyond its range, which the input suite then quarantines).
SCHEMA = ("id BIGINT, ts TIMESTAMP, value DOUBLE, property BIGINT, plug_id BIGINT, "
          "household_id BIGINT, house_id BIGINT")
NARROW = ("property", "plug_id", "household_id", "house_id")
FILE = "file"  # the name of the file a row came from


def fits(directory: str | Path, deployment: Deployment) -> bool:
    """Whether a run reads ``directory`` natively: its files are Parquet (and there is at least
    one, to know), and Spark runs no stateful operator below a crossing."""
    landed = landed_files(directory)
    return (bool(landed) and all(n.endswith(".parquet") for n in landed)
            and not any(node.instantiated for node in deployment.crossings))


def parquet_stream(spark: SparkSession, directory: str, *, files_per_batch: int = 1) -> DataFrame:
    """The stream's rows as Spark's Parquet source reads them, with ``file`` and ``row``, and
    the columns the Python source adds (no heartbeats: the MIG finds the high-water mark)."""
    # A file Spark cannot read is skipped here and quarantined by the MIG (module docstring).
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files_per_batch)
            .option("pathGlobFilter", "*.parquet").option("ignoreCorruptFiles", "true")
            .parquet(str(Path(directory).resolve()))
            .select(*[F.col(c).try_cast("int").alias(c) if c in NARROW else c for c in COLUMNS],
                    F.col("_metadata.file_name").alias(FILE),
                    (F.col("_metadata.row_index") + 1).alias(ROW),
                    F.lit(False).alias("heartbeat"),
                    *[F.lit(None).cast("string").alias(c) for c in ("reason", "rule", "origin")]))


@dataclass(frozen=True)
class Admission:
    """A batch judged: which of its rows are admitted, the quarantined rows, the high-water
    mark after it."""

    admitted: pa.Array  # boolean, one per row of the batch
    quarantined: pl.DataFrame  # the stream's columns, reason, rule, origin
    high_water: datetime | None


def admit_batch(rows: pl.DataFrame, files: list[Path], *, high_water: datetime | None,
                lateness: float, slide: float, time_distance: float) -> Admission:
    """Judge a batch's rows (the stream's columns, ``file`` and ``row``, in Spark's order) by
    the input suite, file by file, then by lateness against ``high_water``, the high-water mark
    of the batches before (``rowstream/eventtime.py``). ``files`` are the batch's files: one
    that gave no rows but holds some is one that Spark could not read."""
    rows = rows.with_row_index("position")
    by_file = [(name, part) for (name,), part in rows.group_by(FILE, maintain_order=True)]
    parts = [judged(parquet_frame(part.drop(FILE, "position"), name), time_distance)
             .with_columns(part["position"])
             for name, part in by_file or [("", rows)]]  # an empty batch keeps the columns
    read = set(rows[FILE].unique())
    parts += [unreadable(path, err).with_columns(pl.lit(None, pl.UInt32).alias("position"))
              for path in files if path.name not in read and (err := _unread(path))]
    frame = pl.concat(parts)
    before = None if high_water is None else (high_water - EPOCH) // timedelta(microseconds=1)
    frame, after = admit(frame, before, lateness, slide)
    frame = frame.sort("position", nulls_last=True)
    good = frame["reason"].is_null()
    return Admission(good.filter(frame["position"].is_not_null()).to_arrow(),
                     frame.filter(~good).drop("position"),
                     None if after is None else EPOCH + timedelta(microseconds=after))


def _unread(path: Path) -> Exception | None:
    """Why Spark read no row of a file (it skips what it cannot read), or None for a file that
    has none."""
    try:
        if pq.ParquetFile(path).metadata.num_rows == 0:
            return None
    except Exception as err:
        return err
    columns = ", ".join(f"{f.name} {f.type}" for f in pq.read_schema(path))
    return ValueError(f"Spark's Parquet reader cannot read its columns ({columns}) as the "
                      f"stream's ({SCHEMA})")


def batch_files(checkpoint: str | Path, batch_id: int) -> list[Path]:
    """The files Spark's file source assigned to a micro-batch, from its checkpoint (the log
    is compacted every few batches into ``<batch>.compact``)."""
    log = Path(checkpoint) / "sources" / "0"
    for name in (str(batch_id), f"{batch_id}.compact"):
        if (log / name).exists():
            entries = [json.loads(line) for line in (log / name).read_text().splitlines()[1:]
                       if line.strip()]
            return [Path(unquote(urlparse(e["path"]).path)) for e in entries
                    if e.get("batchId") == batch_id]
    return []

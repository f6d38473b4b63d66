"""The Python landing gateway: a landing directory of CSV or Parquet files of a stream (its
catalog entry's ``StreamSchema``) read by a Python streaming data source that judges every row
before any Spark operator sees it: by the input suite (``rowstream/landing.py``) and by lateness
(``rowstream/eventtime.py``). Plans with a stateful Spark operator below a crossing read this
way; so do directories of both formats.

It is Spark's *simple* stream reader: the driver's source process reads a micro-batch's files
once, when Spark asks how far the stream has come, and hands Spark the judged rows together with
the offset after them. An offset names the last file read and carries the stream's high-water
mark after it (``high_water``, µs), so that a micro-batch, replayed or not, marks the same rows
late: those at or before the watermark of the batches before it. A batch Spark replays after a
restart is read again from its offsets (``readBetweenOffsets``).

Each micro-batch reads the files after the last one read, ``files_per_batch`` of them, and ends
with a heartbeat row at the high-water mark. With ``availableNow`` the reader stops at the files
there were when the query started, and ends with a batch that holds only that heartbeat (offset
``closed``): Spark moves the watermark in the batch after the one that raised it, and
availableNow runs no batch without data, so without it Spark's windowed aggregates would emit
the windows that the last file completes only in the next run. (A join of Spark's that pairs
rows with the windows that hold them delays its output watermark by the window size: such
windows are emitted once later files move event time on.) Files archived after they were read
do not disturb the offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from rowstream.eventtime import admit
from rowstream.gateway import Gateway, heartbeat
from rowstream.landing import landed_files, read_landed
from workload.schema import StreamSchema

LANDING = "tandem_landing"


class LandingReader(SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: ``after`` (the last file read), ``high_water`` and ``closed`` (module
    docstring)."""

    def __init__(self, options: dict):
        self.directory = Path(options["path"])
        self.schema = StreamSchema.from_json(options["schema"])
        self.per_batch = int(options.get("files_per_batch", 1))
        self.lateness = float(options.get("lateness", 0.0))
        self.slide = float(options.get("slide", 1.0))
        self.target: str | None = None  # the last file an availableNow query reads
        # Where a new query begins: after this file, at this high-water mark (µs), as another
        # query over the directory had got there (Parallel Track, runtime/migration.py).
        self.start_after = options.get("start_after", "")
        high_water = options.get("high_water", "")
        self.high_water = int(high_water) if high_water else None

    def initialOffset(self) -> dict:
        return {"after": self.start_after, "closed": True, "high_water": self.high_water}

    def prepareForTriggerAvailableNow(self) -> None:
        files = landed_files(self.directory)
        self.target = files[-1] if files else ""

    def read(self, start: dict) -> tuple[Iterator[pa.RecordBatch], dict]:
        new = [f for f in landed_files(self.directory) if f > start["after"]
               and (self.target is None or f <= self.target)][:self.per_batch]
        if new:
            rows, high_water = self._judged(new, start.get("high_water"))
            return iter(rows), {"after": new[-1], "closed": False, "high_water": high_water}
        # Offsets written before the closing batch existed have no "closed".
        if self.target is not None and start["after"] and not start.get("closed", False):
            end = {**start, "closed": True}
            return self.readBetweenOffsets(start, end), end
        return iter([]), start

    def readBetweenOffsets(self, start: dict, end: dict) -> Iterator[pa.RecordBatch]:
        names = [f for f in landed_files(self.directory) if start["after"] < f <= end["after"]]
        if names:
            return iter(self._judged(names, start.get("high_water"))[0])
        if end["after"] and end.get("closed") and not start.get("closed", False):
            return iter(_heartbeat(self.schema, end.get("high_water")))  # the closing batch
        return iter([])

    def _judged(self, names: list[str], high_water: int | None
                ) -> tuple[list[pa.RecordBatch], int | None]:
        """The files' rows, judged, then a heartbeat at the high-water mark after them."""
        schema = self.schema
        frame = pl.concat([read_landed(self.directory / f, schema) for f in names])
        frame, high_water = admit(frame, high_water, self.lateness, self.slide,
                                  schema.time_column)
        rows = frame.with_columns(pl.lit(False).alias("heartbeat")).to_arrow()
        rows = rows.select(schema.rows.names).cast(schema.rows)
        return rows.to_batches() + _heartbeat(schema, high_water), high_water

    def commit(self, end: dict) -> None:
        pass  # the files stay; the nightly clean-up archives them


def _heartbeat(schema: StreamSchema, high_water: int | None) -> list[pa.RecordBatch]:
    """The stream has reached its high-water mark (none before its first row)."""
    return [] if high_water is None else heartbeat(schema, high_water).to_batches()


class LandingSource(DataSource):
    """``spark.readStream.format("tandem_landing").option("path", DIR)`` with options schema
    (``StreamSchema.to_json``), files_per_batch, lateness (seconds) and slide (seconds, for the
    window_end a late row misses)."""

    @classmethod
    def name(cls) -> str:
        return LANDING

    def schema(self) -> str:
        return StreamSchema.from_json(self.options["schema"]).spark_ddl()

    def simpleStreamReader(self, schema) -> LandingReader:
        return LandingReader(self.options)


@dataclass(frozen=True)
class LandingDirectory(Gateway):
    """A landing directory read by the Python data source. ``start_after``, ``high_water``: a
    new checkpoint's query begins after that file, with the stream's high-water mark there
    (µs): it marks the same rows late as a query that read the files before."""

    name = "python"
    schema: StreamSchema
    directory: str
    lateness: float
    slide: float
    files_per_batch: int = 1
    start_after: str = ""
    high_water: int | None = None

    def stream(self, spark: SparkSession) -> DataFrame:
        spark.dataSource.register(LandingSource)
        return (spark.readStream.format(LANDING)
                .option("path", str(Path(self.directory).resolve()))
                .option("schema", self.schema.to_json())
                .option("files_per_batch", self.files_per_batch)
                .option("lateness", self.lateness).option("slide", self.slide)
                .option("start_after", self.start_after)
                .option("high_water", "" if self.high_water is None else str(self.high_water))
                .load())

"""Stream sources: the smart-plug generator and a landing directory of DEBS 2014 CSV (or
Parquet) files, both Python streaming data sources.

Both give the columns of the DEBS schema with ``ts`` as a UTC timestamp, plus ``heartbeat`` and,
for a row that cannot be read or arrives late, the ``rule`` it broke, its ``reason`` and its
``origin`` (file and line): bad input is never dropped, it goes to the quarantine
(``rowstream/mig.py``). The generator's stream is in event-time order; a landing directory's
may not be, and its reader marks the late rows (``rowstream/eventtime.py``).
Every micro-batch ends with a heartbeat row (only ``ts`` set): the generator's at the end of its
span of event time, the landing directory's at its high-water mark; a finite generated stream ends
with one past its last window_end. Heartbeats move the
event-time watermark, and they flow through Spark's operators as punctuation: an operator that
emits a heartbeat row for a window has emitted every row of it (``rowstream/dsps.py``)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from optimizer.catalog import DEFAULT_TIME_DISTANCE
from rowstream.eventtime import admit
from rowstream.landing import landed_files, read_landed

GENERATOR = "tandem_smartplugs"
WARMUP_SPAN = 60.0  # seconds of event time per warm-up micro-batch
LANDING = "tandem_landing"
COLUMNS = ("id", "ts", "value", "property", "plug_id", "household_id", "house_id")
ARROW_SCHEMA = pa.schema([
    ("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("value", pa.float64()),
    ("property", pa.int32()), ("plug_id", pa.int32()), ("household_id", pa.int32()),
    ("house_id", pa.int32()), ("heartbeat", pa.bool_()), ("reason", pa.string()),
    ("rule", pa.string()), ("origin", pa.string())])
QUARANTINED = pa.schema([f for f in ARROW_SCHEMA if f.name != "heartbeat"])  # a quarantined row
SPARK_SCHEMA = ("id BIGINT, ts TIMESTAMP, value DOUBLE, property INT, plug_id INT, "
                "household_id INT, house_id INT, heartbeat BOOLEAN, reason STRING, rule STRING, "
                "origin STRING")


class _Span(InputPartition):
    def __init__(self, batch: int):
        self.batch = batch


class _GeneratorReader(DataSourceStreamReader):
    """Micro-batch k holds event time [k * span, (k + 1) * span) (after the warm-up, if any)
    and a heartbeat at its end, the last data batch one in the last window_end too; the last
    micro-batch holds only the heartbeat that ends the stream."""

    def __init__(self, options: dict):
        self.options = dict(options)
        self.span = float(options.get("span", 1.0))
        self.duration = float(options["duration"])
        self.slide = float(options.get("slide", 1.0))
        self.flush = float(options.get("flush", 0.0))
        # A warm-up fills the windows in batches of a minute, before the spans a run measures.
        # Event time before ``begin`` is not generated (a benchmark loaded it into DuckDB).
        begin = float(options.get("begin", 0.0))
        warmup = min(max(float(options.get("warmup", 0.0)), begin), self.duration)
        # A plan a run migrated to reads the open windows' event time again in one batch.
        warmup_span = float(options.get("warmup_span", WARMUP_SPAN))
        bounds = [min(begin + k * warmup_span, warmup)
                  for k in range(math.ceil((warmup - begin) / warmup_span) + 1)]
        steps = math.ceil((self.duration - warmup) / self.span - 1e-9)
        self.bounds = sorted(set(bounds) | {min(warmup + k * self.span, self.duration)
                                            for k in range(steps + 1)})
        self.data_batches = len(self.bounds) - 1

    def _plugs(self):
        from workload.smart_plugs import SmartPlugs, parse_steps  # imported in the Python worker

        o = self.options
        return SmartPlugs(rate=float(o["rate"]), seed=int(o.get("seed", 2014)),
                          houses=int(o.get("houses", 40)),
                          households_per_house=int(o.get("households_per_house", 10)),
                          plugs=int(o.get("plugs", 2125)), steps=parse_steps(o.get("steps", "")))

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(1)  # one span of event time per micro-batch

    def latestOffset(self, start: dict, limit) -> dict:
        last = self.data_batches + 1  # the heartbeat batch comes last
        if isinstance(limit, ReadAllAvailable):
            return {"batch": last}
        return {"batch": min(start["batch"] + 1, last)}

    def partitions(self, start: dict, end: dict):
        return [_Span(k) for k in range(start["batch"], end["batch"])]

    def read(self, partition: _Span):
        plugs = self._plugs()
        if partition.batch < self.data_batches:
            begin, end = self.bounds[partition.batch], self.bounds[partition.batch + 1]
            beats = [heartbeat((plugs.start + end) * 1_000_000)]
            last_end = (last_window_end(plugs, self.duration, self.slide)
                        if partition.batch == self.data_batches - 1 else None)
            if last_end is not None and last_end - 1 < beats[0]["ts"][0].value:
                # The last window_end's own heartbeat (in its last microsecond): a heartbeat at
                # the span's end lies in no window that ends at or before it, and Spark's
                # aggregates emit no window after the last window_end. With spans longer than
                # a window, no earlier heartbeat lies in the last window either, and a chained
                # operator (Q1's join of the loads with their window's maximum) never passes
                # the last window_end on.
                beats.insert(0, heartbeat(last_end - 1))
            table = pa.concat_tables([_good(plugs.between(begin, end)), *beats])
        else:
            table = heartbeat(last_window_end(plugs, self.duration, self.slide)
                              + self.flush * 1_000_000)
        yield from table.cast(ARROW_SCHEMA).to_batches()

    def commit(self, end: dict) -> None:
        pass  # the generator keeps nothing to release


def last_window_end(plugs, duration: float, slide: float) -> int:
    """Microseconds of the last window_end of a finite stream: the first one at or after its
    last event (docs/design.md, Semantics)."""
    last = plugs.events(plugs.index_at(duration) - 1, plugs.index_at(duration))
    last_us = last.column("ts").cast(pa.int64())[0].as_py()
    step = round(slide * 1_000_000)
    return -(-last_us // step) * step


def heartbeat(ts_us: float) -> pa.Table:
    """A heartbeat row at ``ts_us`` microseconds. The one that ends a finite stream lies far
    enough past the last window_end for every stateful operator, chained ones too, to emit the
    last windows; whoever writes results keeps the window_ends up to the last one only."""
    row = {f.name: pa.nulls(1, f.type) for f in ARROW_SCHEMA}
    row["ts"] = pa.array([round(ts_us)], pa.timestamp("us"))
    row["heartbeat"] = pa.array([True])
    return pa.table(row)


def _good(table: pa.Table) -> pa.Table:
    """Rows of the stream as a source gives them: neither heartbeats nor quarantined."""
    n = table.num_rows
    return (table.select(list(COLUMNS)).append_column("heartbeat", pa.array([False] * n))
            .append_column("reason", pa.nulls(n, pa.string()))
            .append_column("rule", pa.nulls(n, pa.string()))
            .append_column("origin", pa.nulls(n, pa.string())))


class SmartPlugSource(DataSource):
    """``spark.readStream.format("tandem_smartplugs")`` with options rate, duration, span,
    slide, flush, warmup, warmup_span, begin, steps (``workload.smart_plugs.parse_steps``), seed,
    houses, households_per_house and plugs."""

    @classmethod
    def name(cls) -> str:
        return GENERATOR

    def schema(self) -> str:
        return SPARK_SCHEMA

    def streamReader(self, schema):
        return _GeneratorReader(self.options)


def generator_stream(spark: SparkSession, *, rate: float, duration: float, span: float,
                     slide: float, flush: float = 0.0, warmup: float = 0.0, begin: float = 0.0,
                     warmup_span: float = WARMUP_SPAN, steps: str = "",
                     **topology) -> DataFrame:
    spark.dataSource.register(SmartPlugSource)
    reader = (spark.readStream.format(GENERATOR).option("rate", rate)
              .option("duration", duration).option("span", span).option("slide", slide)
              .option("flush", flush).option("warmup", warmup).option("begin", begin)
              .option("warmup_span", warmup_span).option("steps", steps))
    for key, value in topology.items():
        reader = reader.option(key, value)
    return reader.load()


class _Files(InputPartition):
    def __init__(self, paths: list[str], high_water: int | None, heartbeat_only: bool = False):
        self.paths = paths
        self.high_water = high_water  # µs: the latest event admitted before these files
        self.heartbeat_only = heartbeat_only


class _LandingReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are file names: a micro-batch reads the files after the last one read, up to
    ``files_per_batch`` of them (all with ``availableNow``). Files archived after they were read
    do not disturb the offsets.

    An offset also carries the stream's high-water mark after its files (``high_water``, µs),
    so that a micro-batch, replayed or not, marks the same rows late: those at or before the
    watermark of the batches before it (``rowstream/eventtime.py``). Finding it reads the new
    files once more, on the driver.

    With ``availableNow`` the reader stops at the files there were when the query started, and
    ends with a batch that holds only the heartbeat of the last file read (offset ``closed``):
    Spark moves the watermark in the batch after the one that raised it, and availableNow runs no
    batch without data, so without it Spark's windowed aggregates would emit the windows that
    the last file completes only in the next run. (A join of Spark's that pairs rows with the
    windows that hold them delays its output watermark by the window size: such windows are
    emitted once later files move event time on.)"""

    def __init__(self, options: dict):
        self.directory = Path(options["path"])
        self.per_batch = int(options.get("files_per_batch", 1))
        self.lateness = float(options.get("lateness", 0.0))
        self.slide = float(options.get("slide", 1.0))
        self.time_distance = float(options.get("time_distance", DEFAULT_TIME_DISTANCE))
        self.target: str | None = None  # the last file an availableNow query reads
        # Where a new query begins: after this file, at this high-water mark (µs), as another
        # query over the directory had got there (Parallel Track, runtime/migration.py).
        self.start_after = options.get("start_after", "")
        high_water = options.get("high_water", "")
        self.high_water = int(high_water) if high_water else None

    def initialOffset(self) -> dict:
        return {"after": self.start_after, "closed": True, "high_water": self.high_water}

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        files = landed_files(self.directory)
        self.target = files[-1] if files else ""

    def latestOffset(self, start: dict, limit) -> dict:
        new = [f for f in landed_files(self.directory) if f > start["after"]
               and (self.target is None or f <= self.target)]
        if not isinstance(limit, ReadAllAvailable):
            new = new[:self.per_batch]
        high_water = start.get("high_water")
        if new:
            _, high_water = self._admitted([self.directory / f for f in new], high_water)
            return {"after": new[-1], "closed": False, "high_water": high_water}
        # Offsets written before the closing batch existed have no "closed".
        return {"after": start["after"], "high_water": high_water,
                "closed": self.target is not None or start.get("closed", False)}

    def partitions(self, start: dict, end: dict):
        names = [f for f in landed_files(self.directory) if start["after"] < f <= end["after"]]
        high_water = start.get("high_water")
        if names:
            return [_Files([str(self.directory / f) for f in names], high_water)]
        if end["after"] and end.get("closed") and not start.get("closed", False):
            return [_Files([str(self.directory / end["after"])], high_water, heartbeat_only=True)]
        return []

    def _admitted(self, paths: list[Path], high_water: int | None):
        frame = pl.concat([read_landed(p, self.time_distance) for p in paths])
        return admit(frame, high_water, self.lateness, self.slide)

    def read(self, partition: _Files):
        frame, high_water = self._admitted([Path(p) for p in partition.paths],
                                           partition.high_water)
        rows = frame.with_columns(pl.lit(False).alias("heartbeat")).to_arrow()
        parts = [] if partition.heartbeat_only else [rows.select(ARROW_SCHEMA.names).cast(ARROW_SCHEMA)]
        if high_water is not None:  # the stream has reached its high-water mark
            parts.append(heartbeat(high_water).cast(ARROW_SCHEMA))
        yield from (pa.concat_tables(parts).to_batches() if parts else [])

    def commit(self, end: dict) -> None:
        pass  # the files stay; the nightly clean-up archives them


class LandingSource(DataSource):
    """``spark.readStream.format("tandem_landing").option("path", DIR)`` with options
    files_per_batch, lateness (seconds), slide (seconds, for the window_end a late row
    misses) and time_distance (seconds, ``rowstream/expectations.py``)."""

    @classmethod
    def name(cls) -> str:
        return LANDING

    def schema(self) -> str:
        return SPARK_SCHEMA

    def streamReader(self, schema):
        return _LandingReader(self.options)


def landing_stream(spark: SparkSession, directory: str, *, lateness: float, slide: float,
                   time_distance: float = DEFAULT_TIME_DISTANCE, files_per_batch: int = 1,
                   start_after: str = "", high_water: int | None = None) -> DataFrame:
    """``start_after``, ``high_water``: a new checkpoint's query begins after that file, with
    the stream's high-water mark there (µs): it marks the same rows late as a query that read
    the files before."""
    spark.dataSource.register(LandingSource)
    return (spark.readStream.format(LANDING).option("path", str(Path(directory).resolve()))
            .option("files_per_batch", files_per_batch).option("lateness", lateness)
            .option("slide", slide).option("time_distance", time_distance)
            .option("start_after", start_after)
            .option("high_water", "" if high_water is None else str(high_water)).load())

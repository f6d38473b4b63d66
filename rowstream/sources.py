"""Stream sources: the smart-plug generator (a Python streaming data source) and a landing
directory of DEBS 2014 CSV (or Parquet) files.

Both give the columns of the DEBS schema with ``ts`` as a UTC timestamp, plus ``heartbeat``.
Every micro-batch of the generator ends with a heartbeat row (only ``ts`` set) at the end of its
span of event time, and the stream with one past its last window_end. Heartbeats move the
event-time watermark, and they flow through Spark's operators as punctuation: an operator that
emits a heartbeat row for a window has emitted every row of it (``rowstream/dsps.py``)."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

GENERATOR = "tandem_smartplugs"
COLUMNS = ("id", "ts", "value", "property", "plug_id", "household_id", "house_id")
SPARK_SCHEMA = ("id BIGINT, ts TIMESTAMP, value DOUBLE, property INT, plug_id INT, "
                "household_id INT, house_id INT, heartbeat BOOLEAN")
CSV_SCHEMA = ("id BIGINT, timestamp DOUBLE, value DOUBLE, property INT, plug_id INT, "
              "household_id INT, house_id INT")


class _Span(InputPartition):
    def __init__(self, batch: int):
        self.batch = batch


class _GeneratorReader(DataSourceStreamReader):
    """Micro-batch k holds event time [k * span, (k + 1) * span) and a heartbeat at its end;
    the last micro-batch holds only the heartbeat that ends the stream."""

    def __init__(self, options: dict):
        self.options = dict(options)
        self.span = float(options.get("span", 1.0))
        self.duration = float(options["duration"])
        self.slide = float(options.get("slide", 1.0))
        self.flush = float(options.get("flush", 0.0))
        self.data_batches = math.ceil(self.duration / self.span - 1e-9)

    def _plugs(self):
        from tandem.workload import SmartPlugs  # imported in the Python worker

        o = self.options
        return SmartPlugs(rate=float(o["rate"]), seed=int(o.get("seed", 2014)),
                          houses=int(o.get("houses", 40)),
                          households_per_house=int(o.get("households_per_house", 10)),
                          plugs=int(o.get("plugs", 2125)))

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
            end = min((partition.batch + 1) * self.span, self.duration)
            table = plugs.between(partition.batch * self.span, end)
            table = pa.concat_tables([
                table.append_column("heartbeat", pa.array([False] * table.num_rows)),
                heartbeat(plugs, (plugs.start + end) * 1_000_000)])
        else:
            end_us = last_window_end(plugs, self.duration, self.slide) + round(self.flush * 1_000_000)
            table = heartbeat(plugs, end_us)
        schema = pa.schema([pa.field("ts", pa.timestamp("us", tz="UTC")) if f.name == "ts" else f
                            for f in table.schema])
        yield from table.cast(schema).to_batches()

    def commit(self, end: dict) -> None:
        pass  # the generator keeps nothing to release


def last_window_end(plugs, duration: float, slide: float) -> int:
    """Microseconds of the last window_end of a finite stream: the first one at or after its
    last event (DESIGN.md)."""
    last = plugs.events(plugs.index_at(duration) - 1, plugs.index_at(duration))
    last_us = last.column("ts").cast(pa.int64())[0].as_py()
    step = round(slide * 1_000_000)
    return -(-last_us // step) * step


def heartbeat(plugs, ts_us: float) -> pa.Table:
    """A heartbeat row at ``ts_us`` microseconds. The one that ends a finite stream lies far
    enough past the last window_end for every stateful operator, chained ones too, to emit the
    last windows; whoever writes results keeps the window_ends up to the last one only."""
    row = {field.name: pa.nulls(1, field.type) for field in plugs.events(0, 0).schema}
    row["ts"] = pa.array([round(ts_us)], pa.timestamp("us"))
    return pa.table({**row, "heartbeat": pa.array([True])})


class SmartPlugSource(DataSource):
    """``spark.readStream.format("tandem_smartplugs")`` with options rate, duration, span,
    slide, seed, houses, households_per_house and plugs."""

    @classmethod
    def name(cls) -> str:
        return GENERATOR

    def schema(self) -> str:
        return SPARK_SCHEMA

    def streamReader(self, schema):
        return _GeneratorReader(self.options)


def generator_stream(spark: SparkSession, *, rate: float, duration: float, span: float,
                     slide: float, flush: float = 0.0, **topology) -> DataFrame:
    spark.dataSource.register(SmartPlugSource)
    reader = (spark.readStream.format(GENERATOR).option("rate", rate)
              .option("duration", duration).option("span", span).option("slide", slide)
              .option("flush", flush))
    for key, value in topology.items():
        reader = reader.option(key, value)
    return reader.load()


def landing_stream(spark: SparkSession, directory: str, files_per_batch: int = 1) -> DataFrame:
    """DEBS 2014 CSV files (``id,timestamp,value,...``, timestamp in Unix seconds) or Parquet
    files with the generator's columns, in the order of their names."""
    if any(Path(directory).glob("*.parquet")):
        raw = (spark.readStream.schema(SPARK_SCHEMA.replace(", heartbeat BOOLEAN", ""))
               .option("maxFilesPerTrigger", files_per_batch).parquet(directory))
    else:
        raw = (spark.readStream.schema(CSV_SCHEMA).option("header", True)
               .option("maxFilesPerTrigger", files_per_batch).csv(directory)
               .withColumn("ts", F.timestamp_micros(F.round(F.col("timestamp") * 1e6).cast("long")))
               .drop("timestamp"))
    return raw.select(*COLUMNS).withColumn("heartbeat", F.lit(False))

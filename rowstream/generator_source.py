"""The smart-plug generator as a Python streaming data source (``rowstream/generator.py`` is
its gateway).

Micro-batch k holds event time [k * span, (k + 1) * span) (after the warm-up, if any) and ends
with a heartbeat row at the end of its span; a finite stream ends with one past its last
window_end, far enough for every stateful operator, chained ones too, to emit the last windows
(whoever writes results keeps the window_ends up to the last one only). Heartbeats move the
event-time watermark, and they flow through Spark's operators as punctuation: an operator that
emits a heartbeat row for a window has emitted every row of it (``rowstream/dsps.py``).

Spark starts a Python process for each of the source's parts (its schema, two
offset runners a query, the reads), and each imports this module: it imports only pyarrow and
pyspark's data source classes, and the generator, the stream's schema and the heartbeat where
a read needs them. With them at the top, each process took 0.66 s more to start, and a query's
start waits for them one after another."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

if TYPE_CHECKING:
    from workload.schema import StreamSchema

GENERATOR = "tandem_smartplugs"
WARMUP_SPAN = 60.0  # seconds of event time per warm-up micro-batch


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
        from workload.smart_plugs import SmartPlugs, parse_steps

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
        from rowstream.gateway import heartbeat
        from workload.schema import StreamSchema

        schema = StreamSchema.from_json(self.options["schema"])
        plugs = self._plugs()
        if partition.batch < self.data_batches:
            begin, end = self.bounds[partition.batch], self.bounds[partition.batch + 1]
            beats = [heartbeat(schema, (plugs.start + end) * 1_000_000)]
            last_end = (last_window_end(plugs, self.duration, self.slide)
                        if partition.batch == self.data_batches - 1 else None)
            if last_end is not None and last_end - 1 < (plugs.start + end) * 1_000_000:
                # The last window_end's own heartbeat (in its last microsecond): a heartbeat at
                # the span's end lies in no window that ends at or before it, and Spark's
                # aggregates emit no window after the last window_end. With spans longer than
                # a window, no earlier heartbeat lies in the last window either, and a chained
                # operator (Q1's join of the loads with their window's maximum) never passes
                # the last window_end on.
                beats.insert(0, heartbeat(schema, last_end - 1))
            table = pa.concat_tables([_good(schema, plugs.between(begin, end)), *beats])
        else:
            table = heartbeat(schema, last_window_end(plugs, self.duration, self.slide)
                              + self.flush * 1_000_000)
        yield from table.to_batches()

    def commit(self, end: dict) -> None:
        pass  # the generator keeps nothing to release


def last_window_end(plugs, duration: float, slide: float) -> int:
    """Microseconds of the last window_end of a finite stream: the first one at or after its
    last event (docs/design.md, Semantics)."""
    last = plugs.events(plugs.index_at(duration) - 1, plugs.index_at(duration))
    last_us = last.column("ts").cast(pa.int64())[0].as_py()
    step = round(slide * 1_000_000)
    return -(-last_us // step) * step


def _good(schema: StreamSchema, table: pa.Table) -> pa.Table:
    """Rows of the stream as a source gives them: neither heartbeats nor quarantined."""
    n = table.num_rows
    return pa.table({f.name: table.column(f.name) if f.name in schema.names else
                     pa.array([False] * n) if f.name == "heartbeat" else pa.nulls(n, f.type)
                     for f in schema.rows}).cast(schema.rows)


class SmartPlugSource(DataSource):
    """``spark.readStream.format("tandem_smartplugs")`` with options schema (the plugs' catalog
    entry, ``StreamSchema.to_json``), ddl (its ``spark_ddl``), rate, duration, span, slide, flush, warmup, warmup_span,
    begin, steps (``workload.smart_plugs.parse_steps``), seed, houses, households_per_house and
    plugs."""

    @classmethod
    def name(cls) -> str:
        return GENERATOR

    def schema(self) -> str:
        return self.options["ddl"]  # StreamSchema.spark_ddl, from the driver

    def streamReader(self, schema):
        return _GeneratorReader(self.options)



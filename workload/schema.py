"""A stream's schema as every engine and file format holds it, built from its catalog entry
(``optimizer.catalog.Stream``): Arrow's and polars' types, Spark's DDL, and the landed files'
own forms (a Parquet file's typed columns, a CSV file's header and text). Nothing here knows a
particular stream: the generators' writers, every gateway, the input suite and the reference
evaluator take their columns from a ``StreamSchema``.

Types (``optimizer.catalog.TYPES``) map one to one across the engines. A TIMESTAMP is an instant
in UTC with microseconds: Arrow's ``timestamp("us", "UTC")`` in landed files and at the gateway,
a UTC wall time (no zone) inside the engines, which are pinned to UTC. In a CSV file it is Unix
seconds with any number of fractional digits (DEBS 2014's form); a BOOLEAN is ``true`` or
``false``; an empty field is a missing value.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from optimizer.catalog import DEFAULT_TIME_DISTANCE, FILE_FORMATS, Expectations, Stream

_ARROW = {"BIGINT": pa.int64(), "INTEGER": pa.int32(), "SMALLINT": pa.int16(),
          "DOUBLE": pa.float64(), "REAL": pa.float32(), "BOOLEAN": pa.bool_(),
          "VARCHAR": pa.string(), "TIMESTAMP": pa.timestamp("us", tz="UTC")}
POLARS = {"BIGINT": pl.Int64, "INTEGER": pl.Int32, "SMALLINT": pl.Int16, "DOUBLE": pl.Float64,
           "REAL": pl.Float32, "BOOLEAN": pl.Boolean, "VARCHAR": pl.String,
           "TIMESTAMP": pl.Datetime("us")}
_SPARK = {"BIGINT": "BIGINT", "INTEGER": "INT", "SMALLINT": "SMALLINT", "DOUBLE": "DOUBLE",
          "REAL": "FLOAT", "BOOLEAN": "BOOLEAN", "VARCHAR": "STRING", "TIMESTAMP": "TIMESTAMP"}
FLOATS = ("DOUBLE", "REAL")
INTEGERS = ("BIGINT", "INTEGER", "SMALLINT")
# What every row at the gateway carries beside the stream's columns: punctuation that moves event
# time (rowstream/dsps.py), and for a row its source quarantined, why and where it came from.
EXTRA = (("heartbeat", pa.bool_()), ("reason", pa.string()), ("rule", pa.string()),
         ("origin", pa.string()))


@dataclass(frozen=True)
class StreamSchema:
    """One stream's columns and what a valid row of it is (module docstring). It travels to
    Spark's Python workers as JSON (``to_json``)."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (name, catalog type), in schema order
    time_column: str
    fields: tuple[str, ...]  # a CSV file's header: one name per column
    expect: Expectations = Expectations()
    # Seconds: how far from its file's median event time a row's may lie (the input suite).
    time_distance: float = DEFAULT_TIME_DISTANCE

    @classmethod
    def of(cls, stream: Stream) -> StreamSchema:
        return cls(stream.name, tuple(stream.columns.items()), stream.time_column, stream.fields,
                   stream.expect, stream.time_distance)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)

    @property
    def types(self) -> dict[str, str]:
        return dict(self.columns)

    @property
    def field_of(self) -> dict[str, str]:
        """Each column's CSV field name."""
        return dict(zip(self.names, self.fields, strict=True))

    @property
    def arrow(self) -> pa.Schema:
        """The stream's columns, as landed Parquet files hold them."""
        return pa.schema([(c, _ARROW[t]) for c, t in self.columns])

    @property
    def rows(self) -> pa.Schema:
        """A gateway's rows: the stream's columns and ``EXTRA``."""
        return pa.schema([*self.arrow, *EXTRA])

    @property
    def quarantined(self) -> pa.Schema:
        """A quarantined row inside a run: its columns as far as they parsed, ``reason``,
        ``rule`` and ``origin``."""
        return pa.schema([f for f in self.rows if f.name != "heartbeat"])

    @property
    def polars(self) -> dict[str, pl.DataType]:
        return {c: POLARS[t] for c, t in self.columns}

    def spark_ddl(self) -> str:
        """Spark's schema of the stream's rows (``rows``)."""
        extra = {pa.bool_(): "BOOLEAN", pa.string(): "STRING"}
        return ", ".join([*(f"{c} {_SPARK[t]}" for c, t in self.columns),
                          *(f"{name} {extra[kind]}" for name, kind in EXTRA)])

    def spark_type(self, column: str) -> str:
        return _SPARK[self.types[column]]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StreamSchema:
        raw = json.loads(text)
        e = raw["expect"]
        expect = Expectations(tuple(e["not_null"]), tuple(tuple(r) for r in e["ranges"]),
                              tuple((c, tuple(v)) for c, v in e["sets"]),
                              tuple(tuple(u) for u in e["unique"]))
        return cls(raw["name"], tuple(tuple(c) for c in raw["columns"]), raw["time_column"],
                   tuple(raw["fields"]), expect, raw["time_distance"])

    # Landed files (the generators' writer) -------------------------------------------------

    def write(self, table: pa.Table, path: Path, file_format: str) -> None:
        """``table``'s rows (the stream's columns) as one landed file of ``file_format``."""
        if file_format not in FILE_FORMATS:
            raise ValueError(f"file format {file_format!r}: give one of {', '.join(FILE_FORMATS)}")
        table = table.select(list(self.names)).cast(self.arrow)
        if file_format == "parquet":
            pq.write_table(table, path)
        else:
            self.csv(table).write_csv(path)

    def csv(self, table: pa.Table) -> pl.DataFrame:
        """Rows as a CSV file holds them: the header's names, timestamps as Unix seconds."""
        frame = pl.from_arrow(table)
        return frame.select(
            *[(seconds_text(pl.col(c)) if t == "TIMESTAMP"
               else pl.col(c).cast(pl.String)).alias(f)
              for (c, t), f in zip(self.columns, self.fields, strict=True)])


def seconds_text(ts: pl.Expr) -> pl.Expr:
    """Unix seconds as DEBS 2014 writes them, with a fraction only where there is one."""
    micros = ts.dt.epoch("us")
    seconds = (micros // 1_000_000).cast(pl.String)
    fraction = (micros % 1_000_000).cast(pl.String).str.zfill(6).str.strip_chars_end("0")
    with_fraction = pl.concat_str(seconds, pl.lit("."), fraction)
    return pl.when(fraction == "").then(seconds).otherwise(with_fraction)


def file_name(prefix: str, second: float, file_seconds: float) -> str:
    """A landed file's name: its stream's prefix and its first second, with its milliseconds
    where a file holds a fraction of a second (``plugs-1377986400.100``), so that names sort
    as the files' times do."""
    ms = round(second * 1000)
    return f"{prefix}-{ms // 1000}" + (f".{ms % 1000:03d}" if file_seconds % 1 else "")


def write_files(schema: StreamSchema, parts: Iterable[tuple[str, pa.Table]],
                directory: str | Path, file_format: str,
                on_file: Callable[[Path], None] | None = None) -> list[Path]:
    """Land ``parts`` (a file's name without its suffix, its rows) in ``directory`` as the
    landing protocol wants them (rowstream/landing.py): written under a name the readers skip,
    then renamed, so that no file is read in part; name order is event-time order, and so is
    modification order, by Spark's milliseconds too (Spark's file source reads in that order)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for stem, table in parts:
        path = directory / f"{stem}.{file_format}"
        partial = directory / f".{path.name}.part"
        schema.write(table, partial, file_format)
        partial.rename(path)
        if paths:
            mtime = max(path.stat().st_mtime_ns, paths[-1].stat().st_mtime_ns + 1_000_000)
            os.utime(path, ns=(mtime, mtime))
        paths.append(path)
        if on_file:
            on_file(path)
    return paths


class EvenlyTimed:
    """A generated stream whose event i comes ``i / rate`` seconds after its start (the air
    stations, the meters): the event times of events, and the events of a span of event time.
    A subclass has ``rate`` and ``events(first, last)``."""

    rate: float

    def offsets_us(self, i: np.ndarray) -> np.ndarray:
        """Event i's time after the start, µs: exact integer arithmetic where it is possible."""
        if float(self.rate).is_integer():
            return (i * 1_000_000) // int(self.rate)
        return np.floor(i * (1e6 / self.rate)).astype(np.int64)

    def index_at(self, seconds: float) -> int:
        """The first event at or after ``seconds`` into the stream."""
        return math.ceil(seconds * self.rate - 1e-9)

    def between(self, begin: float, end: float) -> pa.Table:
        """The events of event-time seconds [begin, end) after the start."""
        return self.events(self.index_at(begin), self.index_at(end))

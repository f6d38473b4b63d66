"""Streams, their schemas and the statistics the cost model needs (arrival rate, distinct groups,
predicate selectivities), read from a TOML catalog such as ``queries/catalog.toml``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from optimizer.errors import CatalogError
from optimizer.expressions import predicate_key
from optimizer.tomlfile import read_toml


def column_set_key(columns) -> frozenset[str]:
    """Distinct counts are keyed by an unordered set of column names."""
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",")]
    return frozenset(c for c in columns if c)


# The allowed lateness of a stream that names none, seconds: DEBS-like sensor streams deliver
# most late readings within 100 ms and the longest delays Ji reports (Table 4.1) are 4.5 s and
# 17 s; 5 s keeps the first stream whole at 5 s of extra output delay (docs/execution.md).
DEFAULT_LATENESS = 5.0
# How far a landed reading's timestamp may lie from its file's median event time, seconds: a
# clock gone wrong would otherwise move the watermark and make every later reading late. A file
# must hold less than this much event time (rowstream/expectations.py).
DEFAULT_TIME_DISTANCE = 86_400.0
# How a stream's files land, which prices Spark's gateway (optimizer/cost.py): Parquet carries
# typed columns, CSV lines Spark parses one by one (rowstream/native.py).
FILE_FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class Stream:
    name: str
    time_column: str
    columns: dict[str, str]  # name -> SQL type, in schema order
    rate: float  # tuples per second
    distinct: dict[frozenset[str], float] = field(default_factory=dict)
    lateness: float = DEFAULT_LATENESS  # allowed lateness L, seconds (rowstream/eventtime.py)
    time_distance: float = DEFAULT_TIME_DISTANCE  # seconds; the input suite's timestamp range
    file_format: str = "parquet"  # one of FILE_FORMATS


@dataclass(frozen=True)
class Catalog:
    streams: dict[str, Stream]
    # Selectivity of a predicate, keyed by its normalised SQL text (see frontend.predicate_key).
    selectivity: dict[str, float]
    source: str = "<memory>"

    def stream(self, name: str) -> Stream | None:
        return self.streams.get(name.lower())

    def with_total_rate(self, streams: list[str], total: float) -> Catalog:
        """Scale the rates of ``streams`` so that they add up to ``total``, keeping their shares."""
        current = sum(self.streams[s].rate for s in streams)
        if current <= 0:
            raise CatalogError("the catalog gives the query's streams no positive rate to scale")
        factor = total / current
        scaled = dict(self.streams)
        for s in streams:
            old = self.streams[s]
            scaled[s] = replace(old, rate=old.rate * factor)
        return Catalog(scaled, self.selectivity, self.source)

    def with_file_format(self, file_format: str) -> Catalog:
        """Every stream landing as ``file_format`` files (a run over a landing directory)."""
        _check_format(file_format, self.source, "every stream")
        streams = {n: replace(s, file_format=file_format) for n, s in self.streams.items()}
        return Catalog(streams, self.selectivity, self.source)

    def statistics(self) -> dict:
        """Its selectivities and distinct counts, as ``with_statistics`` takes them (JSON):
        ``{"selectivity": {predicate: f}, "distinct": {stream: {"a, b": d}}}``."""
        return {"selectivity": dict(self.selectivity),
                "distinct": {name: {", ".join(sorted(k)): v for k, v in s.distinct.items()}
                             for name, s in self.streams.items()}}

    def with_statistics(self, observed: dict) -> Catalog:
        """The catalog with ``observed`` statistics (``statistics``' form) over its own."""
        streams = dict(self.streams)
        for name, counts in observed.get("distinct", {}).items():
            old = streams[name]
            streams[name] = replace(old, distinct={
                **old.distinct, **{column_set_key(k): float(v) for k, v in counts.items()}})
        return Catalog(streams, {**self.selectivity, **observed.get("selectivity", {})},
                       self.source)


def _check_format(file_format: str, source: str, stream: str) -> None:
    if file_format not in FILE_FORMATS:
        raise CatalogError(f"{source}: {stream} lands as {file_format!r} files: give one of "
                           f"{', '.join(FILE_FORMATS)}")


def load_catalog(path: str | Path) -> Catalog:
    path = Path(path)
    raw = read_toml(path, "catalog", "pass --catalog or set TANDEM_CATALOG")
    return parse_catalog(raw, str(path))


def parse_catalog(raw: dict, source: str = "<memory>") -> Catalog:
    streams = {}
    for name, spec in raw.get("streams", {}).items():
        try:
            columns = {str(c).lower(): str(t).upper() for c, t in spec["columns"].items()}
            time_column = str(spec.get("time_column", "ts")).lower()
            rate = float(spec["rate"])
            lateness = float(spec.get("lateness", DEFAULT_LATENESS))
            time_distance = float(spec.get("time_distance", DEFAULT_TIME_DISTANCE))
            file_format = str(spec.get("file_format", "parquet")).lower()
        except (KeyError, TypeError, ValueError) as err:
            raise CatalogError(f"{source}: stream {name!r} needs columns and rate ({err})") from None
        if lateness < 0 or time_distance <= 0:
            raise CatalogError(f"{source}: stream {name!r} needs a lateness of 0 s or more and "
                               "a positive time_distance")
        _check_format(file_format, source, f"stream {name!r}")
        if time_column not in columns:
            raise CatalogError(f"{source}: stream {name!r} has no time column {time_column!r}")
        distinct = {column_set_key(k.lower()): float(v) for k, v in spec.get("distinct", {}).items()}
        streams[name.lower()] = Stream(name.lower(), time_column, columns, rate, distinct, lateness,
                                       time_distance, file_format)
    selectivity = {}
    for text, value in raw.get("selectivity", {}).items():
        if not 0 <= float(value) <= 1:
            raise CatalogError(f"{source}: selectivity of {text!r} must lie in [0, 1]")
        selectivity[predicate_key(text)] = float(value)
    if not streams:
        raise CatalogError(f"{source}: no [streams.*] tables")
    return Catalog(streams, selectivity, source)

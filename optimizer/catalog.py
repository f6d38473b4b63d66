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
# The column types a stream may declare, by the name the catalog may give them. Every engine
# reads them alike: Spark's, DuckDB's and Arrow's types of these names agree (workload/schema.py).
TYPES = {"BIGINT": "BIGINT", "INT8": "BIGINT", "LONG": "BIGINT",
         "INTEGER": "INTEGER", "INT": "INTEGER", "INT4": "INTEGER",
         "SMALLINT": "SMALLINT", "INT2": "SMALLINT", "SHORT": "SMALLINT",
         "DOUBLE": "DOUBLE", "FLOAT8": "DOUBLE", "REAL": "REAL", "FLOAT": "REAL", "FLOAT4": "REAL",
         "BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN",
         "VARCHAR": "VARCHAR", "STRING": "VARCHAR", "TEXT": "VARCHAR",
         "TIMESTAMP": "TIMESTAMP"}


@dataclass(frozen=True)
class Expectations:
    """What a valid row of a stream is, as its catalog entry declares it (``[streams.<name>.
    expect]``): the input suite is built from it (``rowstream/expectations.py``). Every value
    of a column must parse as its type; beyond that:"""

    not_null: tuple[str, ...] = ()  # columns every row must have
    # Numeric columns: column, min, max (inclusive; None: unbounded).
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()
    # Integer, text and boolean columns: column, the values it may take.
    sets: tuple[tuple[str, tuple], ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()  # column sets no two rows of one file share


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
    key: tuple[str, ...] = ()  # the columns that name what a row is about (a plug, a station)
    landing: str | None = None  # the directory its files land in, relative to the catalog's
    expect: Expectations = Expectations()
    # The header a CSV file of the stream has, one name per column (DEBS 2014 calls the
    # plugs' ts "timestamp"); by default the column names.
    csv_header: tuple[str, ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        """The names of a CSV line's fields, in the order of the columns."""
        return self.csv_header or tuple(self.columns)


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
        stream = _parse_stream(name.lower(), spec, source, Path(source).parent)
        streams[stream.name] = stream
    selectivity = {}
    for text, value in raw.get("selectivity", {}).items():
        if not 0 <= float(value) <= 1:
            raise CatalogError(f"{source}: selectivity of {text!r} must lie in [0, 1]")
        selectivity[predicate_key(text)] = float(value)
    if not streams:
        raise CatalogError(f"{source}: no [streams.*] tables")
    return Catalog(streams, selectivity, source)


def _parse_stream(name: str, spec: dict, source: str, base: Path) -> Stream:
    def fail(why: str) -> CatalogError:
        return CatalogError(f"{source}: stream {name!r} {why}")

    try:
        declared = {str(c).lower(): str(t).upper() for c, t in spec["columns"].items()}
        time_column = str(spec.get("time_column", "ts")).lower()
        rate = float(spec["rate"])
        lateness = float(spec.get("lateness", DEFAULT_LATENESS))
        time_distance = float(spec.get("time_distance", DEFAULT_TIME_DISTANCE))
        file_format = str(spec.get("file_format", "parquet")).lower()
        key = tuple(str(c).lower() for c in spec.get("key", ()))
        csv_header = tuple(str(c).lower() for c in spec.get("csv_header", ()))
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise fail(f"needs columns and rate ({err})") from None
    if lateness < 0 or time_distance <= 0:
        raise fail("needs a lateness of 0 s or more and a positive time_distance")
    _check_format(file_format, source, f"stream {name!r}")
    if unknown := {c: t for c, t in declared.items() if t not in TYPES}:
        column, kind = next(iter(unknown.items()))
        raise fail(f"declares {column} as {kind}: give one of {', '.join(sorted(set(TYPES.values())))}")
    columns = {c: TYPES[t] for c, t in declared.items()}
    if time_column not in columns:
        raise fail(f"has no time column {time_column!r}")
    if columns[time_column] != "TIMESTAMP":
        raise fail(f"has a time column {time_column!r} of type {columns[time_column]}: "
                   "declare it TIMESTAMP")
    _check_columns(key, columns, fail, "key")
    if csv_header and len(csv_header) != len(columns):
        raise fail(f"has {len(columns)} columns and a csv_header of {len(csv_header)} names")
    distinct = {column_set_key(k.lower()): float(v) for k, v in spec.get("distinct", {}).items()}
    landing = spec.get("landing")
    if landing is not None:
        landing = str(landing if Path(landing).is_absolute() or source.startswith("<")
                      else base / landing)
    return Stream(name, time_column, columns, rate, distinct, lateness, time_distance,
                  file_format, key, landing, _parse_expect(spec.get("expect", {}), columns, fail),
                  csv_header)


def _check_columns(names, columns: dict[str, str], fail, what: str) -> None:
    for c in names:
        if c not in columns:
            raise fail(f"names {c!r} in {what}, which is not one of its columns "
                       f"({', '.join(columns)})")


def _parse_expect(raw: dict, columns: dict[str, str], fail) -> Expectations:
    """``not_null = [...]``, ``unique = [...]`` (a column or a list of columns), ``range.<c> =
    {min, max}`` (or ``[min, max]``) and ``set.<c> = [...]``."""
    if unknown := set(raw) - {"not_null", "range", "set", "unique"}:
        raise fail(f"has expectations it cannot check ({', '.join(sorted(unknown))}): "
                   "give not_null, range, set or unique")
    not_null = tuple(str(c).lower() for c in raw.get("not_null", ()))
    _check_columns(not_null, columns, fail, "expect.not_null")
    unique = tuple((str(u).lower(),) if isinstance(u, str) else tuple(str(c).lower() for c in u)
                   for u in raw.get("unique", ()))
    _check_columns([c for u in unique for c in u], columns, fail, "expect.unique")
    ranges = []
    for c, bounds in raw.get("range", {}).items():
        c = c.lower()
        _check_columns([c], columns, fail, "expect.range")
        if isinstance(bounds, list | tuple) and len(bounds) == 2:
            bounds = {"min": bounds[0], "max": bounds[1]}
        if not isinstance(bounds, dict) or not set(bounds) <= {"min", "max"} or not bounds:
            raise fail(f"gives expect.range.{c} as {bounds!r}: give {{ min = .., max = .. }}")
        if columns[c] in ("VARCHAR", "BOOLEAN"):
            raise fail(f"gives a range to {c}, a {columns[c]} column: give a set")
        if columns[c] == "TIMESTAMP":
            raise fail(f"gives a range to {c}, a TIMESTAMP column: the time column's range is "
                       "time_distance around each file's median")
        try:
            low, high = (None if bounds.get(b) is None else _bound(bounds[b], columns[c])
                         for b in ("min", "max"))
        except (TypeError, ValueError):
            raise fail(f"gives expect.range.{c} bounds that are not {columns[c]} values: "
                       f"{bounds!r}") from None
        ranges.append((c, low, high))
    sets = []
    for c, values in raw.get("set", {}).items():
        c = c.lower()
        _check_columns([c], columns, fail, "expect.set")
        if not isinstance(values, list) or not values:
            raise fail(f"gives expect.set.{c} as {values!r}: give a list of values")
        if columns[c] in ("TIMESTAMP", "DOUBLE", "REAL"):
            raise fail(f"gives a set to {c}, a {columns[c]} column: give a range")
        kind = {"VARCHAR": str, "BOOLEAN": bool}.get(columns[c], int)
        if not all(isinstance(v, kind) and (kind is bool or not isinstance(v, bool))
                   for v in values):
            raise fail(f"gives expect.set.{c} values that are not {columns[c]} values: {values!r}")
        sets.append((c, tuple(values)))
    return Expectations(not_null, tuple(ranges), tuple(sets), unique)


def _bound(value, kind: str) -> float | int:
    """A range's bound in its column's (numeric) type."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(value)
    if kind in ("DOUBLE", "REAL"):
        return float(value)
    if value != int(value):
        raise ValueError(value)
    return int(value)

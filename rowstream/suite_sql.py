"""The input suite as DuckDB SQL, for the by-reference gateway, where DuckDB reads a batch's
landed files itself (``rowstream/by_reference.py``).

It is the suite's third form, beside Great Expectations (``runtime/validation.py``) and the
vectorised polars checks (``expectations.violations``), generated from the same expectation
objects and with their semantics: a column-map expectation skips missing values (null, and
NaN in a column of a float type, as pandas counts it), uniqueness is within the file, and a
row's ``rule`` is the first expectation it fails in suite order. ``tests/test_expectations.py``
keeps the three in agreement row for row. ``may_fail`` also runs in Spark's JVM, rendered in
its dialect, for split aggregates (``rowstream/suite_spark.py``).

The SQL reads a landed file as the landed frame (``rowstream/expectations.py``), whatever its
format: ``Landed`` names the SQL expression of each of the frame's columns over the file's scan.
Only the rule is SQL; the reasons of the few rows that fail are the polars suite's
(``expectations.reasons``), so that every quarantined row reads alike whichever gateway found it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from rowstream.expectations import FIELD_COUNT, Expectation, raw, unparsed
from workload.schema import FLOATS, StreamSchema


def nan(column: str) -> str:
    """Whether a float is NaN. DuckDB 2.0's ``isnan`` answers false for a NaN read from a
    dictionary-encoded Parquet page when it is projected (a filter answers right), and so do
    its comparisons; its text does not lie."""
    return f"CAST({column} AS VARCHAR) IN ('nan', '-nan')"


def spark_nan(column: str) -> str:
    """Whether a float is NaN, in Spark, whose text of a NaN is 'NaN' and whose ``isnan`` is
    right."""
    return f"isnan({column})"


@dataclass(frozen=True)
class Landed:
    """A landed file's frame in SQL: each column's expression over the file's scan, which of
    them hold floats (NaN counts as missing in those), and how the engine tells a NaN."""

    columns: Mapping[str, str]
    floats: frozenset[str] = frozenset()
    nan: Callable[[str], str] = nan

    def missing(self, name: str) -> str:
        column = self.columns[name]
        return f"({column} IS NULL OR {self.nan(column)})" if name in self.floats \
            else f"({column} IS NULL)"


def identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(value: object) -> str:
    """A Python value as a DuckDB literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, float):
        return f"{value!r}::DOUBLE"
    return str(int(value))


def failed(e: Expectation, landed: Landed, parameters: Mapping[str, object]) -> str:
    """The SQL condition under which a row of ``landed`` fails ``e`` (``parameters``: the
    suite's parameters for the file, ``expectations.input_parameters``). Uniqueness is a window
    over the whole file."""
    args = {k: parameters[v["$PARAMETER"]] if isinstance(v, dict) else v
            for k, v in e.arguments.items()}
    if "column_list" in args:
        columns = [landed.columns[c] for c in args["column_list"]]
        present = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        return f"(({present}) AND count(*) OVER (PARTITION BY {', '.join(columns)}) > 1)"
    column, missing = landed.columns[args["column"]], landed.missing(args["column"])
    if e.type == "expect_column_values_to_not_be_null":
        return missing
    if e.type == "expect_column_values_to_be_null":
        return f"(NOT {missing})"
    if e.type == "expect_column_values_to_be_in_set":
        values = ", ".join(literal(v) for v in args["value_set"])
        return f"(NOT {missing} AND {column} NOT IN ({values}))"
    if e.type == "expect_column_values_to_be_between":
        bounds = [f"{column} >= {literal(args['min_value'])}"] if args.get("min_value") is not None \
            else []
        if args.get("max_value") is not None:
            bounds.append(f"{column} <= {literal(args['max_value'])}")
        return f"(NOT {missing} AND NOT ({' AND '.join(bounds) or 'TRUE'}))"
    if e.type == "expect_column_values_to_be_unique":
        return f"(NOT {missing} AND count(*) OVER (PARTITION BY {column}) > 1)"
    raise NotImplementedError(f"no SQL for {e.type}: add it to rowstream/suite_sql.py")


def rule(suite: tuple[Expectation, ...], landed: Landed, parameters: Mapping[str, object]) -> str:
    """Each row's ``rule``: the first expectation of ``suite`` it fails, or NULL."""
    cases = " ".join(f"WHEN {failed(e, landed, parameters)} THEN {literal(e.rule)}"
                     for e in suite)
    return f"CASE {cases} END"


def typed_landed(schema: StreamSchema, columns: Mapping[str, str], fields: str,
                 isnan: Callable[[str], str] | None = None) -> Landed:
    """The landed frame of rows whose values are all of their columns' types (``columns``:
    each column's SQL), ``fields`` per line: a value is missing where it is null, its text
    (whose nullness alone the suite reads) is the value, and nothing fails to parse. With
    ``isnan`` (the engine's test), a NaN in a float column is missing too; without, the rows
    hold none (DuckDB reads a file with one the Python way, ``by_reference._parquet``)."""
    field = schema.field_of
    floats = frozenset(c for c, t in schema.types.items() if t in FLOATS) if isnan else frozenset()
    return Landed({FIELD_COUNT: fields, **columns,
                   **{raw(field[c]): identifier(c) for c in schema.names},
                   **{unparsed(field[c]): "NULL" for c in schema.names}},
                  floats, isnan or nan)


def unique_columns(suite: tuple[Expectation, ...]) -> list[str]:
    """The columns whose values the suite expects unique within a file."""
    return [e.arguments["column"] for e in suite
            if e.type == "expect_column_values_to_be_unique"]


def may_fail(suite: tuple[Expectation, ...], landed: Landed,
             ranges: Mapping[str, tuple[int, int]] | None = None) -> list[str]:
    """Aggregates over a file's scan, for each expectation of ``suite`` that takes no per-file
    parameter, that are 0 only where no row of the file fails it. They may count a file whose
    rows all pass (a NaN among values in a range) but never miss one that fails: they decide
    only which files are judged row by row (``rule``). Most come from the counts and bounds a
    Parquet file's statistics hold, and cost nothing. The suite's parametrised expectation, the
    event time near the file's median, holds for every row of a file whose event times span
    less than the distance it allows.

    ``ranges``: the bounds of integer columns expected unique, where the file's statistics hold
    them; a bitmap over the range counts their distinct values (``bitstring_agg``), at a
    quarter of a hash table's cost (59 against 17 ms for a million ids), where it holds at most
    64 bits per row."""
    counts = []
    for e in suite:
        args = e.arguments
        if any(isinstance(v, dict) for v in args.values()):
            continue
        if "column_list" in args:
            columns = [landed.columns[c] for c in args["column_list"]]
            present = " OR ".join(f"{c} IS NOT NULL" for c in columns)
            counts.append(f"count(*) FILTER (WHERE {present}) - count(DISTINCT "
                          f"row({', '.join(columns)})) FILTER (WHERE {present})")
            continue
        name = args["column"]
        column, floating = landed.columns[name], name in landed.floats
        nans = f" + count(*) FILTER (WHERE {landed.nan(column)})" if floating else ""
        if e.type == "expect_column_values_to_not_be_null":
            counts.append(f"count(*) - count({column}){nans}")
        elif e.type == "expect_column_values_to_be_null":
            counts.append(f"count(*) FILTER (WHERE NOT {landed.missing(name)})" if floating
                          else f"count({column})")
        elif e.type == "expect_column_values_to_be_in_set":
            values = ", ".join(literal(v) for v in args["value_set"])
            counts.append(f"count(*) FILTER (WHERE {column} NOT IN ({values}))")
        elif e.type == "expect_column_values_to_be_between":
            outside = [f"min({column}) < {literal(args['min_value'])}"
                       for _ in [0] if args.get("min_value") is not None]
            outside += [f"max({column}) > {literal(args['max_value'])}"
                        for _ in [0] if args.get("max_value") is not None]
            counts.append(f"coalesce(({' OR '.join(outside) or 'FALSE'})::INTEGER, 0)")
        elif e.type == "expect_column_values_to_be_unique":
            low, high = (ranges or {}).get(name, (0, None))
            counts.append(f"count({column}) - bit_count(bitstring_agg({column}, {low}, {high}))"
                          if high is not None else
                          f"count({column}) - count(DISTINCT {column})")
        else:
            counts.append(f"count(*) FILTER (WHERE {failed(e, landed, {})})")
    return list(dict.fromkeys(counts))  # a Parquet column is its own raw text: asked once

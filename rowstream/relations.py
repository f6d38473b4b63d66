"""Relations as they cross the MIG: struct columns of one Arrow table, and the timestamps both
engines agree on (Spark's UTC instants, DuckDB's UTC wall times)."""

from __future__ import annotations

import pyarrow as pa


def relation_rows(table: pa.Table, column: str) -> pa.Table:
    """The rows of a relation held as a struct column (null where a row is not in it), as a
    table of its own."""
    structs = table.column(column).combine_chunks()
    structs = structs.filter(structs.is_valid())
    return naive(pa.Table.from_arrays(structs.flatten(), names=[f.name for f in structs.type]))


def naive(table: pa.Table) -> pa.Table:
    """Spark hands timestamps as UTC instants; DuckDB's window state holds UTC wall time."""
    return _retype(table, pa.timestamp("us"))


def utc_instants(table: pa.Table) -> pa.Table:
    """DuckDB's UTC wall times as the instants Spark's timestamps are."""
    return _retype(table, pa.timestamp("us", tz="UTC"))


def _retype(table: pa.Table, timestamp: pa.DataType) -> pa.Table:
    fields = [pa.field(f.name, timestamp) if pa.types.is_timestamp(f.type) else f
              for f in table.schema]
    return table.cast(pa.schema(fields))

"""The DuckDB store: window-state tables, evaluation of DB-ops, purge and idempotent results.

Each query has a schema of its own (``q_<name>``) holding

* one table per DB-op input (``in_<operator id>``), appended from Arrow as micro-batches arrive;
* ``window_ends``, the window ends of the current evaluation;
* ``results``: the result rows with the micro-batch that produced them, written so that
  replaying a batch after a restart replaces its rows instead of adding them again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from columnar.fragment_sql import WINDOW_ENDS, Fragment

DEFAULT_PATH = Path(".tandem/tandem.duckdb")


def schema_name(query: str) -> str:
    return "q_" + re.sub(r"\W", "_", query.lower())


class ColumnarStore:
    """A DuckDB file (or ``:memory:``) that keeps the state and results of DB-ops."""

    def __init__(self, path: str | Path = DEFAULT_PATH):
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        self.con = duckdb.connect(self.path)
        self.con.execute("SET TimeZone = 'UTC'")

    def close(self) -> None:
        self.con.close()

    # -- state ------------------------------------------------------------------------------

    def prepare(self, query: str, fragment: Fragment, schemas: dict[str, pa.Schema]) -> None:
        """Create the schema, the input tables (from their Arrow schemas) and window_ends."""
        schema = schema_name(query)
        self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        self.con.execute(f"CREATE TABLE IF NOT EXISTS {schema}.{WINDOW_ENDS} (window_end TIMESTAMP)")
        for table in fragment.inputs:
            empty = pa.table({n: pa.array([], type=schemas[table.table].field(n).type)
                              for n in table.columns})
            self.con.register("__empty", empty)
            self.con.execute(f"CREATE TABLE IF NOT EXISTS {schema}.{table.table} AS "
                             "SELECT * FROM __empty")
            self.con.unregister("__empty")

    def append(self, query: str, table: str, rows: pa.Table) -> int:
        """Append Arrow rows to an input table; DuckDB scans the Arrow buffers directly."""
        if rows.num_rows == 0:
            return 0
        self.con.register("__rows", rows)
        try:
            columns = ", ".join(rows.column_names)
            self.con.execute(f"INSERT INTO {schema_name(query)}.{table} ({columns}) "
                             f"SELECT {columns} FROM __rows")
        finally:
            self.con.unregister("__rows")
        return rows.num_rows

    def evaluate(self, query: str, fragment: Fragment, ends: Iterable[datetime]) -> pa.Table:
        """The DB-op's rows for all of ``ends`` at once, as Arrow."""
        schema = schema_name(query)
        ends = pa.table({"window_end": pa.array(list(ends), type=pa.timestamp("us"))})
        self.con.execute(f"DELETE FROM {schema}.{WINDOW_ENDS}")
        self.con.register("__ends", ends)
        try:
            self.con.execute(f"INSERT INTO {schema}.{WINDOW_ENDS} SELECT window_end FROM __ends")
        finally:
            self.con.unregister("__ends")
        self.con.execute(f"SET search_path = '{schema}'")
        try:
            return self.con.sql(fragment.sql).to_arrow_table()
        finally:
            self.con.execute("RESET search_path")

    def purge(self, query: str, fragment: Fragment, next_end: datetime) -> int:
        """Delete the input rows that no window ending at ``next_end`` or later needs."""
        schema, deleted = schema_name(query), 0
        for table in fragment.inputs:
            if table.window_size is None:  # rows tagged with their window_end
                condition = "window_end < ?"
            else:  # rows of a windowed stream: in no window ending at next_end or later
                size_us = round(table.window_size * 1_000_000)
                condition = f"{table.time_column} < ?::TIMESTAMP - to_microseconds({size_us})"
            deleted += self.con.execute(
                f"DELETE FROM {schema}.{table.table} WHERE {condition}", [next_end]).fetchone()[0]
        return deleted

    def rows(self, query: str, table: str) -> int:
        return self.con.execute(f"SELECT count(*) FROM {schema_name(query)}.{table}").fetchone()[0]

    # -- results ----------------------------------------------------------------------------

    def write_results(self, query: str, batch_id: int, rows: pa.Table) -> int:
        """Replace the results of ``batch_id``: a replayed batch neither loses nor duplicates."""
        schema = schema_name(query)
        self.con.register("__results", rows)
        try:
            self.con.execute("BEGIN TRANSACTION")
            self.con.execute(f"CREATE TABLE IF NOT EXISTS {schema}.results AS "
                             "SELECT 0::BIGINT AS batch_id, * FROM __results LIMIT 0")
            self.con.execute(f"DELETE FROM {schema}.results WHERE batch_id = ?", [batch_id])
            self.con.execute(f"INSERT INTO {schema}.results SELECT ?::BIGINT, * FROM __results",
                             [batch_id])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        finally:
            self.con.unregister("__results")
        return rows.num_rows

    def results(self, query: str) -> pa.Table:
        return self.con.sql(
            f"SELECT * EXCLUDE (batch_id) FROM {schema_name(query)}.results").to_arrow_table()

"""Read-only inspection of the DuckDB store: a SQL console that only reads the store's tables,
and the EXPLAIN of a DB-op's SQL.

The console checks a statement twice. sqlglot's parse gives a clear refusal for anything but a
single query (a write, ATTACH, COPY, SET, PRAGMA ...) or for a query that reads files; and the
connection itself is opened read-only with DuckDB's external access off, so DuckDB refuses what
the parse might miss."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import sqlglot
from sqlglot import exp

from columnar.fragment_sql import PANE, ROWS, WINDOW_ENDS, Fragment
from columnar.store import busy, connect, schema_name
from optimizer.errors import TandemError

ROW_LIMIT = 200
STATEMENT_TIMEOUT = 2.0  # seconds a console statement may run
# A console statement shares the machine with the runs and the web server.
CONSOLE_CONFIG = {"enable_external_access": False, "threads": 1, "memory_limit": "1GB",
                  "lock_configuration": True}
QUERIES = (exp.Select, exp.Union, exp.Intersect, exp.Except)
# DuckDB's functions that read files or other databases (DuckDB refuses them too: see above).
FILE_READERS = {"read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json",
                "read_json_auto", "read_ndjson", "read_ndjson_auto", "read_json_objects",
                "read_text", "read_blob", "glob", "sniff_csv", "parquet_metadata",
                "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata", "read_xlsx",
                "sqlite_scan", "postgres_scan", "mysql_scan", "iceberg_scan", "delta_scan"}


class Refused(TandemError):
    """A statement the console does not run, with the reason in words."""


class NoSuchTable(Refused):
    """The statement reads a table (or schema) the store does not hold."""


@dataclass(frozen=True)
class Answer:
    columns: list[str]
    rows: list[tuple]
    truncated: bool  # more than ROW_LIMIT rows


def _real(value: float | None) -> float | None:
    """A REAL as it was stored, in its shortest digits (5.4, not the double 5.400000095...)."""
    return None if value is None else float(str(np.float32(value)))


def check_read_only(sql: str) -> str:
    """The statement if it only reads the store's tables, else ``Refused``."""
    try:
        statements = [s for s in sqlglot.parse(sql, dialect="duckdb") if s is not None]
    except sqlglot.errors.ParseError as err:
        raise Refused(f"not valid SQL: {str(err).splitlines()[0]}") from None
    if len(statements) != 1:
        raise Refused("give one statement at a time")
    statement = statements[0]
    if not isinstance(statement, QUERIES):
        kind = (statement.name if isinstance(statement, exp.Command) else statement.key).upper()
        raise Refused(f"the console is read-only: {kind} is refused. Write a SELECT (or WITH … "
                      "SELECT) over the store's tables.")
    for call in statement.find_all(exp.Func):
        name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()
        if name in FILE_READERS:
            raise Refused(f"reading files is refused ({name}): the console reads the store's "
                          "tables only.")
    for table in statement.find_all(exp.Table):
        if isinstance(table.this, exp.Literal) or "/" in table.name or "." in table.name:
            raise Refused(f"reading the file {table.name!r} is refused: the console reads the "
                          "store's tables only.")
    return statement.sql(dialect="duckdb")


def read_only_query(store: str | Path, sql: str, limit: int = ROW_LIMIT,
                    timeout: float | None = STATEMENT_TIMEOUT) -> Answer:
    """Run a read-only query over the DuckDB file ``store``: at most ``limit`` rows (DuckDB
    stops producing rows after them) and ``timeout`` seconds (then DuckDB is interrupted; None:
    no limit), on one thread and 1 GB of memory."""
    check_read_only(sql)
    if not Path(store).is_file():
        raise Refused(f"no DuckDB file at {store} yet: run a query first")
    try:
        con = connect(str(store), read_only=True, config=CONSOLE_CONFIG)
    except duckdb.IOException as err:
        raise Refused(busy(store, err)) from None
    deadline = threading.Timer(timeout, con.interrupt) if timeout else None
    if deadline:
        deadline.start()
    try:
        relation = con.sql(sql)
        columns = relation.columns
        reals = {i for i, kind in enumerate(relation.types) if str(kind) == "FLOAT"}
        rows = [tuple(_real(v) if i in reals else v for i, v in enumerate(row))
                for row in relation.limit(limit + 1).fetchall()]
    except duckdb.InterruptException:
        raise Refused(f"stopped after {timeout:g} s, the console's limit: narrow the query "
                      "(a WHERE, an aggregate) or run it with the duckdb CLI") from None
    except duckdb.PermissionException as err:
        raise Refused(f"refused by DuckDB: {str(err).splitlines()[0]}") from None
    except duckdb.Error as err:
        kind = NoSuchTable if isinstance(err, duckdb.CatalogException) else Refused
        raise kind(f"{type(err).__name__}: {str(err).splitlines()[0]}") from None
    finally:
        if deadline:
            deadline.cancel()
        con.close()
    return Answer(columns, rows[:limit], len(rows) > limit)


def latest_windows(query: str, windows: int) -> str:
    """The SQL of the result rows of ``query``'s last ``windows`` window_ends, in order (and
    within a window_end by every column, so that a table reads the same each time)."""
    results = f"{schema_name(query)}.results"
    return (f"SELECT * EXCLUDE (batch_id) FROM {results} WHERE window_end IN (SELECT DISTINCT "
            f"window_end FROM {results} ORDER BY window_end DESC LIMIT {int(windows)}) "
            "ORDER BY window_end, COLUMNS(*)")


def latest_results(store: str | Path, query: str, windows: int, limit: int = ROW_LIMIT,
                   timeout: float | None = None) -> Answer:
    """The result rows of ``query`` (its name: its results are ``q_<name>.results``) at its
    last ``windows`` window_ends."""
    try:
        return read_only_query(store, latest_windows(query, windows), limit, timeout)
    except NoSuchTable:
        raise Refused(f"{store} holds no results of {query}: run it first (tandem run "
                      f"{query})") from None


def explain_fragment(fragment: Fragment, types: dict[str, str]) -> str:
    """DuckDB's EXPLAIN of a DB-op's SQL, over empty input tables typed from the catalog
    (``types``: column → SQL type; window bounds are timestamps, other columns doubles)."""
    con = duckdb.connect()
    try:
        for table in fragment.sources:  # filled from empty rows as the store fills them
            typed = ", ".join(f'"{c}" {_type(c, types)}' for c in table.columns)
            con.execute(f"CREATE TABLE {ROWS} ({typed})")
            con.execute(f"CREATE TABLE {table.table} AS {table.stored_sql()}")
            for pane in fragment.panes:
                if pane.source.table == table.table:
                    con.execute(f"CREATE TABLE {pane.table.table} AS {pane.sql}")
                    for statement in pane.stacks.create("main") if pane.stacks else ():
                        con.execute(statement)
            con.execute(f"DROP TABLE {ROWS}")
        con.execute(f"CREATE TABLE {WINDOW_ENDS} (window_end TIMESTAMP)")
        return "\n".join(row[1] for row in con.execute("EXPLAIN " + fragment.sql).fetchall())
    finally:
        con.close()


def _type(column: str, types: dict[str, str]) -> str:
    if column in types:
        return types[column]
    if column.startswith("window_"):
        return "TIMESTAMP"
    return "BIGINT" if column == PANE else "DOUBLE"

"""The DuckDB store: window-state tables, evaluation of DB-ops, purge and idempotent results.

Each query has a schema of its own (``q_<name>``) holding

* one table per relation handed over from Spark (``in_<relation id>``), appended from Arrow as
  micro-batches arrive: the window state of DB-ops and of Spark operators after a DB-op;
* ``window_ends``, the window ends of the current evaluation;
* ``results``: the result rows with the micro-batch that produced them, written so that
  replaying a batch after a restart replaces its rows instead of adding them again;
* ``progress``, a row per micro-batch (with a K-slack buffer, its state after the batch);
* ``slack``, with a K-slack buffer, its decision after each unit of the stream
  (``kslack/manager.py``): K, and the high-water mark and watermark it left;
* ``run``, the id of the run whose state the schema holds (its Spark checkpoint names it too).

The schema ``tandem_log`` logs the runs (``runs``) and the plans the optimiser chose (``plans``),
and holds the one quarantine (``quarantine``): the rows a run's gateway or Great Expectations'
landing validation could not admit, with their ``rule``, ``reason`` and ``origin``.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from columnar.fragment_sql import PANE, ROWS, WINDOW_ENDS, FragmentInput, PaneTable
from columnar.stacks import Stacks
from optimizer.errors import TandemError

DEFAULT_PATH = Path(".tandem/tandem.duckdb")
LOG_SCHEMA = "tandem_log"  # the runs and plans of every query
QUARANTINE = "quarantine"  # of tandem_log: every row a gateway or the landing validation refused


@dataclass(frozen=True)
class Progress:
    """How far a run has come: its first event, the last window_end it evaluated and how far
    its arrivals are complete (``rowstream.mig``: the stream up to its latest event, each
    relation of Spark's stateful operators up to the last window_end they completed)."""

    first_ts: datetime | None = None
    last_end: datetime | None = None
    frontiers: dict[str, datetime] = field(default_factory=dict)
    slack: dict | None = None  # the K-slack buffer's state (``BufferManager.to_json``)


_CONNECTING = threading.Lock()


def connect(path: str, **options) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``, one thread at a time: DuckDB 2.0's Python bindings race when two
    threads open the same file at once, and the loser's connection cannot scan Arrow ("Table
    Function with name python_arrow_scan does not exist"); an adaptive run's plans open their
    store in threads of their own."""
    with _CONNECTING:
        return duckdb.connect(path, **options)


class StoreBusy(TandemError):
    """Another process holds the DuckDB file."""


def holder(error: duckdb.IOException) -> str:
    """The process that holds a DuckDB file, from DuckDB's lock error: its command line where
    this machine shows it (``/proc``), such as ``tandem run q1 --rate 2000``, else its PID."""
    held = re.search(r"\(PID (\d+)\)", str(error))
    if not held:
        return "another process"
    try:
        argv = Path(f"/proc/{held[1]}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return f"another process (PID {held[1]})"
    args = [a for a in argv.split("\0") if a]
    # `tandem …` however it was started: the console script, or `python -m tandem.cli`.
    for i, arg in enumerate(args):
        if Path(arg).name == "tandem" or arg == "tandem.cli":
            args = ["tandem", *args[i + 1:]]
            break
    else:
        args = [Path(args[0]).name, *args[1:]] if args else []
    command = " ".join(" ".join(args).split())  # one line
    command = command if len(command) <= 100 else command[:99] + "…"
    return f"`{command}` (PID {held[1]})" if command else f"another process (PID {held[1]})"


def busy(path: str | Path, error: duckdb.IOException) -> str:
    """What a reader is told while a run holds the store: which run, and where to look."""
    return (f"{holder(error)} is writing to {path}, and DuckDB lets no other process read it "
            "meanwhile: follow the run on its terminal (or its Airflow task's log), and read "
            "the store when it has ended")


def schema_name(query: str) -> str:
    return "q_" + re.sub(r"\W", "_", query.lower())


class ColumnarStore:
    """A DuckDB file (or ``:memory:``) that keeps the state and results of DB-ops."""

    def __init__(self, path: str | Path = DEFAULT_PATH, read_only: bool = False,
                 threads: int | None = None):
        """``read_only``: for readers in other processes (the Airflow plugin); DuckDB lets them
        in while no process writes. ``threads``: DuckDB's, when it must not take every core."""
        if str(path) != ":memory:" and not read_only:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = str(path)
        try:
            self.con = connect(self.path, read_only=read_only,
                               config={"threads": threads} if threads else {})
        except duckdb.IOException as err:
            if read_only:
                raise StoreBusy(busy(self.path, err)) from None
            raise StoreBusy(f"the DuckDB file {self.path} is held by {holder(err)}: DuckDB lets "
                            "one process write at a time; stop that process or give another "
                            "--store, then run again (with --resume to continue)") from None
        self._created: set[str] = set()  # tables known to exist
        # The stacks this process keeps (columnar/stacks.py), by their back stack's table: a
        # purge purges them too.
        self._stacked: dict[str, Stacks] = {}
        self._run("SET TimeZone = 'UTC'")

    def close(self) -> None:
        """Close the connection and let it go: a foreachBatch callable that Py4J keeps until
        exit may still hold this store, and DuckDB's bindings report every connection object
        alive at exit as leaked. Closing twice is harmless."""
        if self.con is not None:
            self.con.close()
            self.con = None

    def __enter__(self) -> ColumnarStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cursor(self) -> ColumnarStore:
        """A handle on the same database for another thread: a DuckDB connection serves one
        thread at a time, and each handle has transactions of its own."""
        other = object.__new__(ColumnarStore)
        other.path, other.con, other._created = self.path, self.con.cursor(), self._created
        other._stacked = self._stacked
        other._run("SET TimeZone = 'UTC'")
        return other

    def _run(self, sql: str, params: list | dict | None = None) -> list:
        """Execute a statement and consume its result (DuckDB 2 requires it before the next)."""
        return self.con.execute(sql, params or []).fetchall()

    @contextmanager
    def _view(self, name: str, table: pa.Table | str) -> Iterator[None]:
        """Rows visible to SQL as ``name``: Arrow, whose buffers DuckDB scans without a copy, or
        a query's."""
        if isinstance(table, str):
            self._run(f"CREATE OR REPLACE TEMP VIEW {name} AS {table}")
        else:
            self.con.register(name, table)
        try:
            yield
        finally:
            if isinstance(table, str):
                self._run(f"DROP VIEW IF EXISTS {name}")
            else:
                self.con.unregister(name)

    # -- state ------------------------------------------------------------------------------

    def create(self, query: str, fresh: bool = False) -> str:
        """The query's schema with window_ends and progress; ``fresh`` drops an earlier run's."""
        schema = schema_name(query)
        if fresh:
            self.forget(query)
        self._run(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        self._run(f"CREATE TABLE IF NOT EXISTS {schema}.{WINDOW_ENDS} (window_end TIMESTAMP)")
        self._run(f"CREATE TABLE IF NOT EXISTS {schema}.progress (batch_id BIGINT, "
                  "first_ts TIMESTAMP, last_end TIMESTAMP, frontiers JSON, slack JSON)")
        # A run's schema from before K-slack buffers resumes with them.
        self._run(f"ALTER TABLE {schema}.progress ADD COLUMN IF NOT EXISTS slack JSON")
        self._run(f"CREATE TABLE IF NOT EXISTS {schema}.slack (batch_id BIGINT, unit BIGINT, "
                  "file VARCHAR, k DOUBLE, high_water TIMESTAMP, watermark TIMESTAMP, "
                  "threshold DOUBLE, measured DOUBLE, seconds DOUBLE, stream VARCHAR)")
        # A run's schema from before joins between streams resumes with them.
        self._run(f"ALTER TABLE {schema}.slack ADD COLUMN IF NOT EXISTS stream VARCHAR")
        return schema

    def forget(self, query: str) -> None:
        """Drop the query's schema and its rows in the quarantine."""
        schema = schema_name(query)
        self._run(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        # In place: cursors share the set.
        self._created.difference_update([t for t in self._created
                                         if t.startswith(f"{schema}.")])
        for table in [t for t in self._stacked if t.startswith(f"{schema}.")]:
            del self._stacked[table]
        if self.logged(QUARANTINE):
            self._upgrade_quarantine()
            self._run(f"DELETE FROM {LOG_SCHEMA}.{QUARANTINE} WHERE query = ?", [query])

    def start_run(self, query: str) -> str:
        """Name the run that the query's schema now holds (its checkpoint names it too)."""
        run = uuid.uuid4().hex
        schema = schema_name(query)
        self._run(f"CREATE OR REPLACE TABLE {schema}.run AS SELECT ? AS run_id", [run])
        return run

    def run_id(self, query: str) -> str | None:
        """The run the query's schema holds, if any."""
        if not self._exists(schema_name(query), "run"):
            return None
        rows = self._run(f"SELECT run_id FROM {schema_name(query)}.run")
        return rows[0][0] if rows else None

    def append(self, query: str, table: str, rows: pa.Table | str, batch_id: int,
               sql: str = "SELECT * FROM __rows") -> int:
        """Append the rows a micro-batch brings to a table (created from the first rows'
        schema, plus the micro-batch each row came in): Arrow, without copies, or the rows of a
        query (the files DuckDB read by reference, ``rowstream/by_reference.py``). A batch
        replayed after a restart replaces what it appended before. ``sql`` (DuckDB SQL over the
        rows, ``__rows``) is what the table keeps of them."""
        target = f"{schema_name(query)}.{table}"
        with self._view("__rows", rows):
            if target not in self._created:
                self._run(f"CREATE TABLE IF NOT EXISTS {target} AS "
                          f"SELECT *, 0::BIGINT AS _batch FROM ({sql}) LIMIT 0")
                self._created.add(target)
            self._run(f"DELETE FROM {target} WHERE _batch = ?", [batch_id])
            if isinstance(rows, pa.Table) and rows.num_rows == 0:
                return 0
            return self._run(f"INSERT INTO {target} BY NAME "
                             f"SELECT *, ?::BIGINT AS _batch FROM ({sql})", [batch_id])[0][0]

    def append_input(self, query: str, table: FragmentInput, rows: pa.Table | str, batch_id: int,
                     panes: Iterable[PaneTable] = (), source: str = "SELECT * FROM __rows",
                     keep: bool = True) -> None:
        """Append a relation's rows to its input table (a windowed stream's with their pane)
        and what the pane tables they feed keep of them. ``source``: SQL over the Arrow rows
        (``__rows``) that gives the relation's rows; ``keep``: False when nothing reads the
        rows themselves (``fragment_sql.rows_kept``)."""
        def over(sql: str) -> str:
            return f"WITH {ROWS} AS ({source}) {sql}"

        for pane in panes:
            if pane.source.table == table.table:
                self.append(query, pane.table.table, rows, batch_id, over(pane.sql))
        if keep:
            self.append(query, table.table, rows, batch_id, over(table.stored_sql()))

    def take_over(self, previous: str, query: str, tables: Iterable[str]) -> int:
        """Copy ``tables`` from ``previous``'s schema into ``query``'s: the window state of a
        plan that a run migrates from, which the plan it migrates to keeps alike. Their rows
        count as batch -1, which no batch of the new plan takes back. Only the rows of batches
        whose arrival was recorded are copied: a run that stopped between a batch's rows and
        its record would replay that batch, and the new plan reads those rows again instead.
        Copying again replaces the copy. Returns the rows copied."""
        old, new, copied = schema_name(previous), schema_name(query), 0
        for table in tables:
            if not self._exists(old, table):  # no row of it had arrived
                continue
            self._run(f"CREATE OR REPLACE TABLE {new}.{table} AS "
                      f"SELECT * REPLACE (-1::BIGINT AS _batch) FROM {old}.{table} "
                      f"WHERE _batch < 0 OR _batch IN (SELECT batch_id FROM {old}.progress)")
            self._created.add(f"{new}.{table}")
            copied += self.rows(query, table)
        return copied

    def rebuild_panes(self, query: str, pane: PaneTable) -> None:
        """Compute a pane table anew from the rows its source table holds (its stacks anew
        too)."""
        schema = schema_name(query)
        if pane.stacks:
            for table in (pane.stacks.back, pane.stacks.front):
                self._run(f"DROP TABLE IF EXISTS {schema}.{table}")
            self._stacked.pop(f"{schema}.{pane.stacks.back}", None)
        stored = f"SELECT * EXCLUDE ({PANE}, _batch) FROM {schema}.{pane.source.table}"
        self._run(f"CREATE OR REPLACE TABLE {schema}.{pane.table.table} AS SELECT *, "
                  f"0::BIGINT AS _batch FROM (WITH {ROWS} AS ({stored}) {pane.sql})")
        self._created.add(f"{schema}.{pane.table.table}")

    def evaluate(self, query: str, sql: str, ends: Iterable[datetime],
                 stacks: Iterable[Stacks] = ()) -> pa.Table:
        """A query over the input tables (a DB-op's, ``fragment_sql.read_sql``) for all of
        ``ends`` at once, as Arrow, once ``stacks`` (the DB-op's) hold the windows' partials."""
        schema = schema_name(query)
        ends = pa.table({"window_end": pa.array(list(ends), type=pa.timestamp("us"))})
        self._run(f"DELETE FROM {schema}.{WINDOW_ENDS}")
        with self._view("__ends", ends):
            self._run(f"INSERT INTO {schema}.{WINDOW_ENDS} SELECT window_end FROM __ends")
        self._run(f"SET search_path = '{schema}'")
        try:
            for stack in stacks:
                self._stack(schema, stack)
            return self.con.sql(sql).to_arrow_table()
        finally:
            self._run("RESET search_path")

    def _stack(self, schema: str, stacks: Stacks) -> None:
        """Extend a pane table's two stacks to the window_ends being evaluated
        (``columnar/stacks.py``)."""
        if f"{schema}.{stacks.back}" not in self._stacked:
            if not self._exists(schema, stacks.panes):
                return  # no row has arrived: the windows are empty
            for statement in stacks.create(schema):
                self._run(statement)
            self._stacked[f"{schema}.{stacks.back}"] = stacks
        last_panes = self._run(f"SELECT list(epoch_us(window_end) // {stacks.slice_us}) "
                               f"FROM {WINDOW_ENDS}")[0][0] or []
        if not last_panes:
            return
        stacked = self._run(f"SELECT max({PANE}) FROM {stacks.back}")[0][0]
        span = stacks.span(stacked, last_panes)
        if span is not None and span[0] == span[1]:
            self._run(stacks.step(), {"to": span[1]})
        elif span is not None:
            self._run(stacks.extend(), {"from": span[0], "to": span[1]})
        for block, low in stacks.fronts(last_panes):
            params = {"block": block, "low": low}
            if not self._run(stacks.front_built(), params)[0][0]:
                self._run(stacks.build_front(), params)

    def purge(self, query: str, tables: Iterable[FragmentInput], next_end: datetime) -> int:
        """Delete the input rows, and the stacked partials of the query's evaluations, that no
        window ending at ``next_end`` or later needs."""
        schema, deleted = schema_name(query), 0
        for key, stack in self._stacked.items():
            if key.startswith(f"{schema}."):
                last = self._run(f"SELECT epoch_us(?::TIMESTAMP) // {stack.slice_us}",
                                 [next_end])[0][0]
                for table, condition in stack.purge():
                    deleted += self._run(f"DELETE FROM {schema}.{table} WHERE {condition}",
                                         {"last": last})[0][0]
        for table in tables:
            # Rows (or panes) of a windowed stream in no window ending at next_end or later.
            if table.window_size is None:  # rows tagged with their window_end
                condition = "window_end < ?"
            elif table.panes_per_window is not None:  # the window at K·β reads K - W/β + 1 on
                condition = (f"{PANE} <= epoch_us(?::TIMESTAMP) // {table.slide_us} "
                             f"- {table.panes_per_window}")
            else:
                size_us = round(table.window_size * 1_000_000)
                condition = f"{table.time_column} < ?::TIMESTAMP - to_microseconds({size_us})"
            deleted += self._run(
                f"DELETE FROM {schema}.{table.table} WHERE {condition}", [next_end])[0][0]
        return deleted

    def rows(self, query: str, table: str) -> int:
        return self._run(f"SELECT count(*) FROM {schema_name(query)}.{table}")[0][0]

    # -- progress and results ---------------------------------------------------------------

    def progress(self, query: str, before: int) -> Progress:
        """The progress after the batches before ``before``: the arrivals of the last one, and
        the last window_end evaluated (a batch's evaluation may not have committed yet)."""
        schema = schema_name(query)
        rows = self._run(
            f"SELECT first_ts, frontiers, (SELECT max(last_end) FROM {schema}.progress "
            f"WHERE batch_id < $before), slack FROM {schema}.progress WHERE batch_id < $before "
            "ORDER BY batch_id DESC LIMIT 1", {"before": before})
        if not rows:
            return Progress()
        first_ts, frontiers, last_end, slack = rows[0]
        return Progress(first_ts, last_end, {k: datetime.fromisoformat(v)
                                             for k, v in json.loads(frontiers or "{}").items()},
                        json.loads(slack) if slack else None)

    def slack(self, query: str) -> list[dict]:
        """The K-slack buffer's decisions of ``query``'s batches so far, in order: a dict per
        unit of the ``slack`` table's columns."""
        if not self._exists(schema_name(query), "slack"):
            return []
        cursor = self.con.execute(f"SELECT * FROM {schema_name(query)}.slack "
                                  "ORDER BY batch_id, stream, unit")
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def arrivals(self, query: str) -> int:
        """The micro-batches whose arrival is recorded."""
        return self._run(f"SELECT count(*) FROM {schema_name(query)}.progress")[0][0]

    def last_arrival(self, query: str) -> int | None:
        """The last micro-batch whose arrival is recorded."""
        return self._run(f"SELECT max(batch_id) FROM {schema_name(query)}.progress")[0][0]

    def unevaluated(self, query: str) -> tuple[int, Progress] | None:
        """The last micro-batch, if its rows arrived but its evaluation never committed (a run
        stopped in between), with its progress."""
        rows = self._run(f"SELECT batch_id FROM {schema_name(query)}.progress "
                         "WHERE last_end IS NULL AND batch_id = (SELECT max(batch_id) FROM "
                         f"{schema_name(query)}.progress)")
        if not rows:
            return None
        batch_id = rows[0][0]
        return batch_id, self.progress(query, before=batch_id + 1)

    def arrived(self, query: str, batch_id: int, first_ts: datetime | None,
                frontiers: dict[str, datetime], results: str | None = None,
                slack: dict | None = None, decisions: Iterable[tuple] = ()) -> None:
        """Record how far a batch's arrivals complete the crossings, once its rows are
        appended, and a K-slack buffer's state after it and decisions (``slack``: the
        buffer's ``to_json``; ``decisions``: a file's stream, its name and its ``Decision`` each). A
        replayed batch first takes back what it and later batches committed: their results
        and progress are evaluated again. ``results``: the query whose results table the
        batches write (default ``query``; a migrated run's plans share their run's)."""
        schema, into = schema_name(query), schema_name(results or query)
        with self._transaction():
            # Asked of the catalog in this transaction's snapshot: the evaluator's connection
            # creates the table, and a cache could know of it before this snapshot does.
            if self._exists(into, "results"):
                self._run(f"DELETE FROM {into}.results WHERE batch_id >= ?", [batch_id])
            self._run(f"DELETE FROM {schema}.progress WHERE batch_id >= ?", [batch_id])
            self._run(f"DELETE FROM {schema}.slack WHERE batch_id >= ?", [batch_id])
            self._run(f"INSERT INTO {schema}.progress (batch_id, first_ts, last_end, frontiers, "
                      "slack) VALUES (?, ?, NULL, ?, ?)",
                      [batch_id, first_ts,
                       json.dumps({k: v.isoformat() for k, v in frontiers.items()}),
                       None if slack is None else json.dumps(slack)])
            rows = [[batch_id, d.unit, name, d.k, d.high_water, d.watermark, d.threshold,
                     d.measured, d.seconds, stream] for stream, name, d in decisions]
            if rows:
                self.con.executemany(
                    f"INSERT INTO {schema}.slack (batch_id, unit, file, k, high_water, watermark, "
                    "threshold, measured, seconds, stream) VALUES (?, ?, ?, ?, "
                    "make_timestamp(?::BIGINT), make_timestamp(?::BIGINT), ?, ?, ?, ?)", rows)

    def commit(self, query: str, batch_id: int, rows: pa.Table | None,
               last_end: datetime | None, results: str | None = None) -> int:
        """Record the results of an arrived batch's evaluation and the last window_end it
        evaluated, in one transaction: a restart finds either both or neither, and evaluates
        again from the last committed window_end. ``results`` as for ``arrived``."""
        schema, into = schema_name(query), schema_name(results or query)
        with self._transaction():
            if rows is not None:
                with self._view("__results", rows):
                    self._run(f"CREATE SCHEMA IF NOT EXISTS {into}")
                    self._run(f"CREATE TABLE IF NOT EXISTS {into}.results AS "
                              "SELECT 0::BIGINT AS batch_id, * FROM __results LIMIT 0")
                    self._run(f"DELETE FROM {into}.results WHERE batch_id = ?", [batch_id])
                    self._run(f"INSERT INTO {into}.results SELECT ?::BIGINT, * FROM __results",
                              [batch_id])
            self._run(f"UPDATE {schema}.progress SET last_end = ? WHERE batch_id = ?",
                      [last_end, batch_id])
        return 0 if rows is None else rows.num_rows

    def last_result_end(self, results: str, batches: range) -> datetime | None:
        """The latest window_end among the result rows that ``batches`` wrote into
        ``results``'s table."""
        if not self._exists(schema_name(results), "results"):
            return None
        return self._run(f"SELECT max(window_end) FROM {schema_name(results)}.results "
                         "WHERE batch_id >= ? AND batch_id < ?",
                         [batches.start, batches.stop])[0][0]

    def move_results(self, query: str, target: str) -> int:
        """Move ``query``'s result rows into ``target``'s results table, in one transaction."""
        source, into = schema_name(query), schema_name(target)
        if not self._exists(source, "results"):
            return 0
        with self._transaction():
            self._run(f"CREATE TABLE IF NOT EXISTS {into}.results AS "
                      f"SELECT * FROM {source}.results LIMIT 0")
            moved = self._run(f"INSERT INTO {into}.results SELECT * FROM {source}.results")[0][0]
            self._run(f"DELETE FROM {source}.results")
        return moved

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._run("BEGIN TRANSACTION")
        try:
            yield
            self._run("COMMIT")
        except BaseException:
            try:
                self._run("ROLLBACK")
            except duckdb.TransactionException:
                # DuckDB ended the transaction itself, as it does when a write fails (a full
                # disk): what failed is the error raised, not the rollback.
                pass
            raise

    def _exists(self, schema: str, table: str) -> bool:
        return bool(self._run("SELECT 1 FROM duckdb_tables() WHERE schema_name = ? "
                              "AND table_name = ?", [schema, table]))

    # -- the log of runs and plans (the Airflow plugin shows it) ---------------------------

    def record(self, log: str, row: dict) -> None:
        """Append a row to the log ``runs`` or ``plans``; values that are not scalars
        (a placement) are kept as JSON."""
        row = {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in row.items()}
        target = f"{LOG_SCHEMA}.{log}"
        self._run(f"CREATE SCHEMA IF NOT EXISTS {LOG_SCHEMA}")
        with self._view("__row", pa.Table.from_pylist([row])):
            self._run(f"CREATE TABLE IF NOT EXISTS {target} AS SELECT * FROM __row LIMIT 0")
            self._run(f"INSERT INTO {target} BY NAME SELECT * FROM __row")

    def replace_logged(self, log: str, target: str, rows: pa.Table) -> None:
        """Replace the rows of ``target`` in the log ``log`` (validations, the landing
        quarantine) by ``rows``: validating a file again does not add its rows twice."""
        table = f"{LOG_SCHEMA}.{log}"
        self._run(f"CREATE SCHEMA IF NOT EXISTS {LOG_SCHEMA}")
        with self._view("__rows", rows), self._transaction():
            self._run(f"CREATE TABLE IF NOT EXISTS {table} AS SELECT * FROM __rows LIMIT 0")
            self._run(f"DELETE FROM {table} WHERE target = ?", [target])
            self._run(f"INSERT INTO {table} BY NAME SELECT * FROM __rows")

    def quarantine(self, rows: pa.Table, *, query: str | None = None,
                   batch_id: int | None = None, target: str | None = None) -> None:
        """Put rows in the quarantine (``tandem_log.quarantine``): those the gateway of the run
        ``query`` found in micro-batch ``batch_id``, or those Great Expectations' landing
        validation found in the file ``target``. ``rows``: ``stream``, ``ts`` (the row's event
        time, where it has one), ``row`` (its columns as JSON), ``rule``, ``reason`` and
        ``origin`` (``rowstream.gateway.QUARANTINE_TABLE``), whatever the stream. Writing a batch or a file again replaces its rows: a replayed
        batch or a file validated again does not add them twice."""
        table = f"{LOG_SCHEMA}.{QUARANTINE}"
        keys = {"query": query, "batch_id": batch_id, "target": target}
        with self._view("__rows", rows), self._transaction():
            if table not in self._created:  # once per store: runs write it every micro-batch
                self._run(f"CREATE SCHEMA IF NOT EXISTS {LOG_SCHEMA}")
                self._run(f"CREATE TABLE IF NOT EXISTS {table} AS SELECT NULL::VARCHAR AS query, "
                          "NULL::BIGINT AS batch_id, NULL::VARCHAR AS target, * FROM __rows "
                          "LIMIT 0")
                self._upgrade_quarantine()
                self._created.add(table)
            self._run(f"DELETE FROM {table} WHERE "
                      + " AND ".join(f"{k} IS NOT DISTINCT FROM ?" for k in keys),
                      list(keys.values()))
            if rows.num_rows:
                self._run(f"INSERT INTO {table} BY NAME SELECT ?::VARCHAR AS query, "
                          "?::BIGINT AS batch_id, ?::VARCHAR AS target, * FROM __rows",
                          list(keys.values()))

    def _upgrade_quarantine(self) -> None:
        """A store written before the gateways shared the quarantine has it from the landing
        validation alone, without the columns that say which run found a row; one written
        before streams were declared in the catalog has the plugs' columns, not the row as
        JSON (its old rows keep them)."""
        for column, kind in (("query", "VARCHAR"), ("batch_id", "BIGINT"), ("target", "VARCHAR"),
                             ("stream", "VARCHAR"), ("row", "VARCHAR")):
            self._run(f"ALTER TABLE {LOG_SCHEMA}.{QUARANTINE} ADD COLUMN IF NOT EXISTS "
                      f"{column} {kind}")

    def logged_targets(self, log: str, suite: str) -> set[str]:
        """The targets that the log ``log`` holds outcomes of ``suite`` for."""
        if not self.logged(log):
            return set()
        return {t for (t,) in self._run(f"SELECT DISTINCT target FROM {LOG_SCHEMA}.{log} "
                                         "WHERE suite = ?", [suite])}

    def recent(self, log: str, query: str, limit: int = 10) -> list[dict]:
        """The latest rows of a log for ``query`` and the plans it migrated to
        (``<query>__plan<n>``, ``runtime/migration.py``), newest first."""
        if not self.logged(log):
            return []
        return self.query(f"SELECT * FROM {LOG_SCHEMA}.{log} WHERE query = ? OR "
                          "starts_with(query, ? || '__plan') ORDER BY logged_at DESC LIMIT ?",
                          [query, query, limit])

    def has_results(self, query: str) -> bool:
        return self.has_table(query, "results")

    def has_table(self, query: str, table: str) -> bool:
        return self._exists(schema_name(query), table)

    def logged(self, log: str) -> bool:
        return self._exists(LOG_SCHEMA, log)

    def query(self, sql: str, params: list | None = None) -> list[dict]:
        """Rows of a statement as dicts (the plugin's summaries)."""
        rel = self.con.execute(sql, params or [])
        names = [d[0] for d in rel.description]
        return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]

    def results(self, query: str) -> pa.Table:
        return self.con.sql(
            f"SELECT * EXCLUDE (batch_id) FROM {schema_name(query)}.results").to_arrow_table()

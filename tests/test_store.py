"""The DuckDB store keeps window state, purges what no window needs and writes results
idempotently per micro-batch."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import polars as pl
import pyarrow as pa
import pytest

from benchmarking.verify import compare
from columnar.fragment_sql import fragments
from columnar.store import ColumnarStore, Progress, connect
from optimizer import optimize
from tests.conftest import query_sql
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration
START = datetime(2013, 8, 31, 22, 0, 0)


@pytest.fixture
def q5(catalog, profile):
    [fragment] = fragments(optimize(query_sql("q5"), catalog, profile, placement="duckdb").plan)
    return fragment


def test_evaluating_in_one_pass_or_slide_by_slide_gives_the_same_rows(tmp_path, q5):
    rows = SmartPlugs(rate=10, houses=2, households_per_house=2, plugs=6).between(0, 400)
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.create("q5")
    store.append_input("q5", q5.sources[0], rows, 0, q5.panes)
    ends = [START + timedelta(seconds=s) for s in range(300, 400)]
    together = store.evaluate("q5", q5.sql, ends, q5.stacks)
    apart = pa.concat_tables(store.evaluate("q5", q5.sql, [e], q5.stacks) for e in ends)
    # Sums of partials per pane round apart from sums in another order: floats within
    # verify's tolerance.
    assert compare({}, pl.from_arrow(together), pl.from_arrow(apart)).status == "same"
    assert together.num_rows > 0


def test_purge_keeps_exactly_what_open_windows_need(tmp_path, q5):
    rows = SmartPlugs(rate=10, houses=2, households_per_house=2, plugs=6).between(0, 400)
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.create("q5")
    store.append_input("q5", q5.sources[0], rows, 0, q5.panes)
    next_end = START + timedelta(seconds=350)
    before = store.evaluate("q5", q5.sql, [next_end], q5.stacks)
    deleted = store.purge("q5", q5.sources, next_end)
    # 5-minute windows ending at 350 s or later need rows from 50 s on: 10 rows/s * 50 s go.
    assert deleted == 500 and store.rows("q5", "in_window_1") == 3500
    # ... and the panes from the one of [50 s, 51 s) on.
    [panes] = q5.panes
    assert store.purge("q5", [panes.table], next_end) > 0
    first = store.con.sql(f"SELECT min(_pane) FROM q_q5.{panes.table.table}").fetchall()[0][0]
    assert first == (next_end - timedelta(seconds=300)).replace(tzinfo=UTC).timestamp() + 1
    after = store.evaluate("q5", q5.sql, [next_end], q5.stacks)
    assert compare({}, pl.from_arrow(after), pl.from_arrow(before)).status == "same"


def test_replayed_batches_replace_their_rows_results_and_progress(tmp_path, q5):
    rows = SmartPlugs(rate=10, houses=2, households_per_house=2, plugs=6).between(0, 10)
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.create("q5")
    result = pa.table({"k": [1, 2], "window_end": pa.array([START, START], pa.timestamp("us"))})
    end = START + timedelta(seconds=1)
    store.append_input("q5", q5.sources[0], rows.slice(0, 50), 0, q5.panes)
    store.arrived("q5", 0, START, {"stream": end})
    store.commit("q5", 0, result, end)
    later = Progress(START, end + timedelta(seconds=1), {"stream": end, "aggregate_1": end})
    for _ in range(2):  # batch 1, then batch 1 again after a restart
        store.append_input("q5", q5.sources[0], rows.slice(50), 1, q5.panes)
        store.arrived("q5", 1, START, later.frontiers)
        store.commit("q5", 1, result.slice(0, 1), later.last_end)
    assert store.rows("q5", "in_window_1") == 100
    assert store.results("q5").num_rows == 3
    assert store.progress("q5", before=1) == Progress(START, end, {"stream": end})
    store.close()
    reopened = ColumnarStore(tmp_path / "t.duckdb")  # the file survives the process
    assert reopened.results("q5").num_rows == 3
    assert reopened.progress("q5", before=2) == later


def test_a_batch_that_arrived_but_was_not_evaluated_is_evaluated_after_a_restart(tmp_path):
    # Batch 1's rows and frontiers committed, its evaluation did not: the next batch evaluates
    # from batch 0's last window_end, and a replay of batch 1 takes back its results.
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.create("q5")
    result = pa.table({"window_end": pa.array([START], pa.timestamp("us"))})
    ends = [START + timedelta(seconds=s) for s in range(4)]
    store.arrived("q5", 0, START, {"stream": ends[1]})
    store.commit("q5", 0, result, ends[1])
    store.arrived("q5", 1, START, {"stream": ends[2]})
    assert store.progress("q5", before=2) == Progress(START, ends[1], {"stream": ends[2]})
    store.commit("q5", 1, result, ends[2])
    store.arrived("q5", 1, START, {"stream": ends[3]})  # replayed
    assert store.results("q5").num_rows == 1
    assert store.progress("q5", before=2) == Progress(START, ends[1], {"stream": ends[3]})


def test_a_takeover_copies_the_rows_of_recorded_arrivals_only(tmp_path, q5):
    # Batch 1's rows were appended and the run stopped before its arrival was recorded: the
    # batch is read again, so its rows are not the old plan's state to take over.
    rows = SmartPlugs(rate=10, houses=2, households_per_house=2, plugs=6).between(0, 10)
    store = ColumnarStore(tmp_path / "t.duckdb")
    for query in ("old", "new"):
        store.create(query)
    store.append_input("old", q5.sources[0], rows.slice(0, 50), 0, q5.panes)
    store.arrived("old", 0, START, {"stream": START})
    store.append_input("old", q5.sources[0], rows.slice(50), 1, q5.panes)
    tables = [q5.sources[0].table] + [p.table.table for p in q5.panes]
    assert store.take_over("old", "new", tables) > 0
    assert store.rows("new", q5.sources[0].table) == 50
    for table in tables:
        assert store.query(f"SELECT DISTINCT _batch FROM q_new.{table}") == [{"_batch": -1}]
    # Copied again (a resumed migration), it is the same copy, not two.
    store.take_over("old", "new", tables)
    assert store.rows("new", q5.sources[0].table) == 50


def test_a_quarantine_written_before_the_gateways_shared_it_takes_their_rows(tmp_path):
    # Before, only the landing validation wrote tandem_log.quarantine: no query, no batch_id.
    with ColumnarStore(tmp_path / "old.duckdb") as store:
        store.replace_logged("quarantine", "a.csv", pa.table({"id": [1], "rule": ["x"],
                                                              "target": ["a.csv"]}))
    with ColumnarStore(tmp_path / "old.duckdb") as store:
        store.forget("q1")  # a fresh run
        store.quarantine(pa.table({"id": [2], "rule": ["late"]}), query="q1", batch_id=0)
        store.quarantine(pa.table({"id": [2], "rule": ["late"]}), query="q1", batch_id=0)
        store.quarantine(pa.table({"id": [3], "rule": ["y"]}), target="b.csv")
        rows = store.con.sql("SELECT query, batch_id, target, id FROM tandem_log.quarantine "
                             "ORDER BY id").fetchall()
    # The replayed batch replaced its rows; the old file's row is kept.
    assert rows == [(None, None, "a.csv", 1), ("q1", 0, None, 2), (None, None, "b.csv", 3)]


def test_connections_opened_at_once_in_threads_all_scan_arrow(tmp_path):
    # An adaptive run's plans open the same store in threads of their own. DuckDB's bindings
    # race when two threads open a file at once: the loser cannot scan Arrow tables ("Table
    # Function with name python_arrow_scan does not exist").
    table, failures = pa.table({"a": [1, 2, 3]}), []

    def open_and_scan(path, start):
        start.wait()
        try:
            con = connect(str(path))
            con.register("rows", table)
            assert con.sql("SELECT sum(a) FROM rows").fetchall() == [(6,)]
            con.close()
        except Exception as err:  # noqa: BLE001 - every thread's failure is reported
            failures.append(repr(err))

    for attempt in range(40):
        path, start = tmp_path / f"{attempt}.duckdb", threading.Barrier(3)
        connect(str(path)).close()
        threads = [threading.Thread(target=open_and_scan, args=(path, start)) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []

"""The DuckDB store keeps window state, purges what no window needs and writes results
idempotently per micro-batch."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from columnar.fragment_sql import fragments
from columnar.store import ColumnarStore
from optimizer import optimize
from tandem.workload import SmartPlugs
from tests.conftest import query_sql

pytestmark = pytest.mark.integration
START = datetime(2013, 8, 31, 22, 0, 0)


@pytest.fixture
def q5(catalog, profile):
    [fragment] = fragments(optimize(query_sql("q5"), catalog, profile, placement="duckdb").plan)
    return fragment


def test_evaluating_in_one_pass_or_slide_by_slide_gives_the_same_rows(tmp_path, q5):
    rows = SmartPlugs(rate=10, houses=2, households_per_house=2, plugs=6).between(0, 400)
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.prepare("q5", q5, {"in_window_1": rows.schema})
    store.append("q5", "in_window_1", rows)
    ends = [START + timedelta(seconds=s) for s in range(300, 400)]
    together = store.evaluate("q5", q5, ends)
    apart = pa.concat_tables(store.evaluate("q5", q5, [e]) for e in ends)
    key = [(c, "ascending") for c in together.column_names]
    assert together.sort_by(key).equals(apart.sort_by(key))
    assert together.num_rows > 0


def test_purge_keeps_exactly_what_open_windows_need(tmp_path, q5):
    rows = SmartPlugs(rate=10, houses=2, households_per_house=2, plugs=6).between(0, 400)
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.prepare("q5", q5, {"in_window_1": rows.schema})
    store.append("q5", "in_window_1", rows)
    next_end = START + timedelta(seconds=350)
    before = store.evaluate("q5", q5, [next_end])
    deleted = store.purge("q5", q5, next_end)
    # 5-minute windows ending at 350 s or later need rows from 50 s on: 10 rows/s * 50 s go.
    assert deleted == 500 and store.rows("q5", "in_window_1") == 3500
    assert store.evaluate("q5", q5, [next_end]).equals(before)


def test_results_are_idempotent_per_batch(tmp_path):
    store = ColumnarStore(tmp_path / "t.duckdb")
    store.con.execute("CREATE SCHEMA q_x")
    first = pa.table({"k": [1, 2], "window_end": pa.array([START, START], pa.timestamp("us"))})
    store.write_results("x", 0, first)
    store.write_results("x", 1, first.slice(0, 1))
    store.write_results("x", 1, first.slice(0, 1))  # replayed after a restart
    assert store.results("x").num_rows == 3
    store.close()
    reopened = ColumnarStore(tmp_path / "t.duckdb")  # the file survives the process
    assert reopened.results("x").num_rows == 3

"""The DuckDB SQL of a DB-op computes the fragment's rows for every requested window_end.

The inputs are filled by hand, as the MIG operator would fill them, and the expected rows are
worked out by hand from the semantics of docs/design.md."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pytest
import sqlglot

from columnar.fragment_sql import LISTS, ROWS, fragments, rows_kept
from columnar.store import ColumnarStore
from optimizer import optimize
from optimizer.deployment import deploy
from tests.conftest import query_sql

T0 = dt.datetime(2014, 9, 1)
# (id, seconds after T0, value, property, plug_id, household_id, house_id)
READINGS = [
    (1, 10, 10.0, 1, 1, 1, 1), (2, 20, 100.0, 1, 1, 1, 1), (3, 30, 95.0, 1, 1, 1, 1),
    (4, 40, 50.0, 1, 1, 1, 1), (5, 12, 999.0, 0, 1, 1, 1), (6, 15, 5.0, 1, 2, 1, 1),
    (7, 25, 5.0, 1, 2, 1, 1), (8, 26, 999.0, 0, 2, 1, 1),
]
WINDOW_ENDS = [25, 60, 330]
TYPES = {"ts": "TIMESTAMP", "window_end": "TIMESTAMP", "value": "DOUBLE", "max_5m": "DOUBLE",
         "avg_5m": "DOUBLE"}  # everything else is an integer id


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def run_fragment(fragment, tables: dict[str, list[tuple]]) -> list[tuple]:
    """The fragment's rows over input tables filled as the store fills them (a windowed
    stream's rows with their pane, and the partial aggregates of its pane tables), evaluated
    as the store evaluates them (its stacks extended first)."""
    store = ColumnarStore(":memory:")
    schema = store.create("f")
    con = store.con
    for table in fragment.sources:
        columns = ", ".join(f"{c} {TYPES.get(c, 'BIGINT')}" for c in table.columns)
        con.execute(f"CREATE TABLE {ROWS} ({columns})")
        if tables[table.table]:
            marks = ", ".join("?" for _ in table.columns)
            con.executemany(f"INSERT INTO {ROWS} VALUES ({marks})", tables[table.table])
        con.execute(f"CREATE TABLE {schema}.{table.table} AS {table.stored_sql()}")
        for pane in fragment.panes:
            if pane.source.table == table.table:
                con.execute(f"CREATE TABLE {schema}.{pane.table.table} AS {pane.sql}")
        con.execute(f"DROP TABLE {ROWS}")
    rows = store.evaluate("f", fragment.sql, [at(s) for s in WINDOW_ENDS], fragment.stacks)
    return sorted(tuple(r.values()) for r in rows.to_pylist())


def stream_rows(keep=lambda r: True):
    return [(i, at(s), v, p, plug, hh, h) for i, s, v, p, plug, hh, h in READINGS if keep((i, s, v, p))]


Q1_EXPECTED = sorted([
    # window_end 25 s: plug 1 saw 10 and 100 (max 100, one above 90); plug 2 saw 5 (one above 4.5)
    (1, 1, 1, at(25), 1), (1, 1, 2, at(25), 1),
    # window_end 60 s: plug 1 saw 10, 100, 95, 50 (two above 90); plug 2 saw 5, 5 (both above 4.5)
    (1, 1, 1, at(60), 2), (1, 1, 2, at(60), 2),
    # window_end 330 s: [30 s, 330 s) holds 95 and 50 of plug 1 (one above 85.5); plug 2 nothing
    (1, 1, 1, at(330), 1),
])


@pytest.mark.parametrize("placement, table, keep", [
    ("duckdb", "in_window_1", lambda r: True),
    ("select_1=spark,select_2=spark,aggregate_1=duckdb,join_1=duckdb,select_3=duckdb,"
     "aggregate_2=duckdb", "in_select_1", lambda r: r[3] == 1),
])
def test_q1_fragment_gives_the_hand_computed_counts(catalog, profile, placement, table, keep):
    result = optimize(query_sql("q1"), catalog, profile, 1000, placement=placement)
    [fragment] = fragments(result.plan)
    assert [t.table for t in fragment.sources] == [table]  # the CTE read twice moves once
    assert run_fragment(fragment, {table: stream_rows(keep)}) == Q1_EXPECTED


def test_q3_fragment_reads_a_spark_aggregate_tagged_with_window_end(catalog, profile):
    placement = ("select_1=spark,aggregate_1=spark,select_2=spark,aggregate_2=duckdb,"
                 "join_1=duckdb,project_1=duckdb")
    result = optimize(query_sql("q3"), catalog, profile, 1000, placement=placement)
    [fragment] = fragments(result.plan)
    assert {t.table: t.window_size for t in fragment.sources} == {"in_aggregate_1": None,
                                                                 "in_select_2": 60}
    five_minutes = [(1, 1, 1, at(60), 100.0, 63.75), (1, 1, 2, at(60), 5.0, 5.0)]
    rows = run_fragment(fragment, {
        "in_aggregate_1": five_minutes,
        "in_select_2": stream_rows(lambda r: r[3] == 1),
    })
    # window_end 60 s: the last minute holds the same loads as the last five minutes.
    assert rows == [
        (1, 1, 1, at(60), 100.0, 100.0, 63.75, 63.75, 0.0, 0.0),
        (1, 1, 2, at(60), 5.0, 5.0, 5.0, 5.0, 0.0, 0.0),
    ]


def test_aggregates_over_a_windows_rows_combine_partials_per_pane(catalog, profile):
    result = optimize(query_sql("q3"), catalog, profile, 1000, placement="duckdb")
    [fragment] = fragments(result.plan)
    # Both windowed aggregates read their panes; no reading is expanded to its windows.
    assert [p.table.table for p in fragment.panes] == ["panes_aggregate_1", "panes_aggregate_2"]
    assert "_windows" not in fragment.sql
    # window_end 60 s: plug 1's loads 10, 100, 95, 50; plug 2's 5 and 5 (both windows).
    rows = run_fragment(fragment, {"in_window_1": stream_rows(), "in_window_2": stream_rows()})
    assert (1, 1, 1, at(60), 100.0, 100.0, 63.75, 63.75, 0.0, 0.0) in rows
    assert (1, 1, 2, at(60), 5.0, 5.0, 5.0, 5.0, 0.0, 0.0) in rows


def test_a_median_has_no_partials_and_reads_the_windows_rows(catalog, profile):
    sql = ("SELECT house_id, household_id, plug_id, window_end, MEDIAN(value) AS m "
           "FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES) WHERE property = 1 "
           "GROUP BY house_id, household_id, plug_id, window_end")
    [fragment] = fragments(optimize(sql, catalog, profile, 1000, placement="duckdb").plan)
    assert fragment.panes == ()
    assert run_fragment(fragment, {"in_window_1": stream_rows()}) == sorted([
        (1, 1, 1, at(25), 55.0), (1, 1, 2, at(25), 5.0),  # 10, 100; 5
        (1, 1, 1, at(60), 72.5), (1, 1, 2, at(60), 5.0),  # 10, 100, 95, 50; 5, 5
        (1, 1, 1, at(330), 72.5),  # [30 s, 330 s): 95, 50
    ])


@pytest.mark.parametrize("name", ["q1", "q2", "q3", "q4", "q5", "q6", "j5", "correlated"])
def test_fragment_sql_is_duckdb_sql_that_sqlglot_transpiles(catalog, profile, name):
    for placement in ("duckdb", "auto"):
        result = optimize(query_sql(name), catalog, profile, 20_000, placement=placement)
        for fragment in fragments(result.plan):
            for dialect in ("spark", "postgres"):
                assert sqlglot.transpile(fragment.sql, read="duckdb", write=dialect)
            assert run_fragment(fragment, defaultdict(list)) == []  # DuckDB runs it


@pytest.mark.parametrize("name", ["q1", "q2", "correlated", "correlated_count"])
def test_a_correlated_aggregate_reads_the_rows_of_each_pane_as_one_list(catalog, profile, name):
    result = optimize(query_sql(name), catalog, profile, 20_000, placement="duckdb")
    [fragment] = fragments(result.plan)
    assert any(LISTS in p.table.columns for p in fragment.panes)
    assert "_windows" not in fragment.sql  # no row is expanded to the windows that hold it


@pytest.mark.parametrize("placement, kept", [
    ("auto", set()),  # Q1's DB-op reads the readings through their lists per pane only
    ("duckdb", set()),
    # Spark's join after the MIG reads the readings back, expanded to their windows.
    ("select_1=spark,select_2=spark,aggregate_1=duckdb,join_1=spark,select_3=spark,"
     "aggregate_2=spark", {"in_select_1"}),
])
def test_the_store_keeps_the_rows_that_something_reads_as_rows(catalog, profile, placement,
                                                                 kept):
    physical = optimize(query_sql("q1"), catalog, profile, 20_000, placement=placement).plan
    assert rows_kept(deploy(physical), fragments(physical)) == kept

"""The reference evaluator against hand-worked windows, and the DuckDB fragments of every
placement against the reference (DuckDB only: Spark's side is played by the reference)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import polars as pl
import pytest

from benchmarking import reference
from columnar.fragment_sql import fragments
from columnar.store import ColumnarStore
from optimizer import optimize
from optimizer.logical import Project, Select, Window
from optimizer.physical import evaluate
from tests.conftest import query_sql
from tests.test_fragment_sql import Q1_EXPECTED, READINGS, T0, at
from workload.smart_plugs import SmartPlugs

SMALL = SmartPlugs(rate=3, houses=2, households_per_house=2, plugs=6)
COLUMNS = ["id", "ts", "value", "property", "plug_id", "household_id", "house_id"]


def hand_stream() -> pl.DataFrame:
    rows = [(i, at(s), v, p, plug, hh, h) for i, s, v, p, plug, hh, h in READINGS]
    return pl.DataFrame(rows, schema=COLUMNS, orient="row").with_columns(pl.col("ts").cast(pl.Datetime("us")))


def test_window_ends_run_from_after_the_first_row_to_at_or_after_the_last():
    # Rows at 10 s ... 40 s with a 1 s slide: ends 11 s ... 40 s.
    first, last = reference.window_ends({"plugs": hand_stream()}, 1.0)
    assert (first, last) == (int(at(11).timestamp() * 1e6), int(at(40).timestamp() * 1e6))


def test_reference_q1_on_hand_worked_windows(catalog, profile):
    plan = optimize(query_sql("q1"), catalog, profile).logical
    rows = reference.evaluate(plan.root, {"plugs": hand_stream()})
    # At 25 s as in the fragment test; at 40 s plug 1 has 10, 100, 95 (40 s is outside) and
    # plug 2 has 5, 5: two readings above 90 % of the maximum each.
    wanted = {at(25): [r for r in Q1_EXPECTED if r[3] == at(25)],
              at(40): [(1, 1, 1, at(40), 2), (1, 1, 2, at(40), 2)]}
    got = {end: [tuple(r) for r in rows.filter(pl.col("window_end") == end).iter_rows()]
           for end in wanted}
    assert got == wanted
    # window_end 40 s, at the last row, is the last one evaluated.
    assert rows["window_end"].max() == at(40)


def test_reference_window_membership_is_half_open(catalog, profile):
    sql = ("SELECT plug_id, window_end, COUNT(*) AS n FROM HOP(plugs, ts, INTERVAL '10' SECOND, "
           "INTERVAL '20' SECONDS) WHERE property = 1 GROUP BY plug_id")
    plan = optimize(sql, catalog, profile).logical
    rows = reference.evaluate(plan.root, {"plugs": hand_stream()})
    counts = {(r["plug_id"], r["window_end"]): r["n"] for r in rows.iter_rows(named=True)}
    # Plug 1 loads at 10, 20, 30, 40 s. [0, 20) holds 10; [10, 30) holds 10, 20; [20, 40) 20, 30.
    assert counts[(1, at(20))] == 1 and counts[(1, at(30))] == 2 and counts[(1, at(40))] == 2
    assert rows["window_end"].min() == at(20) and rows["window_end"].max() == at(40)


def stream_rows(node, streams: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """What Spark hands the MIG for a windowed-stream input: rows after its stateless operators."""
    if isinstance(node, Window):
        return streams[node.stream]
    rows = stream_rows(node.input, streams)
    if isinstance(node, Select):
        return rows.filter(pl.sql_expr(node.predicate.sql()))
    assert isinstance(node, Project)
    return rows.select([pl.sql_expr(e.sql()).alias(n) for n, e in node.expressions
                        if n not in ("window_start", "window_end")])


@pytest.mark.integration
@pytest.mark.parametrize("name", ["q1", "q2", "q3", "q4", "q5", "q6", "correlated",
                                  "correlated_count"])
def test_duckdb_fragments_of_every_placement_match_the_reference(catalog, profile, name):
    # 7 minutes at 3 tuples/s from 6 plugs in 2 houses: the 5-minute windows fill and slide,
    # and every plug reports a load every 4 s.
    stream = pl.from_arrow(SMALL.between(0, 420))
    streams = {"plugs": stream}
    optimization = optimize(query_sql(name), catalog, profile, 20)
    plan = optimization.logical
    first, last = reference.window_ends(streams, plan.root.slide)
    ends = [T0.__class__.fromtimestamp(0) + timedelta(microseconds=us)
            for us in range(first, last + 1, int(plan.root.slide * 1e6))]
    truth = reference.Evaluator(streams)
    # Every placement on the two engines (q6's 512 too); placements share most of their DB-ops,
    # so each distinct fragment (its SQL over its inputs) is evaluated once. A complete
    # placement's physical plan is phase two's evaluation of it (what `--placement` gives).
    distinct = {}
    for engines in itertools.product(("spark", "duckdb"), repeat=len(plan)):
        placement = {plan.ids[op]: e for op, e in zip(plan.operators, engines, strict=True)}
        physical = evaluate(plan, placement, optimization.model)
        for fragment in fragments(physical):
            distinct.setdefault((fragment.sql, tuple(fragment.sources), tuple(fragment.panes)),
                                (physical, fragment))
    for physical, fragment in distinct.values():
        store = ColumnarStore(":memory:")
        store.create(name)
        for table in fragment.sources:
            node = physical.logical.by_id[table.table.removeprefix("in_")]
            rows = (truth.relation(node) if table.window_size is None
                    else stream_rows(node, streams)).select(table.columns)
            store.append_input(name, table, rows.to_arrow(), 0, fragment.panes)
        got = pl.from_arrow(store.evaluate(name, fragment.sql, ends, fragment.stacks))
        root = physical.logical.by_id[fragment.members[-1]]
        assert_same_rows(got.select(root.columns), truth.result(root))
        store.close()
    assert distinct


def same_rows(got: pl.DataFrame, want: pl.DataFrame) -> bool:
    try:
        assert_same_rows(got, want)
    except AssertionError:
        return False
    return True


def assert_same_rows(got: pl.DataFrame, want: pl.DataFrame) -> None:
    got, want = got.sort(got.columns), want.sort(want.columns)
    assert got.height == want.height
    for column in want.columns:
        a, b = got[column], want[column]
        if a.dtype.is_float() or b.dtype.is_float():
            assert ((a - b).abs() <= 1e-9 * (1 + b.abs())).all(), column
        else:
            assert a.cast(b.dtype).equals(b), column

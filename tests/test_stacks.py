"""Windows assembled from two stacks of pane partials (columnar/stacks.py) give the reference's
rows, batch by batch as a run evaluates them: across block boundaries, with groups that come
and go, NULL values, a purge one batch behind, batches evaluated again and stacks rebuilt.
Windows here are short, so the stacks are kept from one pane per window on (a run keeps them
from ``STACKED_FROM``)."""

from __future__ import annotations

import random
from datetime import timedelta

import polars as pl
import pytest

from benchmarking import reference
from columnar import fragment_sql
from columnar.fragment_sql import fragments
from columnar.stacks import Stacks
from columnar.store import ColumnarStore
from optimizer import optimize
from tests.test_fragment_sql import T0
from tests.test_reference import COLUMNS, assert_same_rows

SQL = ("SELECT plug_id, window_end, SUM(value) AS s, COUNT(*) AS n, COUNT(value) AS nv, "
       "AVG(value) AS a, MIN(value) AS lo, MAX(value) AS hi "
       "FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '{size}' SECONDS) "
       "WHERE property = 1 GROUP BY plug_id")


@pytest.fixture(autouse=True)
def stacked(monkeypatch):
    monkeypatch.setattr(fragment_sql, "STACKED_FROM", 1)


def stream(seconds: int, seed: int) -> pl.DataFrame:
    """Readings of five plugs that report now and then (a plug may be silent for a whole
    block), some loads NULL, some rows of another property; timestamps within the second."""
    draw, rows = random.Random(seed), []
    for second in range(seconds):
        for plug in range(5):
            if draw.random() < (0.9 if plug < 2 else 0.2 if plug < 4 else 0.02):
                for _ in range(draw.randint(1, 3)):
                    value = None if draw.random() < 0.1 else round(draw.uniform(-5, 100), 3)
                    rows.append((len(rows), T0 + timedelta(seconds=second + draw.random()),
                                 value, 1 if draw.random() < 0.8 else 0, plug, 1, 1))
    frame = pl.DataFrame(rows, schema=COLUMNS, orient="row")
    return frame.with_columns(pl.col("ts").cast(pl.Datetime("us")),
                              pl.col("value").cast(pl.Float64))


@pytest.mark.parametrize(("size", "seed"), [(10, 1), (7, 2), (1, 3), (30, 4)])
def test_windows_from_the_stacks_match_the_reference_batch_by_batch(catalog, profile, size,
                                                                    seed):
    plan = optimize(SQL.format(size=size), catalog, profile, placement="duckdb")
    assert fragments(plan.plan)[0].stacks, "the aggregate reads its windows from stacks"
    assert_batches_match_the_reference(plan, stream(100, seed), seed)


def assert_batches_match_the_reference(plan, rows: pl.DataFrame, seed: int) -> None:
    """Evaluate the plan's one DB-op as a run does, batch by batch, and compare every window
    with the reference evaluator's. A batch brings the rows up to a few seconds past the
    window_ends it completes, to a millisecond (1 to 3, sometimes none), so a pane's rows may come in two
    batches; every fifth batch is evaluated twice, as after a restart; the store purges one
    batch behind."""
    [fragment] = fragments(plan.plan)
    first, last = reference.window_ends({"plugs": rows}, 1.0)
    ends = [T0.__class__.fromtimestamp(0) + timedelta(microseconds=us)
            for us in range(first, last + 1, 1_000_000)]
    store = ColumnarStore(":memory:")
    store.create("s")
    draw, got, batch, bound = random.Random(seed), [], 0, T0
    while ends:
        now = ends[:draw.choice([0, 1, 1, 1, 2, 3])]
        later = max(bound, (now[-1] if now else ends[0])
                    + timedelta(milliseconds=draw.randint(0, 3000)))
        arrived = rows.filter((pl.col("ts") >= bound) & (pl.col("ts") < later))
        bound = later
        store.append_input("s", fragment.sources[0], arrived.to_arrow(), batch, fragment.panes)
        if now:
            for _ in range(2 if batch % 5 == 4 else 1):
                result = store.evaluate("s", fragment.sql, now, fragment.stacks)
            got.append(pl.from_arrow(result))
            store.purge("s", [*fragment.sources, *(p.table for p in fragment.panes)], now[0])
            ends = ends[len(now):]
        batch += 1
    want = reference.evaluate(plan.logical.root, {"plugs": rows})
    assert_same_rows(pl.concat(got).select(want.columns), want)


def test_a_rebuilt_pane_table_rebuilds_its_stacks(catalog, profile):
    rows = stream(40, 5)
    plan = optimize(SQL.format(size=10), catalog, profile, placement="duckdb")
    [fragment] = fragments(plan.plan)
    [pane] = fragment.panes
    store = ColumnarStore(":memory:")
    store.create("s")
    end = T0 + timedelta(seconds=30)
    store.append_input("s", fragment.sources[0], rows.to_arrow(), 0, fragment.panes)
    before = store.evaluate("s", fragment.sql, [end], fragment.stacks)
    store.con.execute(f"UPDATE q_s.{pane.stacks.back} SET _s = -1")  # stale stacks
    store.rebuild_panes("s", pane)
    assert_same_rows(pl.from_arrow(store.evaluate("s", fragment.sql, [end], fragment.stacks)),
                     pl.from_arrow(before))


def test_the_stacks_read_each_window_from_a_prefix_and_a_suffix():
    stacks = Stacks("panes_a", ("k",), (("_x", "SUM"),), width=10, slice_us=1_000_000)
    # Windows ending at panes 23 and 24 read block 2's prefixes and block 1's suffixes from 14
    # and 15; one ending at 29 is block 2 alone, one at 30 begins block 3's prefix.
    assert stacks.fronts([23, 24, 29, 30]) == [(1, 14), (2, 21)]
    assert stacks.span(None, [23, 24]) == (20, 24)  # the back from block 2's first pane
    assert stacks.span(22, [23, 24]) == (23, 24)  # continued
    assert stacks.span(24, [23, 24]) is None  # evaluated again: stacked already
    assert stacks.span(12, [23]) == (20, 23)  # an old block's back does not seed this one

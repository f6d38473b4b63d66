"""Exact pruning of a correlated aggregate (columnar/fragment_sql.py, ``_pruned``): the lists of
Q1's rows keep only readings above 90 % of their own pane's maximum, and the windows still give
the reference's rows, with panes whose rows come in two batches, negative and NULL loads.
Ordered lists (``_ordered_count``): a count under one comparison, found from the chunks' minima,
gives the reference's rows for every comparison, with ties across chunk edges; the cost model
prices as ordered exactly the counts that DuckDB finds by order."""

from __future__ import annotations

import random
from datetime import timedelta

import polars as pl
import pytest

from columnar.fragment_sql import MINIMA, fragments
from optimizer import optimize
from tests.conftest import query_sql
from tests.test_fragment_sql import T0
from tests.test_reference import COLUMNS
from tests.test_stacks import assert_batches_match_the_reference, stream


def ordered(plan) -> bool:
    """Are the fragment's lists ordered, and does the cost model say so too?"""
    [fragment] = fragments(plan.plan)
    found = any(MINIMA in p.sql for p in fragment.panes)
    assert bool(plan.model.ordered) == found, "the cost model prices the lists otherwise"
    return found


Q1 = query_sql("q1").replace("INTERVAL '5' MINUTES", "INTERVAL '10' SECONDS")


@pytest.mark.parametrize("threshold", ["l.value > 0.9 * p.max_load",
                                       "l.value >= p.max_load - 20",
                                       "0.5 * p.max_load + 3 < l.value"])
def test_pruned_lists_give_the_reference_s_windows(catalog, profile, threshold):
    sql = Q1.replace("l.value > 0.9 * p.max_load", threshold)
    plan = optimize(sql, catalog, profile, placement="duckdb")
    [fragment] = fragments(plan.plan)
    assert any("_bound" in p.sql for p in fragment.panes), "the lists are pruned"
    assert ordered(plan)
    assert_batches_match_the_reference(plan, stream(60, 7), 7)


@pytest.mark.parametrize("threshold", ["l.value > 0.9 * p.avg_load",  # not a maximum
                                       "l.value > 100 - p.max_load",  # falls as the max rises
                                       "l.value > -0.9 * p.max_load"])
def test_a_threshold_that_a_pane_cannot_bound_prunes_nothing(catalog, profile, threshold):
    sql = Q1.replace("l.value > 0.9 * p.max_load", threshold).replace(
        "MAX(value) AS max_load", "MAX(value) AS max_load, AVG(value) AS avg_load")
    plan = optimize(sql, catalog, profile, placement="duckdb")
    [fragment] = fragments(plan.plan)
    assert not any("_bound" in p.sql for p in fragment.panes)
    assert ordered(plan)
    assert_batches_match_the_reference(plan, stream(60, 8), 8)


Q2 = query_sql("q2").replace("INTERVAL '5' MINUTES", "INTERVAL '4' SECONDS")


def crowded(seconds: int, seed: int) -> pl.DataFrame:
    """Three plugs with 0 to 150 readings a second each, loads from a few values (ties at
    every chunk's edge), some NULL: a (plug, pane) list holds up to 150 values, 13 chunks."""
    draw, rows = random.Random(seed), []
    for second in range(seconds):
        for plug in range(3):
            for _ in range(draw.choice([0, 1, 9, 40, 150])):
                value = None if draw.random() < 0.05 else float(draw.randint(0, 12))
                rows.append((len(rows), T0 + timedelta(seconds=second + draw.random()),
                             value, 1, plug, 1, 1))
    frame = pl.DataFrame(rows, schema=COLUMNS, orient="row")
    return frame.with_columns(pl.col("ts").cast(pl.Datetime("us")),
                              pl.col("value").cast(pl.Float64))


@pytest.mark.parametrize("comparison", ["l.value > p.avg_load", "l.value >= p.avg_load",
                                        "l.value < p.avg_load", "l.value <= p.avg_load",
                                        "p.avg_load < l.value", "p.avg_load >= l.value",
                                        "l.value > p.avg_load + 1",
                                        "l.value >= 2 * p.avg_load - 3"])
def test_ordered_lists_count_every_comparison_as_the_reference(catalog, profile, comparison):
    sql = Q2.replace("l.value > p.avg_load", comparison)
    plan = optimize(sql, catalog, profile, placement="duckdb")
    assert ordered(plan)
    assert_batches_match_the_reference(plan, crowded(40, 11), 11)


def test_pruned_lists_are_ordered_too(catalog, profile):
    plan = optimize(Q1, catalog, profile, placement="duckdb")
    [fragment] = fragments(plan.plan)
    assert any(MINIMA in p.sql and "_bound" in p.sql for p in fragment.panes)
    assert ordered(plan)
    assert_batches_match_the_reference(plan, crowded(40, 12), 12)


@pytest.mark.parametrize("condition", ["l.value > p.avg_load AND l.value < p.avg_load + 3",
                                       "l.value - p.avg_load > 0 OR l.value IS NULL"])
def test_lists_under_other_conditions_are_not_ordered(catalog, profile, condition):
    sql = Q2.replace("WHERE l.value > p.avg_load", f"WHERE {condition}")
    plan = optimize(sql, catalog, profile, placement="duckdb")
    assert not ordered(plan)
    assert_batches_match_the_reference(plan, crowded(20, 13), 13)

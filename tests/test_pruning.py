"""Exact pruning of a correlated aggregate (columnar/fragment_sql.py, ``_pruned``): the lists of
Q1's rows keep only readings above 90 % of their own pane's maximum, and the windows still give
the reference's rows, with panes whose rows come in two batches, negative and NULL loads."""

from __future__ import annotations

import pytest

from columnar.fragment_sql import fragments
from optimizer import optimize
from tests.conftest import query_sql
from tests.test_stacks import assert_batches_match_the_reference, stream

Q1 = query_sql("q1").replace("INTERVAL '5' MINUTES", "INTERVAL '10' SECONDS")


@pytest.mark.parametrize("threshold", ["l.value > 0.9 * p.max_load",
                                       "l.value >= p.max_load - 20",
                                       "0.5 * p.max_load + 3 < l.value"])
def test_pruned_lists_give_the_reference_s_windows(catalog, profile, threshold):
    sql = Q1.replace("l.value > 0.9 * p.max_load", threshold)
    plan = optimize(sql, catalog, profile, placement="duckdb")
    [fragment] = fragments(plan.plan)
    assert any("_bound" in p.sql for p in fragment.panes), "the lists are pruned"
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
    assert_batches_match_the_reference(plan, stream(60, 8), 8)

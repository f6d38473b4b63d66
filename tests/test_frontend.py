"""The SQL front-end builds the logical plans of Ji's queries (Fig. 6.5, Table 6.1)."""

from __future__ import annotations

import pytest

from optimizer.frontend import parse_query
from optimizer.logical import Aggregate, Join, Project, Select, Window, post_order, r2r_operators
from tests.conftest import query_sql


def kinds(root):
    return [n.kind for n in post_order(root)]


def test_q1_is_the_window_joined_with_its_own_aggregate(catalog):
    # Ji lines 1924-1930: S = window; M = max per group of S; J = S join M; C = count(sigma(J)).
    root = parse_query(query_sql("q1"), catalog)
    assert isinstance(root, Aggregate) and root.aggregates[0].func == "COUNT"
    high = root.input
    assert isinstance(high, Select) and high.predicate.sql() == "value > 0.9 * max_load"
    join = high.input
    assert isinstance(join, Join)
    assert set(join.keys) == {("house_id", "house_id"), ("household_id", "household_id"),
                              ("plug_id", "plug_id")}
    left, right = join.left, join.right
    assert isinstance(left, Select) and isinstance(left.input, Window)
    assert isinstance(right, Aggregate) and right.aggregates[0].func == "MAX"
    assert right.group_by == ("house_id", "household_id", "plug_id", "window_end")
    # The CTE referenced twice becomes two subtrees: the plan is a tree.
    assert left is not right.input and left.input is not right.input.input
    w = left.input
    assert (w.stream, w.size, w.slide) == ("plugs", 300, 1)
    assert root.columns == ("house_id", "household_id", "plug_id", "window_end", "high_loads")


@pytest.mark.parametrize("name, r2r", [("q1", 6), ("q2", 6), ("q3", 6), ("q4", 6), ("q5", 3),
                                       ("q6", 9), ("j2", 6), ("j5", 15), ("j8", 24)])
def test_r2r_operator_counts(catalog, name, r2r):
    # J2, J5, J8 have 6, 15 and 24 R2R operators after phase one in Ji's Table 6.1.
    assert len(r2r_operators(parse_query(query_sql(name), catalog))) == r2r


def test_q2_uses_incremental_average_and_q1_a_holistic_maximum(catalog):
    q1 = [n for n in post_order(parse_query(query_sql("q1"), catalog)) if isinstance(n, Aggregate)]
    q2 = [n for n in post_order(parse_query(query_sql("q2"), catalog)) if isinstance(n, Aggregate)]
    assert [a.incremental for a in q1] == [False, True]
    assert [a.incremental for a in q2] == [True, True]


def test_q5_nests_aggregates_per_plug_then_per_household(catalog):
    root = parse_query(query_sql("q5"), catalog)
    assert kinds(root) == ["window", "select", "aggregate", "aggregate"]
    assert root.group_by == ("house_id", "household_id", "window_end")
    assert root.input.aggregates[0].func == "SUM"


def test_tumble_window_and_interval_forms(catalog):
    root = parse_query("SELECT plug_id, window_end, COUNT(*) AS n "
                       "FROM TUMBLE(plugs, ts, INTERVAL '1 minute') GROUP BY plug_id", catalog)
    window = root.input
    assert isinstance(window, Window) and window.size == window.slide == 60
    assert root.group_by == ("plug_id", "window_end")  # window_end is implicit


def test_computed_outputs_become_a_projection_that_keeps_window_end(catalog):
    root = parse_query("SELECT plug_id, MAX(value) - MIN(value) AS spread "
                       "FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS) "
                       "GROUP BY plug_id", catalog)
    assert isinstance(root, Project)
    assert root.columns == ("plug_id", "spread", "window_end")
    assert [a.func for a in root.input.aggregates] == ["MAX", "MIN"]


def test_having_is_a_selection_over_the_aggregate(catalog):
    root = parse_query("SELECT plug_id, AVG(value) AS a FROM HOP(plugs, ts, INTERVAL '1' SECOND, "
                       "INTERVAL '1' MINUTE) GROUP BY plug_id HAVING AVG(value) > 10", catalog)
    assert isinstance(root, Project) and isinstance(root.input, Select)
    assert root.input.predicate.sql() == "a > 10"


def test_single_input_conjuncts_are_pushed_below_the_join(catalog):
    sql = """SELECT a.plug_id, a.window_end, a.value, b.value AS other
             FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE) AS a
             JOIN (SELECT plug_id, window_end, AVG(value) AS value
                   FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
                   GROUP BY plug_id) AS b
               ON a.plug_id = b.plug_id AND a.value > b.value AND a.property = 1"""
    # b.value clashes with a.value: a projection below the join renames it b_value.
    clashing = parse_query(sql, catalog)
    assert clashing.columns[:4] == ("plug_id", "window_end", "value", "other")
    assert clashing.input.condition.sql() == "value > b_value"
    assert dict(clashing.input.right.expressions)["b_value"].sql() == "value"
    root = parse_query(sql.replace("AVG(value) AS value", "AVG(value) AS mean")
                       .replace("b.value AS other", "b.mean").replace("a.value > b.value",
                                                                      "a.value > b.mean"), catalog)
    join = root.input
    assert isinstance(join, Join) and join.keys == (("plug_id", "plug_id"),)
    assert join.condition.sql() == "value > mean"
    assert isinstance(join.left, Select) and join.left.predicate.sql() == "property = 1"
    assert isinstance(root.input.left.input, Window)

"""An aggregate split across the engines (docs/optimizer.md, Phase two): its partials per pane
in Spark's executors, their merge in the driver's DuckDB. Without Spark: what the optimiser
allows and how it prices the crossing; the runs themselves are in the placement matrices
(tests/matrix.py's split class) and tests/test_crash.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from columnar.fragment_sql import fragments
from optimizer import optimize
from optimizer.cost import SPARK, SPLIT
from optimizer.errors import TandemError
from tests.conftest import query_sql

SPLIT_Q5 = "select_1=spark,aggregate_1=split,aggregate_2=duckdb"


def _operator(plan, op_id):
    return next(op for op in plan.operators if op.id == op_id)


def test_a_split_aggregate_is_a_spark_operator_and_a_db_op_that_reads_its_partials(catalog,
                                                                                    profile):
    plan = optimize(query_sql("q5"), catalog, profile, 100_000, placement=SPLIT_Q5).plan
    partial = _operator(plan, "aggregate_1_partial")
    (db_op,) = plan.db_ops
    assert partial.engine == SPARK and partial.lambda_in == pytest.approx(100_000 / 2)
    assert db_op.inputs == ("aggregate_1_partial",) and not plan.by_reference
    # What crosses is a row per group with a tuple in a pane: Q5's 2,125 plugs, 1-s panes,
    # whatever the rate; by value the selected rows cross.
    faster = optimize(query_sql("q5"), catalog, profile, 1_000_000, placement=SPLIT_Q5).plan
    assert db_op.lambda_in == faster.db_ops[0].lambda_in <= 2_125
    by_value = optimize(query_sql("q5"), catalog, profile, 1_000_000,
                        placement="select_1=spark,aggregate_1=duckdb,aggregate_2=duckdb").plan
    assert by_value.db_ops[0].lambda_in == pytest.approx(faster.operators[1].lambda_out)


def test_the_partials_are_the_same_query_in_each_dialect(catalog, profile):
    plan = optimize(query_sql("q5"), catalog, profile, placement=SPLIT_Q5).plan
    (pane,) = fragments(plan)[0].panes
    assert pane.spark_sql is not None and "FROM {rows}" in pane.spark_sql
    # DuckDB's epoch_us and //, Spark's unix_micros and DIV, over the same columns and groups.
    assert pane.spark_sql.replace("UNIX_MICROS", "EPOCH_US").replace(" DIV ", " // ") \
        .replace("{rows}", "__input") == pane.sql
    duckdb = optimize(query_sql("q5"), catalog, profile,
                      placement=SPLIT_Q5.replace(SPLIT, "duckdb")).plan
    assert fragments(duckdb)[0].panes[0].spark_sql is None


@pytest.mark.parametrize("placement, why", [
    ("select_1=duckdb,aggregate_1=split,aggregate_2=duckdb", "not those"),  # rows in DuckDB
    ("select_1=spark,aggregate_1=spark,aggregate_2=split", "cannot be split"),  # windowed rows
])
def test_what_cannot_be_split_is_refused_in_one_line(catalog, profile, placement, why):
    with pytest.raises(TandemError, match=why) as err:
        optimize(query_sql("q5"), catalog, profile, placement=placement)
    assert "\n" not in str(err.value)


def test_a_profile_without_spark_partials_never_splits(catalog, profile):
    # A profile calibrated before the split existed does not price it: no plan splits.
    functions = {e: {f: c for f, c in found.items() if not (e == SPARK and f == "partial")}
                 for e, found in profile.functions.items()}
    older = replace(profile, functions=functions)
    for rate in (1_000, 1_000_000):
        result = optimize(query_sql("q5"), catalog, older, rate, exhaustive_check=True)
        assert SPLIT not in result.plan.placement.values()
        assert result.plan.placement == result.exhaustive_placement


def test_placement_split_splits_what_it_can_and_keeps_the_rest_in_duckdb(catalog, profile):
    # Q3: both aggregates split, each over Spark's selection; their join in the driver's DuckDB.
    plan = optimize(query_sql("q3"), catalog, profile, placement="split").plan
    assert plan.placement == {"select_1": SPARK, "aggregate_1": SPLIT, "select_2": SPARK,
                              "aggregate_2": SPLIT, "join_1": "duckdb", "project_1": "duckdb"}
    holistic = ("SELECT plug_id, window_end, MEDIAN(value) AS m "
                "FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '10' SECOND) "
                "GROUP BY plug_id, window_end")
    with pytest.raises(TandemError, match="no aggregate of this query can be split"):
        optimize(holistic, catalog, profile, placement="split")


"""How a placement deploys: which operators stream in Spark, which relations cross the MIG into
DuckDB, and the steps after it (DB-ops and Spark operators above a DB-op)."""

from __future__ import annotations

from optimizer import optimize
from optimizer.deployment import deploy
from optimizer.logical import stateless_rows
from tests.conftest import query_sql


def deployed(name, catalog, profile, placement):
    plan = optimize(query_sql(name), catalog, profile, placement=placement).plan
    deployment = deploy(plan)
    ids = plan.logical.ids
    crossings = sorted(deployment.relation_id(n) for n in deployment.crossings)
    steps = [s.db_op or ids[s.node] for s in deployment.steps]
    streaming = sorted(ids[n] for n in deployment.streaming)
    return deployment, crossings, steps, streaming


def test_pure_duckdb_moves_the_window_once_though_q1_reads_it_twice(catalog, profile):
    _, crossings, steps, streaming = deployed("q1", catalog, profile, "duckdb")
    assert crossings == ["window_1"] and steps == ["dbop_1"]
    assert streaming == ["window_1", "window_2"]


def test_pure_spark_hands_over_only_the_root(catalog, profile):
    deployment, crossings, steps, _ = deployed("q5", catalog, profile, "spark")
    assert crossings == ["aggregate_2"] and steps == []
    assert deployment.crossings[0] is deployment.physical.logical.root


def test_spark_operators_above_a_db_op_run_after_it(catalog, profile):
    placement = ("select_1=spark,aggregate_1=duckdb,select_2=spark,aggregate_2=duckdb,"
                 "join_1=spark,project_1=spark")
    _, crossings, steps, streaming = deployed("q3", catalog, profile, placement)
    assert crossings == ["select_1", "select_2"]
    assert steps == ["dbop_1", "dbop_2", "join_1", "project_1"]
    assert streaming == ["select_1", "select_2", "window_1", "window_2"]


def test_a_db_op_between_spark_operators_splits_the_plan(catalog, profile):
    # Q1: the peak in DuckDB between Spark's selections and Spark's join and count.
    placement = ("select_1=spark,select_2=spark,aggregate_1=duckdb,join_1=spark,"
                 "select_3=spark,aggregate_2=spark")
    _, crossings, steps, streaming = deployed("q1", catalog, profile, placement)
    # Both selections compute one relation: it crosses once, for the DB-op and the join.
    assert crossings == ["select_1"]
    assert steps == ["dbop_1", "join_1", "select_3", "aggregate_2"]
    assert "join_1" not in streaming


def test_a_stateless_crossing_is_its_predicates_and_columns_over_the_stream(catalog, profile):
    sql = ("WITH p AS (SELECT plug_id, window_end, value * 2 AS double_value FROM "
           "HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '10' SECOND) WHERE property = 1) "
           "SELECT plug_id, window_end, MAX(double_value) AS m FROM p WHERE double_value > 3 "
           "GROUP BY plug_id, window_end")
    plan = optimize(sql, catalog, profile, placement="duckdb").plan
    (crossing,) = [n for n in plan.logical.operators if n.kind == "aggregate"][0].inputs
    predicates, columns = stateless_rows(crossing)
    # The projection is substituted into the selection above it; the window's time column
    # stays, for the windows above.
    assert [p.sql() for p in predicates] == ["property = 1", "value * 2 > 3"]
    assert {n: e.sql() for n, e in columns.items()} == {"plug_id": "plug_id", "ts": "ts",
                                                        "double_value": "value * 2"}


def test_buckets_partition_by_the_keys_every_operator_groups_and_joins_on(catalog, profile):
    from optimizer.keys import partition_keys
    from rowstream.buckets import stored_rows

    def root(name):
        return optimize(query_sql(name), catalog, profile).logical.root

    # Q5 takes the maximum over a household's plugs: a plug alone does not hold a group whole.
    assert partition_keys(root("q5")) == ("house_id", "household_id")
    assert partition_keys(root("q1")) == ("house_id", "household_id", "plug_id")
    predicates, columns = stored_rows(root("q6"))
    assert [p.sql() for p in predicates] == ["property = 1"]  # every window's rows are loads
    assert sorted(columns) == ["house_id", "household_id", "plug_id", "property", "ts", "value"]

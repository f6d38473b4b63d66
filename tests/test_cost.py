"""Hand-computed checks of every equation of the cost model (Ji Eq. 6.1-6.6, Definition 6.1,
Zhu Eq. 4.3/4.5) on round numbers (tests/data/unit_*.toml)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer import optimize
from optimizer.catalog import parse_catalog
from optimizer.cost import CostModel, Objective, PlanCost, better
from optimizer.errors import CatalogError
from optimizer.frontend import parse_query
from optimizer.logical import Aggregate, Join, LogicalPlan, Select, Window, post_order
from optimizer.ordered_lists import counted_by_order
from optimizer.physical import evaluate, uniform
from optimizer.statistics import Statistics

COUNT_BY_K = ("SELECT k, window_end, COUNT(*) AS n "
              "FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS) WHERE v > 0 GROUP BY k")
S_JOIN_T = ("SELECT a.k, a.window_end, COUNT(*) AS n "
            "FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS) AS a "
            "JOIN HOP(t, ts, INTERVAL '1' SECOND, INTERVAL '20' SECONDS) AS b ON a.k = b.k "
            "GROUP BY a.k")


def model_for(sql, catalog, profile):
    plan = LogicalPlan(parse_query(sql, catalog))
    return plan, CostModel(Statistics(catalog), profile)


def node(plan, kind):
    return next(n for n in post_order(plan.root) if isinstance(n, kind))


def test_selection_and_aggregate_sizes(unit_catalog, unit_profile):
    plan, model = model_for(COUNT_BY_K, unit_catalog, unit_profile)
    st_ = model.stats
    window, select, agg = node(plan, Window), node(plan, Select), node(plan, Aggregate)
    # Window: lambda = r = 100, |w| = r * W = 100 * 10 s, one slide per second.
    assert (st_[window].lambda_out, st_[window].cardinality, st_[window].n_slide) == (100, 1000, 1)
    # Eq. 6.1: lambda_out = f * lambda_in with f = 0.5 from the catalog; |w| cascades the same way.
    assert (st_[select].lambda_out, st_[select].cardinality) == (50, 500)
    # Eq. 6.3: lambda_out = n_slide * n_group = 1 * 10 (distinct k).
    assert (st_[agg].lambda_out, st_[agg].cardinality) == (10, 10)


def test_dsps_op_costs_eq_6_4(unit_catalog, unit_profile):
    plan, model = model_for(COUNT_BY_K, unit_catalog, unit_profile)
    # Selection: u = lambda_in * c = 100 * 0.001.
    assert model.dsps(node(plan, Select)).u == pytest.approx(0.1)
    # Incremental aggregate: constant c = 0.001 + (W/beta = 10) * 0.0001; u = 50 * 0.002.
    agg = model.dsps(node(plan, Aggregate))
    assert agg.u == pytest.approx(0.1)
    assert agg.memory == pytest.approx(10 * 10 * 3)  # groups * open windows * 3 columns


def test_holistic_aggregate_cost_grows_with_window_cardinality(unit_catalog, unit_profile):
    plan, model = model_for(COUNT_BY_K.replace("COUNT(*)", "MAX(v)"), unit_catalog, unit_profile)
    # c(|w|) = a + b * n_slide * |w| / lambda: u = 50 * 0.002 + 1 * 500 * 0.0001.
    assert model.dsps(node(plan, Aggregate)).u == pytest.approx(0.15)


def test_join_sizes_eq_6_2_cascade_and_cost(unit_catalog, unit_profile):
    plan, model = model_for(S_JOIN_T, unit_catalog, unit_profile)
    st_ = model.stats
    join, agg = node(plan, Join), node(plan, Aggregate)
    # |w_s| = 100 * 10 = 1000, |w_t| = 50 * 20 = 1000; f = 1 / max(d_s = 10, d_t = 20).
    assert st_.selectivity(join) == pytest.approx(1 / 20)
    # Eq. 6.2: lambda_out = 100 * f * 1000 + 50 * f * 1000 = 5000 + 2500.
    assert st_[join].lambda_out == pytest.approx(7500)
    # Cascaded cardinality: |w_out| = f * |w_L| * |w_R| = 50000; the aggregate then has 10 groups.
    assert st_[join].cardinality == pytest.approx(50_000)
    assert st_[agg].lambda_out == pytest.approx(10)
    # KNV03 hash join: c = 0.001 + 0.0001 * f * |w_other| = 0.006 for both inputs.
    cost = model.dsps(join)
    assert cost.u == pytest.approx(100 * 0.006 + 50 * 0.006)
    # Zhu Eq. 4.3: one state per input, |w_s| + |w_t| tuples of 5 columns (1 byte each here).
    assert cost.memory == pytest.approx((1000 + 1000) * 5)


def test_join_of_a_join_holds_the_intermediate_state_eq_4_5(unit_catalog, unit_profile):
    sql = ("SELECT a.k, a.window_end, a.v, b.x, c.v2 "
           "FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS) AS a "
           "JOIN HOP(t, ts, INTERVAL '1' SECOND, INTERVAL '20' SECONDS) AS b ON a.k = b.k "
           "JOIN (SELECT k AS k2, v AS v2, window_end FROM HOP(s, ts, INTERVAL '1' SECOND, "
           "INTERVAL '10' SECONDS)) AS c ON a.k = c.k2")
    plan, model = model_for(sql, unit_catalog, unit_profile)
    top = next(n for n in post_order(plan.root) if isinstance(n, Join) and isinstance(n.left, Join))
    # The upper join keeps |S_AB| = f * |S_A| * |S_B| = 50000 joined tuples (Eq. 4.5's extra term).
    assert model.stats[top.left].cardinality == pytest.approx(50_000)
    width_ab, width_c = len(top.left.columns), len(top.right.columns)
    assert model.dsps(top).memory == pytest.approx(50_000 * width_ab + 1000 * width_c)


def test_db_op_cost_is_transfer_in_plus_sql_plus_transfer_out(unit_catalog, unit_profile):
    plan, model = model_for(COUNT_BY_K, unit_catalog, unit_profile)
    select, agg = node(plan, Select), node(plan, Aggregate)
    # Both in DuckDB, result into the results table: transfer in 100 * 0.001 + 0.01 per batch;
    # the COUNT's partials per pane kept up to date (the selection applied on the way),
    # 50 * 1e-4 per second and an insert of 0.003 per batch; SQL per window_end 0.01 + 10 panes
    # * 10 keys * 2e-5; no transfer out.
    both = model.db(frozenset({select, agg}), agg, to_sink=True)
    assert both.u == pytest.approx(0.11 + 0.008 + 0.012)
    # Only the selection in DuckDB: each window_end's relation goes back to Spark, every one of
    # its 50 tuples/s in 10 windows (500 * 0.001 + 0.01 per slide).
    first = model.db(frozenset({select}), select)
    assert first.u == pytest.approx(0.11 + 0.01 + 0.51)
    # Non-additive (Ji Sec. 6.1): two operators in DuckDB cost less than the first one alone.
    assert both.u < first.u
    # State: the window of 1000 tuples of 3 stored columns (ts, k, v) plus window_start/_end.
    assert both.memory == pytest.approx(1000 * 5)


def test_by_reference_the_store_keeps_only_the_windows_read_as_rows(unit_catalog, unit_profile):
    duckdb = unit_profile.functions["duckdb"] | {"store": {"per_tuple": 0.0002}}
    profile = dataclasses.replace(unit_profile, functions=unit_profile.functions | {
        "duckdb": duckdb})
    # One file a batch (a batch of four shares its fixed costs, the test below).
    plan = LogicalPlan(parse_query(COUNT_BY_K, unit_catalog))
    model = CostModel(Statistics(unit_catalog), profile, files_per_batch=1)
    select, agg = node(plan, Select), node(plan, Aggregate)
    # The window's rows feed the COUNT's partials only: none moves in or is stored, and no
    # transfer's 0.01 per batch is paid; what a batch costs is the partials' upkeep (0.008, as
    # by value) and the SQL (0.012).
    both = model.db(frozenset({select, agg}), agg, to_sink=True, by_reference=True)
    assert both.u == pytest.approx(0.008 + 0.012)
    # A relation Spark computes still crosses by value: the selection's 50 tuples/s.
    assert model.db(frozenset({agg}), agg, to_sink=True, by_reference=True).u == \
        pytest.approx(50 * 0.001 + 0.01 + 0.008 + 0.012)
    # A MEDIAN reads the window's rows at every slide: its 100 tuples/s are stored (0.0002
    # each), and it reads the 1000 rows of the window (4e-5 each) after the SQL's 0.01.
    plan, model = model_for("SELECT k, window_end, MEDIAN(v) AS m FROM HOP(s, ts, INTERVAL "
                            "'1' SECOND, INTERVAL '10' SECONDS) GROUP BY k", unit_catalog, profile)
    model = CostModel(Statistics(unit_catalog), profile, files_per_batch=1)
    median = node(plan, Aggregate)
    assert model.db(frozenset({median}), median, to_sink=True, by_reference=True).u == \
        pytest.approx(100 * 0.0002 + 0.01 + 1000 * 4e-5)


def test_a_batch_of_four_files_pays_its_fixed_costs_once(unit_catalog, unit_profile):
    duckdb = unit_profile.functions["duckdb"]
    profile = dataclasses.replace(unit_profile, functions=unit_profile.functions | {
        "duckdb": duckdb | {"query": duckdb["query"] | {"further_end": 0.25}}})
    plan, model = model_for(COUNT_BY_K, unit_catalog, profile)  # up to four files a batch
    select, agg = node(plan, Select), node(plan, Aggregate)
    # Near its limit a batch takes four 1-s files: the partials' insert (0.003) is paid once
    # for them (50 * 1e-4 + 0.003 / 4), and one query evaluates their four window_ends: its
    # 0.01 and the first window_end's 0.002, each further one a quarter of that, once in 4 s.
    both = model.db(frozenset({select, agg}), agg, to_sink=True, by_reference=True)
    assert both.u == pytest.approx(0.005 + 0.003 / 4 + (0.01 + 0.002 * (1 + 3 * 0.25)) / 4)
    # By value a batch is one second and evaluates one window_end, as before.
    assert model.db(frozenset({select, agg}), agg, to_sink=True).u == \
        pytest.approx(0.11 + 0.008 + 0.012)


def test_plan_costs_eq_6_5_and_6_6(unit_catalog, unit_profile):
    plan, model = model_for(COUNT_BY_K, unit_catalog, unit_profile)
    spark = evaluate(plan, uniform(plan, "spark"), model)
    # source 100 * 0.001 + 0.1 per batch; select 0.1; aggregate 0.1; sink 10 * (0.001 + 0.0005).
    assert [op.u for op in spark.operators] == pytest.approx([0.2, 0.1, 0.1, 0.015])
    assert spark.cost.bottleneck == pytest.approx(0.2)  # Eq. 6.5: the maximum
    assert spark.cost.utilization == pytest.approx(0.415)  # Eq. 6.6: the sum
    duck = evaluate(plan, uniform(plan, "duckdb"), model)
    assert [op.kind for op in duck.operators] == ["source", "db-op", "sink"]
    assert duck.cost.utilization == pytest.approx(0.2 + 0.130 + 10 * 0.0005)


def test_the_gateway_costs_per_tuple_what_the_file_format_costs(unit_catalog, unit_profile):
    _, model = model_for(S_JOIN_T, unit_catalog, unit_profile)
    # s lands as Parquet (the default), t as CSV (unit_catalog.toml): 100 * 0.001 + 50 * 0.003
    # per tuple, and the job's 0.1 once per micro-batch.
    assert model.source(["s", "t"]).u == pytest.approx(0.1 + 0.15 + 0.1)
    csv = CostModel(Statistics(unit_catalog.with_file_format("csv")), unit_profile)
    assert csv.source(["s", "t"]).u == pytest.approx(0.3 + 0.15 + 0.1)


def test_by_reference_spark_control_is_paid_once_per_batch_of_files(unit_catalog, unit_profile):
    scans = {"scan": {"per_tuple": 0.0002, "per_call": 0.02}, "scan_csv": {"per_tuple": 0.0004}}
    profile = dataclasses.replace(unit_profile, functions=unit_profile.functions | {
        "spark": unit_profile.functions["spark"] | {"control": {"per_call": 0.2}},
        "duckdb": unit_profile.functions["duckdb"] | scans})
    # DuckDB scans s's 100 Parquet tuples (0.02 + 100 * 0.0002 per file) and t's 50 CSV ones
    # (50 * 0.0004); Spark's control, 0.2 a batch, is shared by the batch's files.
    for files, control in ((1, 0.2), (4, 0.05)):
        model = CostModel(Statistics(unit_catalog), profile, files_per_batch=files)
        assert model.source(["s", "t"], by_reference=True).u == \
            pytest.approx(0.02 + 0.02 + 0.02 + control)


def test_by_reference_the_mig_s_thread_reads_keeps_the_partials_and_evaluates(unit_catalog,
                                                                              unit_profile):
    # No Spark job reads a batch by reference: the MIG's thread reads its files, keeps the
    # partials up and evaluates, while Spark plans the next batch. Only Spark's control is on
    # the job's side, so fully overlapped (sigma 0) the load is the MIG thread's part.
    profile = priced_by_reference(unit_profile, scan={"per_tuple": 0.0002, "per_call": 0.02})
    plan, model = model_for(COUNT_BY_K, unit_catalog, profile)
    select, agg = node(plan, Select), node(plan, Aggregate)
    source = model.source(["s"], by_reference=True)
    # Spark's control, 0.2 a batch, shared by the batch's four files (FILES_PER_BATCH).
    assert source.u - source.evaluation == pytest.approx(0.2 / 4)
    assert source.evaluation == pytest.approx(0.02 + 100 * 0.0002)
    db_op = model.db(frozenset({select, agg}), agg, to_sink=True, by_reference=True)
    assert db_op.evaluation == pytest.approx(db_op.u)  # the partials' upkeep included
    by_value = model.db(frozenset({select, agg}), agg, to_sink=True)
    assert by_value.evaluation < by_value.u  # the moves in and the upkeep are the job's
    cost = PlanCost(0.0, 0.0, 0.0).add(source).add(db_op)
    assert Objective(time_shared=True, overlap=0.0).load(cost) == pytest.approx(
        source.evaluation + db_op.u)


def test_a_plan_s_load_overlaps_as_its_crossings_go(unit_catalog, unit_profile):
    # By value Spark's tasks and DuckDB's evaluation share the cores, one after the other
    # (sigma 1); by reference Spark's control of the next batch hides behind the MIG's thread
    # (overlap_reference 0): the optimisation's objective is its plan's.
    scan = {"per_tuple": 0.0002, "per_call": 0.02}
    profile = dataclasses.replace(priced_by_reference(unit_profile, scan=scan, scan_csv=scan),
                                  time_shared=True, overlap=1.0, overlap_reference=0.0)
    for placement, referenced in (("duckdb", True), ("select_1=spark", False)):
        o = optimize(COUNT_BY_K, unit_catalog, profile, placement=placement)
        assert o.plan.by_reference is referenced and o.objective.by_reference is referenced
        a, e = o.plan.cost.arrival, o.plan.cost.evaluation
        assert a > 0 and e > 0
        assert o.objective.load(o.plan.cost) == pytest.approx(max(a, e) if referenced else a + e)


def test_a_profile_calibrated_before_csv_was_priced_asks_for_a_calibration(unit_catalog,
                                                                            unit_profile):
    spark = {f: c for f, c in unit_profile.functions["spark"].items() if f != "source_csv"}
    old = dataclasses.replace(unit_profile, functions={**unit_profile.functions, "spark": spark})
    _, model = model_for(S_JOIN_T, unit_catalog.with_file_format("parquet"), old)
    assert model.source(["s", "t"]).u == pytest.approx(0.15 + 0.1)
    _, model = model_for(S_JOIN_T, unit_catalog, old)
    with pytest.raises(CatalogError, match=r"lacks \[spark.source_csv\] per_tuple: re-run `tandem "
                                           "calibrate`"):
        model.source(["s", "t"])


def test_a_file_format_the_gateway_does_not_read_is_refused(unit_catalog):
    with pytest.raises(CatalogError, match="every stream lands as 'json' files: give one of csv, "
                                           "parquet"):
        unit_catalog.with_file_format("json")
    with pytest.raises(CatalogError, match="stream 's' lands as 'avro' files"):
        parse_catalog({"streams": {"s": {"columns": {"ts": "TIMESTAMP"}, "rate": 1,
                                         "file_format": "avro"}}})


def test_rate_override_scales_every_stream(unit_catalog):
    scaled = unit_catalog.with_total_rate(["s", "t"], 300)
    assert (scaled.streams["s"].rate, scaled.streams["t"].rate) == (200, 100)


def test_default_selectivities_follow_system_r(unit_catalog, unit_profile):
    plan, model = model_for(COUNT_BY_K.replace("v > 0", "k = 3 AND v < 2"), unit_catalog,
                            unit_profile)
    # Each conjunct is its own selection. k = 3: 1 / distinct(k) = 0.1; v < 2: System R's 1/3.
    selects = [n for n in post_order(plan.root) if isinstance(n, Select)]
    assert [model.stats.selectivity(n) for n in selects] == pytest.approx([0.1, 1 / 3])
    assert model.stats[selects[-1]].lambda_out == pytest.approx(100 * 0.1 / 3)


@pytest.mark.parametrize("a, b, condition", [
    (PlanCost(0.9, 5.0, 0), PlanCost(1.1, 0.1, 0), 1),  # feasible beats infeasible
    (PlanCost(0.9, 2.0, 0), PlanCost(0.5, 3.0, 0), 2),  # both feasible: lower C_u
    (PlanCost(1.5, 9.0, 0), PlanCost(2.0, 1.0, 0), 3),  # both infeasible: lower C_b
])
def test_definition_6_1(a, b, condition):
    assert better(a, b) and not better(b, a)
    objective = Objective()
    assert objective.rank(a) < objective.rank(b)


def test_without_feasibility_check_plans_rank_by_utilisation_alone():
    a, b = PlanCost(0.9, 5.0, 0), PlanCost(1.1, 0.1, 0)
    assert Objective(feasibility=False).rank(b) < Objective(feasibility=False).rank(a)


def test_memory_budget_makes_plans_over_it_infeasible():
    objective = Objective(memory_budget=1000)
    small, large = PlanCost(0.5, 3.0, 800), PlanCost(0.2, 1.0, 1500)
    assert objective.feasible(small) and not objective.feasible(large)
    assert objective.effective_bottleneck(large) == pytest.approx(1.5)
    assert objective.rank(small) < objective.rank(large)


def test_time_shared_operators_keep_up_only_when_their_sum_does():
    # Each operator alone keeps up (C_b <= 1); one after another they do not (C_u > 1).
    cost = PlanCost(0.6, 1.4, 0)
    assert Objective().feasible(cost)
    assert not Objective(time_shared=True).feasible(cost)
    assert Objective(time_shared=True).rank(PlanCost(0.9, 0.95, 0)) < Objective(
        time_shared=True).rank(cost)


def with_functions(profile, engine: str, **functions):
    return dataclasses.replace(profile, functions=profile.functions | {
        engine: profile.functions[engine] | functions})


def priced_by_reference(profile, **scans):
    """``profile`` with Spark's control by reference, 0.2 a batch, and DuckDB's ``scans``."""
    return with_functions(with_functions(profile, "spark", control={"per_call": 0.2}), "duckdb",
                          **scans)


def test_a_spark_operator_after_the_mig_reads_every_row_duckdb_hands_it(unit_catalog,
                                                                        unit_profile):
    batch = {"per_tuple": 0.0002, "per_call": 0.02}
    plan, model = model_for(COUNT_BY_K, unit_catalog,
                            with_functions(unit_profile, "spark", batch_aggregate=batch))
    select, agg = node(plan, Select), node(plan, Aggregate)
    # One relation per window_end: the selection's 50 tuples/s each in 10 windows; the
    # aggregate's 10 groups a window_end once, its lambda_out (Eq. 6.3).
    assert model.handed(select) == pytest.approx(500)
    assert model.handed(agg) == pytest.approx(model.stats[agg].lambda_out) == pytest.approx(10)
    # The COUNT in Spark over DuckDB's rows is a batch aggregation of those 500 rows, all on
    # the evaluation thread, with no state of its own (the window is DuckDB's).
    after = model.after_mig(agg)
    assert (after.u, after.memory, after.evaluation) == pytest.approx((0.12, 0.0, 0.12))
    # Not the streaming aggregate's update of 10 partials a tuple: 50 * (0.001 + 10 * 0.0001).
    assert model.dsps(agg).u == pytest.approx(0.1)
    # A selection over the aggregate's rows filters each of them once.
    having = LogicalPlan(parse_query(f"SELECT * FROM ({COUNT_BY_K}) AS c WHERE n > 2", unit_catalog))
    top = CostModel(Statistics(unit_catalog), model.profile)
    assert top.after_mig(having.root).u == pytest.approx(10 * 0.001)
    # A profile calibrated before the batch aggregation was priced prices it as it did then.
    old = CostModel(Statistics(unit_catalog), unit_profile)
    assert old.after_mig(agg).u == pytest.approx(old.dsps(agg).u)


# Q1's shape: the window's rows joined with their window's maximum, counted.
ROWS_AND_PEAK = ("SELECT a.k, a.window_end, COUNT(*) AS n "
                 "FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS) AS a "
                 "JOIN (SELECT k, window_end, MAX(v) AS m "
                 "FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS) GROUP BY k) AS p "
                 "ON a.k = p.k AND a.window_end = p.window_end WHERE a.v > 0.9 * p.m GROUP BY a.k")


def test_spark_rows_a_spark_operator_after_the_mig_reads_cross_and_come_back(unit_catalog,
                                                                              unit_profile):
    plan, model = model_for(ROWS_AND_PEAK, unit_catalog, unit_profile)
    join, peak = node(plan, Join), node(plan, Aggregate)
    rows = next(i for i in join.inputs if isinstance(i, Window))
    placement = {plan.ids[op]: "spark" for op in plan.operators} | {plan.ids[peak]: "duckdb"}
    # The join runs after the MIG, over the maximum's rows from DuckDB and the window's rows,
    # which Spark read: those move in with their batch (100 * 0.001 + 0.01), are kept as the
    # window (1000 tuples of 5 columns), and come back for each window_end (1000 * 0.001 + 0.01).
    alone, crossed = model.after_mig(join), model.after_mig(join, (rows,))
    assert crossed.u - alone.u == pytest.approx(0.11 + 1.01)
    assert crossed.evaluation - alone.evaluation == pytest.approx(1.01)
    assert crossed.memory == pytest.approx(1000 * 5)
    # The plan prices the join so, in its operator and in C_u.
    physical = evaluate(plan, placement, model)
    listed = next(o for o in physical.operators if o.id == plan.ids[join])
    assert listed.u == pytest.approx(crossed.u)
    assert physical.cost.utilization == pytest.approx(sum(o.u for o in physical.operators))


def test_a_join_after_the_mig_is_a_batch_join_of_the_rows_handed(unit_catalog, unit_profile):
    batch = {"per_tuple": 0.0002, "per_call": 0.02}
    plan, model = model_for(ROWS_AND_PEAK, unit_catalog,
                            with_functions(unit_profile, "spark", batch_join=batch))
    join = node(plan, Join)
    # Over DuckDB's rows of both inputs: the window's 100 tuples/s in 10 windows each and the
    # maximum's 10 groups a window_end, 1010 rows a second, and one job a batch; not the
    # streaming join's probes of the other window per tuple (Eq. 6.4, KNV03).
    assert model.after_mig(join).u == pytest.approx(1010 * 0.0002 + 0.02)
    # By reference a batch takes four seconds: the job is paid once for them.
    assert model.after_mig(join, (), True).u == pytest.approx(1010 * 0.0002 + 0.02 / 4)
    # A profile calibrated before the batch join was priced prices it as it did then.
    old = CostModel(Statistics(unit_catalog), unit_profile)
    assert old.after_mig(join).u == pytest.approx(old.dsps(join).u)


def test_the_job_and_the_evaluation_thread_overlap(unit_catalog, unit_profile):
    # A move out of a tenth of the unit profile's, so that the evaluation thread is the smaller side.
    profile = with_functions(with_functions(unit_profile, "duckdb", transfer_out={
        "per_tuple": 0.0001, "per_call": 0.01}), "spark", batch_aggregate={"per_tuple": 0.0002})
    plan, model = model_for(COUNT_BY_K, unit_catalog, profile)
    # Both in DuckDB: the job holds the source 0.2, the move in 0.11 and the partials' upkeep
    # 0.008; the evaluation thread the SQL 0.012 and the insert into the results 10 * 0.0005.
    duck = evaluate(plan, uniform(plan, "duckdb"), model).cost
    assert (duck.arrival, duck.evaluation) == pytest.approx((0.318, 0.017))
    # Only the selection in DuckDB: the SQL 0.01 and the move out of its 500 rows a second
    # 0.06 run on the thread, and so do the aggregate in Spark over them (0.1) and the sink's
    # move and insert.
    mixed = evaluate(plan, {"select_1": "duckdb", "aggregate_1": "spark"}, model).cost
    assert (mixed.arrival, mixed.evaluation) == pytest.approx((0.31, 0.07 + 0.1 + 0.015))
    # load = max(A, E) + sigma * min(A, E); sigma = 1 is C_u, Ji's C_b applies without sharing.
    assert Objective(time_shared=True, overlap=0.5).load(mixed) == pytest.approx(0.31 + 0.0925)
    assert Objective(time_shared=True).load(mixed) == pytest.approx(mixed.utilization)
    assert Objective(overlap=0.5).load(mixed) == mixed.bottleneck
    # The overlapped load ranks plans: the mixed plan takes more resources (C_u) but less wall
    # time than the pure-DuckDB one would at sigma = 0.
    shared = Objective(time_shared=True, overlap=0.0)
    assert shared.load(mixed) == pytest.approx(0.31) and shared.load(duck) == pytest.approx(0.318)


costs = st.builds(PlanCost, st.floats(0, 3), st.floats(0, 10), st.just(0.0))


@given(costs, costs)
def test_rank_orders_plans_as_definition_6_1(a, b):
    objective = Objective()
    if objective.rank(a) <= objective.rank(b):
        assert better(a, b)
    else:
        assert better(b, a) and not better(a, b)


def test_duckdb_reads_pane_partials_and_lists_not_window_tuples(unit_catalog, unit_profile):
    # Q1's shape over s: each row against its key's maximum in the same window.
    plan, model = model_for(
        "WITH l AS (SELECT * FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS)), "
        "p AS (SELECT k, window_end, MAX(v) AS m FROM l GROUP BY k, window_end) "
        "SELECT l.k, l.window_end, COUNT(*) AS n FROM l JOIN p "
        "ON l.k = p.k AND l.window_end = p.window_end WHERE l.v > 0.5 * p.m "
        "GROUP BY l.k, l.window_end", unit_catalog, unit_profile)
    join = node(plan, Join)
    peak, count = (next(n for n in post_order(plan.root) if isinstance(n, Aggregate)
                        and n.aggregates[0].func == func) for func in ("MAX", "COUNT"))
    # MAX from its partials: 10 panes * 10 keys (100 tuples/s fill every pane) * 2e-5, not the
    # window's 1000 tuples; keeping the partials costs 100 tuples/s * 1e-4 and an insert of
    # 0.003 per batch.
    assert model.db_work(peak) == pytest.approx(100 * 2e-5)
    assert model.db_arrival(peak) == pytest.approx(100 * 1e-4 + 0.003)
    # The join reads the window's 1000 rows as list elements (5e-6 each) in 100 lists, and
    # the 10 maxima (1e-5 each), instead of probing a hash table per row.
    assert model.db_work(join) == pytest.approx(1000 * 5e-6 + 100 * 2e-5 + 10 * 1e-5)
    # Keeping the lists costs a tuple 2e-4 and a batch 0.004.
    assert model.db_arrival(join) == pytest.approx(100 * 2e-4 + 0.004)
    # The COUNT over the join's output reads tagged rows: no panes.
    # The selection and the COUNT above the join are lambdas over the lists: the COUNT only
    # writes one row per key.
    assert model.db_work(node(plan, Select)) == 0.0
    assert model.db_work(count) == pytest.approx(10 * 2e-5)
    assert model.db_arrival(count) == 0.0


def test_a_count_under_one_comparison_reads_the_chunks_minima_and_one_chunk(unit_catalog,
                                                                           unit_profile):
    # Q1's shape at 40,000 tuples/s of s: a window of 10 s holds 400,000 rows in 100 lists
    # (10 keys, 10 panes) of 4,000 values. Sorted, in chunks of ceil(sqrt(4000)) = 64, a
    # count reads each list's 63 minima and one chunk: 12,700 values, not 400,000.
    catalog = unit_catalog.with_total_rate(["s"], 40_000)
    sql = ("WITH l AS (SELECT * FROM HOP(s, ts, INTERVAL '1' SECOND, INTERVAL '10' SECONDS)), "
           "p AS (SELECT k, window_end, MAX(v) AS m FROM l GROUP BY k, window_end) "
           "SELECT l.k, l.window_end, COUNT(*) AS n FROM l JOIN p "
           "ON l.k = p.k AND l.window_end = p.window_end WHERE l.v > 0.5 * p.m "
           "GROUP BY l.k, l.window_end")
    plan = LogicalPlan(parse_query(sql, catalog))
    join = node(plan, Join)
    assert counted_by_order(plan.root) == {join}
    ordered = CostModel(Statistics(catalog), unit_profile, ordered=frozenset({join}))
    plain = CostModel(Statistics(catalog), unit_profile)
    assert plain.db_work(join) - ordered.db_work(join) == pytest.approx((400_000 - 12_700) * 5e-6)
    # Two comparisons, a value of the other side alone, or a SUM: the rows that pass are not
    # a prefix or a suffix of one order.
    for other in (sql.replace("l.v > 0.5 * p.m", "l.v > 0.5 * p.m AND l.v < p.m"),
                  sql.replace("l.v > 0.5 * p.m", "p.m > 3"),
                  sql.replace("COUNT(*) AS n", "SUM(l.v) AS n")):
        assert counted_by_order(LogicalPlan(parse_query(other, catalog)).root) == frozenset()


@pytest.mark.parametrize("predicate, selectivity", [
    ("(k = 3 OR v < 2)", 0.1 + 1 / 3 - 0.1 / 3),  # independent events: a + b - ab
    ("NOT k = 3", 0.9),
    ("k <> 3", 0.9),  # 1 - System R's 1/10 for an equality it cannot look up
    ("k = v", 0.1),  # two columns: System R's 1/10
    ("v BETWEEN 1 AND 2", 1 / 4),
    ("k IN (1, 2, 3)", 3 * 0.1),
    ("v + 1 >= 2", 1 / 3),
])
def test_every_predicate_shape_gets_system_rs_default(unit_catalog, unit_profile, predicate,
                                                      selectivity):
    plan, model = model_for(COUNT_BY_K.replace("v > 0", predicate), unit_catalog, unit_profile)
    (select,) = [n for n in post_order(plan.root) if isinstance(n, Select)]
    assert model.stats.selectivity(select) == pytest.approx(selectivity)


@pytest.mark.parametrize("change, refusal", [
    ({"lateness": -1}, "a lateness of 0 s or more"),
    ({"time_distance": 0}, "a positive time_distance"),
    ({"time_column": "when"}, "has no time column 'when'"),
    ({"rate": "fast"}, "needs columns and rate"),
])
def test_a_catalog_entry_that_cannot_hold_is_refused_in_one_line(change, refusal):
    entry = {"rate": 10, "columns": {"ts": "TIMESTAMP", "k": "INTEGER"}} | change
    with pytest.raises(CatalogError, match=refusal):
        parse_catalog({"streams": {"s": entry}}, "mine.toml")


def test_a_catalog_without_streams_or_with_a_selectivity_above_one_is_refused():
    with pytest.raises(CatalogError, match="no \\[streams.\\*\\] tables"):
        parse_catalog({"selectivity": {}}, "mine.toml")
    with pytest.raises(CatalogError, match="must lie in \\[0, 1\\]"):
        parse_catalog({"streams": {"s": {"rate": 1, "columns": {"ts": "TIMESTAMP"}}},
                       "selectivity": {"k = 1": 1.5}}, "mine.toml")


def test_a_rate_cannot_be_scaled_from_nothing(unit_catalog):
    still = dataclasses.replace(unit_catalog, streams={
        n: dataclasses.replace(s, rate=0.0) for n, s in unit_catalog.streams.items()})
    with pytest.raises(CatalogError, match="no positive rate to scale"):
        still.with_total_rate(["s", "t"], 300)

"""Zhu's migration cost model (Sec. 12.3), the state matching it rests on (Sec. 12.1.1), the
hysteresis rule, and the statistics monitor: hand-computed on the round numbers of
tests/data/unit_*.toml, no engine needed."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from columnar.store import ColumnarStore
from optimizer import optimize
from optimizer.catalog import column_set_key
from optimizer.cost import Objective, PlanCost
from optimizer.errors import TandemError
from optimizer.migration import (
    MS,
    PARTIALS,
    PT,
    ROWS,
    MigrationCost,
    decide,
    match,
    migration_costs,
    parallel_track,
    states,
)
from optimizer.observed import (
    BatchObservation,
    Monitor,
    Observed,
    catalog_statistics,
    merged,
    planned_statistics,
)
from rowstream.eventtime import EPOCH
from rowstream.gateway import STREAM
from runtime.explain import explain
from runtime.migration import PLAN_BATCHES, Request, moving_state_takeover, parse_migrate_at
from tests.conftest import query_sql
from tests.test_cost import COUNT_BY_K, S_JOIN_T
from workload.smart_plugs import DEBS_START

SPARK_ONLY = "spark"
HYBRID = "select_1=spark,aggregate_1=duckdb"


def planned(sql, catalog, profile, placement):
    return optimize(sql, catalog, profile, placement=placement)


def kept_states(sql, catalog, profile, placement):
    o = planned(sql, catalog, profile, placement)
    return states(o.plan, o.model)


def test_states_of_each_engine(unit_catalog, unit_profile):
    (spark,) = kept_states(COUNT_BY_K, unit_catalog, unit_profile, SPARK_ONLY)
    # Spark's aggregate keeps a partial per (window, group): 10 groups x W/beta = 10 windows.
    # Rebuilding it is W seconds of its work, W*u (Eq. 12.1): u = 50/s x (0.001 + 10 x 0.0001).
    assert (spark.relation, spark.form, spark.engine) == ("aggregate_1", PARTIALS, "spark")
    assert spark.tuples == 100 and spark.window == 10
    assert spark.work == pytest.approx(10 * 0.1)
    (duck,) = kept_states(COUNT_BY_K, unit_catalog, unit_profile, HYBRID)
    # DuckDB keeps the selected rows of the window: 50/s x 10 s. Rebuilding them is W seconds
    # of the DB-op's arrival side: the move in (50 x 0.001 + 0.01 per batch) and the pane
    # partials' upkeep (50 x 0.0001 + 0.003 per batch).
    assert (duck.relation, duck.form, duck.engine) == ("select_1", ROWS, "duckdb")
    assert duck.tuples == 500
    assert duck.work == pytest.approx(10 * (0.05 + 0.01 + 0.005 + 0.003))


def test_matching_keeps_central_tables_and_rebuilds_the_rest(unit_catalog, unit_profile):
    spark = kept_states(COUNT_BY_K, unit_catalog, unit_profile, SPARK_ONLY)
    hybrid = kept_states(COUNT_BY_K, unit_catalog, unit_profile, HYBRID)
    to_duckdb = match(spark, hybrid)
    assert (to_duckdb.kept, to_duckdb.recomputed, to_duckdb.discarded) == ((), hybrid, spark)
    # duckdb-partitioned keeps the same rows in files under the checkpoint of its own query.
    partitioned = (dataclasses.replace(hybrid[0], engine="duckdb-partitioned"),)
    assert match(hybrid, partitioned).recomputed == partitioned
    # The join's two windows are read by the DB-op whether or not the aggregate above it runs
    # in DuckDB too: the new plan reads the old plan's tables as they are.
    old = kept_states(S_JOIN_T, unit_catalog, unit_profile, "join_1=duckdb,aggregate_1=spark")
    new = kept_states(S_JOIN_T, unit_catalog, unit_profile, "duckdb")
    kept = match(old, new)
    assert len(kept.kept) == 2 and kept.recomputed == () and kept.discarded == ()
    assert {s.relation for s in kept.kept} == {"window_1", "window_2"}


def test_moving_state_cost(unit_catalog, unit_profile):
    spark = planned(COUNT_BY_K, unit_catalog, unit_profile, SPARK_ONLY)
    hybrid = planned(COUNT_BY_K, unit_catalog, unit_profile, HYBRID)
    ms, _ = migration_costs(spark, hybrid, lateness=0, restart=3)
    # T_MS = T_match + T_move + T_S + restart (Eq. 12.3): 4*1*1 comparisons of 1e-7 s; nothing
    # moves; T_S reads W = 10 s of the stream again through the gateway in one batch
    # (10 s x 100/s x 0.001 + 0.1 once) and rebuilds DuckDB's rows from them: the move in
    # (500 x 0.001 + 0.01 once) and the pane partials' upkeep (500 x 0.0001 + 0.003 once).
    assert ms.strategy == MS
    assert ms.duration == pytest.approx(4e-7 + (1.0 + 0.1) + (0.5 + 0.01 + 0.05 + 0.003) + 3)
    assert ms.silence == ms.duration and ms.state_tuples == 500
    # Back to Spark: its aggregate's 10 s of work at 0.1 s per second, and no fixed cost.
    back, _ = migration_costs(hybrid, spark, lateness=0, restart=3)
    assert back.duration == pytest.approx(4e-7 + (1.0 + 0.1) + 1.0 + 3)
    # A migration that keeps every state costs only the restart and the matching.
    same, _ = migration_costs(hybrid, hybrid, lateness=0, restart=3)
    assert same.duration == pytest.approx(3 + 4e-7) and same.state_tuples == 0


def test_parallel_track_cost(unit_catalog, unit_profile):
    _, pt = migration_costs(planned(COUNT_BY_K, unit_catalog, unit_profile, HYBRID),
                            planned(COUNT_BY_K, unit_catalog, unit_profile, SPARK_ONLY),
                            lateness=2, restart=3)
    # T_PT = W + L of event time (Eq. 12.4, one level of window_ends), output all along; the new
    # plan's work meanwhile: its C_u = source 0.2 + select 0.1 + aggregate 0.1 + sink (10 rows/s
    # moved at 0.001 and inserted at 0.0005) = 0.415 per second.
    assert (pt.strategy, pt.duration, pt.silence) == (PT, 12, 0)
    assert pt.work == pytest.approx(12 * 0.415)
    assert pt.feasible
    # On shared cores both plans' loads add up: 0.6 + 0.5 > 1 cannot run side by side.
    shared = Objective(time_shared=True)
    assert not parallel_track(PlanCost(0.6, 0.6, 0), PlanCost(0.5, 0.5, 0), (), 10, 0,
                              shared).feasible
    assert parallel_track(PlanCost(0.4, 0.4, 0), PlanCost(0.5, 0.5, 0), (), 10, 0,
                          shared).feasible


MS_5 = MigrationCost(MS, 5, 5, 5, 0)
PT_30 = MigrationCost(PT, 300, 0, 30, 0)


@pytest.mark.parametrize("current, candidate, costs, observed, migrate, strategy", [
    # Falls behind: move at once, by Moving State even where Parallel Track is cheaper, since
    # the old plan would go on falling behind beside the new one.
    (PlanCost(1.5, 1.5, 0), PlanCost(0.5, 0.5, 0), [MS_5, MigrationCost(PT, 300, 0, 1, 0)],
     None, True, MS),
    # The model says it keeps up, the batches say it does not.
    (PlanCost(0.9, 0.9, 0), PlanCost(0.5, 0.5, 0), [MS_5], 1.3, True, MS),
    # 10 % better: within the 20 % margin.
    (PlanCost(0.5, 0.5, 0), PlanCost(0.45, 0.45, 0), [MS_5], None, False, None),
    # Saves 0.2 s per second: Moving State's 5 s pay back in 25 s, Parallel Track's 30 in 150.
    (PlanCost(0.5, 0.5, 0), PlanCost(0.3, 0.3, 0), [MS_5, PT_30], None, True, MS),
    # Saves 0.001 s per second of 0.004: 25 % but 5000 s to pay back, beyond 600 s.
    (PlanCost(0.004, 0.004, 0), PlanCost(0.003, 0.003, 0), [MS_5], None, False, None),
    # Never to a plan that does not keep up.
    (PlanCost(1.5, 1.5, 0), PlanCost(1.2, 1.2, 0), [MS_5], None, False, None),
    # Parallel Track alone priced, and the machine cannot run both plans.
    (PlanCost(0.5, 0.5, 0), PlanCost(0.1, 0.1, 0), [MigrationCost(PT, 300, 0, 30, 0, False)],
     None, False, None),
])
def test_hysteresis_rule(current, candidate, costs, observed, migrate, strategy):
    decision = decide(current, candidate, costs, Objective(), margin=0.2, horizon=600,
                      observed_load=observed)
    assert decision.migrate is migrate, decision.reason
    assert (decision.cost.strategy if decision.cost else None) == (strategy if migrate else None)


def test_the_running_plan_is_judged_as_its_crossings_go():
    # The running plan by value, its sides one after the other (sigma 1): 0.6 + 0.5 falls
    # behind. Judged with the candidate's overlap by reference (0) it would keep up at 0.6, and
    # a candidate 18 % cheaper would be within the margin.
    by_value = Objective(time_shared=True, overlap=1.0, overlap_reference=0.0)
    current, candidate = PlanCost(0.6, 1.1, 0, 0.5), PlanCost(0.5, 0.9, 0, 0.8)
    decision = decide(current, candidate, [MS_5], by_value.crossing(True), margin=0.2,
                      horizon=600, current_objective=by_value)
    assert decision.migrate, decision.reason
    assert not decide(current, candidate, [MS_5], by_value.crossing(True), margin=0.2,
                      horizon=600).migrate


def batch(tuples, seconds=1.0, wall=0.5, **crossings):
    return BatchObservation(tuples, seconds, wall, crossings)


def test_monitor_estimates_the_recent_batches():
    monitor = Monitor(recent=3, band=0.25, confirm=2)
    monitor.observe(batch(1000))
    monitor.observe(batch(0, seconds=0, wall=0.1))  # an idle trigger is not a batch
    monitor.observe(batch(2000, seconds=2.0, select_1=1000))
    assert monitor.estimate() is None  # two batches of the three it rests on
    monitor.observe(batch(3000, seconds=0.5, wall=1.0, select_1=500))
    observed = monitor.estimate()
    # Sums over the batches: 6000 tuples in 3.5 s of event time, 2.0 s of wall time.
    assert observed.rate == pytest.approx(6000 / 3.5)
    assert observed.load == pytest.approx(2.0 / 3.5)
    assert observed.selectivity == {"select_1": pytest.approx(1500 / 6000)}


def test_monitor_is_due_only_on_a_confirmed_shift():
    monitor = Monitor(recent=1, band=0.25, confirm=3)
    for tuples in (1100, 900, 1200):  # within 25 % of the planned 1000/s
        monitor.observe(batch(tuples))
        assert not monitor.due(1000)
    monitor.observe(batch(5000))  # one noisy batch
    assert not monitor.due(1000)
    monitor.observe(batch(1000))
    assert not monitor.due(1000)
    for step in range(3):  # the rate stays at 20,000/s
        monitor.observe(batch(20_000))
        assert monitor.due(1000) is (step == 2)
    monitor.reset()
    assert monitor.estimate() is None and not monitor.due(20_000)
    # A plan that falls behind is due as well, at the rate it was chosen for.
    for step in range(3):
        monitor.observe(batch(1000, wall=1.4))
        assert monitor.due(1000) is (step == 2)


def test_monitor_is_due_when_a_selectivity_shifts():
    monitor = Monitor(recent=1, band=0.25, confirm=2)
    planned = {"select_1": 0.5}
    monitor.observe(batch(1000, select_1=550))  # within the band
    assert not monitor.due(1000, planned)
    for step in range(2):  # the rate holds; the selection keeps a tenth of it
        monitor.observe(batch(1000, select_1=100))
        assert monitor.due(1000, planned) is (step == 1)


def test_observed_statistics_are_the_catalogs(catalog, profile):
    # Q5's selection of the loads crosses to DuckDB: its rows per stream tuple are the
    # selectivity of "property = 1". Its first aggregate's rows per window_end are the distinct
    # plugs that reported. The optimiser plans with both in place of the catalog's.
    optimization = optimize(query_sql("q5"), catalog, profile)
    plan = optimization.logical
    plugs = "house_id, household_id, plug_id"
    assert planned_statistics(plan, optimization.model.stats) == {
        "select_1": catalog.selectivity["property = 1"],
        "aggregate_1": catalog.streams["plugs"].distinct[column_set_key(plugs)]}
    observed = Observed(1000.0, 0.5, {"select_1": 0.2}, 5, {"aggregate_1": 1800.0})
    seen = catalog_statistics(plan, observed)
    assert seen == {"selectivity": {"property = 1": 0.2}, "distinct": {"plugs": {plugs: 1800.0}}}
    again = optimize(query_sql("q5"), catalog.with_statistics(seen), profile)
    assert planned_statistics(again.logical, again.model.stats) == {
        "select_1": 0.2, "aggregate_1": 1800.0}
    # Observed later, over what was observed before: the newer value of each.
    assert merged(seen, {"distinct": {"plugs": {plugs: 1700.0}}}) == {
        "selectivity": {"property = 1": 0.2}, "distinct": {"plugs": {plugs: 1700.0}}}


def test_monitor_estimates_groups_per_window_end():
    monitor = Monitor(recent=2, band=0.25, confirm=1)
    planned = {"aggregate_1": 2125.0}
    for rows, ends in ((4250, 2), (2125, 1)):
        monitor.observe(BatchObservation(1000, 1.0, 0.1, groups={"aggregate_1": (rows, ends)}))
    assert monitor.estimate().groups == {"aggregate_1": 2125.0}
    assert not monitor.due(1000, planned)
    monitor.observe(BatchObservation(1000, 1.0, 0.1, groups={"aggregate_1": (300, 1)}))
    monitor.observe(BatchObservation(1000, 1.0, 0.1, groups={"aggregate_1": (300, 1)}))
    assert monitor.due(1000, planned)


def test_monitor_estimates_each_parts_work_per_second():
    monitor = Monitor(recent=2)
    monitor.observe(BatchObservation(1000, 2.0, 0.5, timings={"spark": 0.4, "dbop_1": 0.1}))
    monitor.observe(BatchObservation(1000, 2.0, 0.7, timings={"spark": 0.6}))
    assert monitor.estimate().work == {"spark": pytest.approx(0.25),
                                       "dbop_1": pytest.approx(0.025)}


Q3_AGGREGATES_IN_DUCKDB = ("select_1=spark,aggregate_1=duckdb,select_2=spark,aggregate_2=duckdb,"
                           "join_1=spark,project_1=spark")


@pytest.mark.parametrize("new, taken, begin", [
    # The join moves into DuckDB: both aggregates' pane tables are kept alike and taken over,
    # and no other state needs rebuilding: nothing is read again.
    (Q3_AGGREGATES_IN_DUCKDB.replace("join_1=spark,project_1=spark",
                                     "join_1=duckdb,project_1=duckdb"),
     ("panes_aggregate_1", "panes_aggregate_2"), 400.0),
    # All of it into Spark: its state is rebuilt from the stream since the first instant a
    # window after the floor holds, 390 s + 1 s - 5 min.
    ("spark", (), 91.0),
])
def test_moving_state_takes_over_what_is_stored_alike(tmp_path, new, taken, begin):
    store = ColumnarStore(tmp_path / "tandem.duckdb")
    start = EPOCH + timedelta(seconds=DEBS_START)
    store.create("q3")
    # The old plan read up to 400 s (its watermark is 5 s behind) and evaluated up to 390 s.
    store.arrived("q3", 7, start, {STREAM: start + timedelta(seconds=395)})
    store.commit("q3", 7, None, start + timedelta(seconds=390))
    store.close()
    takeover, migration = moving_state_takeover(
        tmp_path / "tandem.duckdb", "q3", 1, explain("q3", placement=Q3_AGGREGATES_IN_DUCKDB),
        explain("q3", placement=new), DEBS_START, 5.0, Request(new, MS, "by hand"), 0.0, None)
    assert takeover.tables == taken and migration.taken == taken
    assert takeover.floor == start + timedelta(seconds=390)
    assert (takeover.begin, takeover.replay_until) == (begin, 400.0)
    assert takeover.batch_base == PLAN_BATCHES and takeover.results == "q3"
    assert migration.replayed_seconds == 400.0 - begin


def test_a_migration_by_hand_is_read_from_the_command_line():
    assert parse_migrate_at("300:duckdb:pt") == (300.0, "duckdb", "pt")
    assert parse_migrate_at("90.5:select_1=spark,aggregate_1=duckdb:ms") == (
        90.5, "select_1=spark,aggregate_1=duckdb", "ms")
    for wrong in ("duckdb:pt", "later:duckdb:ms", "300:duckdb:fast", "300::ms"):
        with pytest.raises(TandemError):
            parse_migrate_at(wrong)

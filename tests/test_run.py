"""Plans run on the real engines (Spark Structured Streaming and a DuckDB file) give exactly the
reference evaluator's rows, also when a run is stopped and restarted from its checkpoint."""

from __future__ import annotations

import sys
from dataclasses import replace

import polars as pl
import pytest

from benchmarking import reference
from columnar.store import ColumnarStore
from optimizer import optimize
from optimizer.errors import TandemError
from runtime.explain import explain
from runtime.run import run
from runtime.spec import RunSpec
from tests.conftest import ROOT, query_sql, short
from tests.matrix import FULL, matrix
from tests.test_reference import assert_same_rows
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

# Six plugs in two houses at 6 tuples/s: every plug reports a load every 2 s. The queries'
# short-window variants (tests/conftest.py:short): 60 s of event time fill their 20-second
# windows and slide them. Four 15-s micro-batches, each of which a window straddles: ten-second
# ones made these tests 12-15 % slower (each batch costs Spark about a second however few rows).
TOPOLOGY = dict(houses=2, households_per_house=2, plugs=6)
RATE, DURATION, BATCH = 6, 60, 15


@pytest.fixture(scope="module")
def truth():
    stream = pl.from_arrow(SmartPlugs(rate=RATE, **TOPOLOGY).between(0, DURATION))
    return reference.Evaluator({"plugs": stream})


def results(store_path, name: str) -> pl.DataFrame:
    with ColumnarStore(store_path) as store:
        return pl.from_arrow(store.results(name))


HOOKS = ("explanation", "on_batch", "on_start", "stop_when")  # run's, beside the spec


def run_small(name, tmp_path, **kwargs):
    hooks = {k: kwargs.pop(k) for k in HOOKS if k in kwargs}
    return run(RunSpec(short(name), rate=RATE, duration=DURATION, batch=BATCH, topology=TOPOLOGY,
                       store=tmp_path / "tandem.duckdb", checkpoint=tmp_path / "checkpoint",
                       **kwargs), **hooks)


# Q2 and Q4 are Q1's and Q3's kinds with AVG for MAX, over the generator's finite stream. Every
# class of placement (tests/matrix.py) runs over Q1, Q3, Q5 and Q6 in tests/test_disorder.py; here
# each engine computes the AVG once, in a uniform plan: Spark's, central DuckDB's per-slice
# partials (by reference), the partitions', and Spark's partials merged in DuckDB.
# `make test-matrices` runs every class of Q2 and Q4 too.
CASES = matrix(("q2", "q4")) if FULL else [
    ("q2", "spark"), ("q4", "duckdb"), ("q2", "duckdb-partitioned"), ("q4", "split")]


@pytest.mark.parametrize("name, placement", CASES)
def test_placements_give_the_reference_rows(tmp_path, truth, catalog, profile, name, placement):
    summary = run_small(name, tmp_path, placement=placement)
    root = optimize(query_sql(short(name)), catalog, profile).logical.root
    got = results(tmp_path / "tandem.duckdb", name)
    want = truth.result(root)
    assert summary.tuples == RATE * DURATION and summary.result_rows == want.height
    assert_same_rows(got.select(root.columns), want)
    assert summary.transfers.to_duckdb_tuples > 0
    first, last = reference.window_ends(truth.streams, root.slide)
    assert summary.window_ends == (last - first) // int(root.slide * 1e6) + 1


def test_each_batch_reports_the_statistics_the_monitor_needs(tmp_path, truth, catalog, profile):
    # Q5's selection of the loads crosses from Spark to DuckDB in one placement, its per-plug
    # aggregate in the other. Over the run, the selection's rows are the stream's loads (the
    # selectivity of "property = 1"), and the aggregate's rows per window_end are the
    # reference's (its groups).
    reports = []
    run_small("q5", tmp_path / "a", placement="select_1=spark,aggregate_1=duckdb,aggregate_2=duckdb",
              on_batch=reports.append)
    loads = truth.streams["plugs"].filter(pl.col("property") == 1).height
    assert loads > 0 and sum(r.crossed.get("select_1", 0) for r in reports) == loads
    # Each part's time: Spark's, and that of the one DB-op that holds both aggregates.
    assert set().union(*(r.timings for r in reports)) == {"spark", "dbop_1"}
    assert all(r.timings["spark"] > 0 for r in reports)
    reports = []
    run_small("q5", tmp_path / "b", placement="select_1=spark,aggregate_1=spark,aggregate_2=duckdb",
              on_batch=reports.append)
    plan = optimize(query_sql(short("q5")), catalog, profile).logical
    aggregate = next(n for n, rid in plan.relation_ids.items() if rid == "aggregate_1")
    last = results(tmp_path / "b" / "tandem.duckdb", "q5")["window_end"].max()
    want = truth.result(aggregate).filter(pl.col("window_end") <= last)
    rows, ends = (sum(r.groups.get("aggregate_1", (0, 0))[i] for r in reports) for i in (0, 1))
    assert (rows, ends) == (want.height, want["window_end"].n_unique())


@pytest.mark.parametrize("placement", [
    # Q1 with its stateful operators in Spark (state in the checkpoint) and its root in DuckDB.
    "select_1=spark,select_2=spark,aggregate_1=spark,join_1=spark,select_3=duckdb,aggregate_2=duckdb",
    # Its window state in the partitions' DuckDB files under the checkpoint, the root central.
    "select_1=spark,select_2=duckdb-partitioned,aggregate_1=duckdb-partitioned,join_1=duckdb,"
    "select_3=duckdb,aggregate_2=duckdb"])
def test_a_run_restarted_from_its_checkpoint_neither_loses_nor_duplicates(tmp_path, truth,
                                                                          catalog, profile,
                                                                          placement):
    first = run_small("q1", tmp_path, placement=placement, stop_after=3)
    assert first.batches == 3  # of four: the resumed run reads the fourth
    run_small("q1", tmp_path, placement=placement, resume=True)
    root = optimize(query_sql(short("q1")), catalog, profile).logical.root
    assert_same_rows(results(tmp_path / "tandem.duckdb", "q1").select(root.columns),
                     truth.result(root))


def test_the_fragment_sql_that_runs_is_the_explained_one(tmp_path, truth, catalog, profile):
    # The DB-op's SQL as explain shows it, narrowed to one house: the run's rows are the
    # reference's of that house, so the run executed that text and generated none of its own.
    explained = explain(short("q5"), placement="duckdb")
    (fragment,) = explained.fragments
    narrowed = replace(fragment, sql=f"SELECT * FROM ({fragment.sql}) WHERE house_id = 0")
    run_small("q5", tmp_path, placement="duckdb",
              explanation=replace(explained, fragments=[narrowed]))
    root = optimize(query_sql(short("q5")), catalog, profile).logical.root
    got = results(tmp_path / "tandem.duckdb", "q5").select(root.columns)
    assert got.height > 0 and set(got["house_id"]) == {0}
    assert_same_rows(got, truth.result(root).filter(pl.col("house_id") == 0))


def test_a_failed_micro_batch_fails_the_run_and_resume_completes_it(tmp_path, truth, catalog,
                                                                      profile):
    def fail_third(report):
        if report.batch_id == 2:
            raise RuntimeError("a failure inside the micro-batch")

    with pytest.raises(TandemError, match="RuntimeError: a failure inside the micro-batch"):
        run_small("q5", tmp_path, placement="duckdb", on_batch=fail_third)
    # Spark replays the failed batch; the store took its rows once.
    run_small("q5", tmp_path, placement="duckdb", resume=True)
    root = optimize(query_sql(short("q5")), catalog, profile).logical.root
    assert_same_rows(results(tmp_path / "tandem.duckdb", "q5").select(root.columns),
                     truth.result(root))


def test_spark_operators_after_a_db_op_get_duckdb_rows_back(tmp_path, truth, catalog, profile):
    # Q3 with the aggregates in DuckDB and the join and projection in Spark.
    placement = "select_1=spark,aggregate_1=duckdb,select_2=spark,aggregate_2=duckdb,join_1=spark,project_1=spark"
    summary = run_small("q3", tmp_path, placement=placement)
    root = optimize(query_sql(short("q3")), catalog, profile).logical.root
    assert_same_rows(results(tmp_path / "tandem.duckdb", "q3").select(root.columns),
                     truth.result(root))
    # Both aggregates' rows went back to Spark: one row per plug and window, twice.
    assert summary.transfers.to_spark_tuples == 2 * truth.result(root).height


# Panes change how Spark aggregates; the buckets evaluate a whole plan in Polars, so each kind
# of plan runs, with each aggregate function: a correlated one (Q1: MAX, COUNT), a join of two
# windows (Q3: MAX, AVG), an aggregate of an aggregate (Q5: SUM, MAX), a three-way join (Q6).
# Q2 and Q4 are Q1's and Q3's kinds with AVG for MAX: `make test-matrices` runs them too. The
# panes run over Q2 (AVG, COUNT) and Q5 (SUM, MAX), every function once; the matrices add Q3.
BUCKETS = ("q1", "q2", "q3", "q4", "q5", "q6") if FULL else ("q1", "q3", "q5", "q6")
PANES = ("q2", "q3", "q5") if FULL else ("q2", "q5")


@pytest.mark.parametrize("design, name", [("panes", q) for q in PANES]
                         + [("buckets", q) for q in BUCKETS])
def test_every_pure_spark_design_gives_the_reference_rows(tmp_path, truth, catalog, profile,
                                                          design, name):
    run_small(name, tmp_path, placement="spark", spark_design=design)
    root = optimize(query_sql(short(name)), catalog, profile).logical.root
    assert_same_rows(results(tmp_path / "tandem.duckdb", name).select(root.columns),
                     truth.result(root))


@pytest.mark.parametrize("name", ["q1", "q2"])
def test_the_hand_written_spark_design_gives_the_reference_rows(tmp_path, truth, catalog, profile,
                                                                 name):
    # bench/spark_designs.py measures the product's designs against it: it must be exact too.
    sys.path.insert(0, str(ROOT / "bench" / "handwritten"))
    import spark_numpy

    run_small(name, tmp_path, placement="spark", spark_design=spark_numpy.NAME)
    root = optimize(query_sql(short(name)), catalog, profile).logical.root
    assert_same_rows(results(tmp_path / "tandem.duckdb", name).select(root.columns),
                     truth.result(root))

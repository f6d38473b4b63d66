"""Windows that a benchmark loads into DuckDB directly hold what the MIG would have put there:
a run that resumes after them gives exactly the reference's rows."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from benchmarking.measure import preload, preloadable
from columnar.store import ColumnarStore
from rowstream.mig import EPOCH
from runtime.explain import explain
from runtime.run import run
from runtime.spec import RunSpec
from tests.conftest import short
from tests.test_reference import assert_same_rows
from tests.test_run import BATCH, DURATION, RATE, TOPOLOGY, results, truth  # noqa: F401 (a fixture)
from workload.smart_plugs import DEBS_START, SmartPlugs

pytestmark = pytest.mark.integration

WARM = 30  # seconds of event time loaded: the short-window variants' windows are 20 s
HYBRID_Q1 = ("select_1=spark,select_2=spark,aggregate_1=duckdb,join_1=duckdb,select_3=duckdb,"
             "aggregate_2=duckdb")


def test_a_plan_with_spark_state_cannot_be_preloaded():
    assert not preloadable(explain("q1", rate=RATE, placement="spark"))
    assert preloadable(explain("q1", rate=RATE, placement=HYBRID_Q1))


@pytest.mark.parametrize("name, placement, lateness", [
    ("q1", HYBRID_Q1, 0.0), ("q1", HYBRID_Q1, 5.0), ("q3", "duckdb", 0.0),
    ("q5", "select_1=spark,aggregate_1=duckdb,aggregate_2=duckdb", 0.0)])
def test_preloaded_windows_give_the_reference_rows(tmp_path, truth, name, placement,  # noqa: F811
                                                    lateness):
    plan = explain(short(name), rate=RATE, placement=placement)
    store = ColumnarStore(tmp_path / "t.duckdb")
    # In parts of a batch, as a benchmark loads a long warm-up. With a lateness, the window_ends
    # of its last seconds are left for the run to evaluate, as a run that got there would.
    preload(store, plan, SmartPlugs(rate=RATE, **TOPOLOGY).batches(WARM, BATCH), WARM, lateness)
    store.close()
    run(RunSpec(short(name), rate=RATE, duration=DURATION, batch=BATCH, topology=TOPOLOGY, warmup=WARM,
                begin=WARM, resume=True, store=tmp_path / "t.duckdb",
                checkpoint=tmp_path / "cp", lateness=lateness), explanation=plan)
    root = plan.optimization.logical.root
    after = EPOCH + timedelta(seconds=DEBS_START + WARM - lateness)
    want = truth.result(root).filter(pl.col("window_end") > after)
    got = results(tmp_path / "t.duckdb", name).select(root.columns)
    assert want.height > 0
    assert_same_rows(got, want)

"""Plans run on the real engines (Spark Structured Streaming and a DuckDB file) give exactly the
reference evaluator's rows, also when a run is stopped and restarted from its checkpoint."""

from __future__ import annotations

import polars as pl
import pytest

from columnar.store import ColumnarStore
from optimizer.errors import TandemError
from tandem import reference
from tandem.run import run
from tandem.workload import SmartPlugs
from tests.conftest import query_sql
from tests.test_reference import assert_same_rows

pytestmark = pytest.mark.integration

# Six plugs in two houses at 3 tuples/s: every plug reports a load every 4 s. 400 s of event
# time fill the 5-minute windows and slide them; 10 s micro-batches keep the run short.
TOPOLOGY = dict(houses=2, households_per_house=2, plugs=6)
RATE, DURATION, BATCH = 3, 400, 10


@pytest.fixture(scope="module")
def truth():
    stream = pl.from_arrow(SmartPlugs(rate=RATE, **TOPOLOGY).between(0, DURATION))
    return reference.Evaluator({"plugs": stream})


def results(store_path, name: str) -> pl.DataFrame:
    store = ColumnarStore(store_path)
    try:
        return pl.from_arrow(store.results(name))
    finally:
        store.close()


def run_small(name, tmp_path, **kwargs):
    return run(name, rate=RATE, duration=DURATION, batch=BATCH, topology=TOPOLOGY,
               store=tmp_path / "tandem.duckdb", checkpoint=tmp_path / "checkpoint", **kwargs)


CASES = [(q, p) for q in ("q1", "q2", "q3", "q4", "q5", "q6") for p in ("auto", "duckdb")]


@pytest.mark.parametrize("name, placement", CASES + [("q5", "spark")])
def test_runs_give_the_reference_rows(tmp_path, truth, catalog, profile, name, placement):
    summary = run_small(name, tmp_path, placement=placement)
    from optimizer import optimize

    root = optimize(query_sql(name), catalog, profile).logical.root
    got = results(tmp_path / "tandem.duckdb", name)
    want = truth.result(root)
    assert summary.tuples == RATE * DURATION and summary.result_rows == want.height
    assert_same_rows(got.select(root.columns), want)
    assert summary.transfers.to_duckdb_tuples > 0
    if placement != "spark":  # the MIG evaluates every window_end of the stream, rows or not
        first, last = reference.window_ends(truth.streams, root.slide)
        assert summary.window_ends == (last - first) // int(root.slide * 1e6) + 1


def test_a_run_restarted_from_its_checkpoint_neither_loses_nor_duplicates(tmp_path, truth,
                                                                          catalog, profile):
    first = run_small("q1", tmp_path, placement="duckdb", stop_after=15)
    assert 0 < first.batches < DURATION / BATCH
    run_small("q1", tmp_path, placement="duckdb", resume=True)
    from optimizer import optimize

    root = optimize(query_sql("q1"), catalog, profile).logical.root
    assert_same_rows(results(tmp_path / "tandem.duckdb", "q1").select(root.columns),
                     truth.result(root))


def test_placements_the_runtime_cannot_run_yet_are_refused_before_spark_starts(tmp_path):
    with pytest.raises(TandemError, match="join_1"):
        run_small("q3", tmp_path, placement="spark")
    with pytest.raises(TandemError, match="aggregate_1"):
        run_small("q5", tmp_path, placement="aggregate_1=spark,aggregate_2=duckdb")


def test_a_landing_directory_of_debs_csv_files(tmp_path, truth, catalog, profile):
    landing = tmp_path / "landing"
    SmartPlugs(rate=RATE, **TOPOLOGY).write_csv(landing, DURATION, file_seconds=50)
    summary = run_small("q5", tmp_path, placement="auto", source=str(landing))
    from optimizer import optimize

    root = optimize(query_sql("q5"), catalog, profile).logical.root
    # Without a heartbeat, windows complete as far as the data goes: up to the last event.
    last_event = truth.streams["plugs"]["ts"].max()
    want = truth.result(root).filter(pl.col("window_end") <= last_event)
    assert summary.batches == DURATION // 50 and summary.tuples == RATE * DURATION
    assert_same_rows(results(tmp_path / "tandem.duckdb", "q5").select(root.columns), want)

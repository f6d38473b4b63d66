"""Several queries in one run (docs/design.md, Several queries): DuckDB reads and judges each
micro-batch's files once, and every query gives the rows it gives alone, also when the run is
killed with SIGKILL between two queries' arrivals of a batch and resumed."""

from __future__ import annotations

import signal

import polars as pl
import pytest

from benchmarking.verify import SMALL, landed_truth
from workload.disorder import Disorder
from workload.smart_plugs import SmartPlugs

RATE, DURATION, FILE_SECONDS, LATENESS = 50, 60, 2.0, 1.0
QUERIES = ("q1", "q5", "q3")
# Killed once at each, the n-th in micro-batch n: Spark committed the batch before DuckDB read
# it; the first query recorded its arrival, the others not; the first query committed its
# results, the others not.
POINTS = ["committed-unread", "arrival", "duckdb-write"]


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    directory = tmp_path_factory.mktemp("shared")
    SmartPlugs(rate=RATE, **SMALL).write_files(directory, DURATION, FILE_SECONDS,
                                               disorder=Disorder(tail=0.3),
                                               file_format="parquet")
    return directory


def test_queries_share_a_run_only_where_duckdb_reads_one_stream_for_all(tmp_path, landing):
    from optimizer.errors import TandemError
    from runtime.run import run_together
    from runtime.spec import RunSpec
    from tests.conftest import short

    store = tmp_path / "s.duckdb"
    cases = [(RunSpec(short("q1"), together=(short("q5"),), store=store),
              "give --source DIR"),
             (RunSpec(short("q1"), together=("a1",), source=str(landing), store=store),
              "a1 reads air, and q1 plugs: queries share a run over the same streams"),
             (RunSpec(short("q1"), together=(short("q5"),), source=str(landing), store=store,
                      max_error=0.01), "q1 states a quality"),
             (RunSpec(short("q1"), together=(short("q5"),), source=str(landing), store=store,
                      placement="spark"), "q1's plan runs operators over the stream in Spark")]
    for spec, message in cases:
        with pytest.raises(TandemError, match=message):
            run_together(spec)


@pytest.mark.integration
def test_queries_of_one_run_give_their_reference_rows_and_a_killed_run_the_same(
        tmp_path, landing):
    from columnar.store import ColumnarStore
    from runtime.explain import explain
    from runtime.run import run_together, stream_schema
    from runtime.spec import RunSpec
    from tests.conftest import short
    from tests.test_crash import tandem, where
    from tests.test_reference import assert_same_rows

    first, *others = [short(q) for q in QUERIES]
    whole = run_together(RunSpec(first, together=tuple(others), source=str(landing),
                                 store=tmp_path / "whole.duckdb", lateness=LATENESS,
                                 files_per_batch=4))
    assert [s.query for s in whole] == list(QUERIES)
    assert len({(s.tuples, s.batches, s.quarantined.late) for s in whole}) == 1  # one read
    assert whole[0].quarantined.late > 0
    args = ["run", first, *others, "--source", str(landing), "--store",
            str(tmp_path / "resumed.duckdb"), "--lateness", str(LATENESS),
            "--files-per-batch", "3"]
    for batch, point in enumerate(POINTS, start=1):
        killed = tandem(*args, *(["--resume"] if batch > 1 else []),
                        crash=f"{point}:{where(point, batch, [], 3)}")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run_together(RunSpec(first, together=tuple(others), source=str(landing),
                         store=tmp_path / "resumed.duckdb", lateness=LATENESS,
                         files_per_batch=3, resume=True))
    for query in QUERIES:
        explanation = explain(short(query))
        truth, last_end = landed_truth([(str(landing), stream_schema(explanation), LATENESS)],
                                       explanation)
        root = explanation.optimization.logical.root
        want = truth.result(root).filter(pl.col("window_end") <= last_end)
        assert want.height > 0
        for name in ("whole", "resumed"):
            with ColumnarStore(tmp_path / f"{name}.duckdb") as store:
                assert_same_rows(pl.from_arrow(store.results(query)).select(root.columns), want)

"""Several queries in one run (docs/design.md, Several queries): DuckDB reads and checks each
micro-batch's files once for all the queries (one with a K-slack buffer admits what its own
buffer leaves), and every query gives the rows it gives alone, also when the run is killed with
SIGKILL between two queries' arrivals of a batch and resumed."""

from __future__ import annotations

import signal
from pathlib import Path

import polars as pl
import pytest

from benchmarking import reference
from benchmarking.verify import SMALL, landed_truth
from workload.disorder import Disorder
from workload.smart_plugs import SmartPlugs

RATE, DURATION, FILE_SECONDS, LATENESS = 50, 60, 2.0, 1.0
QUERIES = ("q1", "q5", "q3")
MAX_ERROR = 0.05
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

    # A fourth query states a quality: it sizes a K-slack buffer of its own from the one read;
    # the others judge alike, and append from one table.
    sized = Path(short("q5")).with_name("q5k.sql")
    sized.write_text(f"/*+ QUALITY(max_error = {MAX_ERROR}) */\n" + Path(short("q5")).read_text())
    first, *others = [*(short(q) for q in QUERIES), str(sized)]
    whole = run_together(RunSpec(first, together=tuple(others), source=str(landing),
                                 store=tmp_path / "whole.duckdb", lateness=LATENESS,
                                 files_per_batch=4))
    assert [s.query for s in whole] == [*QUERIES, "q5k"]
    assert len({(s.tuples, s.batches, s.quarantined.late) for s in whole[:3]}) == 1  # one read
    assert whole[0].quarantined.late > 0 and whole[-1].slack["decisions"] > 0
    args = ["run", first, *others, "--source", str(landing), "--store",
            str(tmp_path / "resumed.duckdb"), "--lateness", str(LATENESS),
            "--files-per-batch", "3"]
    for batch, point in enumerate(POINTS, start=1):
        killed = tandem(*args, *(["--resume"] if batch > 1 else []),
                        crash=f"{point}:{where(point, batch, [], 3)}")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = run_together(RunSpec(first, together=tuple(others), source=str(landing),
                                   store=tmp_path / "resumed.duckdb", lateness=LATENESS,
                                   files_per_batch=3, resume=True))
    assert resumed[-1].slack["k"] == whole[-1].slack["k"]
    readings = pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))
    root = explain(str(sized)).optimization.logical.root
    decided = []
    for name in ("whole", "resumed"):
        with ColumnarStore(tmp_path / f"{name}.duckdb") as store:
            got = pl.from_arrow(store.results("q5k")).select(root.columns)
            late = [i for i, in store.con.sql(
                "SELECT CAST(row ->> 'id' AS BIGINT) FROM tandem_log.quarantine "
                "WHERE query = 'q5k' AND rule = 'late'").fetchall()]
            last_end = store.con.sql("SELECT max(last_end) FROM q_q5k.progress").fetchall()[0][0]
            decided.append(store.con.sql("SELECT file, k FROM q_q5k.slack ORDER BY unit")
                           .fetchall())
        want = reference.Evaluator({"plugs": readings.filter(~pl.col("id").is_in(late))}).result(
            root).filter(pl.col("window_end") <= last_end)
        assert want.height > 0 and late
        assert_same_rows(got, want)
    assert decided[0] == decided[1]  # a decision per file, the same after every kill
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

"""Quality-driven disorder handling in a run (kslack/manager.py, rowstream/by_reference.py): K
sized per landed file for the quality a query states, against the reference evaluator over the
readings that were not late, under the all-DuckDB placement by reference and under one with a
Spark operator over Spark's own file source, and a run killed with SIGKILL at the crash points
of the by-reference protocol (tests/crash/points.py), resumed each time, against one never
killed."""

from __future__ import annotations

import signal
from datetime import datetime

import polars as pl
import pytest

from benchmarking import reference
from benchmarking.verify import SMALL
from columnar.store import ColumnarStore
from optimizer import optimize
from rowstream.eventtime import LATE
from runtime.quality import Quality, stated
from tests.conftest import query_sql, short
from tests.test_reference import assert_same_rows
from workload.disorder import Disorder
from workload.smart_plugs import SmartPlugs

# 90 s of event time at 50 tuples/s over six plugs, landed in 2-s files of arrival time: one
# unit of K-slack each, so that the buffer adapts some forty times.
RATE, DURATION, FILE_SECONDS = 50, 90, 2.0
DISORDER = Disorder(tail=0.3)


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qddh")
    SmartPlugs(rate=RATE, **SMALL).write_files(directory, DURATION, FILE_SECONDS,
                                               disorder=DISORDER, file_format="parquet")
    return directory


def test_a_query_states_its_quality_in_its_sql_or_its_catalog_entry(tmp_path):
    catalog = tmp_path / "catalog.toml"
    catalog.write_text("[queries.q]\nmax_error = 0.02\n\n[queries.p]\ndisorder = 'max'\n")
    sql = "SELECT window_end, COUNT(*) AS n FROM HOP(s, ts, INTERVAL '1' SECOND, " \
          "INTERVAL '5' SECONDS) GROUP BY window_end"
    (tmp_path / "q.sql").write_text(sql)
    (tmp_path / "p.sql").write_text(sql)
    (tmp_path / "h.sql").write_text("/*+ QUALITY(max_error = 0.001, confidence = 0.99) */ " + sql)
    assert stated(tmp_path / "q.sql", catalog) == Quality(
        "am", 0.02, source="[queries.q] in catalog.toml")
    assert stated(tmp_path / "p.sql", catalog).disorder == "max"
    hinted = stated(tmp_path / "h.sql", catalog)
    assert (hinted.disorder, hinted.max_error, hinted.confidence) == ("am", 0.001, 0.99)
    # A run's options override what the query states; a baseline keeps the requirement.
    assert hinted.overridden(disorder="pd").requirement == hinted.requirement
    assert hinted.overridden(max_error=0.1).max_error == 0.1
    assert Quality().overridden(max_error=0.05).disorder == "am"
    # A join's recall instead of an aggregate's error; an option of one kind replaces the other.
    (tmp_path / "r.sql").write_text("/*+ QUALITY(min_recall = 0.99) */ " + sql)
    recall = stated(tmp_path / "r.sql", catalog)
    assert (recall.disorder, recall.min_recall, recall.requirement.share) == ("am", 0.99, 0.99 ** 0.5)
    assert recall.overridden(max_error=0.01).requirement == hinted.overridden(
        max_error=0.01, confidence=0.95).requirement
    assert hinted.overridden(min_recall=0.9).min_recall == 0.9
    # The recall's measurement period (P_meas) is a join's, and goes with its recall.
    (tmp_path / "p30.sql").write_text("/*+ QUALITY(min_recall = 0.99, period = 30) */ " + sql)
    over = stated(tmp_path / "p30.sql", catalog)
    assert over.requirement.period == 30 and "over 30 s" in over.describe()
    assert recall.requirement.period == 60 and over.overridden(max_error=0.01).period is None
    with pytest.raises(Exception, match="state it with min_recall"):
        Quality("am", 0.01, period=30)
    (tmp_path / "both.sql").write_text("/*+ QUALITY(min_recall = 0.9, max_error = 0.1) */ " + sql)
    with pytest.raises(Exception, match="not both"):
        stated(tmp_path / "both.sql", catalog)
    (tmp_path / "bad.sql").write_text("/*+ QUALITY(max_eror = 0.1) */ " + sql)
    with pytest.raises(Exception, match="unknown quality keys max_eror"):
        stated(tmp_path / "bad.sql", catalog)
    with pytest.raises(Exception, match="relative error in"):
        Quality().overridden(max_error=1.5)


MAX_ERROR = 0.05
# Killed once at each, the n-th in micro-batch n: where the buffer's state is read, and where
# the batch's arrival and the state after it are committed together.
POINTS = ["committed-unread", "arrival", "duckdb-write"]


def run_args(landing, store, files_per_batch: int) -> list[str]:
    return ["run", short("q5"), "--placement", "duckdb", "--source", str(landing),
            "--gateway", "reference", "--store", str(store), "--max-error", str(MAX_ERROR),
            "--files-per-batch", str(files_per_batch)]


@pytest.mark.integration
def test_k_sized_per_file_gives_the_reference_s_rows_and_a_killed_run_decides_alike(
        tmp_path, landing, catalog, profile):
    from runtime.run import run
    from runtime.spec import RunSpec
    from tests.test_crash import tandem, where

    files = sorted(landing.iterdir())
    whole = run(RunSpec(short("q5"), placement="duckdb", source=str(landing),
                        gateway="reference", store=tmp_path / "whole.duckdb",
                        checkpoint=tmp_path / "whole", max_error=MAX_ERROR, files_per_batch=8))
    # Spark's own file source, a file a batch, its selection in Spark: judged by the MIG.
    run(RunSpec(short("q5"), placement="select_1=spark,aggregate_1=duckdb,aggregate_2=duckdb",
                source=str(landing), gateway="native", store=tmp_path / "native.duckdb",
                checkpoint=tmp_path / "native", max_error=MAX_ERROR))
    # Another batching (three files a batch), killed at each point, resumed to its end.
    args = run_args(landing, tmp_path / "resumed.duckdb", 3)
    for batch, point in enumerate(POINTS, start=1):
        killed = tandem(*args, *(["--resume"] if batch > 1 else []),
                        crash=f"{point}:{where(point, batch, files, 3)}")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = run(RunSpec(short("q5"), placement="duckdb", source=str(landing),
                          gateway="reference", store=tmp_path / "resumed.duckdb",
                          max_error=MAX_ERROR, files_per_batch=3, resume=True))
    readings = pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))
    root = optimize(query_sql(short("q5")), catalog, profile).logical.root
    decided = {}
    for name in ("whole", "native", "resumed"):
        with ColumnarStore(tmp_path / f"{name}.duckdb") as store:
            got = pl.from_arrow(store.results("q5")).select(root.columns)
            late = store.con.sql("SELECT CAST(row ->> 'id' AS BIGINT) FROM tandem_log.quarantine "
                                 "WHERE query = 'q5' AND rule = ?", params=[LATE]).fetchall()
            decided[name] = store.con.sql("SELECT file, k, watermark FROM q_q5.slack "
                                         "ORDER BY unit").fetchall()
            last_end: datetime = store.con.sql(
                "SELECT max(last_end) FROM q_q5.progress").fetchall()[0][0]
        on_time = readings.filter(~pl.col("id").is_in([i for i, in late]))
        want = reference.Evaluator({"plugs": on_time}).result(root).filter(
            pl.col("window_end") <= last_end)
        assert want.height > 0
        assert_same_rows(got, want)
        assert len(late) > 0  # the buffer let some readings come late, and they count nowhere
    # One decision per landed file, the same however the files were batched and read and the
    # run killed; the watermark never moves back.
    assert len(decided["whole"]) == len(files)
    assert decided["resumed"] == decided["whole"] == decided["native"]
    marks = [m for _, _, m in decided["whole"] if m is not None]
    assert marks == sorted(marks)
    ks = [k for _, k, _ in decided["whole"]]
    assert whole.slack["k"]["max"] == max(ks) and min(ks) < DISORDER.max_delay / 2
    # The summary of the resumed run tells K over the whole run, the killed runs' part too.
    assert resumed.slack["k"] == whole.slack["k"] and resumed.slack["decisions"] == len(files)


def test_the_page_draws_k_over_the_run(tmp_path):
    """The Tandem page's disorder section (plugins/tandem_plugin.py), from a run's decisions as
    the store keeps them (airflow_tandem/inspection.py)."""
    from airflow_tandem.inspection import k_over_time, slack_of
    from columnar.store import ColumnarStore
    from kslack.manager import Decision

    start = 1_377_986_400_000_000
    with ColumnarStore(tmp_path / "t.duckdb") as store:
        store.create("q5")
        store.arrived("q5", 0, None, {}, slack={}, decisions=[
            ("plugs", f"f{i}", Decision(i, k, start + i * 1_000_000, start + i * 1_000_000 - 10_000))
            for i, k in enumerate([4.5, 4.5, 0.2, 0.3, 0.25])])
    shown = slack_of("q5", Quality("am", 0.01), tmp_path / "t.duckdb")
    assert shown["decisions"] == 5 and shown["k"] == {"first": 4.5, "median": 0.3,
                                                      "last": 0.25, "max": 4.5}
    svg = k_over_time(shown)
    points = [tuple(map(float, p.split(","))) for p in
              svg.split('points="')[1].split('"')[0].split()]
    # Five points left to right; the largest K at the top of the plot, the least lowest.
    assert len(points) == 5 and [x for x, _ in points] == sorted(x for x, _ in points)
    assert points[0][1] < points[3][1] and points[2][1] == max(y for _, y in points)
    # A join's streams have a buffer each: a line each, named.
    with ColumnarStore(tmp_path / "t.duckdb") as store:
        store.arrived("q5", 1, None, {}, slack={}, decisions=[
            ("meters", f"m{i}", Decision(i, 1.0, start + i * 1_000_000, start))
            for i in range(3)])
    shown = slack_of("q5", Quality("am", min_recall=0.99), tmp_path / "t.duckdb")
    assert shown["k_by_stream"]["meters"]["max"] == 1.0 and shown["k"]["max"] == 4.5
    svg = k_over_time(shown)
    assert svg.count("<polyline") == 2 and ">meters</text>" in svg and ">plugs</text>" in svg


def test_the_nightly_clean_up_keeps_k_s_decisions_as_long_as_the_results(tmp_path):
    from datetime import timedelta

    from kslack.manager import Decision
    from runtime.cleanup import CleanupReport, purge_store

    hour = 3_600_000_000
    with ColumnarStore(tmp_path / "t.duckdb") as store:
        store.create("q5")
        for batch in range(3):  # three hours of decisions, a batch an hour
            store.arrived("q5", batch, None, {}, slack={}, decisions=[
                ("plugs", f"f{batch}", Decision(batch, 0.1, 1_377_986_400_000_000 + batch * hour,
                                                0))])
            store.commit("q5", batch, None, datetime(2013, 8, 31, 22) + timedelta(hours=batch))
        report = CleanupReport()
        purge_store(store, timedelta(hours=1), timedelta(minutes=5), 10, report)
        kept = [file for file, in store.con.sql("SELECT file FROM q_q5.slack").fetchall()]
    assert kept == ["f1", "f2"] and report.progress_rows == 1


def test_a_quality_over_the_generator_is_refused_in_one_line(tmp_path):
    from optimizer.errors import TandemError
    from runtime.run import run
    from runtime.spec import RunSpec

    with pytest.raises(TandemError, match="generator's stream arrives in order: give a landing"):
        run(RunSpec(short("q5"), placement="duckdb", max_error=0.01, duration=5,
                    store=tmp_path / "t.duckdb"))

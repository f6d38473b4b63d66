"""Quality-driven disorder handling in a run (kslack/manager.py, rowstream/by_reference.py): K
sized per landed file for the quality a query states, against the reference evaluator over the
readings that were not late, and a run stopped and resumed against one that never stopped."""

from __future__ import annotations

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

# 90 s of event time at 50 tuples/s over six plugs, landed in 1-s files of arrival time: one
# unit of K-slack each, so that the buffer adapts some eighty times.
RATE, DURATION, FILE_SECONDS = 50, 90, 1.0
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
    (tmp_path / "bad.sql").write_text("/*+ QUALITY(max_eror = 0.1) */ " + sql)
    with pytest.raises(Exception, match="unknown quality keys max_eror"):
        stated(tmp_path / "bad.sql", catalog)
    with pytest.raises(Exception, match="relative error in"):
        Quality().overridden(max_error=1.5)


def run_over(landing, tmp_path, name: str, **options):
    from runtime.run import run
    from runtime.spec import RunSpec

    return run(RunSpec(short("q5"), placement="duckdb", source=str(landing), gateway="reference",
                       store=tmp_path / f"{name}.duckdb", checkpoint=tmp_path / name,
                       max_error=0.05, **options))


@pytest.mark.integration
def test_k_sized_per_file_gives_the_reference_s_rows_and_a_resume_decides_alike(tmp_path,
                                                                                landing,
                                                                                catalog,
                                                                                profile):
    whole = run_over(landing, tmp_path, "whole", files_per_batch=8)
    stopped = run_over(landing, tmp_path, "resumed", files_per_batch=3, stop_after=5)
    resumed = run_over(landing, tmp_path, "resumed", files_per_batch=3, resume=True)
    assert stopped.slack["decisions"] == 5 * 3
    readings = pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))
    root = optimize(query_sql(short("q5")), catalog, profile).logical.root
    decided = {}
    for run in ("whole", "resumed"):
        with ColumnarStore(tmp_path / f"{run}.duckdb") as store:
            got = pl.from_arrow(store.results("q5")).select(root.columns)
            late = store.con.sql("SELECT CAST(row ->> 'id' AS BIGINT) FROM tandem_log.quarantine "
                                 "WHERE query = 'q5' AND rule = ?", params=[LATE]).fetchall()
            decided[run] = store.con.sql("SELECT file, k, watermark FROM q_q5.slack "
                                         "ORDER BY unit").fetchall()
            last_end: datetime = store.con.sql(
                "SELECT max(last_end) FROM q_q5.progress").fetchall()[0][0]
        on_time = readings.filter(~pl.col("id").is_in([i for i, in late]))
        want = reference.Evaluator({"plugs": on_time}).result(root).filter(
            pl.col("window_end") <= last_end)
        assert want.height > 0
        assert_same_rows(got, want)
        assert len(late) > 0  # the buffer let some readings come late, and they count nowhere
    # One decision per landed file, the same however the files were batched and the run
    # stopped; the watermark never moves back.
    assert len(decided["whole"]) == len(list(landing.iterdir()))
    assert decided["resumed"] == decided["whole"]
    marks = [m for _, _, m in decided["whole"] if m is not None]
    assert marks == sorted(marks)
    ks = [k for _, k, _ in decided["whole"]]
    assert whole.slack["k"]["max"] == max(ks) and min(ks) < DISORDER.max_delay / 2
    assert resumed.tuples + stopped.tuples == whole.tuples

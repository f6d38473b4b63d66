"""The input suite and lateness judged in Spark's JVM (rowstream/suite_spark.py) against the
native gateway's row-by-row judge: a file passes in the JVM only where the judge admits every
row of it, and then the batch's summary is the judge's."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from rowstream.gateway import STREAM
from rowstream.native import NativeJudge, judged_columns, parquet_rows
from rowstream.relations import naive
from rowstream.session import spark_session
from rowstream.suite_spark import file_checks, passed
from runtime.settings import example_stream
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

PLUGS = example_stream("plugs")
LATENESS, FILE_SECONDS = 5.0, 10
DAY = timedelta(days=1)
# One bad row planted at the head of a clean file, each failing another rule; the last row
# fails none: only its id is new.
PLANTED = {"null id": {"id": None}, "null ts": {"ts": None}, "null plug": {"plug_id": None},
           "nan": {"value": math.nan}, "infinite": {"value": math.inf},
           "negative": {"value": -1.5}, "property": {"property": 2},
           "epoch": {"ts": datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)}, "far": {"ts": 10 * DAY},
           "late": {"ts": -timedelta(seconds=FILE_SECONDS + 30)}, "duplicate id": {"id": 4},
           "valid": {}}


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    """A clean first file (it sets the high-water mark), then a copy of the second clean file
    per planted row."""
    directory = tmp_path_factory.mktemp("landing")
    first, second = SmartPlugs(rate=20, houses=2, households_per_house=2, plugs=6).write_files(
        directory, 2 * FILE_SECONDS, file_seconds=FILE_SECONDS, file_format="parquet")
    rows = pl.read_parquet(second)
    base = rows.row(0, named=True)
    for n, (name, changes) in enumerate(PLANTED.items(), start=1):
        row = {**base, "id": 9_000_000 + n}
        for column, change in changes.items():
            row[column] = (base[column] + change if isinstance(change, timedelta) else
                           rows["id"][change] if name == "duplicate id" else change)
        path = directory / f"planted-{n:02d}.parquet"
        pq.write_table(pl.concat([pl.DataFrame([row], schema=rows.schema), rows]).to_arrow()
                       .cast(pq.read_schema(second)), path)
    return first, second, {name: directory / f"planted-{n:02d}.parquet"
                           for n, name in enumerate(PLANTED, start=1)}


def judged_both_ways(path, high_water):
    """The JVM's summary of a batch of the one file and the row-by-row judge's verdict."""
    spark = spark_session()
    rows = parquet_rows(spark.read, PLUGS, str(path))
    stream = rows.select(*judged_columns(PLUGS), F.lit(False).alias("heartbeat"))
    judge = NativeJudge(PLUGS, (path,), high_water, LATENESS, 1.0)
    verdict = judge(stream.toArrow())
    checks = file_checks(stream.select(F.struct("*").alias(STREAM)), judge)
    return passed(naive(checks.toArrow()), judge), verdict, rows


def test_a_file_passes_in_the_jvm_exactly_where_the_judge_admits_every_row(landing):
    first, second, planted = landing
    high_water = max(pq.read_table(first).column("ts").to_pylist()).replace(tzinfo=None)
    paths = {"clean": second, **planted}
    judged = {name: judged_both_ways(path, high_water) for name, path in paths.items()}
    for name, (summary, verdict, rows) in judged.items():
        everything_admitted = verdict.quarantined.num_rows == 0
        assert (summary is not None) == everything_admitted, name
        if summary is not None:
            ts = pl.from_arrow(rows.select("ts").toArrow())["ts"].dt.replace_time_zone(None)
            assert summary.tuples == rows.count() == len(ts)
            assert (summary.first, summary.latest) == (ts.min(), ts.max())
            assert summary.high_water == verdict.high_water
            assert summary.files == (paths[name].name,)
    # Each planted row but the valid one makes its file fail in the JVM.
    assert [n for n in PLANTED if judged[n][0] is None] == [n for n in PLANTED if n != "valid"]


def test_the_first_batch_has_no_late_rows_and_sets_the_high_water_mark(landing):
    first, _, _ = landing
    summary, verdict, _ = judged_both_ways(first, None)
    assert summary is not None and summary.high_water == verdict.high_water

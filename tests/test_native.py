"""The native gateway's parts that need no Spark: which runs it serves, and how the MIG judges
a batch of its rows (rowstream/native.py). Runs through Spark are in test_disorder,
test_bad_input and test_crash."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from optimizer.deployment import deploy
from rowstream.eventtime import LATE
from rowstream.native import FILE, admit_batch, batch_files, fits
from tandem.explain import explain

T0 = datetime(2013, 9, 1)


def rows(file: str, seconds: list[float], ids: list[int] | None = None,
         values: list[float] | None = None) -> pl.DataFrame:
    n = len(seconds)
    return pl.DataFrame({
        "id": ids or list(range(n)), "ts": [T0 + timedelta(seconds=s) for s in seconds],
        "value": values or [1.0] * n, "property": [1] * n, "plug_id": [0] * n,
        "household_id": [0] * n, "house_id": [0] * n, FILE: [file] * n,
        "row": list(range(1, n + 1))}).cast({"property": pl.Int32, "plug_id": pl.Int32,
                                             "household_id": pl.Int32, "house_id": pl.Int32,
                                             "ts": pl.Datetime("us")})


def test_a_batch_is_judged_file_by_file_then_by_lateness(tmp_path):
    broken = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [1, 2]}), broken)
    broken.write_bytes(broken.read_bytes()[:-9])
    empty = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), empty)
    batch = pl.concat([
        rows("a.parquet", [10.0, 11.0, 12.0], ids=[1, 2, 1]),  # id 1 twice in its file
        rows("b.parquet", [3.0, 13.0, 14.0], ids=[1, 5, 6], values=[1.0, float("nan"), 2.0]),
    ])
    judged = admit_batch(batch, [tmp_path / "a.parquet", tmp_path / "b.parquet", broken, empty],
                         high_water=T0 + timedelta(seconds=9), lateness=2.0, slide=1.0,
                         time_distance=3600.0)
    # b's id 1 is unique within b; its row at 3 s is at or before the watermark 7 s.
    assert judged.admitted.to_pylist() == [False, True, False, False, False, True]
    assert dict(judged.quarantined.select("origin", "rule").iter_rows()) == {
        "a.parquet:row 1": "expect_column_values_to_be_unique(id)",
        "a.parquet:row 3": "expect_column_values_to_be_unique(id)",
        "b.parquet:row 1": LATE,
        "b.parquet:row 2": "expect_column_values_to_not_be_null(value)",
        "c.parquet": "unreadable",  # the empty file d gave no rows and has none: nothing to say
    }
    assert judged.high_water == T0 + timedelta(seconds=14)  # the latest admitted reading


def test_a_batch_without_rows_keeps_the_high_water_mark():
    judged = admit_batch(rows("a.parquet", []), [], high_water=T0, lateness=1.0, slide=1.0,
                         time_distance=60.0)
    assert len(judged.admitted) == 0 and judged.quarantined.height == 0
    assert judged.high_water == T0


def test_the_files_of_a_batch_come_from_spark_s_checkpoint(tmp_path):
    log = tmp_path / "sources" / "0"
    log.mkdir(parents=True)
    (log / "0").write_text('v1\n{"path":"file:///land/a%20b.parquet","timestamp":1,"batchId":0}\n')
    (log / "9.compact").write_text(
        'v1\n{"path":"file:///land/x.parquet","timestamp":1,"batchId":8}\n'
        '{"path":"file:///land/y.parquet","timestamp":2,"batchId":9}\n')
    assert [p.as_posix() for p in batch_files(tmp_path, 0)] == ["/land/a b.parquet"]
    assert [p.as_posix() for p in batch_files(tmp_path, 9)] == ["/land/y.parquet"]
    assert batch_files(tmp_path, 10) == []


def test_only_parquet_directories_and_stateless_spark_parts_are_read_natively(tmp_path):
    stateless = deploy(explain("q5", placement="duckdb").optimization.plan)
    stateful = deploy(explain("q5", placement="spark").optimization.plan)
    assert not fits(tmp_path, stateless)  # nothing landed yet: nothing says the format
    pq.write_table(pa.table({"id": [1]}), tmp_path / "a.parquet")
    (tmp_path / "b.csv.part").write_text("being written")
    assert fits(tmp_path, stateless) and not fits(tmp_path, stateful)
    (tmp_path / "c.csv").write_text("1,2,3")
    assert not fits(tmp_path, stateless)

"""The native gateway's parts that need no Spark: which runs it serves, and how the MIG judges
a batch of its rows (rowstream/native.py). Runs through Spark are in test_disorder,
test_bad_input and test_crash."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from optimizer.deployment import deploy
from optimizer.errors import TandemError
from rowstream.eventtime import LATE
from rowstream.landing import batch_files, read_landed
from rowstream.native import (
    BLOCK,
    CLEAN,
    FILE,
    HEADER,
    KIND,
    LINE,
    OTHER,
    NativeJudge,
    admit_batch,
    fits,
)
from runtime.explain import explain
from runtime.settings import example_stream

PLUGS = example_stream("plugs")
T0 = datetime(2013, 9, 1)
HOUR = replace(PLUGS, time_distance=3600.0)


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
    judge = NativeJudge(HOUR, (tmp_path / "a.parquet", tmp_path / "b.parquet", broken, empty),
                        high_water=T0 + timedelta(seconds=9), lateness=2.0, slide=1.0)
    judged = judge(batch.to_arrow())
    # b's id 1 is unique within b; its row at 3 s is at or before the watermark 7 s.
    assert judged.admitted.to_pylist() == [False, True, False, False, False, True]
    quarantined = pa.concat_tables([judged.quarantined, judge.unread(judged.files)])
    assert dict(pl.from_arrow(quarantined).select("origin", "rule").iter_rows()) == {
        "a.parquet:row 1": "expect_column_values_to_be_unique(id)",
        "a.parquet:row 3": "expect_column_values_to_be_unique(id)",
        "b.parquet:row 1": LATE,
        "b.parquet:row 2": "expect_column_values_to_not_be_null(value)",
        "c.parquet": "unreadable",  # the empty file d gave no rows and has none: nothing to say
    }
    assert judged.high_water == T0 + timedelta(seconds=14)  # the latest admitted reading


def csv_rows(path, blocks: list[int], kinds: list[int]) -> pl.DataFrame:
    """The lines of a CSV file as Spark's text source gives them: the file's data lines (the
    header's typed values are null), each line's block, kind and text, in Spark's order."""
    lines = read_landed(path, HOUR).select(*PLUGS.names)
    if kinds[0] == HEADER:
        lines = pl.concat([lines.clear(1), lines])
    return lines.with_columns(pl.lit(path.name).alias(FILE), pl.lit(None, pl.Int64).alias("row"),
                              pl.Series(BLOCK, blocks), pl.Series(KIND, kinds, pl.Int8),
                              pl.Series(LINE, path.read_text().splitlines()))


def write_csv(path, lines: list[str]):
    path.write_text("id,timestamp,value,property,plug_id,household_id,house_id\n"
                    + "".join(f"{line}\n" for line in lines))
    return path


def test_a_csv_file_s_lines_are_numbered_in_file_order_across_spark_s_blocks(tmp_path):
    path = write_csv(tmp_path / "a.csv", ["1,1377986400,1.5,1,0,0,0", "2,1377986401,2.5,1,0,0,0",
                                          "1,1377986402,3.5,1,0,0,0"])
    lines = csv_rows(path, [0, 0, 90, 90], [HEADER, CLEAN, CLEAN, CLEAN])
    # Spark's partitions are ordered by size: the second block's lines may come first.
    batch = pl.concat([lines.slice(2), lines.slice(0, 2)])
    judged = admit_batch(batch, HOUR, high_water=None, lateness=0.0, slide=1.0)
    # id 1 twice in the file, lines 2 and 4 (the batch's rows 3 and 1); id 2 is line 3 (row 0).
    # The header is neither admitted nor quarantined.
    assert judged.admitted.to_pylist() == [True, False, False, False]
    assert pl.from_arrow(judged.quarantined).select("origin", "rule").rows() == [
        ("a.csv:2", "expect_column_values_to_be_unique(id)"),
        ("a.csv:4", "expect_column_values_to_be_unique(id)")]


def test_a_csv_file_with_a_line_spark_cannot_judge_is_judged_as_the_python_source_does(tmp_path):
    path = write_csv(tmp_path / "a.csv", [" 1 ,1377986400,1.50,1,0,0,0", "2,1377986401,x,1,0,0,0"])
    judged = admit_batch(csv_rows(path, [0, 0, 0], [HEADER, OTHER, OTHER]), HOUR,
                         high_water=None, lateness=0.0, slide=1.0)
    assert judged.admitted.to_pylist() == [False, True, False]
    assert pl.from_arrow(judged.quarantined).select("origin", "reason").rows() == [
        ("a.csv:3", "value x is not a number")]
    # Spark's values of an admitted line must be the Python source's, or the batch fails.
    wrong = csv_rows(path, [0, 0, 0], [HEADER, OTHER, OTHER]).with_columns(
        pl.col("value").fill_null(0.0) * 2)
    with pytest.raises(TandemError, match="a.csv:2: Spark's CSV source reads this line otherwise"):
        admit_batch(wrong, HOUR, high_water=None, lateness=0.0, slide=1.0)


def test_a_batch_without_rows_keeps_the_high_water_mark():
    judged = admit_batch(rows("a.parquet", []), replace(PLUGS, time_distance=60.0),
                         high_water=T0, lateness=1.0, slide=1.0)
    assert len(judged.admitted) == 0 and judged.quarantined.num_rows == 0
    assert judged.high_water == T0


def test_the_files_of_a_batch_are_the_source_log_s_entries_between_two_offsets(tmp_path):
    # Entries 0-9 compacted into 9.compact, 10 and 11 apart. Batch 1 planned after a death
    # that left entry 1 without its offsets: it holds entries 1 and 2, and batch n the entry
    # n + 1 from then on (tests/test_crash.py makes that checkpoint with Spark).
    log, offsets = tmp_path / "sources" / "0", tmp_path / "offsets"
    log.mkdir(parents=True)
    offsets.mkdir()

    def entry(n: int, name: str) -> str:
        return json.dumps({"path": f"file:///land/{name}", "timestamp": n, "batchId": n}) + "\n"

    (log / "9.compact").write_text("v1\n" + "".join(entry(n, f"{n} a.parquet")
                                                  for n in range(10)))
    for n in (10, 11):
        (log / str(n)).write_text("v1\n" + entry(n, f"{n}.parquet"))
    for batch, logged in ((0, 0), (1, 2), (8, 9), (9, 10), (10, 11)):
        (offsets / str(batch)).write_text('v1\n{"batchWatermarkMs":0}\n'
                                          + json.dumps({"logOffset": logged}) + "\n")
    assert [p.as_posix() for p in batch_files(tmp_path, 0)] == ["/land/0 a.parquet"]
    assert [p.name for p in batch_files(tmp_path, 1)] == ["1 a.parquet", "2 a.parquet"]
    assert [p.name for p in batch_files(tmp_path, 9)] == ["10.parquet"]
    assert [p.name for p in batch_files(tmp_path, 10)] == ["11.parquet"]
    (log / "11").unlink()
    with pytest.raises(TandemError, match="no entry 11"):
        batch_files(tmp_path, 10)


def test_directories_of_one_format_and_stateless_spark_parts_are_read_natively(tmp_path):
    stateless = deploy(explain("q5", placement="duckdb").optimization.plan)
    stateful = deploy(explain("q5", placement="spark").optimization.plan)
    assert not fits(tmp_path, stateless)  # nothing landed yet: nothing says the format
    pq.write_table(pa.table({"id": [1]}), tmp_path / "a.parquet")
    (tmp_path / "b.csv.part").write_text("being written")
    assert fits(tmp_path, stateless) and not fits(tmp_path, stateful)
    (tmp_path / "c.csv").write_text("1,2,3")
    assert not fits(tmp_path, stateless)  # two formats
    (tmp_path / "a.parquet").unlink()
    assert fits(tmp_path, stateless) and not fits(tmp_path, stateful)


def test_a_run_reads_by_reference_or_natively_where_it_fits_unless_told_otherwise(tmp_path):
    from runtime.run import landing_gateway  # imports pyspark, starts no Spark
    from runtime.spec import RunSpec

    duckdb = deploy(explain("q5", placement="duckdb").optimization.plan)
    stateless = deploy(explain("q5", placement="select_1=spark,aggregate_1=duckdb,"
                                               "aggregate_2=duckdb").optimization.plan)
    stateful = deploy(explain("q5", placement="spark").optimization.plan)
    (tmp_path / "a.csv").write_text("1,2,3")
    assert landing_gateway(str(tmp_path), duckdb, "auto") == "reference"
    assert landing_gateway(str(tmp_path), duckdb, "native") == "native"
    assert landing_gateway(str(tmp_path), stateless, "auto") == "native"
    assert landing_gateway(str(tmp_path), stateless, "python") == "python"
    assert landing_gateway(str(tmp_path), stateful, "auto") == "python"
    with pytest.raises(TandemError, match="--gateway reference: DuckDB reads .* itself only"):
        landing_gateway(str(tmp_path), stateless, "reference")
    with pytest.raises(TandemError, match="--gateway native: Spark's own file sources read"):
        landing_gateway(str(tmp_path), stateful, "native")
    with pytest.raises(TandemError, match="--gateway rust: give one of auto, reference, native, "
                                          "python"):
        RunSpec("q5", source=str(tmp_path), gateway="rust")  # refused before anything runs

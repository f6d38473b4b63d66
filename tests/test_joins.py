"""Joins between streams (docs/design.md, Streams and Gateway): the households' meters, a second
stream correlated with the plugs (workload/meters.py), and M1, which joins the two per
household. A run reads each stream from its own landing directory by reference, each judged by
its own rules and lateness, and evaluates a window once both streams have passed it; a run
killed with SIGKILL and resumed gives the rows of one never killed."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from benchmarking import reference
from benchmarking.verify import SMALL, landed_truth, verify
from workload.disorder import Disorder
from workload.meters import HouseholdMeters
from workload.smart_plugs import SmartPlugs

# 60 s of event time: the plugs at 50 tuples/s over six plugs, the four households' meters once
# a second each, both out of order (the meters' delays apart from the plugs') and landed in 2-s
# files of arrival time.
RATE, DURATION, FILE_SECONDS, LATENESS = 50, 60, 2.0, 1.0
PLUGS = SmartPlugs(rate=RATE, **SMALL)
METERED = HouseholdMeters(rate=4, plugs=PLUGS)
DISORDERS = {"plugs": Disorder(tail=0.3), "meters": Disorder(tail=0.3, seed=7, max_delay=3.0)}


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("joins")
    for name, source in (("plugs", PLUGS), ("meters", METERED)):
        source.write_files(directory / name, DURATION, FILE_SECONDS, disorder=DISORDERS[name],
                           file_format="parquet")
    return directory


def test_the_meters_measure_what_the_plugs_draw():
    readings = pl.from_arrow(METERED.between(0, 120))
    # One reading per household and second, the same however the stream is cut.
    assert readings.height == 4 * 120
    assert readings.equals(pl.concat([pl.from_arrow(METERED.between(a, a + 7))
                                      for a in range(0, 120, 7)]).head(readings.height))
    # A household's meter reads at least its unmetered load, and moves with its plugs' bursts.
    minute = readings.with_columns((pl.col("ts").dt.minute()).alias("m"))
    for m in (0, 1):
        plugged = METERED.plugged(m)
        mine = minute.filter(pl.col("m") == m).sort("house_id", "household_id", "ts")
        household = (mine["house_id"] * 2 + mine["household_id"]).to_numpy()
        expected = plugged[household] + METERED.unmetered[household]
        assert np.all(mine["load"].to_numpy() >= 0.98 * expected)


def test_late_readings_of_a_disordered_meter_stream_land_once(landing):
    files = sorted((landing / "meters").iterdir())
    landed = pl.concat([pl.read_parquet(f) for f in files])
    assert landed.height == 4 * DURATION
    assert landed.select("house_id", "household_id", "ts").is_unique().all()
    # Cut by arrival time: some readings land after a later one.
    ts = landed["ts"].cast(pl.Int64).to_numpy()
    assert (ts[1:] < np.maximum.accumulate(ts)[:-1]).sum() > 0


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_a_batch_of_two_streams_reads_each_stream_s_own_rows(tmp_path, file_format):
    """DuckDB reads both streams' files of a batch on one connection, each into temporary
    tables of its own (a CSV file's fields, its lines), which the crossings then read."""
    import duckdb

    from rowstream.by_reference import FileReferences, SynchronisedReferences
    from runtime.settings import example_stream

    judges = []
    for name, source in (("plugs", PLUGS), ("meters", METERED)):
        files = source.write_files(tmp_path / name, 10, 5.0, file_format=file_format)
        judges.append(FileReferences(example_stream(name), tuple(files), None, LATENESS, 1.0))
    def connected() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        return con

    def rows(con: duckdb.DuckDBPyConnection, sql: str, names) -> pl.DataFrame:
        return pl.from_arrow(con.sql(sql).to_arrow_table()).sort(names)

    con = connected()
    read = SynchronisedReferences(tuple(judges)).read(con)
    for judge in judges:
        alone = connected()
        names = list(judge.schema.names)
        want = rows(alone, judge.read(alone).rows, names)
        assert want.height > 0
        assert rows(con, read.rows_of(judge.schema.name), names).equals(want)
    read.close(con)


def test_a_join_between_streams_is_refused_in_one_line_where_it_cannot_run(tmp_path, landing):
    from optimizer.errors import TandemError
    from runtime.run import run
    from runtime.spec import RunSpec
    from tests.conftest import short

    store = tmp_path / "s.duckdb"
    with pytest.raises(TandemError, match="the generator writes one stream: give --source DIR"):
        run(RunSpec(short("m1"), store=store))
    only = tmp_path / "only"
    only.mkdir()
    (only / "plugs").symlink_to(landing / "plugs")
    with pytest.raises(TandemError, match="has no landing directory meters/"):
        run(RunSpec(short("m1"), source=str(only), store=store))
    with pytest.raises(TandemError, match="runs by reference"):
        run(RunSpec(short("m1"), source=str(landing), store=store, gateway="native"))


# Killed once at each, the n-th in micro-batch n: Spark committed the batch before DuckDB read
# its files, DuckDB recorded its arrival (with each stream's buffer), and DuckDB committed its
# results.
POINTS = ["committed-unread", "arrival", "duckdb-write"]
MIN_RECALL = 0.9


@pytest.mark.integration
def test_a_join_between_streams_gives_the_reference_s_rows_and_a_killed_run_the_same(
        tmp_path, landing):
    """M1 with each stream's allowed lateness against the reference; M2, a join of the
    readings themselves, with a buffer per stream sized for a recall, killed at each point and
    resumed, against one never killed and the reference over the readings not late."""
    from columnar.store import ColumnarStore
    from runtime.explain import explain
    from runtime.quality import describe_slack
    from runtime.run import run, stream_schemas
    from runtime.spec import RunSpec
    from tests.conftest import short
    from tests.test_crash import tandem, where
    from tests.test_reference import assert_same_rows

    explanation = explain(short("m1"))
    assert explanation.to_json()["crossing"] == "reference"
    schemas = stream_schemas(explanation)
    assert [s.name for s in schemas] == ["plugs", "meters"]
    truth, last_end = landed_truth([(str(landing / s.name), s, LATENESS) for s in schemas],
                                   explanation)
    want = truth.result(explanation.optimization.logical.root).filter(
        pl.col("window_end") <= last_end)
    assert want.height > 0
    summary = run(RunSpec(short("m1"), source=str(landing), store=tmp_path / "m1.duckdb",
                          checkpoint=tmp_path / "m1", lateness=LATENESS, files_per_batch=4))
    assert summary.gateway == "reference" and summary.quarantined.late > 0
    with ColumnarStore(tmp_path / "m1.duckdb") as store:
        assert_same_rows(pl.from_arrow(store.results("m1")).select(want.columns), want)
    # `tandem verify` runs the placements in which DuckDB reads the streams by reference:
    # here a Spark aggregate over DuckDB's selection, too.
    outcomes = verify(short("m1"), "2", source=str(landing), lateness=LATENESS)
    assert len(outcomes) >= 2 and {o.status for o in outcomes} == {"same"}
    assert any("spark" in o.placement.values() for o in outcomes)

    whole = run(RunSpec("m2", source=str(landing), store=tmp_path / "whole.duckdb",
                        checkpoint=tmp_path / "whole", min_recall=MIN_RECALL,
                        files_per_batch=4))
    args = ["run", "m2", "--source", str(landing), "--store", str(tmp_path / "resumed.duckdb"),
            "--min-recall", str(MIN_RECALL), "--files-per-batch", "3"]
    for batch, point in enumerate(POINTS, start=1):
        killed = tandem(*args, *(["--resume"] if batch > 1 else []),
                        crash=f"{point}:{where(point, batch, [], 3)}")
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = run(RunSpec("m2", source=str(landing), store=tmp_path / "resumed.duckdb",
                          min_recall=MIN_RECALL, files_per_batch=3, resume=True))
    root = explain("m2").optimization.logical.root
    readings = {"plugs": pl.from_arrow(PLUGS.between(0, DURATION)),
                "meters": pl.from_arrow(METERED.between(0, DURATION))}
    decided, held = {}, {}
    for name in ("whole", "resumed"):
        with ColumnarStore(tmp_path / f"{name}.duckdb") as store:
            got = pl.from_arrow(store.results("m2")).select(root.columns)
            late = pl.from_arrow(store.con.sql(
                "SELECT stream, ts, CAST(row ->> 'house_id' AS INTEGER) AS house_id, "
                "CAST(row ->> 'household_id' AS INTEGER) AS household_id, "
                "CAST(row ->> 'id' AS BIGINT) AS id FROM tandem_log.quarantine "
                "WHERE query = 'm2'").to_arrow_table())
            decided[name] = store.con.sql("SELECT stream, file, k, watermark FROM q_m2.slack "
                                          "ORDER BY stream, unit").fetchall()
            state = json.loads(store.con.sql("SELECT slack FROM q_m2.progress ORDER BY "
                                              "batch_id DESC LIMIT 1").fetchall()[0][0])
            held[name] = {s: len(state[s].get("pending", ())) for s in state}
            last_end = store.con.sql("SELECT max(last_end) FROM q_m2.progress").fetchall()[0][0]
        on_time = {
            "plugs": readings["plugs"].filter(~pl.col("id").is_in(
                late.filter(pl.col("stream") == "plugs")["id"].implode())),
            "meters": readings["meters"].with_columns(pl.col("ts").dt.replace_time_zone(None))
            .join(late.filter(pl.col("stream") == "meters").select(
                "house_id", "household_id", "ts"), on=["house_id", "household_id", "ts"],
                how="anti")}
        assert {s for s in late["stream"]} == {"plugs", "meters"}
        want = reference.Evaluator(on_time).result(root).filter(pl.col("window_end") <= last_end)
        assert want.height > 0
        assert_same_rows(got, want)
    # A decision per landed file of each stream, or the file held for the stream behind
    # (Same-K), the same however the files were batched and the run killed; each stream's
    # watermark never moves back.
    files = {name: len(list((landing / name).iterdir())) for name in ("plugs", "meters")}
    assert [sum(s == name for s, *_ in decided["whole"]) + held["whole"][name]
            for name in files] == list(files.values())
    assert decided["resumed"] == decided["whole"] and held["resumed"] == held["whole"]
    # The run's summary says which files wait for the stream behind.
    assert whole.slack["held"] == {s: n for s, n in held["whole"].items() if n}
    assert ("wait for the stream behind" in describe_slack(whole.slack)) == any(
        held["whole"].values())
    assert len({k for _, _, k, _ in decided["whole"]}) > 1  # K adapts
    for name in files:
        marks = [m for s, _, _, m in decided["whole"] if s == name and m is not None]
        assert marks == sorted(marks)
    assert resumed.slack["k_by_stream"] == whole.slack["k_by_stream"]

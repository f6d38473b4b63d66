"""Exactly once under crashes: `tandem run` and `tandem microbatch` are killed with SIGKILL at
the crash points of the protocol (tests/crash/points.py), one after another in a chain (each
resume killed at the next point, a later micro-batch), resumed to the end, and compared with the
reference evaluator: no row lost, none duplicated, in the results and in the quarantine."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from benchmarking import reference
from benchmarking.verify import SMALL
from columnar.store import ColumnarStore
from optimizer import load_catalog, load_profile, optimize
from rowstream.eventtime import LATE, US, watermark
from runtime.microbatch import run_microbatch
from runtime.run import default_checkpoint, run
from runtime.spec import FILES_PER_BATCH, RunSpec
from tests.conftest import QUERIES, lost_and_duplicated, query_sql, short
from tests.crash.points import POINTS, REFERENCE_POINTS, environment
from tests.matrix import FULL
from tests.test_reference import assert_same_rows
from workload.disorder import Disorder
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

EVERY_POINT = POINTS | REFERENCE_POINTS

ROOT = Path(__file__).resolve().parents[1]
# Q5 with its first aggregate in Spark (state in Spark's checkpoint) and its second in DuckDB.
PLACEMENT = "select_1=spark,aggregate_1=spark,aggregate_2=duckdb"
LATENESS = "1"  # below the largest delay: the quarantine holds late readings too
STREAM = SmartPlugs(rate=5, **SMALL)
# Eight files, a micro-batch each, and one that closes; Q5's short-window variant
# (tests/conftest.py:short), whose 20-second windows span two files.
DURATION, FILE_SECONDS = 80, 10


def tandem(*args: str, crash: str, state: Path | None = None):
    env = environment(crash)
    if state:
        env["TANDEM_STATE"] = str(state)
    # A session of its own: a crash point kills the process group, Spark's JVM included.
    return subprocess.run([sys.executable, "-m", "tandem.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, start_new_session=True)


def contents(store: Path, name: str) -> tuple[pl.DataFrame, list[int]]:
    """The results (without the batch that wrote them) and the ids of the readings the
    quarantine holds as late."""
    with ColumnarStore(store, read_only=True) as columnar:
        results = pl.from_arrow(columnar.results(name))
        late = [row[0] for row in columnar.con.execute(
            "SELECT CAST(row ->> 'id' AS BIGINT) AS id FROM tandem_log.quarantine "
                "WHERE query = ? AND rule = ?",
            [name, LATE]).fetchall()]
    return results, sorted(late)


def expected(files: list[Path]) -> tuple[pl.DataFrame, list[int]]:
    """Q5's rows and the late readings by the contract (docs/design.md, Semantics), file by
    file as the micro-batches read them: a reading is late if its event time is at or before
    the watermark of the files before its own (their latest admitted event in whole ms, less
    L); the rest count, and the window_ends up to the last watermark are evaluated."""
    readings = pl.from_arrow(STREAM.between(0, DURATION))
    lateness = round(float(LATENESS) * US)
    high, late = None, []
    for path in files:
        ids = (pl.read_csv(path, columns=["id"], schema_overrides={"id": pl.Int64})
               if path.suffix == ".csv" else pl.read_parquet(path, columns=["id"]))["id"]
        rows = readings.filter(pl.col("id").is_in(ids.implode())).with_columns(
            us=pl.col("ts").dt.epoch("us"))
        mark = watermark(high, float(LATENESS))
        is_late = pl.lit(False) if mark is None else pl.col("us") <= mark
        late += rows.filter(is_late)["id"].to_list()
        admitted = rows.filter(~is_late)["us"].max()
        high = max(t for t in (high, admitted) if t is not None)
    root = optimize(query_sql(short("q5")), load_catalog(QUERIES / "catalog.toml"),
                    load_profile()).logical.root
    step = round(root.slide * US)
    last_end = (high // 1000 * 1000 - lateness) // step * step
    on_time = readings.filter(~pl.col("id").is_in(late))
    want = reference.Evaluator({"plugs": on_time}).result(root).filter(
        pl.col("window_end").dt.epoch("us") <= last_end)
    assert want.height > 0 and late
    return want.select(root.columns), sorted(late)


def assert_exact(got: tuple[pl.DataFrame, list[int]], want: tuple[pl.DataFrame, list[int]],
                 reliability, command: str, points: list[str]) -> None:
    """The reference's rows (floats within its tolerance: Spark's partial sums may add up in
    another order after a restart) and exactly the late readings, each once."""
    (results, late), (want_results, want_late) = got, want
    results = results.select(want_results.columns)
    lost, duplicated = lost_and_duplicated(results, want_results)
    reliability("kill_point", command=command, point="+".join(points), rows_lost=lost
                + len(set(want_late) - set(late)), rows_duplicated=duplicated
                + len(late) - len(set(late)), result_rows=results.height,
                rows_quarantined=len(late))
    assert (lost, duplicated) == (0, 0)
    assert_same_rows(results, want_results)
    assert late == want_late


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> list[Path]:
    return STREAM.write_files(tmp_path_factory.mktemp("landing"), DURATION, FILE_SECONDS,
                              disorder=Disorder(tail=0.3))


def run_args(landing: list[Path], store: Path, placement: str, gateway: str,
             files_per_batch: int = 1) -> list[str]:
    return ["run", short("q5"), "--placement", placement, "--source", str(landing[0].parent),
            "--store", str(store), "--lateness", LATENESS, "--gateway", gateway,
            "--files-per-batch", str(files_per_batch)]


def where(point: str, batch: int, landing: list[Path], files_per_batch: int = 1) -> str:
    """A crash point's place: micro-batch ``batch``, named by its id or by its last file (the
    files landed before the run, so every batch takes ``files_per_batch``)."""
    if point in ("file-read", "spark-offsets"):
        return landing[(batch + 1) * files_per_batch - 1].name
    return str(batch)


def assert_chain_resumes_exactly_once(landing: list[Path], store: Path, placement: str,
                                      reliability, points: list[str], command: str,
                                      gateway: str = "auto", files_per_batch: int = 1) -> None:
    """Kill the run at each of ``points`` in turn, the n-th in micro-batch n + 1 (the first
    has state on both sides by then), each kill a resume of the run before; then resume it
    to its end, in this process: the resume is not killed, and a new JVM's start is most of
    what a short run costs."""
    args = run_args(landing, store, placement, gateway, files_per_batch)
    for batch, point in enumerate(points, start=1):
        killed = tandem(*args, *(["--resume"] if batch > 1 else []),
                        crash=f"{point}:{where(point, batch, landing, files_per_batch)}")
        assert killed.returncode == -signal.SIGKILL, (
            f"the run did not reach the crash point {point} ({EVERY_POINT[point]}) in micro-batch "
            f"{batch}: {killed.stderr[-2000:]}")
    summary = run(RunSpec(short("q5"), placement=placement, source=str(landing[0].parent),
                          store=str(store), lateness=float(LATENESS), resume=True,
                          gateway=gateway, files_per_batch=files_per_batch))
    assert gateway in ("auto", summary.gateway)
    assert_exact(contents(store, "q5"), expected(landing), reliability, command, points)


# `make test` kills the Python source with Spark's state where that state matters: before
# Spark writes its offsets (no other chain), in the MIG's evaluation (elsewhere only in the
# migrations' chain) and after Spark committed its state but DuckDB not the results. The other
# chains reach file-read, arrival and duckdb-write on every gateway; `make test-matrices` kills
# this one at every point.
PYTHON_SOURCE_POINTS = list(POINTS) if FULL else ["spark-offsets", "evaluation",
                                                   "spark-committed"]


def test_a_run_killed_at_its_crash_points_resumes_exactly_once(tmp_path, landing, reliability):
    assert_chain_resumes_exactly_once(landing, tmp_path / "t.duckdb", PLACEMENT, reliability,
                                      PYTHON_SOURCE_POINTS, "tandem run")


def land(landing: list[Path], target: Path, files: slice) -> None:
    # copy2 keeps the modification times the generator gave the files in name order, by
    # which the native gateway reads them (docs/execution.md, landing protocol).
    target.mkdir(parents=True, exist_ok=True)
    for path in landing[files]:
        shutil.copy2(path, target / path.name)


def last_batch(state: Path) -> int:
    with ColumnarStore(state / "tandem.duckdb", read_only=True) as columnar:
        return columnar.con.sql("SELECT max(batch_id) FROM q_q5_microbatch.progress"
                                ).fetchall()[0][0]


def test_a_killed_microbatch_run_resumes_exactly_once(tmp_path, landing, reliability):
    # Two scheduled runs, the first over four files and the second over the rest. The second
    # is killed at the file-read of its first micro-batch (which takes up to four files), and
    # its resume inside the DuckDB commit of the micro-batch that reads those files again. The runs that are not killed run in this
    # process, where `tandem microbatch` would put their state (TANDEM_STATE).
    state, target = tmp_path / "state", tmp_path / "state" / "landing"

    def scheduled():
        run_microbatch(short("q5"), target, checkpoints=state / "checkpoints",
                       store=state / "tandem.duckdb", lateness=float(LATENESS))

    land(landing, target, slice(0, 4))
    scheduled()
    land(landing, target, slice(4, None))
    first = landing[min(4 + FILES_PER_BATCH, len(landing)) - 1]  # the first batch's last file
    for crash in (f"file-read:{first.name}", None):
        crash = crash or f"duckdb-write:{last_batch(state) + 1}"
        killed = tandem("microbatch", short("q5"), "--lateness", LATENESS, state=state,
                        crash=crash)
        assert killed.returncode == -signal.SIGKILL, (crash, killed.stderr[-2000:])
    scheduled()
    assert_exact(contents(state / "tandem.duckdb", "q5_microbatch"), expected(landing),
                 reliability, "tandem microbatch", ["file-read", "duckdb-write"])


# The by-reference gateway (Spark's file source plans each batch, DuckDB reads its files), the
# native gateway (Spark's own Parquet and text sources, rows judged by the MIG),
# duckdb-partitioned (rowstream/partitioned.py: the partitions append, evaluate and purge in
# the batch's job; a replay replaces their rows, a recovered batch is evaluated again in them)
# and a split aggregate (Spark's partials, which a replay replaces) under the same protocol.
BY_REFERENCE_POINTS = ["file-read", "committed-unread", "arrival", "spark-committed",
                       "duckdb-write"]
NATIVE_POINTS = ["file-read", "spark-committed", "duckdb-write"]
PARTITIONED_POINTS = ["arrival", "spark-committed", "duckdb-write"]
# A split aggregate's partials are appended with the batch's other rows, before its arrival.
SPLIT_POINTS = ["arrival", "duckdb-write"]


# Each gateway once, each format once, and each placement where the rows are judged (the
# driver's MIG, or the executors): the format decides how the files are parsed, not the protocol.
# By reference, also with batches of two files, each judged as a batch of its own.
@pytest.mark.parametrize("file_format, placement, gateway, points, files_per_batch", [
    ("parquet", "duckdb", "reference", BY_REFERENCE_POINTS, 1),
    ("csv", "duckdb", "reference", ["file-read", "committed-unread", "duckdb-write"], 2),
    ("csv", "select_1=spark,aggregate_1=duckdb,aggregate_2=duckdb", "native", NATIVE_POINTS, 1),
    ("parquet", "duckdb-partitioned", "native", PARTITIONED_POINTS, 1),
    ("parquet", "select_1=spark,aggregate_1=split,aggregate_2=duckdb", "native", SPLIT_POINTS,
     1)])
def test_a_run_from_files_killed_at_its_crash_points_resumes_exactly_once(
        tmp_path, reliability, file_format, placement, gateway, points, files_per_batch):
    landing = STREAM.write_files(tmp_path / "landing", DURATION, FILE_SECONDS,
                                 file_format=file_format, disorder=Disorder(tail=0.3))
    assert_chain_resumes_exactly_once(landing, tmp_path / "t.duckdb", placement, reliability,
                                      points, f"tandem run ({gateway}, {placement}, "
                                      f"{file_format}"
                                      + (f", {files_per_batch} files per batch)"
                                         if files_per_batch > 1 else ")"),
                                      gateway, files_per_batch)


def forget_offsets(checkpoint: Path, batch: int) -> None:
    """Spark's checkpoint as a death of its JVM after it logged the files of micro-batch
    ``batch`` but before it wrote the batch's offsets would leave it: the source log's entry
    ``batch`` and nothing of Spark's after."""
    for log in ("offsets", "commits"):
        for path in (checkpoint / log).glob("[0-9]*"):
            if int(path.name) >= batch:
                path.unlink()
                (checkpoint / log / f".{path.name}.crc").unlink(missing_ok=True)
    for path in (checkpoint / "sources" / "0").glob("[0-9]*"):
        if int(path.name) > batch:
            path.unlink()
            (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def test_a_file_source_log_ahead_of_the_offsets_loses_no_file(tmp_path, reliability):
    # The batch Spark plans after such a death holds two entries of its source log, and every
    # batch id after it names the entry before its own: the gateways read the files of the
    # entries between two batches' offsets, not the entry with the batch's id.
    landing = STREAM.write_files(tmp_path / "landing", DURATION, FILE_SECONDS,
                                 file_format="parquet", disorder=Disorder(tail=0.3))
    store, batch = tmp_path / "t.duckdb", 2
    args = run_args(landing, store, "duckdb", "reference")
    killed = tandem(*args, crash=f"file-read:{landing[batch].name}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    forget_offsets(default_checkpoint(store, "q5"), batch)
    run(RunSpec(short("q5"), placement="duckdb", source=str(landing[0].parent),
                store=str(store), lateness=float(LATENESS), resume=True, gateway="reference"))
    assert_exact(contents(store, "q5"), expected(landing), reliability,
                 "tandem run (reference, source log ahead)", ["file-read"])

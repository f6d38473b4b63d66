"""Faults outside Tandem: each ends the run with a one-line error, and once the cause is gone a
resumed run has lost nothing."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from benchmarking import reference
from benchmarking.verify import SMALL
from columnar.store import ColumnarStore
from optimizer import optimize
from optimizer.errors import TandemError
from runtime.run import run
from runtime.spec import RunSpec
from tests.conftest import lost_and_duplicated, query_sql, short
from tests.crash.points import FROZEN, JVM, SOURCE, environment
from tests.test_reference import assert_same_rows
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
# Q5's short-window variant (tests/conftest.py:short): 80 s fill and slide its 20-second
# windows in eight micro-batches.
RATE, DURATION, BATCH = 3, 80, 10
PLACEMENT = "select_1=spark,aggregate_1=spark,aggregate_2=duckdb"  # state in both engines
# The landing directory's gateways: Spark's Python source, where Spark keeps state, and DuckDB
# reading the files by reference, where every operator runs in DuckDB.
GATEWAYS = pytest.mark.parametrize("placement", [PLACEMENT, "duckdb"], ids=["python", "reference"])


def q5(tmp_path, **kwargs):
    return run(RunSpec(short("q5"), placement=PLACEMENT, rate=RATE, duration=DURATION, batch=BATCH,
                       topology=SMALL, store=tmp_path / "t.duckdb", **kwargs))


def assert_reference_rows(store, catalog, profile, reliability, fault: str):
    root = optimize(query_sql(short("q5")), catalog, profile).logical.root
    stream = {"plugs": pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))}
    with ColumnarStore(store) as columnar:
        got = pl.from_arrow(columnar.results("q5")).select(root.columns)
    want = reference.evaluate(root, stream)
    lost, duplicated = lost_and_duplicated(got, want)
    reliability("fault", fault=fault, rows_lost=lost, rows_duplicated=duplicated,
                result_rows=got.height)
    assert_same_rows(got, want)


def test_a_store_locked_by_another_process(tmp_path, catalog, profile, reliability):
    q5(tmp_path, stop_after=3)
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys\n"
                               f"con = duckdb.connect({str(tmp_path / 't.duckdb')!r})\n"
                               "print('held', flush=True)\nsys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TandemError) as refused:
            q5(tmp_path, resume=True)
        message = str(refused.value)
        assert "is held by `python -c import duckdb, sys con = duckdb.connect(" in message
        assert f"(PID {holder.pid})" in message
        assert "\n" not in message
    finally:
        holder.communicate("")
    q5(tmp_path, resume=True)
    assert_reference_rows(tmp_path / "t.duckdb", catalog, profile, reliability,
                          "the DuckDB file locked by another process")


@pytest.fixture
def landing(tmp_path) -> Path:
    """Q5's small stream, landed in files of BATCH event seconds."""
    directory = tmp_path / "landing"
    SmartPlugs(rate=RATE, **SMALL).write_files(directory, DURATION, file_seconds=BATCH)
    return directory


def run_landing(landing: Path, store: Path, crash: str | None = None, *options: str,
                placement: str = PLACEMENT):
    """``tandem run`` of Q5 over ``landing`` in a process of its own (the JVM of this test
    session lives on), one file a micro-batch, by reference too (where a batch would take up to
    four), so that the faults meet the same batches."""
    return subprocess.run([sys.executable, "-m", "tandem.cli", "run", short("q5"), "--placement",
                           placement, "--source", str(landing), "--store", str(store),
                           "--files-per-batch", "1", *options],
                          env=environment(crash), capture_output=True, text=True, timeout=600, cwd=ROOT)


def assert_resumed_exactly(landing: Path, store: Path, catalog, profile, reliability,
                           fault: str, placement: str = PLACEMENT) -> None:
    # In this process: a new JVM's start is most of what a short run costs.
    run(RunSpec(short("q5"), placement=placement, source=str(landing), store=store,
                resume=True))
    # A landing directory is evaluated up to its watermark: the last event less 5 s.
    root = optimize(query_sql(short("q5")), catalog, profile).logical.root
    stream = pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))
    want = reference.evaluate(root, {"plugs": stream}).filter(
        pl.col("window_end") <= stream["ts"].max() - timedelta(seconds=5))
    with ColumnarStore(store) as columnar:
        got = pl.from_arrow(columnar.results("q5")).select(root.columns)
    lost, duplicated = lost_and_duplicated(got, want)
    reliability("fault", fault=fault, rows_lost=lost, rows_duplicated=duplicated,
                result_rows=got.height)
    assert_same_rows(got, want)


def assert_one_line(failed: subprocess.CompletedProcess, words: str) -> None:
    assert failed.returncode == 2, failed.stderr[-2000:]
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], failed.stderr


@GATEWAYS
def test_the_spark_jvm_dying_mid_run(tmp_path, landing, catalog, profile, reliability,
                                     placement):
    died = run_landing(landing, tmp_path / "t.duckdb", f"{JVM}:3", placement=placement)
    assert_one_line(died, "Spark's JVM stopped during the run")
    assert_resumed_exactly(landing, tmp_path / "t.duckdb", catalog, profile, reliability,
                           "the Spark JVM dies", placement)


@GATEWAYS
def test_a_spark_jvm_that_stops_answering(tmp_path, landing, catalog, profile, reliability,
                                          placement):
    # Without a bound on Spark's answers the run waits for ever (here, for run_landing's timeout).
    stuck = run_landing(landing, tmp_path / "t.duckdb", f"{FROZEN}:3", "--stall-timeout", "20",
                        placement=placement)
    assert_one_line(stuck, "Spark's JVM answered no call for 20 s")
    assert_resumed_exactly(landing, tmp_path / "t.duckdb", catalog, profile, reliability,
                           "the Spark JVM stops answering", placement)


def test_the_python_source_dying_mid_run(tmp_path, landing, catalog, profile, reliability):
    # The landing source's own process (Spark's PythonStreamingSourceRunner), killed as the
    # kernel kills a process out of memory: Spark says only "EOFException", and no cause.
    third = sorted(landing.iterdir())[2].name
    died = run_landing(landing, tmp_path / "t.duckdb", f"{SOURCE}:{third}")
    assert_one_line(died, "Spark's Python stream source stopped during the run")
    assert_resumed_exactly(landing, tmp_path / "t.duckdb", catalog, profile, reliability,
                           "Spark's Python stream source dies")


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 64 MB file system of its own (tmpfs, mounted as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill_after(commit: Path, filler: Path) -> None:
    """Once Spark committed ``commit``, take the rest of the disk."""
    deadline = time.monotonic() + 300
    while not commit.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 2**20)
        except OSError as full:
            assert full.errno == errno.ENOSPC


@GATEWAYS
def test_a_full_disk(landing, small_disk, catalog, profile, reliability, placement):
    store = small_disk / "t.duckdb"
    filler = small_disk / "filler"
    fill = threading.Thread(target=fill_after, args=(
        small_disk / "checkpoints" / "t" / "q5" / "commits" / "2", filler))
    fill.start()
    full = run_landing(landing, store, placement=placement)
    fill.join()
    assert_one_line(full, "a disk is full")
    filler.unlink()  # the cause is removed
    assert_resumed_exactly(landing, store, catalog, profile, reliability, "a full disk",
                           placement)


# Spark's JVM starting in one thread while another prints: an adaptive run starts its plans in
# threads, and a failing one's traceback once went to Spark's log, its process exiting 1 with
# nothing on the terminal.
STARTING = """
import sys, threading, time
from pathlib import Path
from rowstream.session import spark_session

starting = threading.Thread(target=spark_session, kwargs=dict(log=Path(sys.argv[1])))
starting.start()
time.sleep(0.5)
print("the other thread's line", file=sys.stderr, flush=True)
starting.join()
"""


def test_what_another_thread_prints_while_spark_starts_reaches_the_terminal(tmp_path):
    log = tmp_path / "spark.log"
    done = subprocess.run([sys.executable, "-c", STARTING, str(log)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the other thread's line" in done.stderr
    assert "the other thread's line" not in log.read_text()
    assert "Spark" in log.read_text() and "Spark" not in done.stderr  # its start-up noise


# A JVM that ran out of heap and exited under one measurement of `tandem bench` took the next
# measurement's session with it (ConnectionRefusedError), and the sweep ended there.
AFTER_A_DEAD_JVM = """
import sys
from pathlib import Path
from rowstream.session import spark_session

log = Path(sys.argv[1])
first = spark_session(log=log)
first.sparkContext._gateway.proc.kill()
first.sparkContext._gateway.proc.wait()
print(spark_session(log=log).range(7).count())
"""


def test_a_session_after_the_jvm_died_starts_another(tmp_path):
    done = subprocess.run([sys.executable, "-c", AFTER_A_DEAD_JVM, str(tmp_path / "spark.log")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["7"]


# A job that ran Spark out of memory made its scheduler stop the context, in a JVM that lived
# on: the next measurement of `tandem bench` got the stale session back and failed (its stream's
# data source not found; here, where nothing ran since, "LiveListenerBus is stopped").
AFTER_A_STOPPED_CONTEXT = """
import sys
from pathlib import Path
from rowstream.landing_source import LandingDirectory
from rowstream.session import spark_session
from runtime.explain import explain
from runtime.run import stream_schema
from workload.smart_plugs import SmartPlugs

log, landing = Path(sys.argv[1]), Path(sys.argv[2])
SmartPlugs(rate=100).write_files(landing, 2, 1)
spark_session(log=log).sparkContext._jsc.sc().stop()
spark = spark_session(log=log)
gateway = LandingDirectory(stream_schema(explain("q5")), str(landing), lateness=0, slide=1)
query = gateway.stream(spark).writeStream.format("memory").queryName("landed").start()
query.processAllAvailable()
query.stop()
print(spark.table("landed").count())
"""


def test_a_session_after_spark_stopped_its_context_starts_another(tmp_path):
    done = subprocess.run([sys.executable, "-c", AFTER_A_STOPPED_CONTEXT, str(tmp_path / "spark.log"),
                           str(tmp_path / "landing")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0

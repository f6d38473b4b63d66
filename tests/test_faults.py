"""Faults outside Tandem: each ends the run with a one-line error, and once the cause is gone a
resumed run has lost nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from columnar.crash import JVM, VARIABLE
from columnar.store import ColumnarStore
from optimizer import optimize
from optimizer.errors import TandemError
from tandem import reference
from tandem.run import run
from tandem.verify import SMALL
from tandem.workload import SmartPlugs
from tests.conftest import query_sql
from tests.test_reference import assert_same_rows

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
RATE, DURATION, BATCH = 3, 400, 50
PLACEMENT = "select_1=spark,aggregate_1=spark,aggregate_2=duckdb"  # state in both engines


def q5(tmp_path, **kwargs):
    return run("q5", placement=PLACEMENT, rate=RATE, duration=DURATION, batch=BATCH,
               topology=SMALL, store=tmp_path / "t.duckdb", **kwargs)


def assert_reference_rows(store, catalog, profile):
    root = optimize(query_sql("q5"), catalog, profile).logical.root
    stream = {"plugs": pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))}
    columnar = ColumnarStore(store)
    try:
        got = pl.from_arrow(columnar.results("q5"))
    finally:
        columnar.close()
    assert_same_rows(got.select(root.columns), reference.evaluate(root, stream))


def test_a_store_locked_by_another_process(tmp_path, catalog, profile):
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
        assert "is locked by another process" in message and f"PID {holder.pid}" in message
        assert "\n" not in message
    finally:
        holder.communicate("")
    q5(tmp_path, resume=True)
    assert_reference_rows(tmp_path / "t.duckdb", catalog, profile)


def test_the_spark_jvm_dying_mid_run(tmp_path, catalog, profile):
    landing = tmp_path / "landing"
    SmartPlugs(rate=RATE, **SMALL).write_csv(landing, DURATION, file_seconds=BATCH)
    # In a process of its own: the JVM of this test session lives on.
    args = [sys.executable, "-m", "tandem.cli", "run", "q5", "--placement", PLACEMENT,
            "--source", str(landing), "--store", str(tmp_path / "t.duckdb")]
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    died = subprocess.run(args, env={**env, VARIABLE: f"{JVM}:3"}, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert died.returncode == 2, died.stderr[-2000:]
    lines = died.stderr.strip().splitlines()
    assert len(lines) == 1 and "Spark's JVM stopped during the run" in lines[0], died.stderr
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True,
                             timeout=600, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    # A landing directory is evaluated up to its watermark: the last event less 5 s.
    root = optimize(query_sql("q5"), catalog, profile).logical.root
    stream = pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, DURATION))
    want = reference.evaluate(root, {"plugs": stream}).filter(
        pl.col("window_end") <= stream["ts"].max() - timedelta(seconds=5))
    columnar = ColumnarStore(tmp_path / "t.duckdb")
    try:
        got = pl.from_arrow(columnar.results("q5"))
    finally:
        columnar.close()
    assert_same_rows(got.select(root.columns), want)

"""Faults outside Tandem: each ends the run with a one-line error, and once the cause is gone a
resumed run has lost nothing."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

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

"""Exactly once under crashes: `tandem run` and `tandem microbatch` are killed with SIGKILL at
each crash point of the protocol (columnar/crash.py), resumed, and compared with a run that was
never interrupted: no row lost, none duplicated, in the results and in the quarantine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from benchmarking.verify import SMALL
from columnar.crash import POINTS, VARIABLE
from columnar.store import ColumnarStore
from tests.conftest import lost_and_duplicated
from tests.test_reference import assert_same_rows
from workload.disorder import Disorder
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
# Q5 with its first aggregate in Spark (state in Spark's checkpoint) and its second in DuckDB.
PLACEMENT = "select_1=spark,aggregate_1=spark,aggregate_2=duckdb"
LATENESS = "1"  # below the largest delay: the quarantine holds late readings too
CRASH_BATCH = 3  # the fourth micro-batch: state on both sides by then


def tandem(*args: str, crash: str | None = None, state: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if crash:
        env[VARIABLE] = crash
    if state:
        env["TANDEM_STATE"] = str(state)
    # A session of its own: a crash point kills the process group, Spark's JVM included.
    return subprocess.run([sys.executable, "-m", "tandem.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, start_new_session=True)


def contents(store: Path, schema: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The results (without the batch that wrote them) and the quarantine's origins, sorted."""
    with ColumnarStore(store, read_only=True) as columnar:
        results = pl.from_arrow(columnar.con.sql(
            f"SELECT * EXCLUDE (batch_id) FROM {schema}.results").to_arrow_table())
        quarantine = pl.from_arrow(columnar.con.sql(
            f"SELECT origin, rule FROM {schema}.quarantine").to_arrow_table())
    return results.sort(results.columns), quarantine.sort(quarantine.columns)


def losses(got: tuple[pl.DataFrame, pl.DataFrame], want: tuple[pl.DataFrame, pl.DataFrame]
           ) -> dict:
    """Result and quarantine rows lost or duplicated, against the uninterrupted run."""
    lost, duplicated = lost_and_duplicated(got[0], want[0])
    quarantine_lost, quarantine_duplicated = lost_and_duplicated(got[1], want[1])
    return {"rows_lost": lost + quarantine_lost,
            "rows_duplicated": duplicated + quarantine_duplicated, "result_rows": got[0].height,
            "rows_quarantined": got[1].height}


def assert_same(got: tuple[pl.DataFrame, pl.DataFrame], want: tuple[pl.DataFrame, pl.DataFrame]):
    """The same result rows (floats within verify's tolerance: Spark's partial sums may add up
    in another order after a restart) and the same quarantined lines."""
    (results, quarantine), (want_results, want_quarantine) = got, want
    assert results.height == want_results.height  # none lost, none duplicated
    assert_same_rows(results, want_results)
    assert quarantine.equals(want_quarantine)


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> list[Path]:
    directory = tmp_path_factory.mktemp("landing")
    return SmartPlugs(rate=5, **SMALL).write_files(directory, 400, 50, disorder=Disorder(tail=0.3))


def run_args(landing: list[Path], store: Path) -> list[str]:
    return ["run", "q5", "--placement", PLACEMENT, "--source", str(landing[0].parent),
            "--store", str(store), "--lateness", LATENESS]


@pytest.fixture(scope="module")
def uninterrupted(landing, tmp_path_factory):
    return complete_run(run_args(landing, tmp_path_factory.mktemp("uninterrupted") / "t.duckdb"))


def complete_run(args: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What a run never interrupted writes."""
    done = tandem(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    want = contents(Path(args[args.index("--store") + 1]), "q_q5")
    assert want[0].height > 0 and want[1].height > 0
    return want


def where(point: str, landing: list[Path]) -> str:
    """A crash point's place: the fourth micro-batch, named by its id or by its file."""
    return landing[CRASH_BATCH].name if point in ("file-read", "spark-offsets") else str(CRASH_BATCH)


@pytest.mark.parametrize("point", list(POINTS))
def test_a_run_killed_at_a_crash_point_resumes_exactly_once(tmp_path, landing, uninterrupted,
                                                            reliability, point):
    assert_resumes_exactly_once(run_args(landing, tmp_path / "t.duckdb"), landing, uninterrupted,
                                reliability, point, "tandem run")


def assert_resumes_exactly_once(args: list[str], landing: list[Path], uninterrupted,
                                reliability, point: str, command: str) -> None:
    killed = tandem(*args, crash=f"{point}:{where(point, landing)}")
    assert killed.returncode == -signal.SIGKILL, (
        f"the run did not reach the crash point ({POINTS[point]}): {killed.stderr[-2000:]}")
    resumed = tandem(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    got = contents(Path(args[args.index("--store") + 1]), "q_q5")
    reliability("kill_point", command=command, point=point, **losses(got, uninterrupted))
    assert_same(got, uninterrupted)


def land(landing: list[Path], target: Path, files: slice) -> None:
    # copy2 keeps the modification times the generator gave the files in name order, by
    # which the native gateway reads them (docs/execution.md, landing protocol).
    target.mkdir(parents=True, exist_ok=True)
    for path in landing[files]:
        shutil.copy2(path, target / path.name)


def microbatches(landing: list[Path], state: Path, crash: str | None = None):
    """Two scheduled runs, the first over four files and the second over the rest. ``crash``
    kills the second: at the file-read of its last file, or in the DuckDB commit of its first
    micro-batch."""
    target = state / "landing"
    land(landing, target, slice(0, 4))
    first = tandem("microbatch", "q5", "--lateness", LATENESS, state=state)
    assert first.returncode == 0, first.stderr[-2000:]
    land(landing, target, slice(4, None))
    place = {"file-read": f"file-read:{landing[-1].name}",
             "duckdb-write": f"duckdb-write:{last_batch(state) + 1}"}.get(crash)
    second = tandem("microbatch", "q5", "--lateness", LATENESS, state=state, crash=place)
    if crash:
        assert second.returncode == -signal.SIGKILL, second.stderr[-2000:]
        second = tandem("microbatch", "q5", "--lateness", LATENESS, state=state)
    assert second.returncode == 0, second.stderr[-2000:]
    return contents(state / "tandem.duckdb", "q_q5_microbatch")


def last_batch(state: Path) -> int:
    with ColumnarStore(state / "tandem.duckdb", read_only=True) as columnar:
        return columnar.con.sql("SELECT max(batch_id) FROM q_q5_microbatch.progress"
                                ).fetchall()[0][0]


@pytest.mark.parametrize("point", ["file-read", "duckdb-write"])
def test_a_killed_microbatch_run_resumes_exactly_once(tmp_path, landing, reliability, point):
    want = microbatches(landing, tmp_path / "whole")
    assert want[0].height > 0
    got = microbatches(landing, tmp_path / "crashed", point)
    reliability("kill_point", command="tandem microbatch", point=point, **losses(got, want))
    assert_same(got, want)


# The native gateway (Spark's own Parquet and text sources, rows judged by the MIG) under the
# same protocol.
NATIVE_POINTS = ("file-read", "spark-committed", "duckdb-write")


@pytest.fixture(scope="module", params=["parquet", "csv"])
def native_landing(request, tmp_path_factory) -> list[Path]:
    directory = tmp_path_factory.mktemp(request.param)
    return SmartPlugs(rate=5, **SMALL).write_files(directory, 400, 50, file_format=request.param,
                                                   disorder=Disorder(tail=0.3))


def native_args(landing: list[Path], store: Path) -> list[str]:
    return [*run_args(landing, store)[:2], "--placement", "duckdb",
            *run_args(landing, store)[4:]]


@pytest.fixture(scope="module")
def native_uninterrupted(native_landing, tmp_path_factory):
    return complete_run(native_args(native_landing,
                                    tmp_path_factory.mktemp("native") / "t.duckdb"))


@pytest.mark.parametrize("point", NATIVE_POINTS)
def test_a_native_run_killed_at_a_crash_point_resumes_exactly_once(
        tmp_path, native_landing, native_uninterrupted, reliability, point):
    assert_resumes_exactly_once(native_args(native_landing, tmp_path / "t.duckdb"),
                                native_landing, native_uninterrupted, reliability, point,
                                f"tandem run (native gateway, {native_landing[0].suffix[1:]})")


# duckdb-partitioned (rowstream/partitioned.py): the partitions append, evaluate and purge in
# the batch's job; a replay replaces their rows, a recovered batch is evaluated again in them.
PARTITIONED_POINTS = ("arrival", "spark-committed", "duckdb-write")


@pytest.mark.parametrize("point", PARTITIONED_POINTS)
def test_a_partitioned_run_killed_at_a_crash_point_resumes_exactly_once(
        tmp_path, native_landing, native_uninterrupted, reliability, point):
    args = native_args(native_landing, tmp_path / "t.duckdb")
    args[args.index("duckdb")] = "duckdb-partitioned"
    assert_resumes_exactly_once(args, native_landing, native_uninterrupted, reliability, point,
                                f"tandem run (duckdb-partitioned, {native_landing[0].suffix[1:]})")

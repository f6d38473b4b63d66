"""A real Spark standalone cluster (a master and two workers on 127.0.0.1, from the installed
pyspark): a driver there runs Q1, Q3 and Q5 under a placement of each class and gives the
reference's rows, also when a worker is killed while a query runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pytest

from benchmarking import reference
from benchmarking.cluster import local_cluster
from optimizer import optimize
from rowstream.landing import committed_batches
from runtime.run import default_checkpoint
from tests.conftest import ROOT, query_sql, short
from tests.matrix import reduced
from tests.test_reference import assert_same_rows
from tests.test_run import results
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

TOPOLOGY = dict(houses=2, households_per_house=2, plugs=6)
# The queries' short-window variants (tests/conftest.py:short): eight files of 10 s fill and
# slide their 20-second windows.
RATE, DURATION, FILE_SECONDS = 3, 80, 10
PLACEMENTS = ("spark", "duckdb", "duckdb-partitioned", "auto", "split")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1,
                       memory="1536m") as running:
        yield running


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("landing")
    SmartPlugs(rate=RATE, **TOPOLOGY).write_files(directory, DURATION, FILE_SECONDS)
    return directory


@pytest.fixture(scope="module")
def truth(landing):
    stream = pl.from_arrow(SmartPlugs(rate=RATE, **TOPOLOGY).between(0, DURATION))
    return reference.Evaluator({"plugs": stream})


def assert_reference_rows(store: Path, query: str, truth, catalog, profile) -> None:
    """The run's rows are the reference's up to the last window_end it evaluated: a landing
    directory has no end, so windows are evaluated as far as its watermark goes (and Spark's
    stateful operators emit a window only once the watermark passes it)."""
    root = optimize(query_sql(short(query)), catalog, profile).logical.root
    got = results(store, query)
    with duckdb.connect(str(store), read_only=True) as con:
        (last_end,), = con.sql(f"SELECT max(last_end) FROM q_{query}.progress").fetchall()
    bound = max(t for t in (last_end, got["window_end"].max()) if t is not None)
    want = truth.result(root).filter(pl.col("window_end") <= bound)
    assert want.height > 0
    assert got.height == want.height
    assert_same_rows(got.select(root.columns), want)


# Each placement once, over Q1, Q3 and Q5: the placement decides what runs in the executors
# (Spark's operators, the exchange, the partitions' DuckDBs, a split aggregate's partials), the
# query only which operators,
# and the queries' placements are checked locally against the reference (tests/matrix.py).
# A worker is killed while two of them run: Spark's stateful operators (Q1's aggregate and
# join) restore their state from the checkpoint, and the lost executor's partitions reopen their
# DuckDB files (under the checkpoint) on the other worker and replace the rows the lost tasks
# may have appended.
# Q1's optimised plan is of Q3's all-DuckDB class (its rows cross whole, no Spark state before
# the MIG, DuckDB at the root): `make test` runs one of them, `make test-matrices` both.
PLACED = reduced(list(zip(("q1", "q3", "q5", "q1", "q3"), PLACEMENTS, strict=True)))
KILLED = (("q1", "spark"), ("q5", "duckdb-partitioned"))
# The library's run, as `tandem run` calls it, for each of a list of specs in turn.
RUNS = ("import json, sys; from runtime.run import run; from runtime.spec import RunSpec; "
        "[run(RunSpec(**spec)) for spec in json.loads(sys.argv[1])]")


@dataclass
class Placed:
    store: Path
    commits_at_kill: int | None = None  # the run's micro-batches committed when a worker died


def commits(store: Path, query: str) -> int:
    return len(committed_batches(default_checkpoint(store, query)))


@pytest.fixture(scope="module")
def placed(cluster, landing, tmp_path_factory) -> dict[tuple[str, str], Placed]:
    """The runs one after another in one driver on the cluster (``TANDEM_SPARK_MASTER``, which
    `--master` sets): a driver's start, its JVM and its executors, is most of what a short run
    there costs. While each run of ``KILLED`` runs, once it has committed two micro-batches, a
    worker is killed outright and a new one joins, as a restarted machine would."""
    directory = tmp_path_factory.mktemp("placed")
    runs = {(query, placement): Placed(directory / f"{query}-{placement}.duckdb")
            for query, placement in PLACED}
    specs = [dict(query=short(query), placement=placement, source=str(landing),
                  store=str(run.store)) for (query, placement), run in runs.items()]
    env = os.environ | {"TANDEM_SPARK_MASTER": cluster.url, "TANDEM_SPARK_MEMORY": "1g"}
    log = directory / "driver.log"
    with open(log, "w") as out:  # a pipe nobody reads could fill and stop it
        driver = subprocess.Popen([sys.executable, "-c", RUNS, json.dumps(specs)], cwd=ROOT,
                                  env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        for query, placement in KILLED:
            run = runs[query, placement]
            deadline = time.monotonic() + 300
            while commits(run.store, query) < 2:
                assert driver.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, f"{query} {placement} committed no batch"
                time.sleep(0.2)
            run.commits_at_kill = commits(run.store, query)
            cluster.kill_worker(next(n for n, w in enumerate(cluster.workers)
                                     if w.poll() is None))
            cluster.start_worker()
        assert driver.wait(timeout=1800) == 0, log.read_text()[-3000:]
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    return runs


@pytest.mark.parametrize("query, placement", PLACED)
def test_every_placement_on_the_cluster_gives_the_reference_rows(cluster, placed, truth, catalog,
                                                                 profile, query, placement):
    assert_reference_rows(placed[query, placement].store, query, truth, catalog, profile)
    # The driver ran its tasks on the cluster's executors, not in a local Spark. The master
    # learns that the driver's application ended when its connection drops, a moment after.
    cluster.wait(lambda: cluster.state()["completedapps"], "an application completed on the "
                 "cluster")


@pytest.mark.parametrize("query, placement", KILLED)
def test_a_worker_killed_while_the_query_runs(placed, query, placement):
    """Spark runs the lost executor's tasks again on the other worker, and the run goes on:
    the reference's rows (above), and micro-batches committed after the worker died."""
    run = placed[query, placement]
    assert run.commits_at_kill is not None
    assert commits(run.store, query) > run.commits_at_kill, "no micro-batch after the kill"

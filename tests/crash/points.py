"""Crash points: where the exactly-once tests kill a run (tests/test_crash.py,
tests/test_migration_run.py, tests/test_faults.py).

``TANDEM_CRASH=<point>:<where>`` kills the run's whole process group (the CLI, Spark's JVM and
its Python workers) with SIGKILL when it reaches ``point`` at ``where``: a micro-batch id, or
for the points of a landing directory's reading, the name of the micro-batch's last file. That
is a crash at a known step of the protocol, as a power cut would leave it, and the resumed run
must neither lose nor duplicate a row.

This is a seam, not a hook: the product holds no crash code, and its hot paths pay nothing.
A test runs the command with ``environment(crash)``, which puts ``tests/crash/site`` first on
the path of every Python process the run starts (Spark's workers and its stream source's runner
included); that folder's ``sitecustomize`` calls ``install``, which wraps the functions at
those steps.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

VARIABLE = "TANDEM_CRASH"
GROUP = "TANDEM_CRASH_GROUP"  # the run's process group (Spark's Python workers have their own)
POINTS = {
    "file-read": "a landing file is being read (in Spark's Python worker)",
    "spark-offsets": "Spark has written the micro-batch's offsets, not yet run it",
    "arrival": "the micro-batch's rows are in DuckDB, its arrival not yet recorded",
    "evaluation": "the MIG's thread has evaluated the micro-batch's window_ends, not committed",
    "spark-committed": "Spark has committed the micro-batch, DuckDB not yet its results",
    "duckdb-write": "inside DuckDB's transaction that commits the micro-batch's results",
}
# An adaptive run's migrations (runtime/migration.py), where the number of the plan they start.
MIGRATION_POINTS = {
    "migration": "Moving State: the old plan has stopped, the new one is not recorded yet",
    "release": "Parallel Track: the old plan is done, the new one's results not yet released",
}
JVM = "jvm"  # Spark's JVM dies at a micro-batch's arrival; the CLI's process lives on
ROOT = Path(__file__).resolve().parents[2]
SITE = Path(__file__).resolve().parent / "site"


def environment(crash: str | None, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) for a command that ``crash`` kills, or, without one,
    that runs whole."""
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if k not in (VARIABLE, GROUP)}
    if crash:
        env[VARIABLE] = crash
        env["PYTHONPATH"] = os.pathsep.join(
            [str(SITE), str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def crash_point(point: str, where: object, victim: int | None = None) -> None:
    """Die here if ``TANDEM_CRASH`` names this point and place; with ``victim``, that process
    dies instead of the whole group."""
    if os.environ.get(VARIABLE) == f"{point}:{where}":
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
        else:
            os.killpg(int(os.environ.get(GROUP, os.getpgid(0))), signal.SIGKILL)


_here = threading.local()  # the MIG whose evaluation this thread runs, the batch it commits


def install() -> None:
    """Wrap the steps of the protocol (``POINTS``, ``MIGRATION_POINTS``) with their crash
    points. The processes the run starts learn which group to kill."""
    os.environ.setdefault(GROUP, str(os.getpgid(0)))
    from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

    from columnar.store import ColumnarStore
    from rowstream import landing_source, mig, native

    # The Python landing source reads a batch's files when Spark asks how far the stream has
    # come, before Spark writes the batch's offsets; Spark plans the batch after.
    reader = landing_source.LandingReader
    read, partitions = reader.read, _SimpleStreamReaderWrapper.partitions

    def file_read(self, start):
        rows, end = read(self, start)
        if end["after"] != start["after"]:
            crash_point("file-read", end["after"])
        return rows, end

    def offsets_written(self, start, end):
        if isinstance(self.simple_reader, reader) and end["after"] != start["after"]:
            crash_point("spark-offsets", end["after"])
        return partitions(self, start, end)

    reader.read, _SimpleStreamReaderWrapper.partitions = file_read, offsets_written

    admit_batch = native.admit_batch

    def judged(frame, **options):  # the native gateway's rows, judged by its judge
        verdict = admit_batch(frame, **options)
        if frame.height:
            crash_point("file-read", frame[native.FILE][-1])
        return verdict

    native.admit_batch = judged

    arrive, evaluate_batch = mig.Mig._arrive, mig.Mig._evaluate_batch

    def arriving(self, batch, batch_id, started):
        if os.environ.get(VARIABLE) == f"{JVM}:{batch_id}":  # the JVM dies, this process lives
            crash_point(JVM, batch_id, victim=self.spark.sparkContext._gateway.proc.pid)
        return arrive(self, batch, batch_id, started)

    def evaluating(self, arrival):
        _here.mig = self
        return evaluate_batch(self, arrival)

    mig.Mig._arrive, mig.Mig._evaluate_batch = arriving, evaluating

    arrived, commit, transaction = (ColumnarStore.arrived, ColumnarStore.commit,
                                    ColumnarStore._transaction)

    def recording_arrival(self, query, batch_id, *args, **kwargs):
        crash_point("arrival", batch_id)
        return arrived(self, query, batch_id, *args, **kwargs)

    def committing(self, query, batch_id, *args, **kwargs):
        crash_point("evaluation", batch_id)
        _after_spark_commit(getattr(_here, "mig", None), batch_id)
        _here.committing = batch_id
        try:
            return commit(self, query, batch_id, *args, **kwargs)
        finally:
            _here.committing = None

    @contextmanager
    def in_transaction(self):
        with transaction(self):
            yield
            if getattr(_here, "committing", None) is not None:
                crash_point("duckdb-write", _here.committing)

    ColumnarStore.arrived, ColumnarStore.commit = recording_arrival, committing
    ColumnarStore._transaction = in_transaction
    _install_migration_points()


def _after_spark_commit(bridge, batch_id: int) -> None:
    """The point between Spark's commit of a batch and DuckDB's: Spark writes its commit log
    once ``foreachBatch`` returns, while the MIG's thread evaluates."""
    if os.environ.get(VARIABLE) != f"spark-committed:{batch_id}" or bridge is None:
        return
    committed = Path(bridge.checkpoint) / "commits" / str(batch_id - bridge.batch_base)
    for _ in range(6000):
        if committed.exists():
            break
        time.sleep(0.01)
    crash_point("spark-committed", batch_id)


def _install_migration_points() -> None:
    from optimizer.migration import MS
    from runtime import migration

    adaptive = migration._Adaptive
    start, release = adaptive._start, adaptive._release

    def starting(self, explanation, takeover, migrated, *args, **kwargs):
        if migrated is not None and migrated.strategy == MS:
            crash_point("migration", self.numbers)  # the old plan is stopped, the new not saved
        return start(self, explanation, takeover, migrated, *args, **kwargs)

    def releasing(self, plan):
        plan.started.wait()
        crash_point("release", plan.number)
        return release(self, plan)

    adaptive._start, adaptive._release = starting, releasing

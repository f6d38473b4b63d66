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

import importlib.abc
import importlib.util
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

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
# The crossing by reference (rowstream/by_reference.py), where Spark commits a batch before
# DuckDB has read its files.
REFERENCE_POINTS = {
    "committed-unread": "Spark has committed the micro-batch, DuckDB has not read its files",
}
# An adaptive run's migrations (runtime/migration.py), where the number of the plan they start.
MIGRATION_POINTS = {
    "migration": "Moving State: the old plan has stopped, the new one is not recorded yet",
    "release": "Parallel Track: the old plan is done, the new one's results not yet released",
}
JVM = "jvm"  # Spark's JVM dies at a micro-batch's arrival; the CLI's process lives on
# Spark's JVM stops (SIGSTOP) at a micro-batch's arrival: it lives on and answers no call, as
# one did whose threads an OutOfMemoryError had killed.
FROZEN = "jvm-frozen"
# The Python process that runs the landing source's reader for Spark dies (SIGKILL, as the
# kernel's OOM killer kills) when it has read a named file; the CLI and the JVM live on.
SOURCE = "source-died"
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


def crash_point(point: str, where: object, victim: int | None = None,
                how: signal.Signals = signal.SIGKILL) -> None:
    """Die here if ``TANDEM_CRASH`` names this point and place; with ``victim``, that process
    gets ``how`` instead of the whole group getting SIGKILL."""
    if os.environ.get(VARIABLE) == f"{point}:{where}":
        if victim is not None:
            os.kill(victim, how)
        else:
            os.killpg(int(os.environ.get(GROUP, os.getpgid(0))), signal.SIGKILL)


_here = threading.local()  # the MIG whose evaluation this thread runs, the batch it commits


def install() -> None:
    """Wrap the steps of the protocol (``POINTS``, ``MIGRATION_POINTS``) with their crash
    points, each module's as it is first imported: a process imports only what it runs (Spark
    starts its Python workers with this installed, and must hear from each within 10 s). The
    processes the run starts learn which group to kill."""
    os.environ.setdefault(GROUP, str(os.getpgid(0)))
    sys.meta_path.insert(0, _Patching({
        "pyspark.sql.datasource_internal": _patch_spark_reader,
        "rowstream.landing_source": _patch_landing_source,
        "rowstream.native": _patch_native,
        "rowstream.by_reference": _patch_by_reference,
        "rowstream.mig": _patch_mig,
        "rowstream.shared": _patch_shared,
        "columnar.store": _patch_store,
        "runtime.migration": _patch_migration,
    }))


class _Patching(importlib.abc.MetaPathFinder):
    """Runs ``patches[name](module)`` once the module ``name`` has been executed, before any
    other module can import a name from it."""

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        patch = self.patches.pop(name, None)
        if patch is None:
            return None
        spec = importlib.util.find_spec(name)  # the other finders' (this one has let go of it)
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, patch: Callable[[ModuleType], None]):
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.patch(module)


def _patch_landing_source(module: ModuleType) -> None:
    # The Python landing source reads a batch's files when Spark asks how far the stream has
    # come, before Spark writes the batch's offsets; Spark plans the batch after.
    read = module.LandingReader.read

    def file_read(self, start):
        rows, end = read(self, start)
        if end["after"] != start["after"]:
            crash_point("file-read", end["after"])
            crash_point(SOURCE, end["after"], victim=os.getpid())
        return rows, end

    module.LandingReader.read = file_read


def _patch_spark_reader(module: ModuleType) -> None:
    partitions = module._SimpleStreamReaderWrapper.partitions

    def offsets_written(self, start, end):
        # A landing source's reader: its module is imported (and patched) by then.
        landing = sys.modules.get("rowstream.landing_source")
        if (landing and isinstance(self.simple_reader, landing.LandingReader)
                and end["after"] != start["after"]):
            crash_point("spark-offsets", end["after"])
        return partitions(self, start, end)

    module._SimpleStreamReaderWrapper.partitions = offsets_written


def _patch_native(module: ModuleType) -> None:
    admit_batch = module.admit_batch

    def judged(frame, *args, **options):  # the native gateway's rows, judged by its judge
        verdict = admit_batch(frame, *args, **options)
        if frame.height:
            crash_point("file-read", frame[module.FILE][-1])
        return verdict

    module.admit_batch = judged


def _patch_by_reference(module: ModuleType) -> None:
    read = module.FileReferences.read

    def files_read(self, con):  # the by-reference gateway's files, read by DuckDB
        done = read(self, con)
        if self.files:
            crash_point("file-read", self.files[-1].name)
        return done

    module.FileReferences.read = files_read


def _patch_mig(module: ModuleType) -> None:
    arrive, evaluate_batch = module.Mig.arrive, module.Mig.evaluate_batch

    def arriving(self, batch, batch_id, started, read=None):
        # The JVM dies or stops, this process lives: its pid only where one of them is set.
        if os.environ.get(VARIABLE, "").partition(":")[0] in (JVM, FROZEN):
            jvm = self.spark.sparkContext._gateway.proc.pid
            crash_point(JVM, batch_id, victim=jvm)
            crash_point(FROZEN, batch_id, victim=jvm, how=signal.SIGSTOP)
        return arrive(self, batch, batch_id, started, read)

    def evaluating(self, arrival):
        _here.mig = self
        return evaluate_batch(self, arrival)

    read_and_evaluate = module.Mig._arrive_and_evaluate

    def reading(self, batch_id, started):
        _wait_for_spark_commit(self, "committed-unread", batch_id)
        return read_and_evaluate(self, batch_id, started)

    module.Mig.arrive, module.Mig.evaluate_batch = arriving, evaluating
    module.Mig._arrive_and_evaluate = reading


def _patch_shared(module: ModuleType) -> None:
    """Several queries' MIGs read each batch once, on a thread of their own."""
    read_and_evaluate = module.SharedBatches._arrive_and_evaluate

    def reading(self, batch_id, started):
        _wait_for_spark_commit(self.migs[0], "committed-unread", batch_id)
        return read_and_evaluate(self, batch_id, started)

    module.SharedBatches._arrive_and_evaluate = reading


def _patch_store(module: ModuleType) -> None:
    store = module.ColumnarStore
    arrived, commit, transaction = store.arrived, store.commit, store._transaction

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

    store.arrived, store.commit, store._transaction = recording_arrival, committing, in_transaction


def _after_spark_commit(bridge, batch_id: int) -> None:
    """The point between Spark's commit of a batch and DuckDB's: Spark writes its commit log
    once ``foreachBatch`` returns, while the MIG's thread evaluates."""
    _wait_for_spark_commit(bridge, "spark-committed", batch_id)


def _wait_for_spark_commit(bridge, point: str, batch_id: int) -> None:
    """Die at ``point`` of ``batch_id`` once Spark has committed the batch, if asked to."""
    if os.environ.get(VARIABLE) != f"{point}:{batch_id}" or bridge is None:
        return
    committed = Path(bridge.checkpoint) / "commits" / str(batch_id - bridge.batch_base)
    for _ in range(6000):
        if committed.exists():
            break
        time.sleep(0.01)
    crash_point(point, batch_id)


def _patch_migration(module: ModuleType) -> None:
    from optimizer.migration import MS

    adaptive = module._Adaptive
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

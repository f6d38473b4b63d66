"""Crash points: where the exactly-once tests kill a run (tests/test_crash.py).

``TANDEM_CRASH=<point>:<where>`` makes the run kill its whole process group (the CLI, Spark's
JVM and its Python workers) with SIGKILL when it reaches ``point`` at ``where``: a micro-batch
id, or for the points in the landing source, which Spark calls without one, the name of the
last file of the micro-batch. That is a crash at a known place in the protocol, as a power cut
would leave it, and the resumed run must neither lose nor duplicate a row. Unset, a crash point
costs one environment lookup.
"""

from __future__ import annotations

import os
import signal

VARIABLE = "TANDEM_CRASH"
GROUP = "TANDEM_CRASH_GROUP"  # the run's process group (Spark's Python workers have their own)
POINTS = {
    "file-read": "a landing file is being read (in Spark's Python worker)",
    "spark-offsets": "Spark has written the micro-batch's offsets, not yet run it",
    "arrival": "the micro-batch's rows are in DuckDB, its arrival not yet recorded",
    "evaluation": "the MIG's thread is evaluating the micro-batch's window_ends",
    "spark-committed": "Spark has committed the micro-batch, DuckDB not yet its results",
    "duckdb-write": "inside DuckDB's transaction that commits the micro-batch's results",
}
# An adaptive run's migrations (runtime/migration.py), where the number of the plan they start.
MIGRATION_POINTS = {
    "migration": "Moving State: the old plan has stopped, the new one is not recorded yet",
    "release": "Parallel Track: the old plan is done, the new one's results not yet released",
}
JVM = "jvm"  # Spark's JVM dies at a micro-batch's arrival; the CLI's process lives on


def arm() -> None:
    """Called by the run before it starts Spark: the processes Spark starts learn which group
    to kill."""
    if os.environ.get(VARIABLE):
        os.environ.setdefault(GROUP, str(os.getpgid(0)))


def crash_point(point: str, where: object, victim: int | None = None) -> None:
    """Die here if ``TANDEM_CRASH`` names this point and place; with ``victim``, that process
    dies instead of the whole group."""
    wanted = os.environ.get(VARIABLE)
    if wanted and wanted == f"{point}:{where}":
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
        else:
            os.killpg(int(os.environ.get(GROUP, os.getpgid(0))), signal.SIGKILL)

"""Incremental runs over a landing directory: each run reads the files that landed since the last
one (Spark's availableNow trigger), continues the windows from the checkpoint and the DuckDB state,
and stops. ``tandem_microbatch`` in Airflow runs this on a schedule.

Exactly once: Spark's checkpoint keeps the last file read (the landing source's offsets are file
names, so files must land with names in event-time order, as ``tandem generate`` writes them), the
results are written per micro-batch id, and a lock on the checkpoint lets one run at a time go
on: an overlapping run waits and then finds only the files its predecessor left.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

from columnar.store import schema_name
from rowstream.gateway import Quarantined
from rowstream.landing import landed_files, last_file_read


@dataclass(frozen=True)
class MicroBatchSummary:
    query: str
    files: list[str]  # the files this run read, in order
    tuples: int = 0
    batches: int = 0
    result_rows: int = 0
    quarantined: Quarantined = Quarantined()
    wall_seconds: float = 0.0
    results_table: str = ""
    placement: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "quarantined"},
                **self.quarantined.to_json()}


def microbatch_name(query: str) -> str:
    """The micro-batch runs' name for a query: their schema in the store and their checkpoint,
    apart from the bounded runs of the query (which start afresh each time)."""
    return f"{Path(query).stem}_microbatch"


def pending_files(landing: str | Path, checkpoint: str | Path) -> list[str]:
    """The landed files that the checkpoint has not read yet."""
    after = last_file_read(checkpoint)
    return [f for f in landed_files(landing) if f > after]


@contextmanager
def exclusive(checkpoint: Path) -> Iterator[None]:
    """One run of a checkpoint at a time, across processes: a second run waits for the first."""
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    with open(checkpoint.with_name(checkpoint.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_microbatch(query: str, landing: str | Path, *, checkpoints: str | Path,
                   store: str | Path, placement: str = "auto", catalog: str | None = None,
                   profile: str | None = None, lateness: float | None = None) -> MicroBatchSummary:
    """Run ``query`` over the files that landed in ``landing`` since its last run, with its
    checkpoint in ``checkpoints``. A run that finds no new file returns at once, without
    starting Spark.

    The first run's placement is pinned for its checkpoint (``<checkpoint>.placement``): Spark's
    state and DuckDB's window tables are those of that plan. A plan the nightly clean-up finds
    better is adopted by Parallel Track over the runs that follow (``runtime.adoption``): each
    plan has a checkpoint of its own."""
    name = microbatch_name(query)
    checkpoints = Path(checkpoints)
    pinned = checkpoints / f"{name}.placement"
    Path(landing).mkdir(parents=True, exist_ok=True)  # where users drop files
    with exclusive(checkpoints / name):
        # While Parallel Track runs two plans, the old one's results are the run's.
        oldest = live_checkpoints(query, checkpoints, store)[0]
        files = pending_files(landing, oldest)
        if not files:
            return MicroBatchSummary(name, [], results_table=f"{schema_name(name)}.results")
        from runtime.adoption import scheduled_run  # imports Spark: only to read something

        if pinned.is_file() and (checkpoints / name).is_dir():
            placement = pinned.read_text().strip()
        summary = scheduled_run(query, name, landing, checkpoints, store, placement=placement,
                                catalog=catalog, profile=profile, lateness=lateness)
        if summary.query == name:  # the checkpoint's first plan ran
            pinned.write_text(",".join(f"{op}={e}" for op, e in summary.placement.items()) + "\n")
        read = [f for f in files if f <= last_file_read(oldest)]
    return MicroBatchSummary(summary.query, read, summary.tuples, summary.batches,
                             summary.result_rows, summary.quarantined, summary.wall_seconds,
                             summary.results_table, summary.placement)


def live_checkpoints(query: str, checkpoints: str | Path, store: str | Path) -> list[Path]:
    """The checkpoints of the plans that the micro-batch runs of ``query`` still run, oldest
    first: the first plan's, or those that Parallel Track runs side by side, or the plan it
    adopted."""
    from runtime.migration import live_plans

    name = microbatch_name(query)
    return [Path(checkpoints) / plan for plan in live_plans(store, name) or [name]]

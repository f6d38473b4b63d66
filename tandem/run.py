"""`tandem run`: optimise a query (unless a placement is forced), deploy it on Spark and DuckDB
and run it over the generator or a landing directory. The CLI and the Airflow operators call
``run``."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from columnar.store import DEFAULT_PATH, ColumnarStore, schema_name
from optimizer.errors import TandemError
from rowstream.mig import BatchReport, Mig, Transfers
from tandem.explain import Explanation, explain

CHECKPOINTS = Path(".tandem/checkpoints")


@dataclass(frozen=True)
class RunSummary:
    query: str
    placement: dict[str, str]
    tuples: int
    batches: int
    window_ends: int
    result_rows: int
    quarantined: int
    wall_seconds: float
    transfers: Transfers
    store: str
    results_table: str

    @property
    def throughput(self) -> float:
        return self.tuples / self.wall_seconds if self.wall_seconds else 0.0


def run(query: str, *, placement: str = "auto", rate: float = 1000.0, duration: float = 60.0,
        batch: float | None = None, source: str = "generator", catalog: str | None = None,
        profile: str | None = None, store: str | Path = DEFAULT_PATH,
        checkpoint: str | Path | None = None, resume: bool = False,
        stop_after: int | None = None, topology: dict | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
        explanation: Explanation | None = None) -> RunSummary:
    """Run ``query`` for ``duration`` seconds of event time at ``rate`` tuples/s (generator), or
    over the files in the directory ``source``. ``batch`` is the event time per micro-batch
    (default: one slide). ``resume`` continues from the checkpoint of an earlier run;
    ``stop_after`` stops after that many micro-batches (to interrupt a run on purpose)."""
    from rowstream.session import spark_session
    from rowstream.sources import generator_stream, landing_stream

    explanation = explanation or explain(query, rate=rate, catalog=catalog, profile=profile,
                                         placement=placement)
    physical = explanation.optimization.plan
    name = explanation.query.stem
    reports: list[BatchReport] = []

    def record(report: BatchReport) -> None:
        reports.append(report)
        if on_batch:
            on_batch(report)

    columnar = ColumnarStore(store)
    checkpoint = Path(checkpoint) if checkpoint else CHECKPOINTS / name
    if not resume:
        shutil.rmtree(checkpoint, ignore_errors=True)
        columnar._run(f"DROP SCHEMA IF EXISTS {schema_name(name)} CASCADE")
    mig = Mig(name, physical, columnar, record)  # refuses placements it cannot run, before Spark
    spark = spark_session()
    slide = physical.logical.root.slide
    span = batch or slide
    if source == "generator":
        stream = generator_stream(spark, rate=rate, duration=duration, span=span, slide=slide,
                                  **(topology or {}))
    elif Path(source).is_dir():
        stream = landing_stream(spark, source)
    else:
        raise TandemError(f"--source {source!r}: give 'generator' or a directory of CSV files")

    writer = stream.writeStream.foreachBatch(mig).option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(availableNow=True) if source != "generator" else writer
    started = time.perf_counter()
    handle = writer.queryName(f"tandem_{name}").start()
    try:
        while handle.isActive and not mig.finished:
            if stop_after is not None and len(reports) >= stop_after:
                break
            if handle.exception():
                raise TandemError(f"the Spark query failed: {handle.exception()}")
            time.sleep(0.05)
    finally:
        handle.stop()
        columnar.close()
    wall = time.perf_counter() - started
    return RunSummary(name, physical.placement, sum(r.tuples for r in reports), len(reports),
                      sum(r.window_ends for r in reports), sum(r.result_rows for r in reports),
                      0, wall, mig.transfers, str(store), f"{schema_name(name)}.results")

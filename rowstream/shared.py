"""Several queries over one stream in one run (docs/design.md, Several queries): one Spark query
plans the micro-batches, and DuckDB reads and judges each batch's files once, by reference,
for every query that judges them alike (a query sizing a K-slack buffer of its own reads them
for itself); their admitted rows go into one temporary table. Each query's MIG
(``rowstream/mig.py``) then appends its windows' rows from that table and evaluates its windows
as it would alone, into its own store schema and results, one query after the other on one
thread.

Each query records the batch's arrival with its own progress, so a run killed between two
queries' arrivals resumes each from its own last batch: a query that missed a batch Spark
committed reads it again from the files Spark's checkpoint lists (``Mig.recover``), exactly as
a run of that query alone would.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from rowstream.mig import Mig, Transfers


@dataclass
class SharedBatches:
    """The ``foreachBatch`` of several queries' MIGs over one stream read by reference; it
    answers a run as one MIG does (``runtime.run._drive``)."""

    migs: list[Mig]
    failure: Exception | None = None
    paused: bool = False
    _pending: Future | None = field(default=None, init=False)

    def __post_init__(self):
        if not all(m.gateway.by_reference for m in self.migs):
            raise ValueError("queries share a stream's read only by reference")
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="tandem-shared")

    @property
    def finished(self) -> bool:
        return all(m.finished for m in self.migs)

    @property
    def interrupted(self) -> bool:
        return any(m.interrupted for m in self.migs)

    @property
    def transfers(self) -> Transfers:
        moved = Transfers()
        for m in self.migs:
            moved.add(m.transfers.to_duckdb_tuples, m.transfers.to_duckdb_bytes)
            moved.add(m.transfers.to_spark_tuples, m.transfers.to_spark_bytes, to_spark=True)
        return moved

    def stream(self, source: DataFrame) -> DataFrame:
        return source  # Spark reads nothing: the batch is its plan

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.paused:
            return
        self._wait()
        self._pending = self._thread.submit(self._arrive_and_evaluate, batch_id,
                                            time.perf_counter())

    def _arrive_and_evaluate(self, batch_id: int, started: float) -> None:
        """Steps 1–4 of every query's MIG for one batch: DuckDB reads it once for the queries
        whose gateways judge alike (the stream's lateness), and once more for each query
        with a K-slack buffer of its own, whose verdicts are its own."""
        try:
            alike: dict[object, list[Mig]] = {}
            for mig in self.migs:
                alike.setdefault(mig.gateway, []).append(mig)
            arrivals = []
            for migs in alike.values():
                first = migs[0]
                read = first.read(first.judge_of(batch_id))
                try:
                    if len(migs) > 1:
                        read.read.share(first.store.con)
                    arrivals += [(m, m.arrive(None, batch_id, started, read)) for m in migs]
                finally:
                    read.read.close(first.store.con)
            for mig, arrival in arrivals:
                mig.evaluate_batch(arrival)
        except Exception as err:
            self.failure = self.failure or err
            raise

    def _wait(self) -> None:
        if self._pending is not None:
            self._pending.result()
        if self.failure is not None:
            raise self.failure

    def recover(self) -> None:
        """Each query's own recovery: from its own last arrival and evaluation."""
        for mig in self.migs:
            mig.recover()

    def busy(self) -> bool:
        return self._pending is not None and not self._pending.done()

    def drain(self) -> None:
        if self._pending is not None:
            self._pending.exception()
        self.failure = self.failure or next((m.failure for m in self.migs if m.failure), None)

    def close(self) -> None:
        self.drain()
        self._thread.shutdown()
        for mig in self.migs:
            mig.close()

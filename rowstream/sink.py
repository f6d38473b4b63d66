"""The result sink of a plan whose root runs in Spark: a MIG into the DuckDB results table.

Spark's stateful operators run in append mode, so every row a micro-batch emits is final; the
sink commits them keyed by the batch id, which makes a replay after a restart harmless."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from columnar.store import ColumnarStore
from rowstream.mig import BatchReport, Transfers, naive


@dataclass
class ResultSink:
    query: str
    store: ColumnarStore
    final_end: datetime | None  # a finite stream's last window_end; later ones are not results
    on_batch: Callable[[BatchReport], None] | None = None
    transfers: Transfers = field(default_factory=Transfers)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        rows = naive(batch.toArrow())
        if self.final_end is not None and rows.num_rows:
            rows = rows.filter(pc.less_equal(rows.column("window_end"),
                                             pa.scalar(self.final_end, pa.timestamp("us"))))
        self.transfers.to_duckdb_tuples += rows.num_rows
        self.transfers.to_duckdb_bytes += rows.nbytes
        latest = pc.max(rows.column("window_end")).as_py() if rows.num_rows else None
        count = self.store.commit(self.query, batch_id, rows, None, latest)
        if self.on_batch:
            ends = len(pc.unique(rows.column("window_end"))) if rows.num_rows else 0
            self.on_batch(BatchReport(batch_id, 0, latest, ends, count,
                                      time.perf_counter() - started, False))

"""The event-time contract every placement shares (docs/design.md, Semantics; docs/execution.md).

A stream's *high-water mark* is the latest event time among the rows it has admitted so far (and
its heartbeats). With an allowed lateness L its *watermark* is Spark's: the high-water mark in
whole milliseconds, less L (``EventTimeWatermarkExec`` keeps event times in milliseconds).

* A window_end e is evaluated once the watermark has reached it (e <= watermark): Spark's
  aggregates emit a window then, and the MIG evaluates DuckDB's window_ends by the same rule.
* A row is late if its event time is at or before the watermark of the micro-batches before its
  own (Spark's ``ts <= watermark`` for late rows). The gateway sends it to the quarantine,
  so no operator of any engine sees it, and Spark's stateful operators drop nothing.

A row that is not late has ts > watermark >= every window_end evaluated so far, so every window
that holds it is still open: it counts exactly, under every placement.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

US = 1_000_000
EPOCH = datetime(1970, 1, 1)  # event times are UTC wall times, microseconds since it
LATE = "late"  # the quarantine's rule for a late row


def watermark(high_water_us: int | None, lateness: float) -> int | None:
    """Spark's watermark (µs) after the rows up to ``high_water_us``."""
    if high_water_us is None:
        return None
    return (high_water_us // 1000) * 1000 - round(lateness * US)


def admit(frame: pl.DataFrame, high_water_us: int | None, lateness: float,
          slide: float, time_column: str, mark: int | None = None
          ) -> tuple[pl.DataFrame, int | None]:
    """Mark the late rows of a micro-batch (``time_column``, ``reason``, ``rule`` columns; rows
    with a reason are already quarantined) against the high-water mark of the batches before it
    and its watermark (``mark``, by default the high-water mark less ``lateness``; a K-slack
    buffer's never moves back, ``kslack/manager.py``). Returns the rows and the high-water mark
    after the batch."""
    mark = watermark(high_water_us, lateness) if mark is None else mark
    if mark is not None:
        ts = pl.col(time_column).dt.epoch("us")
        step = round(slide * US)
        first_end = (ts // step + 1) * step  # the earliest window that would hold the row
        late = pl.col("reason").is_null() & (ts <= mark)
        reason = pl.format(
            "late by {} s (allowed {} s): its window_end {} was evaluated at watermark {}",
            ((high_water_us - ts) / US).round(3), pl.lit(lateness),
            pl.from_epoch(first_end, "us").dt.to_string("%Y-%m-%d %H:%M:%S%.f"),
            pl.from_epoch(pl.lit(mark), "us").dt.to_string("%Y-%m-%d %H:%M:%S%.f"))
        frame = frame.with_columns(pl.when(late).then(reason).otherwise("reason").alias("reason"),
                                   pl.when(late).then(pl.lit(LATE)).otherwise("rule").alias("rule"))
    admitted = frame.filter(pl.col("reason").is_null())[time_column].dt.epoch("us").max()
    candidates = [t for t in (high_water_us, admitted) if t is not None]
    return frame, max(candidates) if candidates else None

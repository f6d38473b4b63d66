"""The gateway: how a stream enters Spark, and how each micro-batch is judged before its rows
reach DuckDB (docs/design.md, Contracts).

A gateway gives Spark a streaming DataFrame of the stream's rows (``StreamSchema.rows``, from
the stream's catalog entry: its columns, ``heartbeat`` and, for a row its source already
quarantined, ``reason``, ``rule`` and ``origin``) and, for every micro-batch, a ``Judge``: a function of the batch's stream rows that
returns a ``Verdict``, the three things the MIG needs of the batch:

* which rows are admitted (the rest leave every crossing before DuckDB sees them);
* the quarantined rows, with the rule each broke, its reason and its origin (file and line);
* the stream's high-water mark after the batch, when the gateway, not its Spark source, keeps it.

The MIG runs the judge on the driver over the batch's Arrow rows, or in the executors, one task
at a time, where the batch's rows stay there (``rowstream/partitioned.py``); a judge is
therefore picklable and reads nothing but its arguments and the files it was given. A source
that judges its rows itself, before any Spark operator sees them (the generator, the Python
landing source), has the plain ``Judge``: it admits every row it is given. A new gateway is one
module with a ``Gateway`` subclass.

The quarantined rows of every gateway, and those of Great Expectations' landing validation, go
to one table (``columnar/store.py``, ``tandem_log.quarantine``); ``Quarantined`` counts them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from kslack.manager import BufferManager, Decision, Policy
from rowstream.eventtime import EPOCH, LATE
from workload.schema import StreamSchema

if TYPE_CHECKING:  # the runs' summaries count the quarantine without starting Spark
    from pyspark.sql import DataFrame, SparkSession

# The MIG's batch holds every relation as a struct column (rowstream/mig.py): the stream's rows
# with the columns a judge reads, and the rows a source quarantined itself.
STREAM, QUARANTINE = "stream", "quarantine"
# The quarantine table's rows, whatever the stream (columnar/store.py): the row's columns as
# JSON, as far as they parsed, and its event time, where it has one.
QUARANTINE_TABLE = pa.schema([("stream", pa.string()), ("ts", pa.timestamp("us")),
                              ("row", pa.string()), ("reason", pa.string()),
                              ("rule", pa.string()), ("origin", pa.string())])


@dataclass(frozen=True)
class Quarantined:
    """Rows quarantined, per rule: an input expectation's name, ``unreadable`` or ``late``."""

    rules: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rules.values())

    @property
    def late(self) -> int:
        """The rows that came later than the allowed lateness."""
        return self.rules.get(LATE, 0)

    def to_json(self) -> dict:
        """As runs report it: the total, the late rows among them, and each rule's rows."""
        return {"quarantined": self.total, "late": self.late, "rules": dict(self.rules)}

    def __add__(self, other: Quarantined) -> Quarantined:
        return Quarantined(dict(Counter(self.rules) + Counter(other.rules)))

    @classmethod
    def of(cls, rows: pa.Table) -> Quarantined:
        """The counts of quarantined ``rows`` (a ``rule`` column)."""
        return cls({c["values"]: c["counts"]
                    for c in pc.value_counts(rows.column("rule")).to_pylist()})

    @classmethod
    def total_of(cls, parts: Iterable[Quarantined]) -> Quarantined:
        return sum(parts, cls())


@dataclass(frozen=True)
class Slack:
    """What a K-slack buffer (``kslack/manager.py``) made of a batch: the watermark after it,
    each landed file's decision (its stream, its name, the decision), and the buffer's state
    after the batch, which the batch's progress stores (``ColumnarStore.arrived``)."""

    watermark: datetime | None
    decisions: tuple[tuple[str, str, Decision], ...]
    state: dict


def buffer_of(policy: Policy | None, state: dict | None) -> BufferManager | None:
    """The buffer a gateway sizes by ``policy`` as the batches before left it (``state``);
    None for a fixed lateness."""
    return None if policy is None else BufferManager.from_json(policy, state)


def observed(frame: pl.DataFrame, time_column: str, value: str | None) -> tuple:
    """What a K-slack buffer observes of a judged file (``BufferManager.observe``), its rows in
    the order they landed: of those that passed the input suite, the times in µs, which came
    late, and the values of the stream column ``value`` (None: none)."""
    seen = frame.filter(pl.col("reason").is_null() | (pl.col("rule") == LATE))
    return (seen[time_column].dt.epoch("us").to_numpy(),
            (seen["rule"] == LATE).fill_null(False).to_numpy(),
            seen[value].cast(pl.Float64).to_numpy() if value else None)


def slack_of(buffer: BufferManager | None, decisions: list[tuple[str, str, Decision]]
             ) -> Slack | None:
    if buffer is None:
        return None
    return Slack(None if buffer.mark is None else EPOCH + timedelta(microseconds=buffer.mark),
                 tuple(decisions), buffer.to_json())


@dataclass(frozen=True)
class Verdict:
    """A judged micro-batch (module docstring)."""

    admitted: pa.Array | None  # boolean, one per stream row judged; None: every row
    quarantined: pa.Table  # StreamSchema.quarantined
    high_water: datetime | None  # after the batch; None where the source keeps it
    files: tuple[str, ...] = ()  # the names of the landed files the rows came from
    slack: Slack | None = None  # where a K-slack buffer judged it


@dataclass(frozen=True)
class Judge:
    """The judge of a source that judged its rows itself: every row it is given is admitted."""

    schema: StreamSchema

    def __call__(self, rows: pa.Table) -> Verdict:
        return Verdict(None, self.schema.quarantined.empty_table(), None)

    def unread(self, read: Iterable[str]) -> pa.Table:
        """The quarantined rows that stand for the batch's files of which no row was read
        (``read``: the names of those that gave rows): Spark's file sources skip a file they
        cannot read."""
        return self.schema.quarantined.empty_table()


class Gateway(ABC):
    """How a stream is read (module docstring)."""

    name: ClassVar[str]  # as runs report it
    schema: StreamSchema  # the stream's, from its catalog entry
    # DuckDB reads each batch's files itself, and Spark's rows are never read: the judge has
    # ``read`` instead (``rowstream/by_reference.py``).
    by_reference: ClassVar[bool] = False

    @property
    def judged(self) -> tuple[str, ...]:
        """The stream's columns a judge reads: the MIG hands them over in the stream's
        relation."""
        return (self.schema.time_column,)

    @property
    def reading(self) -> Gateway:
        """The gateway less how it judges: queries whose gateways read alike share one read
        of each batch (``rowstream/shared.py``)."""
        return self

    @abstractmethod
    def stream(self, spark: SparkSession) -> DataFrame:
        """The streaming DataFrame Spark reads (``schema.rows``, and ``judged``)."""

    def judge(self, batch_id: int, high_water: datetime | None,
              slack: dict | None = None) -> Judge:
        """The judge of micro-batch ``batch_id`` (the gateway's own numbering, from 0), given the
        high-water mark of the batches before it (the last verdict's) and, for a gateway that
        sizes a K-slack buffer (``by_reference``), the buffer's state they left."""
        return Judge(self.schema)


def quarantined_rows(schema: StreamSchema, *parts: pa.Table) -> pa.Table:
    """Quarantined rows of ``schema``'s stream (``schema.quarantined``) as the quarantine
    table holds them (``QUARANTINE_TABLE``): the event time a UTC wall time
    (``rowstream/relations.py``), the row's columns JSON."""
    rows = pa.concat_tables([schema.quarantined.empty_table(), *(
        p.select(schema.quarantined.names).cast(schema.quarantined) for p in parts)])
    if not rows.num_rows:
        return QUARANTINE_TABLE.empty_table()
    frame = pl.from_arrow(rows)
    return frame.select(
        pl.lit(schema.name).alias("stream"),
        pl.col(schema.time_column).dt.replace_time_zone(None).alias("ts"),
        pl.struct(*schema.names).struct.json_encode().alias("row"),
        "reason", "rule", "origin").to_arrow().cast(QUARANTINE_TABLE)


def admitted_rows(batch: pa.Table, verdict: Verdict) -> pa.Table:
    """The rows of a batch (struct columns) that ``verdict`` admits: it judged the rows of the
    stream's relation; every other row is admitted."""
    if verdict.admitted is None:
        return batch
    keep = np.ones(batch.num_rows, bool)
    judged = np.flatnonzero(batch.column(STREAM).is_valid().to_numpy(zero_copy_only=False))
    keep[judged] = verdict.admitted.to_numpy(zero_copy_only=False)
    return batch.filter(pa.array(keep))


def heartbeat(schema: StreamSchema, ts_us: float) -> pa.Table:
    """A heartbeat row at ``ts_us`` microseconds (``rowstream/dsps.py``: punctuation that moves
    the event-time watermark), of ``schema.rows``."""
    row = {f.name: pa.nulls(1, f.type) for f in schema.rows}
    row[schema.time_column] = pa.array([round(ts_us)], pa.timestamp("us", tz="UTC"))
    row["heartbeat"] = pa.array([True])
    return pa.table(row, schema=schema.rows)

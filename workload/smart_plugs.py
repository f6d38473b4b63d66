"""A deterministic smart-plug stream with the shape of DEBS 2014 (the real data is not here).

40 houses of 10 households each, 2125 plugs. Every plug reports its load (property 1, W) and
its cumulative work (property 0, kWh) in turn, so half of the readings are loads. A plug has a
base load drawn once; minute by minute it is off (load 0), normal (base ± 10 %) or in a burst
(2-5 × base). Event i of the stream is reading i mod (2 × plugs) of the round robin, at
``start + i / rate``: any rate and duration, and the same events whatever the batch boundaries,
because every random number is a hash of (seed, what it is for).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from workload.disorder import Disorder, landed_parts
from workload.draws import uniform
from workload.schema import StreamSchema, write_files

DEBS_START = 1377986400  # 2013-09-01 00:00 CEST (22:00 UTC the day before): where DEBS 2014 starts
HOUSES = 40
HOUSEHOLDS_PER_HOUSE = 10
PLUGS = 2125
SEGMENT_SECONDS = 60  # a plug keeps its state (off, normal, burst) for a minute
P_OFF, P_BURST = 0.15, 0.10

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("ts", pa.timestamp("us")),  # UTC, without a zone: both engines are pinned to UTC
    ("value", pa.float64()),
    ("property", pa.int32()),
    ("plug_id", pa.int32()),
    ("household_id", pa.int32()),
    ("house_id", pa.int32()),
])
# The stream as the repository's catalog declares it (queries/catalog.toml; a test keeps the
# two alike): what the writer lands when no catalog entry is handed to it.
PLUGS_STREAM = StreamSchema(
    "plugs", (("id", "BIGINT"), ("ts", "TIMESTAMP"), ("value", "DOUBLE"), ("property", "INTEGER"),
              ("plug_id", "INTEGER"), ("household_id", "INTEGER"), ("house_id", "INTEGER")),
    "ts", ("id", "timestamp", "value", "property", "plug_id", "household_id", "house_id"))


@dataclass(frozen=True)
class SmartPlugs:
    """The stream at ``rate`` events per second, from ``start`` (Unix seconds)."""

    rate: float
    seed: int = 2014
    start: int = DEBS_START
    houses: int = HOUSES
    households_per_house: int = HOUSEHOLDS_PER_HOUSE
    plugs: int = PLUGS  # tests use a few plugs, so that each reports often at a low rate
    # Steps of the rate: (second, rate) pairs, the rate from that second of event time on
    # (``rate`` holds before the first). Stream rates change (DEBS follows daily cycles).
    steps: tuple[tuple[float, float], ...] = ()

    def __post_init__(self):
        if self.plugs < self.houses * self.households_per_house:
            raise ValueError("every household needs a plug: plugs >= houses * households_per_house")
        seconds = [0.0, *(s for s, _ in self.steps)]
        if any(b <= a for a, b in zip(seconds, seconds[1:], strict=False)) or any(
                r <= 0 for r in (self.rate, *(r for _, r in self.steps))):
            raise ValueError("rate steps need increasing seconds after 0 and positive rates")

    @cached_property
    def stretches(self) -> list[tuple[int, int, float]]:
        """(first second's microseconds, first event, rate) of each stretch of one rate."""
        found = [(0, 0, float(self.rate))]
        for second, rate in self.steps:
            start_us, first, before = found[-1]
            length = second - start_us / 1e6
            found.append((round(second * 1e6), first + math.ceil(length * before - 1e-9),
                          float(rate)))
        return found

    @cached_property
    def topology(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(house_id, household_id, plug_id) of every plug; plug ids count within a household."""
        households = self.houses * self.households_per_house
        # Every household has a plug; the others go where a hash sends them.
        extra = (uniform(self.seed, 1, np.arange(self.plugs - households)) * households).astype(int)
        owner = np.concatenate([np.arange(households), extra])
        owner.sort(kind="stable")
        plug_id = np.zeros(self.plugs, dtype=np.int32)
        for h in range(households):  # 400 households: cheap, once
            idx = np.flatnonzero(owner == h)
            plug_id[idx] = np.arange(len(idx))
        return ((owner // self.households_per_house).astype(np.int32),
                (owner % self.households_per_house).astype(np.int32), plug_id)

    @cached_property
    def base_load(self) -> np.ndarray:
        """A log-normal base load per plug, median about 33 W."""
        u = uniform(self.seed, 2, np.arange(self.plugs)).clip(1e-12, 1 - 1e-12)
        v = uniform(self.seed, 3, np.arange(self.plugs)).clip(1e-12, 1 - 1e-12)
        normal = np.sqrt(-2 * np.log(u)) * np.cos(2 * math.pi * v)  # Box-Muller
        return np.exp(3.5 + 1.0 * normal)

    def events(self, first: int, last: int) -> pa.Table:
        """Events first, first + 1, ..., last - 1 of the stream, as Arrow."""
        i = np.arange(first, last, dtype=np.int64)
        slot = i % (2 * self.plugs)
        plug = slot // 2
        load = slot % 2 == 0
        offset_us = np.empty(len(i), dtype=np.int64)
        stretch = np.searchsorted([f for _, f, _ in self.stretches], i, side="right") - 1
        for k, (start_us, first_event, rate) in enumerate(self.stretches):
            mine = stretch == k
            m = i[mine] - first_event
            if rate.is_integer():  # exact integer arithmetic where it is possible
                offset_us[mine] = start_us + (m * 1_000_000) // int(rate)
            else:
                offset_us[mine] = start_us + np.floor(m * (1e6 / rate)).astype(np.int64)
        ts_us = self.start * 1_000_000 + offset_us
        seconds = (ts_us - self.start * 1_000_000) / 1e6
        segment = (seconds // SEGMENT_SECONDS).astype(np.int64)
        state = uniform(self.seed, 4, segment * self.plugs + plug)
        burst = 2 + 3 * uniform(self.seed, 5, segment * self.plugs + plug)
        noise = 1 + 0.1 * (2 * uniform(self.seed, 6, i) - 1)
        base = self.base_load[plug]
        watts = np.where(state < P_OFF, 0.0,
                         np.where(state < P_OFF + P_BURST, base * burst, base * noise))
        kwh = base * (seconds + 3600 * 24 * uniform(self.seed, 7, plug)) / 3.6e6
        house, household, plug_id = self.topology
        return pa.table({
            "id": pa.array(i),
            "ts": pa.array(ts_us, type=pa.timestamp("us")),
            "value": pa.array(np.round(np.where(load, watts, kwh), 3)),
            "property": pa.array(load.astype(np.int32)),
            "plug_id": pa.array(plug_id[plug]),
            "household_id": pa.array(household[plug]),
            "house_id": pa.array(house[plug]),
        }, schema=SCHEMA)

    def index_at(self, seconds: float) -> int:
        """The first event at or after ``seconds`` into the stream."""
        start_us, first, rate = next(s for s in reversed(self.stretches)
                                     if s[0] <= round(seconds * 1e6))
        return first + math.ceil((seconds - start_us / 1e6) * rate - 1e-9)

    def between(self, begin: float, end: float) -> pa.Table:
        """The events of event-time seconds [begin, end) after the start."""
        return self.events(self.index_at(begin), self.index_at(end))

    @staticmethod
    def batch_count(duration: float, span: float) -> int:
        return math.ceil(duration / span - 1e-9)

    def batches(self, duration: float, span: float = 1.0) -> Iterator[pa.Table]:
        """``duration`` seconds of events in micro-batches of ``span`` seconds of event time."""
        for k in range(self.batch_count(duration, span)):
            yield self.between(k * span, min((k + 1) * span, duration))

    def write_files(self, directory: str | Path, duration: float, file_seconds: float = 60.0,
                    on_file: Callable[[Path], None] | None = None,
                    disorder: Disorder | None = None, file_format: str = "csv",
                    begin: float = 0.0, schema: StreamSchema = PLUGS_STREAM) -> list[Path]:
        """Landed files, ``file_seconds`` of event time each, as ``schema`` (the plugs' catalog
        entry) says: CSV files are DEBS 2014's, timestamps Unix seconds with a fraction where
        the rate puts several readings of a plug in one second; Parquet files hold the
        stream's columns, ``ts`` a UTC timestamp. With ``disorder`` (``workload/disorder.py``)
        the files are cut by arrival time instead and hold the readings in arrival order: a late
        reading lands in a file after the one its event time belongs to. The event time before
        ``begin`` is not written. Files are named by their first second (``file_name``)."""
        parts = landed_parts(self.between, "plugs", self.start, duration, file_seconds,
                             disorder, begin)
        return write_files(schema, parts, directory, file_format, on_file)


def parse_steps(text: str) -> tuple[tuple[float, float], ...]:
    """Rate steps written ``SECOND:RATE,...`` (``60:40000,120:2000``): a generator's option."""
    try:
        return tuple((float(a), float(b)) for a, b in
                     (part.split(":") for part in text.split(",") if part.strip()))
    except ValueError:
        raise ValueError(f"rate steps {text!r}: write them SECOND:RATE,... "
                         "(60:40000,120:2000)") from None


def format_steps(steps: tuple[tuple[float, float], ...]) -> str:
    return ",".join(f"{second:g}:{rate:g}" for second, rate in steps)


def debs_csv(table: pa.Table) -> pl.DataFrame:
    """Readings as DEBS 2014 writes them."""
    return PLUGS_STREAM.csv(table.select(list(PLUGS_STREAM.names)))

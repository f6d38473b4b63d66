"""A deterministic air-quality stream: the second example, of another shape than the smart plugs.

Stations (``station``, a name such as ``ST-007``: the key) report fine particles (``pm25``,
µg/m³, REAL), relative humidity (``humidity``, %, SMALLINT, missing from about one reading in
fifty: a sensor that did not answer) and whether they stand indoors (``indoor``, BOOLEAN), with
the time of the reading (``observed_at``). Event i of the stream is station i mod ``stations``
at ``start + i / rate``; a station's particles follow a daily cycle around a base level drawn
once, with now and then a quarter-hour of smoke. Every random number is a hash of (seed, what
it is for), so the events are the same however the stream is cut into files or batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from workload.draws import uniform
from workload.schema import EvenlyTimed, StreamSchema, file_name, write_files

START = 1709251200  # 2024-03-01 00:00 UTC
STATIONS = 24
EPISODE_SECONDS = 900  # smoke comes and goes by the quarter-hour
P_SMOKE = 0.05
P_NO_HUMIDITY = 0.02

# As queries/catalog.toml declares the stream (a test keeps the two alike).
AIR = StreamSchema(
    "air", (("station", "VARCHAR"), ("observed_at", "TIMESTAMP"), ("pm25", "REAL"),
            ("humidity", "SMALLINT"), ("indoor", "BOOLEAN")),
    "observed_at", ("station", "observed_at", "pm25", "humidity", "indoor"))


@dataclass(frozen=True)
class AirQuality(EvenlyTimed):
    """The stream at ``rate`` readings per second over all stations, from ``start`` (Unix
    seconds)."""

    rate: float
    stations: int = STATIONS
    seed: int = 2024
    start: int = START

    def __post_init__(self):
        if self.rate <= 0 or self.stations < 1:
            raise ValueError("the air-quality stream needs a positive rate and a station")

    @cached_property
    def base(self) -> np.ndarray:
        """Each station's base level of fine particles, µg/m³: log-normal, median about 12."""
        u = uniform(self.seed, 1, np.arange(self.stations)).clip(1e-12, 1 - 1e-12)
        v = uniform(self.seed, 2, np.arange(self.stations)).clip(1e-12, 1 - 1e-12)
        return np.exp(2.5 + 0.5 * np.sqrt(-2 * np.log(u)) * np.cos(2 * math.pi * v))

    def events(self, first: int, last: int) -> pa.Table:
        """Events first, ..., last - 1, as Arrow (``AIR``'s columns)."""
        i = np.arange(first, last, dtype=np.int64)
        station = i % self.stations
        offset_us = self.offsets_us(i)
        seconds = offset_us / 1e6
        episode = (seconds // EPISODE_SECONDS).astype(np.int64) * self.stations + station
        smoke = np.where(uniform(self.seed, 3, episode) < P_SMOKE,
                         4 + 6 * uniform(self.seed, 4, episode), 1.0)
        daily = 1 + 0.4 * np.sin(2 * math.pi * (seconds / 86_400 + station / self.stations))
        noise = 1 + 0.15 * (2 * uniform(self.seed, 5, i) - 1)
        pm25 = np.round(self.base[station] * daily * smoke * noise, 1).astype(np.float32)
        humidity = (35 + 50 * uniform(self.seed, 6, i)).astype(np.int16)
        missing = uniform(self.seed, 7, i) < P_NO_HUMIDITY
        names = np.array([f"ST-{k:03d}" for k in range(self.stations)], dtype=object)
        return pa.table({
            "station": pa.array(names[station], pa.string()),
            "observed_at": pa.array(self.start * 1_000_000 + offset_us,
                                    pa.timestamp("us", tz="UTC")),
            "pm25": pa.array(pm25, pa.float32()),
            "humidity": pa.array(humidity, pa.int16(), mask=missing),
            "indoor": pa.array(station % 4 == 0),
        })

    def write_files(self, directory: str | Path, duration: float, file_seconds: float = 60.0,
                    on_file: Callable[[Path], None] | None = None, file_format: str = "parquet",
                    schema: StreamSchema = AIR) -> list[Path]:
        """``duration`` seconds of readings in files of ``file_seconds`` of event time each."""
        count = math.ceil(duration / file_seconds - 1e-9)
        parts = ((file_name("air", self.start + n * file_seconds, file_seconds),
                  self.between(n * file_seconds, min((n + 1) * file_seconds, duration)))
                 for n in range(count))
        return write_files(schema, parts, directory, file_format, on_file)

"""A deterministic stream of household meters, correlated with the smart plugs: the second
stream that windowed joins between streams read (``queries/m1.sql``).

Every household of the plugs' topology (``smart_plugs.SmartPlugs.topology``) has a meter that
reports the household's load (``load``, W) once a second. It measures what the household's
plugs draw, each in the state the plugs' stream gives it for that minute (off, normal or a
burst), plus loads no plug meters (a base drawn once per household, and a kettle or an oven
switched on for a minute now and then), with 2 % of noise. So a burst of a plug shows in its
household's meter, and a join of the two streams per household finds the unmetered load.
Event i of the stream is household i mod 400 at ``start + i / rate`` (the plugs' start). Every
random number is a hash of (seed, what it is for), so the readings are the same however the
stream is cut into files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from workload.disorder import Disorder, landed_parts
from workload.draws import uniform
from workload.schema import EvenlyTimed, StreamSchema, write_files
from workload.smart_plugs import P_BURST, P_OFF, SEGMENT_SECONDS, SmartPlugs

P_APPLIANCE = 0.05  # a minute in which an unmetered appliance runs
# Purposes of the hash, apart from the plugs' (1-7) and the disorder's (11-13).
_UNMETERED, _APPLIANCE, _APPLIANCE_LOAD, _NOISE = 21, 22, 23, 24

# As queries/catalog.toml declares the stream (a test keeps the two alike).
METERS = StreamSchema(
    "meters", (("house_id", "INTEGER"), ("household_id", "INTEGER"), ("ts", "TIMESTAMP"),
               ("load", "DOUBLE")),
    "ts", ("house_id", "household_id", "ts", "load"))


@dataclass(frozen=True)
class HouseholdMeters(EvenlyTimed):
    """The meters of ``plugs``' households, ``rate`` readings per second over all of them (one
    per household and second by default)."""

    rate: float
    plugs: SmartPlugs = SmartPlugs(rate=4250)

    def __post_init__(self):
        if self.rate <= 0:
            raise ValueError("the meters' stream needs a positive rate")

    @property
    def start(self) -> int:
        return self.plugs.start

    @property
    def households(self) -> int:
        return self.plugs.houses * self.plugs.households_per_house

    @cached_property
    def owner(self) -> np.ndarray:
        """Each plug's household, numbered house by house."""
        house, household, _ = self.plugs.topology
        return house.astype(np.int64) * self.plugs.households_per_house + household

    @cached_property
    def unmetered(self) -> np.ndarray:
        """Each household's load that no plug meters, W: 50-250."""
        return 50 + 200 * uniform(self.plugs.seed, _UNMETERED, np.arange(self.households))

    def plugged(self, segment: int) -> np.ndarray:
        """What each household's plugs draw in minute ``segment`` of the stream, W, in the
        states the plugs' stream gives them (``SmartPlugs.events``), without its noise."""
        plugs = self.plugs
        key = segment * plugs.plugs + np.arange(plugs.plugs)
        state = uniform(plugs.seed, 4, key)
        burst = 2 + 3 * uniform(plugs.seed, 5, key)
        watts = np.where(state < P_OFF, 0.0,
                         np.where(state < P_OFF + P_BURST, plugs.base_load * burst,
                                  plugs.base_load))
        return np.bincount(self.owner, weights=watts, minlength=self.households)

    def events(self, first: int, last: int) -> pa.Table:
        """Readings first, ..., last - 1, as Arrow (``METERS``' columns)."""
        i = np.arange(first, last, dtype=np.int64)
        household = i % self.households
        offset_us = self.offsets_us(i)
        segment = offset_us // (SEGMENT_SECONDS * 1_000_000)
        plugged = np.zeros(len(i))
        for s in np.unique(segment):
            mine = segment == s
            plugged[mine] = self.plugged(int(s))[household[mine]]
        appliance_key = segment * self.households + household
        appliance = np.where(uniform(self.plugs.seed, _APPLIANCE, appliance_key) < P_APPLIANCE,
                             1000 + 2000 * uniform(self.plugs.seed, _APPLIANCE_LOAD,
                                                   appliance_key), 0.0)
        noise = 1 + 0.02 * (2 * uniform(self.plugs.seed, _NOISE, i) - 1)
        per_house = self.plugs.households_per_house
        return pa.table({
            "house_id": pa.array((household // per_house).astype(np.int32)),
            "household_id": pa.array((household % per_house).astype(np.int32)),
            "ts": pa.array(self.start * 1_000_000 + offset_us, pa.timestamp("us", tz="UTC")),
            "load": pa.array(np.round((plugged + self.unmetered[household] + appliance)
                                      * noise, 3)),
        })

    def write_files(self, directory: str | Path, duration: float, file_seconds: float = 60.0,
                    on_file: Callable[[Path], None] | None = None, file_format: str = "parquet",
                    disorder: Disorder | None = None, schema: StreamSchema = METERS
                    ) -> list[Path]:
        """``duration`` seconds of readings in files of ``file_seconds`` of event time each, or
        of arrival time with ``disorder`` (``workload/disorder.py``)."""
        parts = landed_parts(self.between, "meters", self.start, duration, file_seconds,
                             disorder)
        return write_files(schema, parts, directory, file_format, on_file)

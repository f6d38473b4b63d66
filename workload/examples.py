"""The example streams, each with a deterministic generator: the smart plugs of DEBS 2014
(``smart_plugs.py``) and the air-quality stations (``air_quality.py``). Their catalog entries are
in ``queries/catalog.toml``; a stream of a user's own needs no generator, only an entry."""

from __future__ import annotations

from workload.air_quality import AIR, AirQuality
from workload.schema import StreamSchema
from workload.smart_plugs import PLUGS_STREAM, SmartPlugs

GENERATORS = {"plugs": (SmartPlugs, PLUGS_STREAM, 4250.0), "air": (AirQuality, AIR, 2.0)}


def generator(stream: str, rate: float | None = None) -> SmartPlugs | AirQuality:
    """The generator of the example ``stream`` at ``rate`` tuples/s (its catalog rate by
    default)."""
    if stream not in GENERATORS:
        raise ValueError(f"no generator writes {stream!r}: give one of {', '.join(GENERATORS)}")
    kind, _, default = GENERATORS[stream]
    return kind(rate=default if rate is None else rate)


def generated_schema(stream: str) -> StreamSchema:
    """The schema the example ``stream``'s generator writes when no catalog entry is given."""
    return GENERATORS[stream][1]

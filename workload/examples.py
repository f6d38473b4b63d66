"""The example streams, each with a deterministic generator: the smart plugs of DEBS 2014
(``smart_plugs.py``), their households' meters (``meters.py``) and the air-quality stations
(``air_quality.py``). Their catalog entries are
in ``queries/catalog.toml``; a stream of a user's own needs no generator, only an entry."""

from __future__ import annotations

from workload.air_quality import AirQuality
from workload.meters import HouseholdMeters
from workload.smart_plugs import SmartPlugs

GENERATORS = {"plugs": SmartPlugs, "meters": HouseholdMeters, "air": AirQuality}


def generator(stream: str, rate: float) -> SmartPlugs | HouseholdMeters | AirQuality:
    """The generator of the example ``stream`` at ``rate`` tuples/s."""
    if stream not in GENERATORS:
        raise ValueError(f"no generator writes {stream!r}: give one of {', '.join(GENERATORS)}")
    return GENERATORS[stream](rate=rate)

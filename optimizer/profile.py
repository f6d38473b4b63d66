"""Calibration profiles: the unit costs of Ji's cost model for one machine, in TOML.

`tandem calibrate` writes this format; a shipped default (`default_profile.toml`) stands in
until a machine has been calibrated."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from optimizer.errors import CatalogError
from optimizer.tomlfile import read_toml

DEFAULT_PROFILE = Path(__file__).with_name("default_profile.toml")
ENGINES = ("spark", "duckdb", "duckdb-partitioned")


@dataclass(frozen=True)
class Profile:
    name: str
    micro_batch_seconds: float
    functions: dict[str, dict[str, dict[str, float]]]  # engine -> function -> coefficient
    source: str
    time_shared: bool = False  # operators share the cores (see cost.Objective)
    overlap: float = 1.0  # sigma of cost.Objective.load: 1 = no overlap, C_u
    parallelism: int = 1  # hash partitions of duckdb-partitioned that run at once (Spark's cores)
    overlap_reference: float | None = None  # sigma of plans by reference (None: ``overlap``)

    def coef(self, engine: str, function: str, name: str) -> float:
        try:
            return self.functions[engine][function][name]
        except KeyError:
            raise CatalogError(
                f"profile {self.source} lacks [{engine}.{function}] {name}: re-run `tandem "
                "calibrate` or copy it from the default profile") from None

    def prices(self, engine: str) -> bool:
        """Does the profile hold unit costs of ``engine`` (duckdb-partitioned is searched only
        where it does)?"""
        return bool(self.functions.get(engine))

    def without(self, engine: str) -> Profile:
        """The profile without ``engine``'s unit costs."""
        return replace(self, functions={e: f for e, f in self.functions.items() if e != engine})

    def get(self, engine: str, function: str, name: str) -> float:
        """A coefficient that may be absent (taken as 0)."""
        return self.functions.get(engine, {}).get(function, {}).get(name, 0.0)


def load_profile(path: str | Path | None = None) -> Profile:
    path = Path(path) if path else DEFAULT_PROFILE
    raw = read_toml(path, "profile", "pass --profile or set TANDEM_PROFILE")
    functions: dict[str, dict[str, dict[str, float]]] = {}
    for engine in ENGINES:
        for function, coefficients in raw.get(engine, {}).items():
            try:
                functions.setdefault(engine, {})[function] = {
                    k: float(v) for k, v in coefficients.items() if k != "fit_error"}
            except (TypeError, ValueError, AttributeError):
                raise CatalogError(f"profile {path}: [{engine}.{function}] must hold numbers") from None
    meta = raw.get("meta", {})
    overlaps = {k: meta[k] for k in ("overlap", "overlap_reference") if k in meta}
    for key, sigma in overlaps.items():
        if not isinstance(sigma, (int, float)) or not 0 <= sigma <= 1:
            raise CatalogError(f"profile {path}: [meta] {key} must be a number from 0 to 1")
    parallelism = meta.get("parallelism", 1)
    if not isinstance(parallelism, int) or parallelism < 1:
        raise CatalogError(f"profile {path}: [meta] parallelism must be a whole number from 1")
    return Profile(str(meta.get("name", path.stem)), float(meta.get("micro_batch_seconds", 1.0)),
                   functions, str(path), bool(meta.get("time_shared", False)),
                   float(overlaps.get("overlap", 1.0)), parallelism,
                   float(overlaps["overlap_reference"]) if "overlap_reference" in overlaps else None)

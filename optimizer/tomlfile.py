"""Reading the TOML files users hand to the optimiser (catalogs, calibration profiles)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from optimizer.errors import CatalogError


def read_toml(path: Path, what: str, hint: str) -> dict:
    """The parsed file, or a CatalogError that says which file and what to do."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise CatalogError(f"{what} {path} not found: {hint}") from None
    except tomllib.TOMLDecodeError as err:
        raise CatalogError(f"{what} {path} is not valid TOML: {err}") from None

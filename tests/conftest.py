from __future__ import annotations

from pathlib import Path

import pytest

from optimizer import load_catalog, load_profile

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "queries"


@pytest.fixture(scope="session")
def catalog():
    return load_catalog(QUERIES / "catalog.toml")


@pytest.fixture(scope="session")
def profile():
    return load_profile()


def query_sql(name: str) -> str:
    return (QUERIES / f"{name}.sql").read_text()

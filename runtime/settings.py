"""Where Tandem finds its catalog, profile and state: command-line options first, then
``TANDEM_*`` environment variables, then ``tandem.toml`` in the working directory, then defaults."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from optimizer.errors import TandemError
from optimizer.profile import DEFAULT_PROFILE

CONFIG_FILE = "tandem.toml"
CALIBRATED_PROFILE = Path(".tandem/profile.toml")  # written by `tandem calibrate`
OBSERVED_CATALOG = "catalog.toml"  # in the state directory, written by the nightly clean-up
REFRESHED_FROM = "refreshed_from"  # its key naming the catalog whose statistics it refreshes


def setting(name: str, given: str | Path | None = None) -> str | None:
    """The value of setting ``name`` (catalog, profile, ...) by the precedence above."""
    if given is not None:
        return str(given)
    env = os.environ.get(f"TANDEM_{name.upper()}")
    if env:
        return env
    config = Path(CONFIG_FILE)
    if config.is_file():
        try:
            value = tomllib.loads(config.read_text()).get("tandem", {}).get(name)
        except tomllib.TOMLDecodeError as err:
            raise TandemError(f"{CONFIG_FILE} is not valid TOML: {err}") from None
        if value is not None:
            return str(value)
    return None


REPOSITORY_QUERIES = Path(__file__).resolve().parents[1] / "queries"


def query_path(query: str) -> Path:
    """A query is a .sql file, or the name of one in queries/ (``q1``) of the working directory
    or of this repository (an Airflow task may run elsewhere)."""
    path = Path(query)
    if path.is_file():
        return path
    for queries in (Path("queries"), REPOSITORY_QUERIES):
        named = queries / f"{query}.sql"
        if named.is_file():
            return named
    raise TandemError(f"query {query!r} not found: give a .sql file or a name from queries/")


def state_dir() -> Path:
    """Where a deployment keeps its DuckDB file, checkpoints and observed statistics."""
    return Path(setting("state") or ".tandem")


def store_path() -> Path:
    return state_dir() / "tandem.duckdb"


def spark_log_path(store: str | Path) -> Path:
    """Where Spark's JVM and the engines' threads log during a run over ``store`` (or a
    calibration writing that profile): beside it."""
    return Path(store).parent / "spark.log"


def spark_master() -> str:
    """Where Spark runs: ``TANDEM_SPARK_MASTER`` (the CLI's ``--master`` sets it), else
    tandem.toml's ``spark_master``, else ``local[*]``. On a cluster, the state directory, the
    landing directory and the checkpoints must be paths every worker reaches."""
    return setting("spark_master") or "local[*]"


def checkpoints_dir() -> Path:
    return state_dir() / "checkpoints"


def landing_dir() -> Path:
    """The directory that files land in for the scheduled micro-batch runs."""
    return Path(setting("landing") or state_dir() / "landing")


def catalog_path(query: Path | None = None, given: str | Path | None = None) -> Path:
    """The given catalog, else the one beside the query (without a query: the working
    directory's ``queries/``, else the repository's), or the statistics the nightly clean-up
    observed in its place (``REFRESHED_FROM`` names the catalog they refresh)."""
    found = setting("catalog", given)
    if found:
        return Path(found)
    beside = query.parent / "catalog.toml" if query is not None else None
    here = Path("queries/catalog.toml")
    if beside is not None and beside.is_file():
        base = beside
    else:
        base = here if here.is_file() or query is not None else REPOSITORY_QUERIES / "catalog.toml"
    observed = state_dir() / OBSERVED_CATALOG
    if observed.is_file():
        try:
            refreshed_from = tomllib.loads(observed.read_text()).get(REFRESHED_FROM)
        except tomllib.TOMLDecodeError:
            refreshed_from = None  # loading it says what is wrong
        if refreshed_from is None or Path(refreshed_from) == base.resolve():
            return observed
    return base


def profile_path(given: str | Path | None = None) -> Path:
    found = setting("profile", given)
    if found:
        return Path(found)
    return CALIBRATED_PROFILE if CALIBRATED_PROFILE.is_file() else DEFAULT_PROFILE

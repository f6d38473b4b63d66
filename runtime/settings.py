"""Where Tandem finds its catalog, profile and state: command-line options first, then
``TANDEM_*`` environment variables, then ``tandem.toml`` in the working directory, then defaults."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from optimizer.errors import TandemError
from optimizer.profile import DEFAULT_PROFILE

if TYPE_CHECKING:
    from optimizer.catalog import Stream
    from workload.schema import StreamSchema

CONFIG_FILE = "tandem.toml"
CALIBRATED_PROFILE = Path(".tandem/profile.toml")  # written by `tandem calibrate`
OBSERVED_CATALOG = "catalog.toml"  # in the state directory, written by the nightly clean-up
REFRESHED_FROM = "refreshed_from"  # its key naming the catalog whose statistics it refreshes


def setting(name: str, given: str | Path | None = None) -> str | None:
    """The value of setting ``name`` (catalog, profile, queries, ...) by the precedence above."""
    if given is not None:
        return str(given)
    env = os.environ.get(f"TANDEM_{name.upper()}")
    if env:
        return env
    value = _config().get("tandem", {}).get(name)
    return None if value is None else str(value)


def _config() -> dict:
    """``tandem.toml`` of the working directory, or nothing."""
    config = Path(CONFIG_FILE)
    if not config.is_file():
        return {}
    try:
        return tomllib.loads(config.read_text())
    except tomllib.TOMLDecodeError as err:
        raise TandemError(f"{CONFIG_FILE} is not valid TOML: {err}") from None


REPOSITORY_QUERIES = Path(__file__).resolve().parents[1] / "queries"


def queries_dir() -> Path:
    """The folder of the user's queries (``TANDEM_QUERIES``, tandem.toml's ``queries``), else
    queries/ of the working directory, else this repository's."""
    given = setting("queries")
    if given:
        return Path(given)
    return Path("queries") if Path("queries").is_dir() else REPOSITORY_QUERIES


def query_names() -> list[str]:
    """The queries of the queries folder, by name: what the Airflow page and DAGs offer."""
    return sorted(p.stem for p in queries_dir().glob("*.sql"))


def query_path(query: str) -> Path:
    """A query is a .sql file, or the name of one in the queries folder (``q1``), else in
    queries/ of the working directory or of this repository (an Airflow task may run
    elsewhere)."""
    path = Path(query)
    if path.is_file():
        return path
    for queries in (queries_dir(), Path("queries"), REPOSITORY_QUERIES):
        named = queries / f"{query}.sql"
        if named.is_file():
            return named
    raise TandemError(f"query {query!r} not found: give a .sql file or a name from "
                      f"{queries_dir()}")


# What the micro-batch DAGs keep up to date when the configuration lists nothing: the
# correlated aggregations, every five minutes.
SCHEDULED = ("q1", "q2")
EVERY_FIVE_MINUTES = "*/5 * * * *"


@dataclass(frozen=True)
class Schedule:
    """A query the micro-batch DAGs keep up to date over a landing directory, on a cron."""

    query: str  # a name of the queries folder, or a .sql file
    landing: Path
    cron: str = EVERY_FIVE_MINUTES

    @property
    def name(self) -> str:
        return Path(self.query).stem


def schedules() -> list[Schedule]:
    """The queries the micro-batch DAGs keep up to date, by the precedence above: those
    ``TANDEM_SCHEDULE`` lists (comma-separated), else those of tandem.toml's
    ``[schedule.<query>]`` tables, else Q1 and Q2. A query's table gives its ``landing`` and
    ``cron``; without them it reads its stream's landing directory (the catalog's ``landing``,
    else ``landing_dir``) every five minutes."""
    tables = _config().get("schedule", {})
    listed = os.environ.get("TANDEM_SCHEDULE")
    names = ([q.strip() for q in listed.split(",") if q.strip()] if listed
             else list(tables) or SCHEDULED)
    found = []
    for query in names:
        table = tables.get(query, {})
        if not isinstance(table, dict) or set(table) - {"landing", "cron"}:
            raise TandemError(f"{CONFIG_FILE}: [schedule.{query}] takes landing and cron only")
        cron = str(table.get("cron", EVERY_FIVE_MINUTES))
        if len(cron.split()) != 5 and not re.fullmatch(r"@\w+", cron):
            raise TandemError(f"{CONFIG_FILE}: [schedule.{query}] cron {cron!r} is not a cron "
                              "expression (five fields, such as \"*/5 * * * *\", or @hourly)")
        landing = table.get("landing") or stream_landing(query) or landing_dir()
        found.append(Schedule(query, Path(landing), cron))
    return found


def example_stream(name: str) -> StreamSchema:
    """The repository catalog's stream ``name`` (``plugs``, ``air``): what the benchmarks run."""
    from optimizer import load_catalog
    from workload.schema import StreamSchema

    return StreamSchema.of(load_catalog(REPOSITORY_QUERIES / "catalog.toml").streams[name])


def query_stream(query: str, catalog: str | Path | None = None) -> Stream:
    """The catalog entry of the stream ``query`` reads (its catalog: ``catalog_path``'s)."""
    from optimizer import load_catalog
    from optimizer.frontend import parse_query
    from optimizer.logical import windows

    path = query_path(query)
    known = load_catalog(catalog_path(path, catalog))
    return known.streams[windows(parse_query(path.read_text(), known))[0].stream]


def stream_landing(query: str) -> str | None:
    """The landing directory the catalog gives the stream ``query`` reads (refused here, not
    when a DAG first runs, if the query cannot be read)."""
    return query_stream(query).landing


def scheduled_by_landing() -> dict[Path, list[str]]:
    """The scheduled queries of each landing directory: the nightly clean-up archives a file
    once every query over its directory has read it."""
    groups: dict[Path, list[str]] = {}
    for schedule in schedules():
        groups.setdefault(schedule.landing, []).append(schedule.query)
    return groups


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
    """The given catalog, else the one beside the query, else the queries folder's, or the
    statistics the nightly clean-up observed in its place (``REFRESHED_FROM`` names the
    catalog they refresh)."""
    found = setting("catalog", given)
    if found:
        return Path(found)
    beside = query.parent / "catalog.toml" if query is not None else None
    base = beside if beside is not None and beside.is_file() else queries_dir() / "catalog.toml"
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

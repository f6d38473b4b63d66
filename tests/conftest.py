from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from optimizer import load_catalog, load_profile

# pytest-xdist's workers run under execnet, whose __main__ has neither a file nor a spec:
# pyspark.sql.connect (Great Expectations imports it) takes that for a doctest run and exits.
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "queries"


C1 = "-XX:TieredStopAtLevel=1"
ARCHIVE = Path(sys.prefix) / "spark-classes.jsa"  # `make test` writes it (Makefile)


def jvm_options(archive: Path = ARCHIVE) -> list[str]:
    """C1, and the class archive where there is one (``pytest_configure``)."""
    if not archive.is_file():
        return [C1]
    # A JVM or pyspark other than the archive's ignores it, with a warning it need not log.
    return [C1, f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off,cds+dynamic=off"]


def pytest_configure(config):
    """The tests' Spark JVMs are short-lived (a run killed at a crash point, a CLI command),
    or run a new query every few seconds (the session's own): C1 alone compiles enough for
    them, and the archive of the classes a run loads spares loading and checking them again.
    Measured in CPU seconds: a short `tandem run` 47 instead of 77, tests/test_disorder.py 302
    instead of 436 with C1 alone (bench/results/test_suite.md). Through SPARK_SUBMIT_OPTS,
    which spark-submit gives the driver's JVM, and which every process the tests start
    inherits; and through PYSPARK_SUBMIT_ARGS to the executors of a cluster's application
    (tests/test_cluster.py, tests/test_docker.py), which its workers start."""
    options = jvm_options()
    current = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if C1 not in current:  # xdist's workers inherit the controller's
        os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [current, *options]))
    # pyspark's launcher reads its spark-submit arguments here, "pyspark-shell" last.
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.executor.defaultJavaOptions="
                          f"{shlex.quote(' '.join(options))} pyspark-shell")


@pytest.fixture(scope="session")
def catalog():
    return load_catalog(QUERIES / "catalog.toml")


@pytest.fixture(scope="session")
def profile():
    return load_profile()


@pytest.fixture(scope="session")
def unit_catalog():
    """Round numbers for the hand-computed cost tests."""
    return load_catalog(ROOT / "tests" / "data" / "unit_catalog.toml")


@pytest.fixture(scope="session")
def unit_profile():
    return load_profile(ROOT / "tests" / "data" / "unit_profile.toml")


@pytest.fixture
def reliability(request):
    """Records what a reliability test measured, as a JSON line in ``TANDEM_RELIABILITY_LOG``
    when it is set (``bench/reliability.py`` sums them into bench/results/reliability.*)."""
    log = os.environ.get("TANDEM_RELIABILITY_LOG")

    def record(kind: str, **figures) -> None:
        if log:
            with open(log, "a") as out:
                out.write(json.dumps({"kind": kind, "test": request.node.nodeid, **figures},
                                     default=str) + "\n")
    return record


def lost_and_duplicated(got: pl.DataFrame, want: pl.DataFrame) -> tuple[int, int]:
    """Result rows of ``want`` whose key (the columns that are not floats) ``got`` lacks, and
    rows of ``got`` whose key appears more than once: what the reliability report counts."""
    keys = [c for c, t in want.schema.items() if not t.is_float()]
    lost = want.select(keys).join(got.select(keys), on=keys, how="anti", nulls_equal=True).height
    return lost, got.height - got.select(keys).unique().height


def query_sql(name: str) -> str:
    """A query of queries/ by name, a .sql file's path, or tests/data/<name>.sql."""
    path = QUERIES / f"{name}.sql"
    if not path.exists():
        path = Path(name) if name.endswith(".sql") else ROOT / "tests" / "data" / f"{name}.sql"
    return path.read_text()


SHORT_SECONDS_PER_MINUTE = 4  # a short variant's window: 5 minutes become 20 seconds


def short(name: str) -> str:
    """The path of the short-window variant of query ``name`` of queries/: every window a
    fifteenth as long, its slide kept (5 minutes become 20 s). For the tests in which the
    window's length is not what is checked: a run fills and slides its windows in a fifteenth
    of the event time, and Spark's sliding windows put each tuple into a fifteenth as many
    windows. The variant's name (its store schema, its results) is the query's."""
    path = _short_queries() / f"{name}.sql"
    if not path.exists():
        path.write_text(re.sub(
            r"INTERVAL '(\d+)' MINUTES?",
            lambda m: f"INTERVAL '{int(m[1]) * SHORT_SECONDS_PER_MINUTE}' SECONDS",
            (QUERIES / f"{name}.sql").read_text()))
    return str(path)


@functools.cache
def _short_queries() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="tandem-short-queries-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    shutil.copy(QUERIES / "catalog.toml", directory)  # a query's catalog is the one beside it
    return directory


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    """An Airflow home with a migrated SQLite metadata DB, this repository's dags/ and plugins/,
    and Tandem's state beside it (the DAGs name their Assets by it, so it stays put for the
    session; ``airflow_state`` empties it for each test). Airflow reads its configuration once,
    at import: tests import it only after this fixture."""
    home = tmp_path_factory.mktemp("airflow")
    os.environ.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
                      TANDEM_STATE=str(home / "state"),
                      AIRFLOW__CORE__PLUGINS_FOLDER=str(ROOT / "plugins"),
                      AIRFLOW__CORE__LOAD_EXAMPLES="False")
    migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"],
                              capture_output=True, text=True)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return home


@pytest.fixture(scope="session")
def dags(airflow_home):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))


@pytest.fixture
def airflow_state(airflow_home) -> Iterator[Path]:
    """The Tandem state the DAGs use, empty before and after a test (the observed catalog the
    nightly clean-up writes there would otherwise steer later tests' plans)."""
    state = airflow_home / "state"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir()
    yield state
    shutil.rmtree(state, ignore_errors=True)

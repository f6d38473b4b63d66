"""The docker compose deployment (``docker/``), as far as this machine can test it without a
Docker engine: the compose file validates (Debian's docker-compose), it names what the code
reads, and the image's entry point runs every role here, with the compose file's own
environment: a Spark master and worker, Airflow's four services on a real PostgreSQL, and a
run of ``tandem_query`` triggered through the REST API that runs Spark on that cluster."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from airflow_tandem.server import stop, token, wait_healthy
from benchmarking.cluster import Cluster, free_port
from tests.conftest import ROOT
from tests.test_airflow_server import call

DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
ENTRYPOINT = DOCKER / "entrypoint.sh"
SECRET = "a-test-secret"
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer")
SHARED = ("/tandem/state", "/tandem/landing")
QUERIES = "/tandem/queries"
PACKAGES = ("optimizer", "kslack", "workload", "columnar", "rowstream", "runtime", "benchmarking",
            "airflow_tandem", "tandem")  # what Spark's executors and drivers both reach

# docker-compose, PostgreSQL and Spark are programs of their own (``make test`` installs the
# first two from Debian's packages).
pytestmark = pytest.mark.integration


def compose(*args: str, secret: str | None = SECRET, **variables: str
            ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AIRFLOW_JWT_SECRET"} | variables
    if secret:
        env["AIRFLOW_JWT_SECRET"] = secret
    return subprocess.run(["docker-compose", "-f", str(COMPOSE), *args], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def config() -> dict:
    """The compose file as docker-compose resolves it (anchors merged, variables set)."""
    done = compose("config")
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_the_compose_file_validates_and_needs_its_secret():
    assert compose("config", "-q").returncode == 0
    refused = compose("config", "-q", secret=None)
    assert refused.returncode != 0 and "set AIRFLOW_JWT_SECRET" in refused.stderr


def test_the_compose_file_names_what_the_code_reads(config):
    services = config["services"]
    assert set(services) == {"postgres", "airflow-init", "spark-master", "spark-worker",
                             *AIRFLOW_SERVICES}
    roles = set(re.findall(r"^  ([a-z|-]+)\)$", ENTRYPOINT.read_text(), re.M))
    roles = {r for alternatives in roles for r in alternatives.split("|")}
    for name, service in services.items():
        if name == "postgres":
            continue
        assert service["command"][0] in roles, f"{name}: no such role in entrypoint.sh"
        env = service["environment"]
        assert env["TANDEM_SPARK_MASTER"] == "spark://spark-master:7077"
        for path in SHARED:  # the same named volume at the same path everywhere
            assert _mounts(service)[path] == _mounts(services["spark-worker"])[path], name
            assert _mounts(service)[path] in config["volumes"]
        assert {env["TANDEM_STATE"], env["TANDEM_LANDING"]} == set(SHARED)
        # The queries and their catalog come from the host: the repository's by default.
        assert env["TANDEM_QUERIES"] == QUERIES
        assert _mounts(service)[QUERIES] == str(ROOT / "queries"), name
    # Every variable the compose file gives Tandem is one the code reads.
    given = {v for service in services.values() for v in service["environment"]
             if v.startswith("TANDEM_")}
    assert given and not _unread_by_the_code(given)
    database = services["postgres"]["environment"]
    url = services["airflow-scheduler"]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert url == (f"postgresql+psycopg://{database['POSTGRES_USER']}:"
                   f"{database['POSTGRES_PASSWORD']}@postgres:5432/{database['POSTGRES_DB']}")
    assert set(config["volumes"]) >= {"state", "landing", "airflow", "postgres"}
    # The image holds every package pyproject installs, and what the services read beside them.
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert re.search(rf"^WORKDIR {IMAGE_ROOT}$", dockerfile, re.M)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert set(packages) == set(PACKAGES)
    for folder in [*packages, "dags", "plugins"]:
        assert re.search(rf"^COPY {folder} {folder}$", dockerfile, re.M), folder
    assert not re.search(r"^COPY queries", dockerfile, re.M)  # mounted from the host


def test_the_queries_and_the_landing_directory_can_be_the_hosts(tmp_path):
    queries, landing = tmp_path / "my-queries", tmp_path / "landing"
    done = compose("config", TANDEM_QUERIES_DIR=str(queries), TANDEM_LANDING_DIR=str(landing))
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    for name, service in services.items():
        if name != "postgres":
            assert _mounts(service)[QUERIES] == str(queries), name
            assert _mounts(service)["/tandem/landing"] == str(landing), name


def _mounts(service: dict) -> dict[str, str]:
    """Target -> source of a service's volumes, in the short syntax (``state:/tandem/state:rw``)
    or the long one."""
    return dict((m["target"], m["source"]) if isinstance(m, dict) else m.split(":")[1::-1]
                for m in service["volumes"])


def _unread_by_the_code(variables: set[str]) -> set[str]:
    """The variables among ``variables`` that no module of the packages reads, by name or
    through ``settings.setting``."""
    code = "\n".join(p.read_text() for package in PACKAGES for p in ROOT.glob(f"{package}/*.py"))
    return {v for v in variables if v not in code
            and f'setting("{v.removeprefix("TANDEM_").lower()}"' not in code}


def test_a_checkout_named_tandem_keeps_its_paths(monkeypatch, tmp_path):
    # `git clone <url> tandem`: the checkout's own path holds /tandem/, which is also the
    # prefix of the image's volumes; rewritten twice, the DAGs folder pointed nowhere.
    monkeypatch.setattr(sys.modules[__name__], "ROOT", Path("/home/someone/tandem"))
    assert local_paths("/opt/tandem/dags", tmp_path) == "/home/someone/tandem/dags"
    assert local_paths("/tandem/state", tmp_path) == f"{tmp_path}/state"
    assert (local_paths("a:/opt/tandem/x:/tandem/landing", tmp_path)
            == f"a:/home/someone/tandem/x:{tmp_path}/landing")


# -- the entry point's roles on this machine --------------------------------------------------


@pytest.fixture(scope="module")
def postgresql(config):
    """A PostgreSQL server of Debian's package in a directory of its own, on a free port, with
    the compose file's user, password and database; its port."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    assert versions, "PostgreSQL is not installed: `make test` installs Debian's postgresql"
    bin_dir = versions[-1].parent
    root = Path(tempfile.mkdtemp(prefix="tandem-pg-"))
    root.chmod(0o755)
    data, port = root / "data", free_port()
    # PostgreSQL refuses to run as root: as root, the server runs as Debian's postgres user.
    as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_owner:
        shutil.chown(root, "postgres")
    run = lambda *cmd: subprocess.run([*as_owner, *cmd], check=True, capture_output=True)  # noqa: E731
    run(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o",
        f"-p {port} -k {root} -h 127.0.0.1", "start")
    try:
        database = config["services"]["postgres"]["environment"]
        for sql in (f"CREATE USER {database['POSTGRES_USER']} PASSWORD "
                    f"'{database['POSTGRES_PASSWORD']}'",
                    f"CREATE DATABASE {database['POSTGRES_DB']} OWNER {database['POSTGRES_USER']}"):
            run(str(bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                "-c", sql)
        yield port
    finally:
        subprocess.run([*as_owner, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


IMAGE_ROOT = "/opt/tandem"  # the Dockerfile's WORKDIR: the repository, here


def _image_environment() -> dict[str, str]:
    """The variables the Dockerfile's ENV instructions set."""
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    pairs = [p for line in re.findall(r"^ENV (.*)$", text, re.M) for p in line.split()]
    return dict(p.split("=", 1) for p in pairs)


def local_paths(value: str, volumes: Path) -> str:
    """The image's paths in ``value`` made local: the code's (``/opt/tandem/``) this checkout's,
    the volumes' (``/tandem/``) directories of ``volumes``. One pass, so that a checkout whose
    own path holds a ``/tandem/`` (a clone named tandem) is not rewritten again."""
    return re.sub(f"{re.escape(IMAGE_ROOT)}/|/tandem/",
                  lambda m: f"{ROOT}/" if m.group(0) != "/tandem/" else f"{volumes}/", value)


class Here:
    """The compose services' environments and commands, rewritten for this machine: the
    services' host names become 127.0.0.1 with free ports, the volumes directories."""

    def __init__(self, config: dict, directory: Path, postgres_port: int):
        self.config, self.directory = config, directory
        self.ports = {"postgres:5432": postgres_port, "spark-master:7077": free_port(),
                      "airflow-apiserver:8080": free_port()}
        self.spark_ui = free_port()
        self.processes: dict[str, subprocess.Popen] = {}

    def _local(self, value: str) -> str:
        for address, port in self.ports.items():
            value = value.replace(address, f"127.0.0.1:{port}")
        return local_paths(value, self.directory)

    def environment(self, service: str) -> dict[str, str]:
        """The image's ENV, then the service's environment (compose's wins), made local."""
        env = _image_environment() | self.config["services"][service]["environment"]
        return os.environ | {k: self._local(str(v)) for k, v in env.items()} | {
            "PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "SPARK_MASTER_HOST": "127.0.0.1", "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_PORT": str(self.ports["spark-master:7077"]),
            "SPARK_MASTER_WEBUI_PORT": str(self.spark_ui), "SPARK_WORKER_WEBUI_PORT": str(free_port()),
            "SPARK_WORKER_CORES": "1", "SPARK_WORKER_MEMORY": "1536m",
            "TANDEM_SPARK_MEMORY": "1g"}

    def command(self, service: str) -> list[str]:
        command = [self._local(c) for c in self.config["services"][service]["command"]]
        if command[0] == "api-server":
            command[command.index("--port") + 1] = str(self.ports["airflow-apiserver:8080"])
        return [str(ENTRYPOINT), *command]

    def start(self, service: str) -> subprocess.Popen:
        log = open(self.directory / f"{service}.log", "ab")
        process = subprocess.Popen(self.command(service), cwd=ROOT, env=self.environment(service),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[service] = process
        return process

    def run(self, service: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(service), cwd=ROOT, env=self.environment(service),
                              capture_output=True, text=True, timeout=600)

    def stop(self) -> None:
        for process in reversed(self.processes.values()):
            stop(process)  # each role's process group, as Airflow standalone's is stopped


def test_the_images_roles_run_airflow_on_postgresql_and_tandem_on_the_cluster(
        config, postgresql, tmp_path):
    here = Here(config, tmp_path, postgresql)
    for path in SHARED:
        (tmp_path / Path(path).name).mkdir()
    (tmp_path / Path(QUERIES).name).symlink_to(_mounts(config["services"]["airflow-scheduler"])[
        QUERIES])  # a directory of the host, as compose mounts it
    try:
        here.start("spark-master")
        master = Cluster(tmp_path, 1, "1536m", port=here.ports["spark-master:7077"],
                         ui_port=here.spark_ui)  # the master's state, as the tests' clusters'
        master.wait(lambda: master.state() is not None, "the master to answer")
        here.start("spark-worker")
        master.wait(lambda: master.state()["aliveworkers"] >= 1, "the worker to register")

        init = here.run("airflow-init")
        assert init.returncode == 0, init.stdout[-3000:] + init.stderr[-3000:]
        for service in AIRFLOW_SERVICES:
            here.start(service)
        port = here.ports["airflow-apiserver:8080"]
        wait_healthy(port, here.processes["airflow-apiserver"])
        base, home = f"http://127.0.0.1:{port}", tmp_path / "airflow"
        jwt = token(port, home)
        deadline = time.monotonic() + 180
        while call(f"{base}/api/v2/dags/tandem_query/details", jwt)[0] != 200:
            assert time.monotonic() < deadline, "the DAG processor did not parse tandem_query"
            time.sleep(2)
        conf = {"query": "q5", "placement": "duckdb", "rate": 20, "duration": 330, "batch": 30}
        status, run = call(f"{base}/api/v2/dags/tandem_query/dagRuns", jwt,
                           {"logical_date": None, "conf": conf})
        assert status == 200, run
        run_url = f"{base}/api/v2/dags/tandem_query/dagRuns/{run['dag_run_id']}"
        deadline = time.monotonic() + 600
        while (state := call(run_url, jwt)[1]["state"]) not in ("success", "failed"):
            assert time.monotonic() < deadline, "tandem_query did not finish in 10 minutes"
            time.sleep(3)
        assert state == "success", (tmp_path / "airflow-scheduler.log").read_text()[-5000:]
        _, xcom = call(f"{run_url}/taskInstances/summary/xcomEntries/return_value", jwt)
        summary = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
        assert summary["tuples"] == 20 * 330
        # The run's Spark driver ran its tasks on the cluster, and its state is on the volume.
        assert master.state()["completedapps"] or master.state()["activeapps"]
        assert (tmp_path / "state" / "tandem.duckdb").exists()
    finally:
        here.stop()

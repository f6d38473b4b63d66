"""Airflow standalone for this repository (``make airflow``, ``tandem airflow``, the tests): its
dags/ and plugins/, SQLite metadata in ``.airflow/``, Tandem's state in ``.tandem/``, on
127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from optimizer.errors import TandemError

REPOSITORY = Path(__file__).resolve().parents[1]
USER = "admin"
DUCKDB_POOL = "tandem_duckdb"  # the tasks that open the DuckDB file (operators.StoreOperator)
POOL_DESCRIPTION = "Tasks that open Tandem's DuckDB file (one process may write to it at a time)"


def environment(home: Path, port: int = 8080, state: Path | None = None) -> dict[str, str]:
    """The environment ``airflow standalone`` runs with."""
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPOSITORY / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPOSITORY / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # SQLite lets one writer in at a time and the others wait 5 s by default; on a busy
        # machine the scheduler's and DAG processor's writes outlast that, and a trigger through
        # the REST API fails with "database is locked". A minute is what a user would wait.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home.resolve()}/airflow.db?timeout=60",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        # New DAGs run when triggered, without a trip to the UI's pause switch first.
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        "TANDEM_STATE": str(state or REPOSITORY / ".tandem"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def start(home: Path, port: int = 8080, state: Path | None = None,
          log: Path | None = None) -> subprocess.Popen:
    """``airflow standalone`` in the background, from the repository (queries/ resolve there),
    with the pool that lets one task at a time open the DuckDB file."""
    home.mkdir(parents=True, exist_ok=True)
    env = environment(home, port, state)
    out = open(log or home / "standalone.log", "ab")
    initialise(env, out)
    return subprocess.Popen([sys.executable, "-m", "airflow", "standalone"], cwd=REPOSITORY,
                            env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def initialise(env: dict[str, str], out) -> None:
    """Airflow's metadata database brought up to date, and the pool of the tasks that open the
    DuckDB file: what ``start`` does first, and the ``airflow-init`` service of ``docker/``
    (``python -m airflow_tandem.server init``) before the other Airflow services start."""
    for command in (["db", "migrate"], ["pools", "set", DUCKDB_POOL, "1", POOL_DESCRIPTION]):
        done = subprocess.run([sys.executable, "-m", "airflow", *command], cwd=REPOSITORY,
                              env=env, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode:
            where = out.name if not str(out.name).startswith("<") else "its output above"
            raise TandemError(f"`airflow {' '.join(command[:2])}` failed: see {where}")


def stop(process: subprocess.Popen) -> None:
    """Stop standalone and every process it started (they share its process group)."""
    for sig, grace in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        time.sleep(1)  # then SIGKILL whatever of the group outlived it


def wait_healthy(port: int, process: subprocess.Popen, timeout: float = 180.0) -> None:
    """Until the API server answers and the scheduler reports healthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TandemError(f"airflow standalone exited with {process.returncode}: see its log")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health",
                                        timeout=5) as answer:
                health = json.load(answer)
            if health.get("scheduler", {}).get("status") == "healthy":
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass
        time.sleep(1)
    raise TandemError(f"Airflow did not become healthy on port {port} within {timeout:.0f} s")


def password(home: Path) -> str:
    """The admin's password, which the simple auth manager generates on first start."""
    generated = home / "simple_auth_manager_passwords.json.generated"
    return json.loads(generated.read_text())[USER]


def token(port: int, home: Path) -> str:
    """A JWT for the REST API (``POST /auth/token``)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/auth/token", method="POST",
        data=json.dumps({"username": USER, "password": password(home)}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["access_token"]


if __name__ == "__main__":
    if sys.argv[1:] != ["init"]:
        sys.exit("usage: python -m airflow_tandem.server init")
    try:
        initialise(dict(os.environ), sys.stdout.buffer)
    except TandemError as err:
        sys.exit(f"error: {err}")

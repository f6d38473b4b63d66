"""A Spark standalone cluster on this machine, from the installed pyspark: a master and workers
started with ``spark-class``, as Spark's own ``sbin`` scripts start them. The tests run queries
on it; a deployment runs the same classes on its machines (``docker/entrypoint.sh``) and points
Tandem at the master with ``TANDEM_SPARK_MASTER``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rowstream.spark_home import spark_home

HOST = "127.0.0.1"
READY_SECONDS = 60.0


class ClusterError(RuntimeError):
    pass


@dataclass
class Cluster:
    """A running master and its workers. ``url`` is what ``TANDEM_SPARK_MASTER`` takes."""

    directory: Path
    cores: int
    memory: str
    port: int = 0
    ui_port: int = 0
    master: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def state(self) -> dict:
        """The master's view (its web UI's JSON): ``aliveworkers``, ``workers``, ``activeapps``."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def start_master(self) -> None:
        self.port, self.ui_port = free_port(), free_port()
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", HOST,
                                  "--port", str(self.port), "--webui-port", str(self.ui_port))
        self.wait(lambda: self.state() is not None, "the master to answer")

    def start_worker(self) -> subprocess.Popen:
        n = len(self.workers)
        work = self.directory / f"worker-{n}"
        worker = self._spawn(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", self.url,
                             "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                             "--work-dir", str(work), "--webui-port", str(free_port()))
        self.workers.append(worker)
        alive = sum(w.poll() is None for w in self.workers)
        self.wait(lambda: self.state()["aliveworkers"] >= alive, f"worker {n} to register")
        return worker

    def kill_worker(self, n: int) -> None:
        """Kill worker ``n`` and its executors outright (SIGKILL), as a machine that fails
        would: the executors run in the worker's process group."""
        _kill_group(self.workers[n])

    def stop(self) -> None:
        """Workers stop their executors when terminated; whatever is left is killed."""
        for process in [*self.workers, self.master]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [*self.workers, self.master]:
            if process is not None:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
                _kill_group(process)

    def _spawn(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        self.directory.mkdir(parents=True, exist_ok=True)
        home = spark_home()  # the executors' Python workers import the installed pyspark
        env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST}
        with open(self.directory / f"{name}.log", "ab") as log:
            return subprocess.Popen([str(home / "bin" / "spark-class"), main_class, *args],
                                    stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)

    def wait(self, ready, what: str) -> None:
        """Until ``ready()`` holds (the master's state answers it), or fail after a minute."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.master is not None and self.master.poll() is not None:
                break
            try:
                if ready():
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise ClusterError(f"timed out waiting for {what}: see the logs in {self.directory}")


@contextmanager
def local_cluster(directory: Path, workers: int = 2, cores: int = 1,
                  memory: str = "2g") -> Iterator[Cluster]:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, their logs and
    work directories in ``directory``; stopped on exit."""
    cluster = Cluster(directory, cores, memory)
    try:
        cluster.start_master()
        for _ in range(workers):
            cluster.start_worker()
        yield cluster
    finally:
        cluster.stop()


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone already
    process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]

"""The SparkSession Tandem runs on: local by default, UTC, few shuffle partitions, RocksDB state."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from rowstream.spark_home import spark_home

LOCAL_RELATION = "spark.sql.execution.arrow.localRelationThreshold"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# Spark's default checkpoint manager renames through Hadoop's FileContext, whose local file
# system starts a `readlink` process for every rename: the offsets, the commits and each state
# store's files, every micro-batch. Tandem's checkpoints are local directories, where rename(2)
# is atomic, which is all the FileSystem API's manager needs to be exact. Spark's file source
# as a control plane alone: 219-266 ms a micro-batch with the default, 103-118 ms with this one
# (bench/checkpoint_manager.py).
CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINTS = ("org.apache.spark.sql.execution.streaming.checkpointing."
               "FileSystemBasedCheckpointFileManager")

_log: Path | None = None  # where the running JVM writes its output (``_launch_jvm``)


def spark_session(app: str = "tandem", log: Path | None = None,
                  master: str = "local[*]") -> SparkSession:
    """The shared session. ``master`` (``runtime.settings.spark_master``) moves the row engine
    to a cluster;
    ``TANDEM_SPARK_MEMORY`` sizes the driver, which in local mode is also the executor (with
    Spark's 1g, `verify --placements all` ran out of aggregation memory after ~400 Q6 queries
    in one session); ``TANDEM_SHUFFLE_PARTITIONS`` sets the partitions of stateful operators
    (it is kept in the checkpoint, so a query restarts with the count it started with).
    ``log``: where the JVM that a new session starts writes its output (Spark's start-up
    warnings and log), instead of the user's terminal."""
    # Python workers (the stream source, pandas UDFs) must see the same packages as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_HOME", str(spark_home()))
    options = {
        "spark.app.name": app,
        "spark.master": master,
        "spark.driver.memory": os.environ.get("TANDEM_SPARK_MEMORY", "4g"),
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.sql.shuffle.partitions": os.environ.get("TANDEM_SHUFFLE_PARTITIONS", "2"),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        CHECKPOINT_MANAGER: CHECKPOINTS,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Below this size (48 MB by default) createDataFrame of an Arrow table builds the rows
        # in the driver, one thread, at 3.5-4 us a row; above it the executors read the Arrow
        # batches at about 1 us. The MIG hands Spark tables of 100k to millions of rows, the
        # small side of that line (bench/results/after_mig.json).
        LOCAL_RELATION: "0",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    with SparkContext._lock:  # the one that getOrCreate takes: one JVM per process
        _forget_a_dead_jvm()
        _forget_a_stopped_context()
        if log is not None and SparkContext._gateway is None:
            _launch_jvm(options, log)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # Janino cannot compile the code generated for a window's many-way Expand (5-minute windows
    # sliding by a second) and Spark falls back to interpreting it, with the same results: the
    # pages of ERROR it logs for that say nothing a user can act on.
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator",
        jvm.org.apache.logging.log4j.Level.OFF)
    return spark


def _forget_a_dead_jvm() -> None:
    """A JVM that exited (out of heap, killed) leaves its gateway behind, and the next session
    would call into it: forget it, so that getOrCreate starts another."""
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is None or process.poll() is None:
        return
    SparkContext._gateway = SparkContext._jvm = SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = SparkSession._activeSession = None
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - its sockets went with the JVM
        pass


def _forget_a_stopped_context() -> None:
    """Spark stops its context in a JVM that lives on when its scheduler fails (a job that ran
    it out of memory). getOrCreate would hand the next run the session over it, which fails
    (DATA_SOURCE_NOT_FOUND for the stream's source, or "LiveListenerBus is stopped"). Stop it
    on this side too, so that getOrCreate starts another context in the same JVM."""
    context = SparkContext._active_spark_context
    if context is not None and context._jsc is not None and context._jsc.sc().isStopped():
        context.stop()


def jvm_log() -> Path | None:
    """The file the running JVM writes its output to, if this process started it."""
    return _log if SparkContext._gateway is not None else None


def _launch_jvm(options: dict[str, str], log: Path) -> None:
    """Start Spark's JVM with ``log`` as its standard output and error, which the Python
    workers it starts inherit. Only the JVM's: a process-wide redirection while it starts
    would also swallow what the process's other threads print meanwhile (a failing run's
    traceback)."""
    global _log
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as target:
        gateway = launch_gateway(SparkConf().setAll(options.items()),
                                 popen_kwargs={"stdout": target, "stderr": target})
    SparkContext._ensure_initialized(gateway=gateway)
    _log = log

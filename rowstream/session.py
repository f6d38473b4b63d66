"""The SparkSession Tandem runs on: local by default, UTC, few shuffle partitions, RocksDB state."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


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
    builder = (SparkSession.builder.appName(app)
               .master(master)
               .config("spark.driver.memory", os.environ.get("TANDEM_SPARK_MEMORY", "4g"))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
               .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
               .config("spark.sql.shuffle.partitions", os.environ.get("TANDEM_SHUFFLE_PARTITIONS", "2"))
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
               .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    with spark_log(log if SparkContext._active_spark_context is None else None):
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


@contextmanager
def spark_log(log: Path | None) -> Iterator[None]:
    """While it lasts, processes started here inherit ``log`` as their standard error."""
    if log is None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log, "ab") as target:
        os.dup2(target.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)

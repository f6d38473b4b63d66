"""The SparkSession Tandem runs on: local by default, UTC, few shuffle partitions, RocksDB state."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session(app: str = "tandem") -> SparkSession:
    """The shared session. ``TANDEM_SPARK_MASTER`` moves the row engine to a cluster;
    ``TANDEM_SPARK_MEMORY`` sizes the driver, which in local mode is also the executor (with
    Spark's 1g, `verify --placements all` ran out of aggregation memory after ~400 Q6 queries
    in one session); ``TANDEM_SHUFFLE_PARTITIONS`` sets the partitions of stateful operators
    (it is kept in the checkpoint, so a query restarts with the count it started with)."""
    # Python workers (the stream source, pandas UDFs) must see the same packages as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app)
               .master(os.environ.get("TANDEM_SPARK_MASTER", "local[*]"))
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

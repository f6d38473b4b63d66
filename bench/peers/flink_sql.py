"""One Flink SQL job over smart-plug CSV files, run by PyFlink in its own virtual environment
(``make peers``: apache-flink pins py4j, pandas and pyarrow below what Tandem's Spark and
DuckDB need, so it cannot share Tandem's). ``bench/peers/flink.py`` calls it; it imports
nothing of Tandem.

    .venv-flink/bin/python bench/peers/flink_sql.py QUERY.sql INPUT_DIR OUTPUT [--parallelism 2]
        [--checkpoints DIR]

Reads every file of INPUT_DIR as headerless DEBS 2014 CSV (id, Unix seconds, value, property,
plug_id, household_id, house_id) with event time ``ts`` and a watermark 1 s behind it, runs
the query's SELECT in streaming mode, and writes its rows to OUTPUT as JSON lines, or discards
them into Flink's blackhole sink when OUTPUT is ``-``. With ``--checkpoints``, Flink checkpoints
its state there every second, exactly once, as Tandem commits every 1-s micro-batch. Prints one JSON line: the job's wall
seconds from submission to the end of its input, and the rows written."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pyflink.table import EnvironmentSettings, Schema, TableDescriptor, TableEnvironment

SOURCE = """
CREATE TABLE plugs (
  id BIGINT,
  t DECIMAL(17, 6),
  `value` DOUBLE,
  property INT,
  plug_id INT,
  household_id INT,
  house_id INT,
  ts AS TO_TIMESTAMP_LTZ(CAST(t * 1000 AS BIGINT), 3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("query", type=Path)
    parser.add_argument("input", type=Path)
    parser.add_argument("output")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoints", type=Path)
    args = parser.parse_args()
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("parallelism.default", str(args.parallelism))
    config.set("table.local-time-zone", "UTC")  # window bounds of TIMESTAMP_LTZ times in UTC
    # A long garbage collection must slow the job, not fail it (Q1's window join holds every
    # reading once per window: 300 copies).
    config.set("heartbeat.timeout", "600000")
    if args.checkpoints:
        config.set("execution.checkpointing.interval", "1 s")
        config.set("execution.checkpointing.mode", "EXACTLY_ONCE")
        # Tandem's commits are files on disk: so are Flink's checkpoints.
        config.set("execution.checkpointing.storage", "filesystem")
        config.set("execution.checkpointing.dir", args.checkpoints.resolve().as_uri())
    env.execute_sql(SOURCE.format(path=args.input.resolve()))
    select = "\n".join(line for line in args.query.read_text().splitlines()
                       if not line.lstrip().startswith("--"))
    table = env.sql_query(select)
    started = time.perf_counter()
    rows = 0
    if args.output == "-":
        schema = Schema.new_builder().from_resolved_schema(table.get_resolved_schema()).build()
        env.create_temporary_table(
            "results", TableDescriptor.for_connector("blackhole").schema(schema).build())
        table.execute_insert("results").wait()
    else:
        names = table.get_schema().get_field_names()
        with open(args.output, "w") as out, table.execute().collect() as results:
            for row in results:
                out.write(json.dumps(dict(zip(names, row, strict=True)), default=str) + "\n")
                rows += 1
    json.dump({"seconds": time.perf_counter() - started, "rows": rows}, sys.stdout)
    print()


if __name__ == "__main__":
    main()

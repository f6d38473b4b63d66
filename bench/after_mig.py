"""What a Spark aggregate after the MIG costs per row DuckDB hands it: the MIG's path for a Spark
operator over a DB-op's rows (``rowstream/mig.py``: ``createDataFrame`` of an Arrow table of
window_end-tagged rows, the operator, ``toArrow``), timed for tables of 100k to 3M rows, each
size in turn, ``--repeats`` rounds in one JVM (the first round warms it), each round at Spark's
default ``spark.sql.execution.arrow.localRelationThreshold`` (48 MB: smaller tables become rows in
the driver) and at Tandem's (0: the executors read every table's Arrow batches), interleaved.

    .venv/bin/python bench/after_mig.py [--repeats 3]

Writes bench/results/after_mig.json: per threshold and size, the seconds of
``createDataFrame(...).count()``
(the move alone, as ``tandem calibrate`` times ``[duckdb.transfer_out]``) and of the move with a
grouped AVG and ``toArrow`` (Spark's batch aggregation after the MIG, ``[spark.batch_aggregate]``)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pyspark.sql import functions as F  # noqa: E402

from rowstream.mig import utc_instants  # noqa: E402
from rowstream.session import LOCAL_RELATION, spark_session  # noqa: E402
from workload.smart_plugs import SmartPlugs  # noqa: E402

SIZES = (100_000, 1_000_000, 3_000_000)
THRESHOLDS = {"Spark's default": "48MB", "Tandem's": "0"}
KEYS = ("house_id", "household_id", "plug_id", "window_end")


def rows(n: int) -> pa.Table:
    """``n`` plug readings tagged with a window_end, as DuckDB hands a window's rows."""
    second = SmartPlugs(rate=100_000).between(0, 1)
    second = second.append_column("window_end", second.column("ts"))
    return utc_instants(pa.concat_tables([second] * -(-n // second.num_rows)).slice(0, n))


def seconds(job) -> float:
    began = time.perf_counter()
    job()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spark = spark_session(log=Path(tmp) / "spark.log")
        tables = {n: rows(n) for n in SIZES}
        rounds = []
        for repeat in range(args.repeats):
            for name, threshold in THRESHOLDS.items():
                spark.conf.set(LOCAL_RELATION, threshold)
                for n, table in tables.items():
                    move = seconds(lambda t=table: spark.createDataFrame(t).count())
                    aggregate = seconds(lambda t=table: spark.createDataFrame(t).groupBy(
                        *KEYS).agg(F.avg("value")).toArrow())
                    rounds.append({"round": repeat, "local_relation_threshold": threshold,
                                   "rows": n, "move_s": move, "move_and_aggregate_s": aggregate})
                    print(f"round {repeat}, {name} threshold ({threshold}), {n:,} rows: move "
                          f"{move:.3f} s ({move / n * 1e6:.2f} us a row), with the aggregate "
                          f"{aggregate:.3f} s ({aggregate / n * 1e6:.2f} us a row)", flush=True)
    out = ROOT / "bench" / "results" / "after_mig.json"
    out.write_text(json.dumps({"command": "bench/after_mig.py " + " ".join(sys.argv[1:]),
                               "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "rounds": rounds}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

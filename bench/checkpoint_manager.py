"""What Spark's checkpoint manager costs a micro-batch: Spark's file source as a control plane
alone (one small Parquet file a batch, checkpointed, ``foreachBatch`` calling only
``DataFrame.inputFiles()``), with Spark's default manager (Hadoop's FileContext) and with the
FileSystem API's, which ``rowstream/session.py`` sets. The managers are interleaved, each
repeat in turn; the first 10 batches of a query are its warm-up.

    .venv/bin/python bench/checkpoint_manager.py [--repeats 2] [--batches 60]

Writes bench/results/checkpoint_manager.json."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rowstream.session import CHECKPOINT_MANAGER, CHECKPOINTS, spark_session  # noqa: E402

MANAGERS = {"FileContext (Spark's default)": None, "FileSystem (Tandem's)": CHECKPOINTS}
WARMUP = 10  # batches


def per_batch(spark, landing: Path, checkpoint: Path, manager: str | None) -> list[float]:
    """Seconds between consecutive batches' calls, after the warm-up."""
    if manager is None:
        spark.conf.unset(CHECKPOINT_MANAGER)
    else:
        spark.conf.set(CHECKPOINT_MANAGER, manager)
    called: list[float] = []

    def each(batch, _batch_id: int) -> None:
        batch.inputFiles()
        called.append(time.perf_counter())

    query = (spark.readStream.schema("ts timestamp, v double").option("maxFilesPerTrigger", 1)
             .parquet(str(landing)).writeStream.foreachBatch(each)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return [b - a for a, b in zip(called[WARMUP:], called[WARMUP + 1:], strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    spark = spark_session()
    with tempfile.TemporaryDirectory(prefix="tandem-checkpoints-") as tmp:
        landing = Path(tmp) / "landing"
        landing.mkdir()
        for i in range(args.batches):
            seconds = pa.array([(i * 1000 + j) * 1000 for j in range(1000)], pa.timestamp("us"))
            pq.write_table(pa.table({"ts": seconds, "v": pa.array(range(1000), pa.float64())}),
                           landing / f"{i:04d}.parquet")
        runs = []
        for repeat in range(args.repeats):
            for n, (name, manager) in enumerate(MANAGERS.items()):
                gaps = per_batch(spark, landing, Path(tmp) / f"checkpoint-{repeat}-{n}", manager)
                runs.append({"manager": name, "repeat": repeat,
                             "median_ms": 1000 * statistics.median(gaps),
                             "mean_ms": 1000 * statistics.fmean(gaps), "batches": len(gaps)})
                print(f"{name}: {runs[-1]['median_ms']:.0f} ms a batch (median), "
                      f"{runs[-1]['mean_ms']:.0f} ms (mean) over {len(gaps)}", flush=True)
    out = ROOT / "bench" / "results" / "checkpoint_manager.json"
    out.write_text(json.dumps({"command": " ".join(sys.argv), "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()

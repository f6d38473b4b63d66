"""Where a micro-batch's time goes: the capacity of one plan at one rate, measured as ``tandem
bench`` measures it, with the wall seconds of the MIG's steps over the measured batches.

    .venv/bin/python bench/batch_profile.py q1 200000 [--placement auto|spark|duckdb|op=engine,...]
        [--landed parquet|csv|generator] [--gateway auto|reference|native|python]
        [--measure SECONDS]

The arrivals (Spark's job and ``toArrow``, then DuckDB's appends) run in ``foreachBatch``; the
evaluation runs on the MIG's own thread while Spark prepares the next batch (rowstream/mig.py),
so the two columns overlap and a batch takes about the larger of them when the cores allow.
By reference a batch takes up to four landed seconds (``FILES_PER_BATCH``): ``--measure 10``
leaves one batch after the two that settle, ``--measure 40`` eight.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from pyspark.sql.classic.dataframe import DataFrame

from benchmarking.measure import capacity
from columnar.store import ColumnarStore
from rowstream.by_reference import FileReferences
from rowstream.mig import Mig
from rowstream.native import NativeJudge
from runtime.explain import explain

# (class, method, what it is): timed by wrapping the method, nothing else changes.
STEPS = [(Mig, "arrive", "arrival: Spark's job, toArrow and DuckDB's appends"),
         (DataFrame, "toArrow", "  of which toArrow (the Spark job)"),
         (NativeJudge, "__call__", "  of which the input suite and lateness (native gateway)"),
         (FileReferences, "read", "  of which DuckDB's reading and judging (by reference)"),
         (ColumnarStore, "append_input", "  of which DuckDB appends"),
         (Mig, "_wait", "foreachBatch waiting for the previous evaluation"),
         (Mig, "evaluate_batch", "evaluation: the DB-ops, commit and purge"),
         (ColumnarStore, "evaluate", "  of which DuckDB queries")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("query")
    parser.add_argument("rate", type=float)
    parser.add_argument("--placement", default="auto")
    parser.add_argument("--measure", type=float, default=10.0, help="event seconds measured")
    parser.add_argument("--landed", default="parquet", choices=("parquet", "csv", "generator"),
                        help="how the stream arrives: landed files of a format, or the generator")
    parser.add_argument("--gateway", default="auto", choices=("auto", "reference", "native",
                                                               "python"))
    args = parser.parse_args()

    calls: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (start, seconds)

    def timed(cls, name):
        method = getattr(cls, name)

        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return method(*a, **k)
            finally:
                calls[name].append((start, time.perf_counter() - start))
        setattr(cls, name, wrapper)

    for cls, name, _ in STEPS:
        timed(cls, name)
    plan = explain(args.query, rate=args.rate, placement=args.placement)
    found = capacity(plan, args.rate, warmup=300, measure=args.measure,
                     landed=None if args.landed == "generator" else args.landed,
                     gateway=args.gateway)
    # The measured batches, not the warm-up: by reference a batch takes up to FILES_PER_BATCH
    # event seconds, so there are fewer batches than seconds measured.
    batches = found.batches
    if not batches:
        raise SystemExit(f"{args.query} fell behind in the warm-up: no batch was measured")
    since = calls["arrive"][-batches][0]
    print(f"{args.query} at {args.rate:,.0f} tuples/s, placement {args.placement}, "
          f"{args.landed}, gateway {args.gateway}: capacity "
          f"{found.tuples_per_second:,.0f} tuples/s over {found.batches} batches")
    print(f"{'step':55s} {'mean s':>7s} {'max s':>7s}  per batch, last {batches} batches")
    for _, name, what in STEPS:
        seconds = [s for start, s in calls[name] if start >= since]
        per_batch = sum(seconds) / batches
        print(f"{what:55s} {per_batch:7.3f} {max(seconds, default=0):7.3f}")


if __name__ == "__main__":
    main()

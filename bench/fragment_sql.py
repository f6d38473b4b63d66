"""Generated DuckDB SQL against hand-written SQL, fragment by fragment: for every DB-op of the
optimiser's plan of Q1-Q6, the time of the generated query and of an expert's statement over
the same tables (``bench/handwritten/<query>.<fragment>.sql``), on windows as full as the rate
makes them, evaluating the window_ends of one micro-batch.

    .venv/bin/python bench/fragment_sql.py [q1 q3 ...] [--rate 100000] [--repeats 5]
        [--batch 1] [--profile]

The store is filled as ``tandem bench`` fills it (``benchmarking.measure.preload``: the rows the MIG
appends over the warm-up, with their pane tables). Both statements must give the same rows;
each repeat times them back to back, and the figures are medians. ``--profile`` prints DuckDB's
EXPLAIN ANALYZE of each. Writes bench/results/fragment_sql.json and .md."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa

from benchmarking.measure import preload, warmup_stream
from benchmarking.verify import compare
from columnar.store import ColumnarStore, schema_name
from rowstream.eventtime import EPOCH
from runtime.explain import explain
from workload.smart_plugs import DEBS_START

HERE = Path(__file__).resolve().parent
HANDWRITTEN = HERE / "handwritten"
RESULTS = HERE / "results"
QUERIES = ("q1", "q2", "q3", "q4", "q5", "q6")
WARMUP = 300.0  # event seconds: the longest window of Q1-Q6 is full
TARGET = 1.2  # generated / hand-written, at most (issue 15)


def same_rows(generated: pa.Table, handwritten: pa.Table) -> bool:
    """The same rows, floats within verify's tolerance (sums of partials add up in another
    order)."""
    want = pl.from_arrow(generated)
    got = pl.from_arrow(handwritten)
    if sorted(got.columns) != sorted(want.columns):
        return False
    return compare({}, got.select(want.columns).cast(want.schema), want).status == "same"


def timed(store: ColumnarStore, query: str, sql: str, ends: list,
          stacks=()) -> tuple[float, pa.Table]:
    started = time.perf_counter()
    rows = store.evaluate(query, sql, ends, stacks)
    return time.perf_counter() - started, rows


def profile(store: ColumnarStore, query: str, sql: str) -> str:
    store._run(f"SET search_path = '{schema_name(query)}'")
    try:
        return store.con.sql(f"EXPLAIN ANALYZE {sql}").fetchall()[0][1]
    finally:
        store._run("RESET search_path")


def measure(query: str, rate: float, repeats: int, batch: float, show: bool) -> list[dict]:
    plan = explain(query, rate=rate)
    rows = []
    with (tempfile.TemporaryDirectory(prefix="tandem-fragments-") as tmp,
          ColumnarStore(Path(tmp) / "f.duckdb") as store):
        preload(store, plan, warmup_stream(rate, WARMUP), WARMUP)
        last = EPOCH + timedelta(seconds=DEBS_START + WARMUP)
        slide = plan.optimization.plan.logical.root.slide
        ends = [last - timedelta(seconds=slide * k) for k in range(round(batch / slide))][::-1]
        # What a run keeps when it evaluates them: the rows and panes from the first window_end
        # of the batch before on (rowstream/mig.py purges one batch behind).
        tables = {t.table: t for f in plan.fragments
                  for t in (*f.inputs, *(p.table for p in f.panes))}
        store.purge(query, tables.values(), ends[0] - timedelta(seconds=batch))
        for fragment in plan.fragments:
            path = HANDWRITTEN / f"{query}.{fragment.id}.sql"
            if not path.exists():
                print(f"{query} {fragment.id}: no hand-written statement ({path.name})")
                continue
            handwritten = path.read_text()
            times = {"generated": [], "handwritten": []}
            results = {}
            for _ in range(repeats + 1):  # the first pair warms DuckDB's caches: not counted
                for name, sql in (("generated", fragment.sql), ("handwritten", handwritten)):
                    seconds, results[name] = timed(
                        store, query, sql, ends, fragment.stacks if name == "generated" else ())
                    times[name].append(seconds)
            if not same_rows(results["generated"], results["handwritten"]):
                raise SystemExit(f"{query} {fragment.id}: the hand-written statement gives "
                                 "other rows than the generated query")
            generated = statistics.median(times["generated"][1:])
            hand = statistics.median(times["handwritten"][1:])
            rows.append({"query": query, "fragment": fragment.id,
                         "members": list(fragment.members), "rate": rate,
                         "window_ends": len(ends), "result_rows": results["generated"].num_rows,
                         "generated_s": generated, "handwritten_s": hand,
                         "ratio": generated / hand})
            print(f"{query} {fragment.id}: generated {generated:.3f} s, hand-written "
                  f"{hand:.3f} s, ratio {generated / hand:.2f}", flush=True)
            if show:
                for name, sql in (("generated", fragment.sql), ("handwritten", handwritten)):
                    print(f"--- {name}\n{profile(store, query, sql)}")
    return rows


def report(rows: list[dict], args: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fragment_sql.json").write_text(json.dumps(
        {"rate": args.rate, "batch_seconds": args.batch, "repeats": args.repeats,
         "target_ratio": TARGET, "fragments": rows}, indent=2) + "\n")
    lines = ["# Generated fragment SQL against hand-written SQL", "",
             f"`.venv/bin/python bench/fragment_sql.py --rate {args.rate:.0f} --repeats "
             f"{args.repeats} --batch {args.batch:g}`: the optimiser's plan of each query at "
             f"{args.rate:,.0f} tuples/s, windows filled by {WARMUP:.0f} s of the stream, the "
             f"window_ends of one {args.batch:g}-s micro-batch; medians of {args.repeats} "
             "interleaved repeats. The hand-written statements are in `bench/handwritten/`.", "",
             "| query | fragment | generated s | hand-written s | ratio | target ≤ "
             f"{TARGET} |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['query']} | {r['fragment']} | {r['generated_s']:.3f} | "
                     f"{r['handwritten_s']:.3f} | {r['ratio']:.2f} | "
                     f"{'met' if r['ratio'] <= TARGET else 'missed'} |")
    (RESULTS / "fragment_sql.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=list(QUERIES))
    parser.add_argument("--rate", type=float, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=float, default=1.0, help="micro-batch seconds")
    parser.add_argument("--profile", action="store_true", help="print EXPLAIN ANALYZE")
    args = parser.parse_args()
    rows = [r for q in args.queries
            for r in measure(q, args.rate, args.repeats, args.batch, args.profile)]
    if set(args.queries) == set(QUERIES):
        report(rows, args)


if __name__ == "__main__":
    main()

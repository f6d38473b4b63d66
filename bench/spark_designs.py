"""Which exact pure-Spark design is fastest: the capacity of each of ``rowstream.dsps.SPARK_DESIGNS``
for the pure-Spark plan of every query, measured as ``tandem bench`` measures (docs/design.md:
windows warmed to steady state, then 1-s micro-batches). The fastest is `tandem bench`'s
pure-Spark baseline. Beside them runs the hand-written design they must match
(``bench/handwritten/spark_numpy.py``, Q1 and Q2 only).

    .venv/bin/python bench/spark_designs.py [--rates 2000,5000,10000] [--queries q1,...]
                                            [--designs built-in,panes,buckets,expert-numpy]

Per query, the designs run one after another at each rate, their order rotating from rate to
rate; a design that falls short of a rate is not measured at higher ones. Writes
``bench/results/<date>/spark_designs.md`` and ``.json`` after every measurement; runs of the same
day add to them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarking.measure import capacity
from optimizer.logical import windows
from rowstream.dsps import SPARK_DESIGNS
from runtime.explain import explain

sys.path.insert(0, str(Path(__file__).parent / "handwritten"))
import spark_numpy  # noqa: E402  (registers the hand-written design)

DESIGNS = (*SPARK_DESIGNS, spark_numpy.NAME)
HAND_WRITTEN = {spark_numpy.NAME: ("q1", "q2")}  # the queries a hand-written design answers


def measure(queries: list[str], rates: list[float], designs: list[str], seconds: float,
            record: Callable[[dict], None]) -> None:
    failed = set()
    for query in queries:
        for k, rate in enumerate(rates):
            plan = explain(query, rate=rate, placement="spark")
            warmup = max(w.size for w in windows(plan.optimization.logical.root))
            turn = k % len(designs)
            for design in designs[turn:] + designs[:turn]:
                if (query, design) in failed or query not in HAND_WRITTEN.get(design, [query]):
                    continue
                print(f"{query} at {rate:,.0f} tuples/s: {design}", flush=True)
                started = time.perf_counter()
                found = capacity(plan, rate, warmup=warmup, measure=seconds, spark_design=design)
                row = {"query": query, "rate": rate, "design": design,
                       "capacity": round(found.tuples_per_second), "bound": found.bound,
                       "seconds": round(time.perf_counter() - started)}
                print(f"  {row['capacity']:,} tuples/s" + (" (stopped in the warm-up)"
                                                          if found.bound else ""), flush=True)
                record(row)
                if found.tuples_per_second < rate:
                    failed.add((query, design))


def report(rows: list[dict], commands: list[str]) -> str:
    queries = list(dict.fromkeys(r["query"] for r in rows))
    rates = sorted({r["rate"] for r in rows})
    ran = "; ".join(f"`{c}`" for c in commands)
    lines = ["# Pure-Spark designs", "", f"Measured with {ran}. Capacity in tuples/s, "
             "1-s micro-batches; `≤` marks a design stopped in the warm-up (it fell behind the "
             "arrivals: the figure bounds its capacity); `—`: not measured (it fell short at a "
             "lower rate or does not answer the query). expert-numpy is the hand-written design the "
             "product's must match (bench/handwritten/spark_numpy.py, Q1 and Q2 only).", "",
             "| query | rate | " + " | ".join(DESIGNS) + " |", "|---|---:|" + "---:|" * len(DESIGNS)]
    for q in queries:
        for rate in rates:
            cells = []
            for d in DESIGNS:
                r = next((r for r in rows if (r["query"], r["rate"], r["design"]) == (q, rate, d)),
                         None)
                cells.append("—" if r is None else ("≤ " if r["bound"] else "")
                             + f"{r['capacity']:,}")
            lines.append(f"| {q} | {rate:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", default="q1,q2,q3,q4,q5,q6")
    parser.add_argument("--rates", default="2000,5000,10000")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--measure", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    folder = args.out / time.strftime("%Y-%m-%d")
    folder.mkdir(parents=True, exist_ok=True)
    saved = folder / "spark_designs.json"
    # Runs of the same day add to one table (a measurement replaces an earlier one of its point).
    data = json.loads(saved.read_text()) if saved.exists() else {"commands": [], "rows": []}
    data["commands"].append("python bench/spark_designs.py " + " ".join(
        f"--{k} {getattr(args, k)}" for k in ("queries", "rates", "designs")))

    def record(row: dict) -> None:
        key = (row["query"], row["rate"], row["design"])
        data["rows"] = [r for r in data["rows"]
                        if (r["query"], r["rate"], r["design"]) != key] + [row]
        saved.write_text(json.dumps(data, indent=1) + "\n")
        (folder / "spark_designs.md").write_text(report(data["rows"], data["commands"]))

    measure(args.queries.split(","), [float(r) for r in args.rates.split(",")],
            args.designs.split(","), args.measure, record)
    print(report(data["rows"], data["commands"]))


if __name__ == "__main__":
    main()

"""How fast each gateway brings a landing directory in: the optimiser's plan for each query,
measured as ``tandem bench`` measures it (windows filled, then 1-s micro-batches), reading the
same events as CSV through Spark's own text source (the native gateway, Tandem's default), as
CSV through Tandem's Python data source, and as Parquet through Spark's own Parquet source.

    .venv/bin/python bench/gateways.py [q1 q5] [--rate 350000] [--rounds 2] [--profile P]

The rate is offered above what the CSV gateways sustain, so that each capacity (tuples over
wall seconds) is what the gateway reaches, not the rate. The three run in turn, round after
round, each round in the reverse order of the one before: the first measurement in a process
pays for a cold JVM, and the order spreads that. Writes bench/results/<date>/gateways.json and
.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from pathlib import Path

from benchmarking import measure
from runtime.explain import explain

RESULTS = Path(__file__).resolve().parent / "results"
GATEWAYS = {"csv-native": ("csv", "native"), "csv-python": ("csv", "python"),
            "parquet-native": ("parquet", "native")}
FILL, MEASURED = 300.0, 20.0  # event seconds, as bench/peers/flink.py measures Tandem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=["q1", "q5"])
    parser.add_argument("--rate", type=float, default=350_000.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", help="calibration profile (default: the shipped one)")
    args = parser.parse_args()
    out = RESULTS / dt.date.today().isoformat()
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for query in args.queries:
        plan = explain(query, rate=args.rate, profile=args.profile)
        for n in range(args.rounds):
            for name in list(GATEWAYS)[::-1 if n % 2 else 1]:
                landed, gateway = GATEWAYS[name]
                found = measure.capacity(plan, args.rate, warmup=FILL, measure=MEASURED,
                                         landed=landed, gateway=gateway)
                runs.append({"query": query, "gateway": name, "round": n,
                             "tuples_per_second": round(found.tuples_per_second),
                             "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
                print(json.dumps(runs[-1]), flush=True)
    (out / "gateways.json").write_text(json.dumps({"rate": args.rate, "runs": runs}, indent=1)
                                       + "\n")
    (out / "gateways.md").write_text(report(runs, args.rate, args.profile))


def report(runs: list[dict], rate: float, profile: str | None) -> str:
    lines = ["# Gateways", "",
             f"`.venv/bin/python bench/gateways.py {' '.join(dict.fromkeys(r['query'] for r in runs))} "
             f"--rate {rate:.0f}" + (f" --profile {profile}" if profile else "") + "`: the "
             "optimiser's plan, capacity in tuples/s at that offered rate (window fill taken "
             "out), every round's figure and their median.", "",
             "| query | " + " | ".join(GATEWAYS) + " | CSV native / CSV Python |",
             "|---|" + "---:|" * (len(GATEWAYS) + 1)]
    for query in dict.fromkeys(r["query"] for r in runs):
        medians = {}
        cells = []
        for name in GATEWAYS:
            figures = [r["tuples_per_second"] for r in runs
                       if r["query"] == query and r["gateway"] == name]
            medians[name] = statistics.median(figures)
            cells.append(", ".join(f"{f:,}" for f in figures) + f" (median {medians[name]:,.0f})")
        ratio = medians["csv-native"] / medians["csv-python"]
        lines.append(f"| {query} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

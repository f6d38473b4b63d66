"""How fast each crossing brings a landing directory in, against the DuckDB-alone limit: a plan
measured as ``tandem bench`` measures it (windows filled, then 1-s micro-batches) from the same
events landed as Parquet, by reference (Spark's file source plans each batch, DuckDB reads its
files: rowstream/by_reference.py), by value through Spark's own Parquet source (the native
gateway), and by the same MIG fed the files in a loop with no Spark at all
(``benchmarking.measure.duckdb_alone``, the limit); optionally the same from CSV files.

    .venv/bin/python bench/gateways.py [q1 q5] [--rate 1000000] [--rounds 1] [--csv]
        [--placement duckdb] [--profile P] [--systems parquet-reference,duckdb-alone]
        [--files-per-batch 1,4] [--name gateways]

The rate is offered above what the crossings sustain, so that each capacity (tuples over wall
seconds) is what the crossing reaches, not the rate. The systems run in turn, each round in the
reverse order of the one before. Writes bench/results/<date>/<name>.json and .md (``--name``,
default gateways), and each query's limit into bench/results/bench.json as
``limits.duckdb.<query>``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from pathlib import Path

from benchmarking import measure
from runtime.explain import explain
from runtime.spec import FILES_PER_BATCH

RESULTS = Path(__file__).resolve().parent / "results"
FILL, MEASURED = 300.0, 20.0  # event seconds, as bench/peers/flink.py measures Tandem
LIMIT = "duckdb-alone"


def systems(with_csv: bool, files_per_batch: list[int]) -> dict[str, dict]:
    """Each system's arguments to ``measure.capacity`` (the limit's to ``duckdb_alone``). By
    reference, one system per number of files a micro-batch may take, named ``<system>×<n>``
    where there are several."""
    formats = ("parquet", "csv") if with_csv else ("parquet",)
    found = {}
    for landed in formats:
        for n in files_per_batch:
            name = f"{landed}-reference" + (f"×{n}" if len(files_per_batch) > 1 else "")
            found[name] = {"landed": landed, "gateway": "reference", "files_per_batch": n}
        found[f"{landed}-native"] = {"landed": landed, "gateway": "native"}
    # The limit is fed the files as the most the crossing by reference may take a batch.
    return found | {LIMIT: {"files_per_batch": max(files_per_batch)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=["q1", "q5"])
    parser.add_argument("--rate", type=float, default=1_000_000.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--placement", default="duckdb")
    parser.add_argument("--csv", action="store_true", help="also CSV landings")
    parser.add_argument("--profile", help="calibration profile (default: the shipped one)")
    parser.add_argument("--systems", help="a comma-separated subset of the systems compared")
    parser.add_argument("--files-per-batch", default=str(FILES_PER_BATCH),
                        help="the most files a micro-batch by reference takes; several, "
                             "comma-separated, compare them")
    parser.add_argument("--name", default="gateways",
                        help="bench/results/<date>/<name>.json and .md")
    args = parser.parse_args()
    out = RESULTS / dt.date.today().isoformat()
    out.mkdir(parents=True, exist_ok=True)
    compared = systems(args.csv, [int(n) for n in args.files_per_batch.split(",")])
    if args.systems:
        unknown = set(args.systems.split(",")) - set(compared)
        if unknown:
            parser.error(f"--systems: no {', '.join(sorted(unknown))} (systems: "
                         f"{', '.join(compared)})")
        compared = {n: a for n, a in compared.items() if n in args.systems.split(",")}
    runs = []
    for query in args.queries:
        plan = explain(query, rate=args.rate, profile=args.profile, placement=args.placement)
        for n in range(args.rounds):
            for name in list(compared)[::-1 if n % 2 else 1]:
                if name == LIMIT:
                    found = measure.duckdb_alone(plan, args.rate, warmup=FILL, measure=MEASURED,
                                                 **compared[name])
                else:
                    found = measure.capacity(plan, args.rate, warmup=FILL, measure=MEASURED,
                                             **compared[name])
                runs.append({"query": query, "system": name, "round": n,
                             "tuples_per_second": round(found.tuples_per_second),
                             "batches": found.batches,
                             "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
                print(json.dumps(runs[-1]), flush=True)
    setting = {"rate": args.rate, "placement": args.placement, "profile": args.profile}
    (out / f"{args.name}.json").write_text(json.dumps(setting | {"runs": runs}, indent=1) + "\n")
    (out / f"{args.name}.md").write_text(report(runs, compared, args))
    bench = RESULTS / "bench.json"
    merged = json.loads(bench.read_text()) if bench.exists() else {}
    limits = merged.setdefault("limits", {}).setdefault("duckdb", {})
    for query in dict.fromkeys(r["query"] for r in runs if r["system"] == LIMIT):
        # A capacity at a rate offered above it, not a rate searched for: searching DuckDB's
        # millions a second would land billions of rows per step on this machine.
        limits[query] = {"capacity": _median(runs, query, LIMIT), "offered": args.rate,
                         "placement": args.placement, "command": _command(runs, args)}
    bench.write_text(json.dumps(merged, indent=1) + "\n")


def _median(runs: list[dict], query: str, system: str) -> float:
    return statistics.median(r["tuples_per_second"] for r in runs
                             if r["query"] == query and r["system"] == system)


def _ratio(runs: list[dict], query: str, a: str, b: str) -> str:
    """The median of ``a`` over ``b``'s, where both ran."""
    ran = {r["system"] for r in runs if r["query"] == query}
    return f"{_median(runs, query, a) / _median(runs, query, b):.2f}x" if {a, b} <= ran else "–"


def _command(runs: list[dict], args) -> str:
    return (f".venv/bin/python bench/gateways.py {' '.join(dict.fromkeys(r['query'] for r in runs))}"
            f" --rate {args.rate:.0f} --rounds {args.rounds} --placement {args.placement}"
            + (" --csv" if args.csv else "") + (f" --profile {args.profile}" if args.profile else "")
            + (f" --systems {args.systems}" if args.systems else "")
            + f" --files-per-batch {args.files_per_batch}")


def report(runs: list[dict], compared: dict, args) -> str:
    # The ratios' crossing by reference: the one that takes the most files per batch.
    reference = max((n for n, a in compared.items() if a.get("landed") == "parquet"
                     and a.get("gateway") == "reference"),
                    key=lambda n: compared[n]["files_per_batch"], default="parquet-reference")
    lines = ["# Crossings against the DuckDB-alone limit", "",
             f"`{_command(runs, args)}`: capacity in tuples/s at that offered rate (windows "
             f"filled with {FILL:.0f} s of event time, then {MEASURED:.0f} s in 1-s files, one "
             "micro-batch each but by reference, where a batch takes up to the files per batch "
             "that have landed; the first two batches dropped), every round's figure and their "
             "median; the systems interleaved in one run.", "",
             "| query | " + " | ".join(compared) + " | reference / native | limit / reference |",
             "|---|" + "---:|" * (len(compared) + 2)]
    for query in dict.fromkeys(r["query"] for r in runs):
        cells = []
        for name in compared:
            figures = [r["tuples_per_second"] for r in runs
                       if r["query"] == query and r["system"] == name]
            cells.append(", ".join(f"{f:,}" for f in figures)
                         + (f" (median {statistics.median(figures):,.0f})" if len(figures) > 1
                            else ""))
        ratios = (_ratio(runs, query, reference, "parquet-native"),
                  _ratio(runs, query, LIMIT, reference))
        lines.append(f"| {query} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

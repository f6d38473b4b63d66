"""Scaling: Q1, Q3 and Q5 on a Spark standalone cluster of 1 and of 2 workers on this machine
(``benchmarking/cluster.py``), under pure-Spark, pure-DuckDB (by reference where the profile
prices it), duckdb-partitioned, split (``--placement split``: the aggregates' partials in
Spark's executors, their merge in the driver's DuckDB) and the optimiser's plan; then a
projection to N machines from the calibrated cost model.

    .venv/bin/python bench/scaling.py [--workers 1,2] [--queries q1,q3,q5]
        [--placements spark,duckdb,duckdb-partitioned,split,auto] [--from q1[:placement]=100000 ...]
        [--profile P] [--resume] [--out scaling] [--no-project]
    .venv/bin/python bench/scaling.py --project [--profile P]     # the projection alone

Each worker has one core and its own executor; the driver runs in this process's child, as a
user's would. Every plan's maximum sustainable rate is searched to within 10 %
(``benchmarking.bench.next_rate``), one step of each placement in turn, so that the ratios at one
worker count are measured in one run; capacity is measured as ``tandem bench`` measures it
(``benchmarking.measure.capacity``, Parquet files landed before the clock starts). Writes
bench/results/<out>.json and .md after every step; ``--resume`` goes on from them.

The projection (``project``) takes the profile's unit costs as this machine's and assumes N
machines of the same kind, each running one executor with as many cores as this one: the
work Spark spreads over its executors (the gateway, Spark's operators, duckdb-partitioned's
exchange and its partitions' DuckDB work, whose parallelism becomes N times the profile's)
divides by N; what the driver does alone (its fixed cost per micro-batch, the moves into and
out of a central DuckDB, the central DB-ops and the results' commit) does not. The gateway's
calibrated cost per tuple includes the judgement of the rows, which a plan without a partitioned
DB-op does on the driver: dividing it by N flatters those plans.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from benchmarking.bench import _warmup, next_rate  # noqa: E402
from optimizer.cost import PARTITIONED, SPLIT  # noqa: E402
from optimizer.errors import TandemError  # noqa: E402
from optimizer.profile import Profile, load_profile  # noqa: E402
from runtime.explain import explain  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PLACEMENTS = ("spark", "duckdb", PARTITIONED, SPLIT, "auto")
MEASURE = 10.0  # event seconds measured per capacity
MACHINES = (1, 2, 4, 8, 16)
# Unit-cost functions whose work Spark's executors do (the projection's assumption).
SPREAD = {"spark": ("source", "source_csv", "select", "project", "aggregate", "holistic",
                    "join", "partial"),
          PARTITIONED: ("exchange",)}


def measure(query: str, placement: str, rate: float, profile: str | None) -> dict:
    """One capacity on the cluster this process's Spark session is bound to."""
    from benchmarking.measure import capacity

    plan = explain(query, rate=rate, profile=profile, placement=placement)
    found = capacity(plan, rate, warmup=_warmup(plan), measure=MEASURE)
    return {"capacity": found.tuples_per_second, "bound": found.bound,
            "placement": plan.optimization.plan.placement}


def search(workers: int, queries: list[str], placements: list[str], start: dict[str, float],
           profile: str | None, results: dict, out: str) -> None:
    """Every (query, placement)'s maximum on a cluster of ``workers`` workers, one step of each
    in turn; each step in a process of its own bound to the cluster's master. A search starts
    at ``start[query:placement]``, else at ``start[query]``, else where the cost model puts the
    plan's maximum on one machine: pure-Spark's and pure-DuckDB's differ by orders of
    magnitude, and each step moves at most 2x."""
    from benchmarking.cluster import local_cluster

    tried = results.setdefault(str(workers), {})
    with local_cluster(Path(f"/tmp/tandem-scaling-{workers}"), workers=workers, cores=1,
                       memory="3g") as cluster:
        while True:
            steps = []
            for query in queries:
                for placement in placements:
                    runs = tried.setdefault(query, {}).setdefault(placement, [])
                    history = _history(runs)
                    if any("error" in r for r in runs) or fixed_cost(history) is not None:
                        continue
                    rate = next_rate(history) if history else _start(query, placement, start,
                                                                     profile)
                    if rate is not None:
                        steps.append((query, placement, rate))
            if not steps:
                return
            for query, placement, rate in steps:
                print(f"{workers} worker(s): {query} {placement} at {rate:,.0f} tuples/s",
                      flush=True)
                tried[query][placement].append(_child(cluster.url, query, placement, rate,
                                                      profile))
                write(results, out)


def _history(runs: list[dict]) -> list[tuple[float, float, bool]]:
    """A search's measured steps as ``next_rate`` takes them: (rate, capacity, kept up)."""
    return [(r["rate"], r["capacity"], r["capacity"] >= r["rate"]) for r in runs if "capacity" in r]


def fixed_cost(history: list[tuple[float, float, bool]]) -> float | None:
    """A plan's fixed seconds per 1-second micro-batch, when they are 1 or more: it falls behind
    at every rate, and halving the rate again only costs steps. Fitted as seconds per batch
    (rate / capacity) = fixed + per tuple * rate over three or more steps behind, none kept up,
    whose rates span 4x at least: over closer rates the machine's noise sets the line's slope."""
    behind = [(rate, rate / found) for rate, found, kept in history if not kept and found]
    if len(behind) < 3 or any(kept for *_, kept in history):
        return None
    rates = [rate for rate, _ in behind]
    if max(rates) < 4 * min(rates):
        return None
    _, fixed = np.polyfit(*zip(*behind, strict=True), 1)
    return float(fixed) if fixed >= 1 else None


def _start(query: str, placement: str, start: dict[str, float], profile: str | None) -> float:
    found = start.get(f"{query}:{placement}", start.get(query))
    if found is not None:
        return found
    try:
        rate = projected_max(query, placement, load_profile(profile))
    except TandemError:  # the placement cannot run the query: the child says so
        return 50_000.0
    return float(f"{rate:.2g}")


def _child(master: str, query: str, placement: str, rate: float, profile: str | None) -> dict:
    command = [sys.executable, __file__, "--child", query, placement, str(rate),
               "--master", master] + (["--profile", profile] if profile else [])
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"rate": rate, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return {"rate": rate, **json.loads(lines[-1])}


def spread_over(profile: Profile, machines: int) -> Profile:
    """The profile of ``machines`` machines like this one (module docstring)."""
    functions = {engine: {function: {name: value / machines
                                     if function in SPREAD.get(engine, ()) and name != "per_call"
                                     else value for name, value in coefficients.items()}
                          for function, coefficients in by_function.items()}
                 for engine, by_function in profile.functions.items()}
    return replace(profile, functions=functions, parallelism=profile.parallelism * machines)


def projected_max(query: str, placement: str, profile: Profile) -> float:
    """The largest rate whose plan's load (``Objective.load``) is at most 1, to 1 %."""
    from optimizer import load_catalog, optimize
    from runtime import settings

    path = settings.query_path(query)
    catalog = load_catalog(settings.catalog_path(path))

    def load(rate: float) -> float:
        o = optimize(path.read_text(), catalog, profile, rate, placement=placement)
        return o.objective.load(o.plan.cost)

    lo = hi = 1_000.0
    while load(hi) <= 1 and hi < 1e9:
        lo, hi = hi, hi * 2
    while load(lo) > 1 and lo > 1:
        lo, hi = lo / 2, lo
    while hi / lo > 1.01:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if load(mid) <= 1 else (lo, mid)
    return lo


def project(queries: list[str], placements: list[str], profile: Profile) -> dict:
    table = {}
    for query in queries:
        for placement in placements:
            try:
                table.setdefault(query, {})[placement] = {
                    str(n): projected_max(query, placement, spread_over(profile, n))
                    for n in MACHINES}
            except TandemError:  # the placement cannot run the query
                continue
    return table


def write(results: dict, out: str) -> None:
    """bench/results/<out>.json and .md (``--out``)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{out}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lines = ["# Scaling: a Spark standalone cluster of 1 and 2 workers on this machine", "",
             *(f"`{c}`" + ("  " if n < len(results.get("commands", [])) else "")
               for n, c in enumerate(results.get("commands", []), 1)), "",
             f"Written {results.get('written', '')} by `bench/scaling.py`; profile "
             f"`{results.get('profile')}`. Maximum sustainable rate, tuples/s (largest kept up "
             "with; smallest fallen behind at in brackets; none: a fixed cost per 1-second "
             "micro-batch above a second, `fixed_cost`).", ""]
    for workers, by_query in sorted((k, v) for k, v in results.items() if k.isdigit()):
        shown = [p for p in PLACEMENTS if any(p in b for b in by_query.values())]
        lines += [f"## {workers} worker(s)", "", "| query | " + " | ".join(shown) + " |",
                  "|---|" + "---:|" * len(shown)]
        for query, by_placement in by_query.items():
            cells = []
            for placement in shown:
                runs = by_placement.get(placement, [])
                kept = [r["rate"] for r in runs if r.get("capacity", 0) >= r["rate"]]
                behind = [r["rate"] for r in runs if "capacity" in r and r["capacity"] < r["rate"]]
                errors = [r["error"] for r in runs if "error" in r]
                fixed = fixed_cost(_history(runs))
                cell = f"{max(kept, default=0):,.0f}"
                if fixed is not None:
                    cell = f"none: {fixed:.1f} s per batch"
                elif behind:
                    cell += f" ({min(behind):,.0f})"
                cells.append(errors[0][:60] if errors else cell if runs else "")
            lines.append(f"| {query.upper()} | " + " | ".join(cells) + " |")
        lines.append("")
    if "projection" in results:
        lines += ["## Projection to N machines (the cost model; module docstring)", "",
                  f"Profile `{results.get('projection_profile')}`.", "",
                  "| query | placement | " + " | ".join(f"N={n}" for n in MACHINES) + " |",
                  "|---|---|" + "---:|" * len(MACHINES)]
        for query, by_placement in results["projection"].items():
            for placement, by_n in by_placement.items():
                lines.append(f"| {query.upper()} | {placement} | "
                             + " | ".join(f"{by_n[str(n)]:,.0f}" for n in MACHINES) + " |")
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--queries", default="q1,q3,q5")
    parser.add_argument("--placements", default=",".join(PLACEMENTS))
    parser.add_argument("--from", dest="start", action="append", default=[],
                        help="query[:placement]=rate: where a search starts (default: the "
                             "cost model's maximum on one machine)")
    parser.add_argument("--profile")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--out", default="scaling", help="bench/results/<out>.json and .md")
    parser.add_argument("--project", action="store_true", help="the projection alone")
    parser.add_argument("--no-project", action="store_true", help="no projection")
    parser.add_argument("--child", nargs=3, metavar=("QUERY", "PLACEMENT", "RATE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import os
        os.environ["TANDEM_SPARK_MASTER"] = args.master
        query, placement, rate = args.child
        print(json.dumps(measure(query, placement, float(rate), args.profile), default=str))
        return
    queries, placements = args.queries.split(","), args.placements.split(",")
    path = RESULTS / f"{args.out}.json"
    results = json.loads(path.read_text()) if args.resume and path.exists() else {}
    profile = load_profile(args.profile)
    results["written"] = dt.date.today().isoformat()
    results.setdefault("commands", []).append(
        " ".join([".venv/bin/python bench/scaling.py", *sys.argv[1:]]))
    if not args.project:
        results["profile"] = profile.source
        start = {q: float(r) for q, r in (s.split("=") for s in args.start)}
        for workers in map(int, args.workers.split(",")):
            search(workers, queries, placements, start, args.profile, results, args.out)
    if args.no_project:  # an uncalibrated profile's projection says nothing
        results.pop("projection", None)
    else:
        results["projection"] = project(queries, placements, profile)
        results["projection_profile"] = profile.source
    write(results, args.out)


if __name__ == "__main__":
    main()

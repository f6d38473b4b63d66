"""Flink SQL as a peer: the same queries over the same events, exact against Tandem's reference
evaluator, and its capacity measured the way Tandem's is.

    make peers                                   # PyFlink 2.3 in .venv-flink (about 850 MB)
    .venv/bin/python bench/peers/flink.py [q1 ...] [--rates q1=500 q5=40000 ...]

Flink reads headerless DEBS CSV files (its distribution has no Parquet format), one file per
reader at parallelism 2, each in event-time order: a reader without a file, or files read out
of order, silently loses windows. The files split the plugs between them, so both readers cover
the whole event time.

Capacity, as for Tandem: tuples over wall seconds with start-up and window fill taken out,
here as the difference between two runs over the same stream, ``FILL`` + ``SHORT`` and
``FILL`` + ``LONG`` event seconds: (tuples_long - tuples_short) / (seconds_long -
seconds_short). A rate is sustained when the capacity at it is at least the rate.

Tandem's optimiser's plan is measured at the same rates, each right after Flink's (its capacity
over FILL seconds of filled windows and SHORT measured seconds, ``tandem.measure``). Writes
bench/results/flink.json and .md, and ``peers.flink.<query>`` in bench/results/bench.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from rowstream.eventtime import EPOCH
from tandem import measure, reference
from tandem.explain import explain
from tandem.verify import compare
from tandem.workload import SmartPlugs, debs_csv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PYTHON = ROOT / ".venv-flink" / "bin" / "python"
RESULTS = ROOT / "bench" / "results"
QUERIES = ["q1", "q2", "q3", "q4", "q5", "q6"]  # bench/peers/flink/<query>.sql
HEAP = "4g"  # Flink's JVM heap: Spark's driver gets as much (rowstream/session.py)
READERS = 2  # Flink's parallelism: one file per reader
FILL, SHORT, LONG = 300.0, 20.0, 80.0  # event seconds: the 5-minute windows fill, then measured
PART = 30.0  # event seconds generated at a time
# Exactness: 7 minutes at 3 tuples/s from 6 plugs in 2 houses, as the tests' reference checks.
SMALL = SmartPlugs(rate=3, houses=2, households_per_house=2, plugs=6)


class FlinkFailed(RuntimeError):
    pass


def write_input(directory: Path, plugs: SmartPlugs, duration: float) -> int:
    """The stream's first ``duration`` seconds as one headerless CSV file per reader; the
    number of readings."""
    directory.mkdir(parents=True, exist_ok=True)
    files = [open(directory / f"plugs-{r}.csv", "wb") for r in range(READERS)]
    count = 0
    try:
        for rows in plugs.batches(duration, PART):
            frame = debs_csv(rows)
            reader = (pl.from_arrow(rows.column("id")) // 2) % READERS  # plugs alternate
            for r, out in enumerate(files):
                frame.filter(reader == r).write_csv(out, include_header=False)
            count += rows.num_rows
    finally:
        for out in files:
            out.close()
    return count


def run_job(query: str, directory: Path, output: str, log: Path) -> dict:
    """One Flink job (``flink_sql.py``): its wall seconds and the rows it wrote."""
    if not PYTHON.exists():
        raise FlinkFailed(f"no PyFlink at {PYTHON}: run `make peers` first")
    with open(log, "a") as err:
        done = subprocess.run([str(PYTHON), str(HERE / "flink_sql.py"),
                               str(HERE / "flink" / f"{query}.sql"), str(directory), output,
                               "--parallelism", str(READERS)],
                              stdout=subprocess.PIPE, stderr=err, text=True,
                              env=os.environ | {"JVM_ARGS": f"-Xmx{HEAP}"})
    if done.returncode != 0:
        raise FlinkFailed(f"Flink's {query} job failed (exit {done.returncode}); its log: {log}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def exact(query: str, log: Path) -> dict:
    """Flink's rows against the reference's on a small stream, over the window_ends Tandem's
    semantics define (Flink also emits the windows after the last reading)."""
    stream = pl.from_arrow(SMALL.between(0, 420))
    plan = explain(query).optimization.logical
    want = reference.Evaluator({"plugs": stream}).result(plan.root)
    first, last = reference.window_ends({"plugs": stream}, plan.root.slide)
    with tempfile.TemporaryDirectory(prefix="tandem-flink-") as tmp:
        write_input(Path(tmp) / "in", SMALL, 420)
        out = Path(tmp) / "rows.jsonl"
        run_job(query, Path(tmp) / "in", str(out), log)
        got = pl.read_ndjson(out) if out.stat().st_size else pl.DataFrame()
    got = got.with_columns(pl.col("window_end").str.to_datetime(time_unit="us"))
    got = got.filter(pl.col("window_end").is_between(
        EPOCH + dt.timedelta(microseconds=first), EPOCH + dt.timedelta(microseconds=last)))
    same = compare({}, got.select(want.columns).cast(want.schema), want).status == "same"
    return {"rows": want.height, "flink_rows": got.height, "exact": same}


def capacity(query: str, rate: float, log: Path) -> dict:
    """Flink's capacity at ``rate`` (module docstring)."""
    runs = []
    for measured in (SHORT, LONG):
        with tempfile.TemporaryDirectory(prefix="tandem-flink-") as tmp:
            tuples = write_input(Path(tmp) / "in", SmartPlugs(rate=rate), FILL + measured)
            runs.append((tuples, run_job(query, Path(tmp) / "in", "-", log)["seconds"]))
    (short_tuples, short_s), (long_tuples, long_s) = runs
    tuples_per_second = (long_tuples - short_tuples) / max(long_s - short_s, 1e-9)
    return {"rate": rate, "tuples_per_second": tuples_per_second,
            "runs": [{"tuples": t, "seconds": s} for t, s in runs],
            "sustained": tuples_per_second >= rate}


def tandem_capacity(query: str, rate: float) -> dict:
    """The optimiser's plan at ``rate``, measured as ``tandem bench`` measures it (Parquet files
    landed before the clock starts, windows filled by FILL seconds)."""
    found = measure.capacity(explain(query, rate=rate), rate, warmup=FILL, measure=SHORT)
    return {"rate": rate, "tuples_per_second": found.tuples_per_second,
            "sustained": found.tuples_per_second >= rate and not found.bound}


def write_report(report: dict) -> None:
    (RESULTS / "flink.json").write_text(json.dumps(report, indent=2) + "\n")
    bench = RESULTS / "bench.json"
    merged = json.loads(bench.read_text()) if bench.exists() else {}
    merged.setdefault("peers", {})["flink"] = report
    bench.write_text(json.dumps(merged, indent=1) + "\n")  # as tandem bench writes it
    lines = ["# Flink SQL beside Tandem", "",
             "`.venv/bin/python bench/peers/flink.py` (PyFlink 2.3, local, parallelism 2, "
             f"{HEAP} heap, headerless CSV, one file per reader; Tandem: the optimiser's plan, "
             "Parquet files landed, 1-s micro-batches). Capacity in tuples/s at each rate, "
             "both systems measured back to back; a system keeps up with a rate when its "
             "capacity there is at least the rate. At a rate both keep up with, capacity "
             "reflects each system's fixed costs (Tandem's per micro-batch), not its limit: "
             "compare the highest rates each keeps up with.", "",
             "| query | Flink's rows = reference's | rate | Flink | Tandem |",
             "|---|---|---|---|---|"]
    for query, r in report.items():
        e = r["exactness"]
        exact_text = f"{'yes' if e['exact'] else 'NO'} ({e['flink_rows']} of {e['rows']} rows)"
        for f, t in zip(r["flink"], r["tandem"], strict=True):
            lines.append(f"| {query} | {exact_text} | {f['rate']:,.0f} | {_kept(f)} | "
                         f"{_kept(t)} |")
        if not r["flink"]:
            lines.append(f"| {query} | {exact_text} | – | – | – |")
    (RESULTS / "flink.md").write_text("\n".join(lines) + "\n")


def _kept(m: dict) -> str:
    return f"{m['tuples_per_second']:,.0f} ({'kept up' if m['sustained'] else 'fell behind'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=QUERIES)
    parser.add_argument("--rates", nargs="*", default=["q1=500", "q5=40000"],
                        help="query=rate,rate,... (tuples/s); other queries: exactness only")
    args = parser.parse_args()
    rates = {q: [float(r) for r in rs.split(",")]
             for q, rs in (item.split("=") for item in args.rates)}
    RESULTS.mkdir(exist_ok=True)
    log = RESULTS / "flink.log"
    log.write_text("")
    report = {}
    try:
        for query in args.queries:
            report[query] = {"exactness": exact(query, log), "flink": [], "tandem": []}
            print(query, "exactness", report[query]["exactness"], flush=True)
            for rate in rates.get(query, []):  # interleaved: Flink, then Tandem, per rate
                report[query]["flink"].append(capacity(query, rate, log))
                report[query]["tandem"].append(tandem_capacity(query, rate))
                print(query, rate, "Flink", report[query]["flink"][-1]["tuples_per_second"],
                      "Tandem", report[query]["tandem"][-1]["tuples_per_second"], flush=True)
    except FlinkFailed as err:
        sys.exit(str(err))
    write_report(report)


if __name__ == "__main__":
    main()

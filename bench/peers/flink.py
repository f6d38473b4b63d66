"""Flink SQL as a peer: the same queries over the same events, exact against Tandem's reference
evaluator, and its capacity measured the way Tandem's is.

    make peers                                   # PyFlink 2.3 in .venv-flink (about 850 MB)
    .venv/bin/python bench/peers/flink.py [q1 q1-expert ...] [--from q5=1800000,1000000 ...]
        [--systems flink,tandem,tandem-parquet] [--resume] [--profile P] [--files-per-batch N]

Flink reads headerless DEBS CSV files (its distribution has no Parquet format), one file per
reader at parallelism 2, each in event-time order: a reader without a file, or files read out
of order, silently loses windows. The files split the plugs between them, so both readers cover
the whole event time. ``<query>-expert.sql`` is the query as an expert writes it in Flink SQL;
each query's ratios are over the best of Flink's formulations. Flink checkpoints its state every
second, exactly once, to files (``flink_sql.py --checkpoints``), as Tandem commits every 1-s
micro-batch; both JVMs get ``HEAP``.

Capacity, as for Tandem: tuples over wall seconds with start-up and window fill taken out,
here as the difference between two runs over the same stream, ``FILL`` + ``SHORT`` and
``FILL`` + ``LONG`` event seconds: (tuples_long - tuples_short) / (seconds_long -
seconds_short). A rate is sustained when the capacity at it is at least the rate. Both runs
fill the windows and flush them at the end of the input, so the difference holds neither: it is
the capacity with the windows full, as Tandem's is. Each run's input size is recorded beside
the memory the machine had available before it: input larger than that is read from disk.

Tandem's optimiser's plan at each rate is measured as ``tandem bench`` measures it (its
capacity over FILL seconds of filled windows and SHORT measured seconds, ``benchmarking.measure``),
twice: from the same CSV rows as Flink ("tandem") and from Parquet files ("tandem-parquet"),
each read by the gateway ``tandem run`` picks for the plan (by reference where every operator
over the stream runs in DuckDB).
For the formulations given ``--from``, each system's maximum sustainable rate is searched to
within 10 % (``benchmarking.bench.next_rate``), one step of each (formulation, system) in turn,
so that the ratios of a run, Flink's expert formulations against Tandem included, are measured
in one run. Writes bench/results/flink.json and .md, and ``peers.flink.<query>`` in
bench/results/bench.json, after every step; ``--resume`` goes on from them (a search at high
rates outlasts a session).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from benchmarking import measure, reference
from benchmarking.bench import bracket_text, next_rate, rates_bracket
from benchmarking.verify import compare
from optimizer.optimizer import placement_spec
from rowstream.eventtime import EPOCH
from runtime.explain import explain
from runtime.spec import FILES_PER_BATCH
from workload.smart_plugs import SmartPlugs, debs_csv

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PYTHON = ROOT / ".venv-flink" / "bin" / "python"
RESULTS = ROOT / "bench" / "results"
QUERIES = sorted(p.stem for p in (HERE / "flink").glob("*.sql"))  # q1, q1-expert, ...
HEAP = "4g"  # Flink's JVM heap: Spark's driver gets as much (rowstream/session.py)
READERS = 2  # Flink's parallelism: one file per reader
FILL, SHORT, LONG = 300.0, 20.0, 80.0  # event seconds: the 5-minute windows fill, then measured
PART = 30.0  # event seconds generated at a time
STARTUP = 60.0  # wall seconds a job may take beyond its stream's event time (JVM, job graph)
SYSTEMS = {"flink": "Flink", "tandem": "Tandem (CSV)", "tandem-parquet": "Tandem (Parquet)"}
TANDEM = {"tandem": "csv", "tandem-parquet": "parquet"}  # the format of the files landed
# Issue 35: Tandem's maximum rate over the best of Flink's, CSV against CSV and best against best.
TARGETS = {"q1": 10, "q3": 3, "q5": 3}
# Exactness: 7 minutes at 3 tuples/s from 6 plugs in 2 houses, as the tests' reference checks.
SMALL = SmartPlugs(rate=3, houses=2, households_per_house=2, plugs=6)


class FlinkFailed(RuntimeError):
    pass


class JobFailed(FlinkFailed):
    """A Flink job that failed, or that ran past its time limit (and was killed). In a capacity
    measurement both mean that Flink cannot keep up with the rate: the query gave the
    reference's rows on a small stream, and past its limit a job took longer than its stream's
    event time, so it fell behind in the window fill already (at high rates Q1's window join
    thrashes in GC for many times that long)."""


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


def run_job(query: str, directory: Path, output: str, log: Path,
            limit: float | None = None) -> dict:
    """One Flink job (``flink_sql.py``), checkpointing beside ``directory``: its wall seconds
    and the rows it wrote. A job still running after ``limit`` wall seconds is killed
    (``JobFailed``)."""
    if not PYTHON.exists():
        raise FlinkFailed(f"no PyFlink at {PYTHON}: run `make peers` first")
    with open(log, "a") as err:
        # A session of its own: PyFlink's JVM is the job's child, and a kill must reach it.
        job = subprocess.Popen([str(PYTHON), str(HERE / "flink_sql.py"),
                                str(HERE / "flink" / f"{query}.sql"), str(directory), output,
                                "--parallelism", str(READERS),
                                "--checkpoints", str(directory.parent / "checkpoints")],
                               stdout=subprocess.PIPE, stderr=err, text=True,
                               start_new_session=True,
                               env=os.environ | {"JVM_ARGS": f"-Xmx{HEAP}"})
        try:
            out, _ = job.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            raise JobFailed(f"Flink's {query} job ran past {limit:.0f} s") from None
    if job.returncode != 0:
        raise JobFailed(f"Flink's {query} job failed (exit {job.returncode}); its log: {log}")
    return json.loads(out.strip().splitlines()[-1])


def tandem_query(query: str) -> str:
    """The query a Flink formulation computes: ``q1-expert`` (bench/peers/flink/q1-expert.sql)
    is Q1 as an expert writes it in Flink SQL."""
    return query.split("-")[0]


def exact(query: str, log: Path) -> dict:
    """Flink's rows against the reference's on a small stream, over the window_ends Tandem's
    semantics define (Flink also emits the windows after the last reading)."""
    stream = pl.from_arrow(SMALL.between(0, 420))
    plan = explain(tandem_query(query)).optimization.logical
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
    """Flink's capacity at ``rate`` (module docstring). A job that fails, or runs longer than its
    stream's event time plus STARTUP, fell behind (``JobFailed``): its capacity is then 0 and
    the reason kept."""
    runs = []
    try:
        for measured in (SHORT, LONG):
            with tempfile.TemporaryDirectory(prefix="tandem-flink-") as tmp:
                tuples = write_input(Path(tmp) / "in", SmartPlugs(rate=rate), FILL + measured)
                size = sum(f.stat().st_size for f in (Path(tmp) / "in").iterdir())
                available = memory_available()
                job = run_job(query, Path(tmp) / "in", "-", log,
                              limit=FILL + measured + STARTUP)
                runs.append({"tuples": tuples, "seconds": job["seconds"], "input_bytes": size,
                             "memory_available": available})
    except JobFailed as err:
        return {"rate": rate, "tuples_per_second": 0.0, "sustained": False, "error": str(err),
                "runs": runs}
    short, long = runs
    tuples_per_second = ((long["tuples"] - short["tuples"])
                         / max(long["seconds"] - short["seconds"], 1e-9))
    return {"rate": rate, "tuples_per_second": tuples_per_second, "runs": runs,
            "sustained": tuples_per_second >= rate}


def memory_available() -> int:
    """Bytes the kernel could give a process now, page cache it would drop included."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def tandem_capacity(query: str, rate: float, profile: str | None, landed: str,
                    files_per_batch: int) -> dict:
    """The optimiser's plan at ``rate``, measured as ``tandem bench`` measures it (windows filled
    by FILL seconds, files of format ``landed`` in the landing directory before the clock
    starts), planned and read as ``tandem run`` plans and reads a run over those files, up to
    ``files_per_batch`` a micro-batch by reference."""
    plan = explain(query, rate=rate, profile=profile, file_format=landed,
                   files_per_batch=files_per_batch)
    found = measure.capacity(plan, rate, warmup=FILL, measure=SHORT, landed=landed,
                             files_per_batch=files_per_batch)
    return {"rate": rate, "tuples_per_second": found.tuples_per_second,
            "placement": placement_spec(plan.optimization.plan.placement),
            "files_per_batch": files_per_batch,
            "sustained": found.tuples_per_second >= rate and not found.bound}


def search(starts: dict[tuple[str, str], float], report: dict, log: Path,
           profile: str | None, on_step, files_per_batch: int = FILES_PER_BATCH) -> None:
    """Narrow the maximum sustainable rate of each (formulation, system) in ``starts``
    (``benchmarking.bench.next_rate``), one step of each in turn, so that their ratios are
    measured in one run (Flink's expert formulation beside Tandem's plan of the same query
    included); one that has measurements in ``report`` (a run resumed) goes on from them."""
    def measure_at(query: str, system: str, rate: float) -> dict:
        if system == "flink":
            return capacity(query, rate, log)
        return tandem_capacity(tandem_query(query), rate, profile, TANDEM[system],
                               files_per_batch)

    def following(query: str, system: str) -> float | None:
        return next_rate([(m["rate"], m["tuples_per_second"], m["sustained"])
                          for m in report[query][system]])

    rates = {key: following(*key) if report[key[0]][key[1]] else start
             for key, start in starts.items()}
    while any(rate is not None for rate in rates.values()):
        for (query, system), rate in rates.items():
            if rate is None:
                continue
            at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            report[query][system].append(measure_at(query, system, rate) | {"at": at})
            rates[query, system] = following(query, system)
            on_step(query, system)


def with_figures(entry: dict) -> dict:
    """A formulation's measurements with, per system, the largest rate it kept up with and
    the smallest above it where it fell behind; nothing for one only checked for exactness."""
    tried = {system: entry[system] for system in SYSTEMS if entry.get(system)}
    if not tried:
        return entry
    return entry | {"max_rate": {system: rates_bracket([(m["rate"], m["sustained"])
                                                        for m in found])
                                 for system, found in tried.items()}}


def comparison(report: dict) -> dict:
    """Per query, its formulations together: the best of Flink's largest rates and the
    formulation that reached it, Tandem's per format, and Tandem's over the best of Flink's,
    CSV against CSV (Flink reads only CSV here) and best against best."""
    out: dict[str, dict] = {}
    for name, entry in report.items():
        query = out.setdefault(tandem_query(name), {"exact": {}, "max_rate": None,
                                                    "formulation": None, "tandem": {},
                                                    "measured": None})
        query["exact"][name] = entry["exactness"]["exact"]
        days = [m["at"][:10] for system in SYSTEMS for m in entry.get(system, []) if m.get("at")]
        query["measured"] = max([query["measured"] or "", *days]) or None
        rates = entry.get("max_rate", {})
        if "flink" in rates and rates["flink"][0] > (query["max_rate"] or [0])[0]:
            query["max_rate"], query["formulation"] = rates["flink"], name
        query["tandem"] |= {system: rates[system] for system in TANDEM if system in rates}
    for query in out.values():
        flink, tandem = (query["max_rate"] or [0])[0], query["tandem"]
        best = max((r[0] for r in tandem.values()), default=0)
        csv = tandem.get("tandem", [0])[0]
        query["ratio"] = {"csv": csv / flink if flink and csv else None,
                          "best": best / flink if flink and best else None}
    return out


def write_report(report: dict) -> None:
    report = {query: with_figures(entry) for query, entry in report.items()}
    compared = comparison(report)
    (RESULTS / "flink.json").write_text(json.dumps(report, indent=2) + "\n")
    bench = RESULTS / "bench.json"
    merged = json.loads(bench.read_text()) if bench.exists() else {}
    # A run's queries replace their figures; the others keep those of the run that measured them.
    merged.setdefault("peers", {}).setdefault("flink", {}).update(compared)
    bench.write_text(json.dumps(merged, indent=1) + "\n")  # as tandem bench writes it
    # Every query searched so far, this run's and earlier runs' (bench/results/<day>/flink*.md).
    compared = merged["peers"]["flink"]
    lines = ["# Flink SQL beside Tandem", "",
             "`.venv/bin/python bench/peers/flink.py` (PyFlink 2.3, local, parallelism 2, "
             f"{HEAP} heap, checkpoints every second to files, headerless CSV, one file per "
             "reader; Tandem: the optimiser's plan at each rate, 1-s micro-batches (by reference "
             "one 1-s file each, unless the plan column says more), from the same "
             "DEBS CSV rows and from Parquet files, each read by the gateway `tandem run` picks). "
             "A system keeps up with a rate when its capacity there (tuples over wall seconds "
             "with the windows full: start-up, window fill and flush taken out) is at least the "
             f"rate; a Flink job that runs longer than its stream's event time plus {STARTUP:.0f} "
             "s fell behind in the fill already. Each maximum sustainable rate is searched to "
             "within 10 %, one step of each system in turn: the largest rate kept up with, the "
             "smallest rate fallen behind at in brackets. Flink's figure is the best of its "
             "formulations (`bench/peers/flink/<query>[-expert].sql`); the ratios are Tandem's "
             "largest rates over it, from CSV (like for like) and the better of CSV and Parquet. "
             "Only steps of one run interleave: the summary holds every query searched so far, "
             "each as of the day of its search's last step (that run's steps are in "
             "`bench/results/<day>/flink*.md`, this run's in the last table).", "",
             "| query | Flink's rows = reference's | Flink max rate (formulation) | "
             + " | ".join(f"{SYSTEMS[system]} max rate" for system in TANDEM)
             + " | CSV / Flink | best / Flink | target | searched |",
             "|---|---|---:|" + "---:|" * (len(TANDEM) + 3) + "---|"]
    for query, c in sorted(compared.items()):
        row = [query, ", ".join(f"{name}: {'yes' if same else 'NO'}"
                                for name, same in c["exact"].items()),
               f"{bracket_text(c['max_rate'])} ({c['formulation']})" if c["max_rate"] else "–"]
        row += [bracket_text(c["tandem"].get(system)) for system in TANDEM]
        row += [f"{x:,.1f}x" if (x := c["ratio"][kind]) else "–" for kind in ("csv", "best")]
        row.append(f"{TARGETS[query]}x" if query in TARGETS else "–")
        row.append(c.get("measured") or "–")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Every measurement, in the order taken (Flink's: each run's tuples, wall "
              "seconds, input size and the memory available before it):", "",
              "| query | system | rate | capacity | kept up | plan or runs | at (UTC) |",
              "|---|---|---:|---:|---|---|---|"]
    steps = [(m.get("at") or "", query, system, m) for query, r in report.items()
             for system in SYSTEMS for m in r.get(system, [])]
    for at, query, system, m in sorted(steps, key=lambda step: step[0]):
        if "placement" in m:  # Tandem's
            batched = m.get("files_per_batch", 1)
            how = m["placement"] + (f"; up to {batched} files a batch" if batched > 1 else "")
        else:
            how = m.get("error") or ", ".join(
                f"{run['tuples']:,} tuples in {run['seconds']:.0f} s"
                + (f" ({run['input_bytes'] / 2**30:.1f} of "
                   f"{run['memory_available'] / 2**30:.1f} GiB)" if "input_bytes" in run else "")
                for run in m["runs"])
        lines.append(f"| {query} | {SYSTEMS[system]} | {m['rate']:,.0f} | "
                     f"{m['tuples_per_second']:,.0f} | {'yes' if m['sustained'] else 'no'} | "
                     f"{how} | {at or '–'} |")
    (RESULTS / "flink.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=QUERIES)
    parser.add_argument("--from", dest="starts", nargs="*",
                        default=["q5=1800000,1000000,2000000", "q3=400000,1000000,2000000",
                                 "q3-expert=400000", "q1-expert=15000", "q1=800,1000000,1000000"],
                        help="query=flink[,tandem[,tandem-parquet]]: the rates "
                             "(tuples/s) where each system's search starts, '-' for none; the "
                             "searches of a run take a step each in turn; other queries: "
                             "exactness only")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="the systems whose maximum rates to search: " + ", ".join(SYSTEMS))
    parser.add_argument("--resume", action="store_true",
                        help="go on from bench/results/flink.json's measurements (its queries' "
                             "exactness is not checked again)")
    parser.add_argument("--profile", help="Tandem's calibration profile (default: the shipped "
                                          "one)")
    parser.add_argument("--files-per-batch", type=int, default=FILES_PER_BATCH,
                        help="the most files a Tandem micro-batch by reference takes (a resumed "
                             "search goes on with the number it began with)")
    args = parser.parse_args()
    systems = args.systems.split(",")
    starts = {(query, system): float(rate) for query, rates in
              (item.split("=") for item in args.starts) if query in args.queries
              for system, rate in zip(SYSTEMS, rates.split(","), strict=False)
              if rate != "-" and system in systems}
    RESULTS.mkdir(exist_ok=True)
    log = RESULTS / "flink.log"
    log.write_text("")
    earlier = RESULTS / "flink.json"
    report = json.loads(earlier.read_text()) if args.resume and earlier.exists() else {}
    for entry in report.values():  # an earlier run may not have measured every system
        for system in SYSTEMS:
            entry.setdefault(system, [])

    def step(query: str, system: str) -> None:
        m = report[query][system][-1]
        print(f"{query} {system} at {m['rate']:,.0f}: {m['tuples_per_second']:,.0f} tuples/s"
              f" ({'kept up' if m['sustained'] else 'fell behind'})", flush=True)
        write_report(report)  # after every step: a long run that stops keeps what it measured

    try:
        for query in args.queries:
            if query not in report:
                report[query] = {"exactness": exact(query, log)} | {s: [] for s in SYSTEMS}
                print(query, "exactness", report[query]["exactness"], flush=True)
                write_report(report)
        search(starts, report, log, args.profile, step, args.files_per_batch)
    except FlinkFailed as err:
        sys.exit(str(err))


if __name__ == "__main__":
    main()

"""The reliability report: runs the tests that feed Tandem bad input, kill it, fault it, disorder
its stream and try to escape its console, collects what each measured (``TANDEM_RELIABILITY_LOG``,
tests/conftest.py) and writes bench/results/reliability.md and reliability.json.

    .venv/bin/python bench/reliability.py          # about 40 minutes on 2 cores
    .venv/bin/python bench/reliability.py --from-log LOG --exit-code N
                    # only sum a log that a test run with TANDEM_RELIABILITY_LOG=LOG wrote

A figure comes from a test that also asserts it (0 lost, 0 duplicated, exact): the report counts
what the tests measured, including any case that failed."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TESTS = {  # what each part of the report runs
    "bad_input": "tests/test_bad_input.py tests/test_expectations.py",
    "kill_point": "tests/test_crash.py",
    "fault": "tests/test_faults.py",
    "disorder": "tests/test_disorder.py",
    "escape": "tests/test_inspect.py",
    "query": "tests/test_fuzz_queries.py",
}


def pytest_command(kind: str) -> str:
    return f".venv/bin/python -m pytest {TESTS[kind]}"


def collect(log: Path) -> dict[str, list[dict]]:
    records: dict[str, list[dict]] = {kind: [] for kind in TESTS}
    for line in log.read_text().splitlines() if log.exists() else []:
        record = json.loads(line)
        records.setdefault(record["kind"], []).append(record)
    return records


def summarise(records: dict[str, list[dict]], outcome: int) -> dict:
    counted = [r for kind in ("bad_input", "kill_point", "fault", "disorder")
               for r in records[kind]]
    bad, disorder = records["bad_input"], records["disorder"]
    return {
        "rows_read": sum(r["rows_read"] for r in bad) + sum(r["readings"] for r in disorder),
        "rows_quarantined": (sum(r["rows_quarantined"] for r in bad)
                             + sum(r["late"] for r in disorder)),
        "rows_lost": sum(r["rows_lost"] for r in counted),
        "rows_duplicated": sum(r["rows_duplicated"] for r in counted),
        "kill_points": sum(len(r["point"].split("+")) for r in records["kill_point"]),
        "fault_tests": len(records["fault"]),
        "disorder_cases": len(disorder),
        "disorder_exact": sum(bool(r["exact"]) for r in disorder),
        "escapes_tried": len(records["escape"]),
        "escapes_refused": sum(bool(r["refused"]) for r in records["escape"]),
        "bad_input_runs": len(bad),
        "bad_input_classes": sorted({c for r in bad for c in r["classes"]}),
        "queries_fuzzed": len(records["query"]),
        "queries_outcomes": dict(Counter(r["outcome"] for r in records["query"])),
        "pytest_exit_code": outcome,
    }


def report(summary: dict, records: dict[str, list[dict]], produced: str) -> str:
    def rows(kind: str, columns: list[str]) -> str:
        head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
        return head + "\n".join("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |"
                                for r in records[kind])

    lags: dict[float, list[float]] = {}
    for r in records["disorder"]:
        lags.setdefault(r["lateness"], []).append(r["output_lag_seconds"])
    lag = "; ".join(f"with L = {k:g} s, {statistics.median(v):.1f} s in the median case "
                    f"({sum(x > k + 2 for x in v)} of {len(v)} runs more)"
                    for k, v in sorted(lags.items()))
    s = summary
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(s["queries_outcomes"].items()))
    return f"""# Reliability

{produced}, which ran the tests below with `TANDEM_RELIABILITY_LOG` set; `bench/reliability.py`
counts what they measured (pytest exit code {s['pytest_exit_code']}). Raw figures:
`reliability.json`.

| | |
|---|---|
| rows read | {s['rows_read']:,} |
| rows quarantined, each with its rule and reason | {s['rows_quarantined']:,} |
| rows lost | {s['rows_lost']:,} |
| rows duplicated | {s['rows_duplicated']:,} |
| kill points (SIGKILL, then `--resume`) | {s['kill_points']} |
| other faults | {s['fault_tests']} |
| disorder cases exact | {s['disorder_exact']} of {s['disorder_cases']} |
| console escapes refused | {s['escapes_refused']} of {s['escapes_tried']} |
| mutated queries: explained or refused in one line | {s['queries_fuzzed']} ({outcomes}) |

Rows lost count result rows of the reference (or of an uninterrupted run) missing from a run's
results, and quarantined lines missing from its quarantine; rows duplicated count result rows
whose key appears twice.

## Bad input

Every class planted in one landing directory of CSV files, and the Parquet classes in one of
Parquet files read by the native gateway (`tests/bad_input.py`): {', '.join(s['bad_input_classes'])}.
Good rows + quarantined rows = rows read in every run, and the results equal the reference over
the good rows. Great Expectations and the gateway's vectorised checks flag the same rows
(`tests/test_expectations.py`). Reproduce: `{pytest_command('bad_input')}`

{rows('bad_input', ['query', 'placement', 'gateway', 'rows_read', 'rows_processed', 'rows_quarantined', 'result_rows', 'rows_lost', 'rows_duplicated'])}

## Kill points

`tandem run` and `tandem microbatch` killed with SIGKILL (the whole process group, Spark's JVM
too) at the crash points of `tests/crash/points.py`, one after another in one run (each resume
killed at the next), resumed with `--resume` to the end, compared with the reference evaluator.
Reproduce: `{pytest_command('kill_point')}`

{rows('kill_point', ['command', 'point', 'result_rows', 'rows_quarantined', 'rows_lost', 'rows_duplicated'])}

## Other faults

Each ends the run with a one-line error; the run resumed after the cause is removed is compared
with the reference. Reproduce: `{pytest_command('fault')}` (the full disk needs root: it mounts a
64 MB tmpfs).

{rows('fault', ['fault', 'result_rows', 'rows_lost', 'rows_duplicated'])}

## Disorder

Q1, Q3, Q5 and Q6 under 8 placements each over a disordered landing directory of CSV files
(`tandem generate --disorder`: about half the readings out of order, a tail up to 4.5 s), and
under pure-DuckDB and the optimiser's plan over the same stream as Parquet files, read by Spark's
own Parquet source (gateway `native`, `rowstream/native.py`), with
L above the largest delay (nothing late, results = reference) and below it (late readings
quarantined, results = reference over the rest). Reproduce: `{pytest_command('disorder')}`

What L costs: a window_end is evaluated once the watermark (latest reading − L) passes it, so
results trail the stream by L plus up to one slide, and a micro-batch. Measured at the end of
each run, the last evaluated window_end trails the latest reading {lag or 'n/a'}. The runs that
trail by more are those where Spark joins rows with the windows that hold them (pure-Spark Q1):
Spark delays such a join's output watermark by the window size, so its last windows are
emitted only once later files move event time on (`rowstream/landing_source.py`).

{rows('disorder', ['query', 'placement', 'gateway', 'lateness', 'readings', 'late', 'exact', 'rows_lost', 'rows_duplicated', 'output_lag_seconds'])}

## Console escapes

Statements that write, read files or change settings, sent to the Tandem page's read-only
console. Reproduce: `{pytest_command('escape')}`

{rows('escape', ['sql', 'refused'])}

## Queries users write

{s['queries_fuzzed']} hypothesis cases of Q1–Q6 with tokens dropped, swapped, duplicated or
garbage inserted: each is explained or refused with a one-line error. Reproduce:
`{pytest_command('query')}`
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-log", type=Path, help="sum this log instead of running tests")
    parser.add_argument("--exit-code", type=int, default=0, help="the exit code of that run")
    args = parser.parse_args()
    if args.from_log:
        records, outcome = collect(args.from_log), args.exit_code
        produced = ("Summed by `bench/reliability.py --from-log` from a run of the whole suite "
                    "(`TANDEM_RELIABILITY_LOG=LOG .venv/bin/python -m pytest -q`)")
    else:
        with tempfile.TemporaryDirectory() as scratch:
            log = Path(scratch) / "reliability.jsonl"
            tests = " ".join(TESTS.values()).split()
            outcome = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", *tests], cwd=ROOT,
                env={**os.environ, "TANDEM_RELIABILITY_LOG": str(log)}).returncode
            records = collect(log)
        produced = "Produced by `.venv/bin/python bench/reliability.py`"
    summary = summarise(records, outcome)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reliability.json").write_text(
        json.dumps({**summary, "records": records}, indent=2, default=str) + "\n")
    (RESULTS / "reliability.md").write_text(report(summary, records, produced))
    print(json.dumps(summary, indent=2))
    sys.exit(outcome)


if __name__ == "__main__":
    main()

"""What the tests' JVM options (tests/conftest.py) save on a short `tandem run`: the CPU and
wall time of the command's whole process tree (the CLI, Spark's JVM, its Python workers) with
Spark's default JIT, with C1 alone, with the archive of Spark's classes (AppCDS, `make test`
writes it), with both, and with both and the serial collector.

    .venv/bin/python bench/jvm_options.py [--repeats 2] [--variants NAME ...]

The run is Q5's short-window variant (20-second windows) over 80 s of the generator's stream in
eight micro-batches, as the crash tests kill them. CPU time is read from a cgroup made for each
command (run as root): the JVM outlives its parent's wait, so the parent's rusage misses it.
The variants are interleaved, each repeat in turn. Writes bench/results/jvm_options.json."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the tests' options are measured, not copied
from tests.conftest import ARCHIVE, C1, short  # noqa: E402

RESULTS = ROOT / "bench" / "results"
# Not among the tests' options: 15 % less CPU on one short run, but no gain over the crash
# and migration modules, measured in two interleaved pairs (bench/results/test_suite.md).
SERIAL_GC = "-XX:+UseSerialGC"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1; v2 keeps cpu.stat at the root
VARIANTS = {
    "default": [],
    "C1": [C1],
    "archive": [f"-XX:SharedArchiveFile={ARCHIVE}"],
    "C1 + archive": [C1, f"-XX:SharedArchiveFile={ARCHIVE}"],
    "C1 + archive + serial GC": [C1, f"-XX:SharedArchiveFile={ARCHIVE}", SERIAL_GC],
}


def cgroup(name: str) -> tuple[Path, Path]:
    """A new cgroup and the file of its CPU time, in ns (v1) or µs (v2, usage_usec)."""
    if CPUACCT.is_dir():
        group = CPUACCT / name
        group.mkdir()
        return group, group / "cpuacct.usage"
    group = Path("/sys/fs/cgroup") / name
    group.mkdir()
    return group, group / "cpu.stat"


def cpu_seconds(usage: Path) -> float:
    text = usage.read_text()
    if usage.name == "cpu.stat":
        return int(re.search(r"usage_usec (\d+)", text)[1]) / 1e6
    return int(text) / 1e9


def measured(query: Path, options: list[str], n: int) -> dict:
    """Wall and CPU seconds of one run, the ``n``-th."""
    with tempfile.TemporaryDirectory() as directory:
        group, usage = cgroup(f"tandem-jvm-options-{os.getpid()}-{n}")
        command = (f"echo $$ > {group}/cgroup.procs && exec {sys.executable} -m tandem.cli run "
                   f"{query} --placement select_1=spark,aggregate_1=spark,aggregate_2=duckdb "
                   f"--rate 5 --duration 80 --batch 10 --store {directory}/t.duckdb")
        started = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                              env=os.environ | {"SPARK_SUBMIT_OPTS": " ".join(options)})
        wall = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"the run failed: {done.stderr[-2000:]}")
        deadline = time.monotonic() + 60  # the JVM exits after its parent
        while (group / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.2)
        cpu = cpu_seconds(usage)
        group.rmdir()
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    if not ARCHIVE.is_file():
        sys.exit(f"no archive at {ARCHIVE}: `make {ARCHIVE.relative_to(ROOT)}` writes it")
    figures: dict[str, list[dict]] = {name: [] for name in args.variants}
    query = Path(short("q5"))
    for n, name in enumerate(args.variants * args.repeats):
        figures[name].append(measured(query, VARIANTS[name], n))
        print(name, figures[name][-1], flush=True)
    summary = {name: {"runs": runs,
                      "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
                      "median_wall_s": statistics.median(r["wall_s"] for r in runs)}
               for name, runs in figures.items()}
    # A run of some of the variants keeps the others' last figures.
    path = RESULTS / "jvm_options.json"
    kept = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps(kept | summary, indent=2) + "\n")
    for name, s in summary.items():
        print(f"{name:>24}: {s['median_cpu_s']:6.1f} s CPU, {s['median_wall_s']:6.1f} s wall")


if __name__ == "__main__":
    main()

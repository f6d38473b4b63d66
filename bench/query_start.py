"""What a short pure-Spark run over the generator costs in a fresh JVM and in a warm one: the
run of ``tests/test_run.py`` (Q2's short-window variant all in Spark, four 15-s micro-batches at
6 tuples/s), three times in one JVM, the first cold. Each checkout given runs in a process of
its own, its code first on the path of the driver and of Spark's Python workers, the checkouts
in turn for each round, so that two commits compare interleaved (``git worktree add DIR REV``
for the other one). The tests' JVM options (C1, the class archive) as ``make test`` sets them.
A checkout may carry environment settings after commas (``.,SPARK_HOME=...``), to compare two
settings of one commit; ``ARCHIVE`` there names another class archive (the archive's class
path must be the JVM's, which the Spark home decides).

    .venv/bin/python bench/query_start.py [CHECKOUT[,VAR=VALUE...] ...] [--rounds 2]

Writes bench/results/query_start.json, or ``--out``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the tests' options are measured, not copied
from tests.conftest import ARCHIVE, jvm_options  # noqa: E402

RUNS = 3

ONE_JVM = f"""
import json, sys, tempfile, time
from pathlib import Path
from rowstream.session import spark_session
spark_session()
from tests.test_run import run_small
seconds = []
for _ in range({RUNS}):
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run_small("q2", Path(tmp), placement="spark")
    seconds.append(round(time.perf_counter() - started, 1))
print(json.dumps(seconds))
"""


def runs(variant: str) -> list[float]:
    checkout, *settings = variant.split(",")
    checkout = Path(checkout).resolve()
    overrides = dict(setting.split("=", 1) for setting in settings)
    options = " ".join(jvm_options(Path(overrides.pop("ARCHIVE", ARCHIVE))))
    env = {**os.environ, "PYTHONPATH": str(checkout), "SPARK_SUBMIT_OPTS": options, **overrides}
    out = subprocess.run([sys.executable, "-c", ONE_JVM], cwd=checkout, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="*", default=[str(ROOT)])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "query_start.json")
    args = parser.parse_args()
    results = {c: [] for c in args.checkouts}
    for round_ in range(args.rounds):
        for checkout in args.checkouts:
            seconds = runs(checkout)
            results[checkout].append(seconds)
            print(f"round {round_ + 1}, {checkout}: cold {seconds[0]} s, warm "
                  f"{', '.join(map(str, seconds[1:]))} s", flush=True)
    args.out.write_text(json.dumps({"runs_per_jvm": RUNS, "seconds": results}, indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

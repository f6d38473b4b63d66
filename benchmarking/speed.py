"""How fast this machine runs the engines now, against when a profile was calibrated.

A profile's unit costs hold for the machine as it was while ``tandem calibrate`` ran. This one
ran the same calibration 1.3-2.9x slower an hour after another, with nothing else running
(``bench/results/2026-12-02/ranking/notes.md``), and a sweep then measured capacities the
earlier profile predicted well. So a calibration records a probe's seconds at its start and
its end, and ``tandem bench`` times the same probe before and after its sweep: their ratio says
how far the machine's speed moved from the profile's, which no prediction can see.

The probe is what the plans spend most of their time on: Spark reads one second of the plugs
from Parquet, selects and aggregates it in a job; DuckDB reads the same file and aggregates it.
It runs in a process and a JVM of its own, on this machine's cores (``local[*]``). In a session
a calibration had worked in for ten minutes Spark's side took 0.16 s; in a session just
started 3.3 s, then 0.64, 0.49, ... and 0.2-0.35 s from the tenth run on, as the JVM compiled
Spark's code. A new JVM warms up alike each time, so two probes differ by the machine's speed.
Each side is the median of its runs once warm.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq

from columnar.store import connect
from optimizer.errors import TandemError
from optimizer.tomlfile import read_toml
from rowstream.relations import utc_instants
from rowstream.session import spark_session
from workload.smart_plugs import SmartPlugs

ROWS = 1_000_000  # one second at 1M tuples/s
# (runs to warm, runs timed). A run of Spark's side varies by 30 % either way even warm,
# so the median of many.
RUNS = {"duckdb": (5, 15), "spark": (10, 20)}
ENGINES = ("duckdb", "spark")
# Runs here differ by 15-20 % either way, six probes within ten minutes by up to 2x in Spark
# (0.21-0.43 s; DuckDB 0.021-0.025 s), two calibrations an hour apart by 1.3-2.9x.
SLOWER = 1.5
_AGGREGATE = ("SELECT house_id, household_id, plug_id, avg(value) AS v FROM {} "
              "WHERE property = 1 GROUP BY house_id, household_id, plug_id")


STEP = "the speed probe: one second of the plugs aggregated by each engine"  # progress text


def elapsed(job: Callable[[], object]) -> float:
    """Wall seconds of one run of ``job``."""
    started = time.perf_counter()
    job()
    return time.perf_counter() - started


def _settled(job, warm: int, runs: int) -> float:
    """The median seconds of ``runs`` runs of ``job`` after ``warm`` runs."""
    times = [elapsed(job) for _ in range(warm + runs)]
    return statistics.median(times[warm:])


@contextmanager
def sides(spark) -> Iterator[dict[str, Callable[[], list]]]:
    """Each engine's side of the probe, a job that returns the aggregate's rows, over one
    second of the plugs landed as Parquet while the context lasts."""
    with tempfile.TemporaryDirectory(prefix="tandem-probe-") as scratch:
        path = Path(scratch) / "plugs.parquet"
        pq.write_table(utc_instants(SmartPlugs(rate=ROWS).between(0, 1)), path)
        con = connect(":memory:")
        spark.read.parquet(str(path)).createOrReplaceTempView("tandem_probe")
        try:
            yield {"duckdb": lambda: con.execute(
                       _AGGREGATE.format(f"read_parquet('{path}')")).fetchall(),
                   "spark": lambda: spark.sql(_AGGREGATE.format("tandem_probe")).collect()}
        finally:
            spark.catalog.dropTempView("tandem_probe")
            con.close()


def probe() -> dict[str, float]:
    """Seconds of each engine's side of the probe, now, in a new process (about 25 s)."""
    with tempfile.TemporaryDirectory(prefix="tandem-probe-") as scratch:
        done = subprocess.run([sys.executable, "-m", "benchmarking.speed", scratch],
                              capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise TandemError(f"the speed probe failed: {last} (`python -m benchmarking.speed "
                              "DIR` runs it alone and keeps its Spark log in DIR)")
        return json.loads(done.stdout.strip().splitlines()[-1])


def _probe_here(scratch: Path) -> dict[str, float]:
    spark = spark_session("tandem-probe", log=scratch / "spark.log", master="local[*]")
    with sides(spark) as jobs:
        return {e: _settled(jobs[e], *RUNS[e]) for e in ENGINES}


def calibrated(profile: str | Path) -> dict[str, float] | None:
    """The probe's seconds while ``profile`` was calibrated (the mean of its start and end),
    or None for a profile that records none, such as the shipped default."""
    meta = read_toml(Path(profile), "profile", "pass --profile or set TANDEM_PROFILE").get(
        "meta", {})
    found = {e: meta.get(f"probe_{e}") for e in ENGINES}
    if not all(isinstance(v, list) and v for v in found.values()):
        return None
    return {e: statistics.mean(v) for e, v in found.items()}


def ratios(now: dict[str, float], then: dict[str, float]) -> dict[str, float]:
    """How many times slower each engine runs now than then (below 1: faster)."""
    return {e: now[e] / then[e] for e in ENGINES}


def drifted(ratio: dict[str, float]) -> list[str]:
    """The engines whose speed moved beyond the noise between runs."""
    return [e for e, r in ratio.items() if not 1 / SLOWER <= r <= SLOWER]


def record(calibration: str | Path, before: dict[str, float], after: dict[str, float] | None
           ) -> dict:
    """bench.json's ``speed``: the probe's seconds before and after a sweep and while its
    profile was calibrated (None where the profile records none)."""
    then = calibrated(calibration) if Path(calibration).is_file() else None
    return {"calibrated": then, "before": before, "after": after}


def now(calibration: str | Path, before: dict | None = None) -> dict:
    """``record`` with the probe timed now: before a sweep, or after it (``before``: the
    record made before)."""
    seconds = probe()
    return record(calibration, seconds, None) if before is None else before | {"after": seconds}


def warning(speed: dict, calibration: str | Path) -> str | None:
    """What a user must know before a sweep whose predictions the machine's speed will skew."""
    then = speed["calibrated"]
    ratio = ratios(speed["before"], then) if then else {}
    off = drifted(ratio)
    if not off:
        return None
    return ("The speed probe takes " + " and ".join(f"{ratio[e]:.2f}× {e}'s seconds" for e in off)
            + f" of when {calibration} was calibrated: this machine's speed has moved, and the "
            "predictions are off by about as much. `tandem calibrate` measures it again.")


def sentence(speed: dict) -> str:
    """The report's account of ``record``: how far the machine's speed moved."""
    def seconds(probe: dict[str, float]) -> str:
        return f"DuckDB {probe['duckdb']:.3f} s, Spark {probe['spark']:.3f} s"

    said = [f"The speed probe (benchmarking/speed.py) took {seconds(speed['before'])} before "
            "the sweep"]
    if speed.get("after"):
        said.append(f", {seconds(speed['after'])} after it")
    then = speed.get("calibrated")
    if not then:
        return "".join(said) + "; the profile records no probe, so how its machine's speed "\
            "compares is not known."
    said.append(f"; while the profile was calibrated {seconds(then)}")
    moved = [ratios(p, then) for p in (speed["before"], speed.get("after")) if p]
    said.append(". Against the calibration: " + ", ".join(
        f"{e} {'–'.join(f'{r[e]:.2f}×' for r in moved)}" for e in ENGINES))
    off = sorted({e for r in moved for e in drifted(r)})
    said.append(f" (beyond {SLOWER}× either way for {' and '.join(off)}: the predictions of its "
                "work are off by about as much)." if off else f", within {SLOWER}× either way.")
    return "".join(said)


if __name__ == "__main__":  # the probe's own process (``probe``): its seconds as JSON
    print(json.dumps(_probe_here(Path(sys.argv[1]))))

"""`tandem calibrate`: measure the unit costs of Ji's cost model (Sec. 6.3.2) on this machine and
write them as a profile (``optimizer/profile.py``'s format).

Eight groups of micro-benchmarks, each on the real engines:

* **the gateway** (one streaming query per rate): per micro-batch, timed Spark jobs over
  Parquet files landed as users land them, read by Spark's own source (scan; every row moved
  to the MIG and judged; select; project; select and move to DuckDB), and the time Spark spends
  outside them, its fixed cost per micro-batch and its control of a batch by reference; then
  CSV files read and judged, for the parse; and the same files read and judged by DuckDB
  itself, the crossing by reference's scan, and their rows stored, what a window read as rows
  adds;
* **DuckDB fragments**: the SQL of small DB-ops over windows of growing cardinality;
* **DuckDB -> Spark**: ``createDataFrame`` from Arrow tables of growing size;
* **Spark's stateful operators**: small queries deployed entirely in Spark, their capacity
  measured as ``tandem bench`` does, at two window sizes;
* **the MIG's pipeline**: how much of the smaller of its two sides (Spark's job, DuckDB's
  evaluation thread) the larger hides, σ of ``cost.Objective.load``, from the capacity of
  MEDIANs whose two sides weigh alike: by value (Spark's job selects the rows) and by
  reference (its job is the control of the next batch alone);
* **duckdb-partitioned**: the exchange into the executors' DuckDBs, from the capacity of
  Q1's shape placed there, and the parallelism (Spark's default) it divides their work by;
* **split aggregates**: Spark's partials per pane in the executors, from the capacity of
  a windowed SUM split across the engines;
* **Spark after the MIG**, last: its batch aggregation of the rows DuckDB hands it, from the
  capacity of windowed aggregates over DuckDB's selection and over DuckDB's own aggregate.

Before and after them the speed probe (``benchmarking/speed.py``) times each engine on one
second of the plugs; the profile keeps both, and ``tandem bench`` tells the machine's speed
then from its speed now.

Every unit-cost function is linear in its coefficients (Eq. 6.4 with the model's c), so a
coefficient's share of a measurement is what the cost model predicts with that coefficient
alone set to one. Each function is fitted by non-negative least squares on relative error, on
what the functions fitted before it leave over, and the profile keeps the fit's error.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import numpy as np

from benchmarking import speed
from benchmarking.bench import predicted_capacity
from benchmarking.measure import capacity, event_seconds
from benchmarking.speed import elapsed
from columnar.fragment_sql import fragments
from columnar.store import ColumnarStore
from optimizer import load_catalog, load_profile, optimize
from optimizer.cost import FILES_PER_BATCH
from optimizer.profile import DEFAULT_PROFILE, Profile
from rowstream.mig import EPOCH
from rowstream.relations import utc_instants
from runtime import settings
from runtime.explain import Explanation
from runtime.run import scratch
from workload.smart_plugs import DEBS_START, SmartPlugs

Key = tuple[str, str, str]  # (engine, function, coefficient)
KEYS = "house_id, household_id, plug_id, window_end"
HOUSEHOLDS = "house_id, household_id, window_end"  # 400 groups beside the plugs' 2,125


def _aggregate(func: str, size: int, where: str = "", alias: str = "v", keys: str = KEYS) -> str:
    return (f"SELECT {keys}, {func}(value) AS {alias} "
            f"FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '{size}' SECOND) {where} "
            f"GROUP BY {keys}")


def _join_aggregates(size: int, keys: str = KEYS) -> str:
    """Q3's shape: two windowed aggregates joined at equal window_end."""
    columns = ", ".join(f"a.{k}" for k in keys.split(", "))
    return (f"WITH a AS ({_aggregate('AVG', size, keys=keys)}), "
            f"b AS ({_aggregate('AVG', size // 2, alias='w', keys=keys)}) "
            f"SELECT {columns}, a.v - b.w AS d FROM a JOIN b USING ({keys})")


def _join_rows(size: int) -> str:
    """Q1's shape: a window's rows joined with an aggregate of the same window."""
    return (f"WITH l AS (SELECT * FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '{size}' "
            f"SECOND) WHERE property = 1), p AS (SELECT {KEYS}, MAX(value) AS m FROM l "
            f"GROUP BY {KEYS}) SELECT l.house_id, l.household_id, l.plug_id, l.window_end, "
            f"COUNT(*) AS n FROM l JOIN p ON l.house_id = p.house_id AND l.household_id = "
            f"p.household_id AND l.plug_id = p.plug_id AND l.window_end = p.window_end "
            f"WHERE l.value > 0.9 * p.m GROUP BY l.house_id, l.household_id, l.plug_id, "
            f"l.window_end")


@dataclass
class Fitted:
    coefficients: dict[Key, float]
    error: float  # fit_error over its measurements
    measurements: int
    points: list[tuple[float, float]] = field(default_factory=list)  # (measured, fitted)


@dataclass
class Calibration:
    profile: Profile
    fits: dict[tuple[str, str], Fitted] = field(default_factory=dict)
    seconds: float = 0.0


class _Model:
    """The cost model's predictions for micro-queries, with any coefficients."""

    def __init__(self):
        self.catalog_path = settings.catalog_path()
        self.catalog = load_catalog(self.catalog_path)
        base = load_profile(DEFAULT_PROFILE)
        self.keys = [(e, f, n) for e, fs in base.functions.items() for f, cs in fs.items()
                     for n in cs if f != "memory"]
        self.memory = {e: fs["memory"] for e, fs in base.functions.items() if "memory" in fs}
        self.parallelism = base.parallelism
        # What is not measured keeps the shipped default.
        self.values: dict[Key, float] = {k: base.coef(*k) for k in self.keys}

    def profile(self, values: dict[Key, float], name: str = "calibration") -> Profile:
        functions: dict = {e: {"memory": dict(m)} for e, m in self.memory.items()}
        for (e, f, n) in self.keys:
            functions.setdefault(e, {}).setdefault(f, {})[n] = values.get((e, f, n), 0.0)
        return Profile(name, 1.0, functions, name, time_shared=True,
                       parallelism=self.parallelism)

    def optimization(self, sql: str, rate: float, placement: str, values: dict[Key, float]):
        return optimize(sql, self.catalog, self.profile(values), rate, placement=placement)

    def utilization(self, sql: str, rate: float, placement: str, values: dict[Key, float]) -> float:
        return self.optimization(sql, rate, placement, values).plan.cost.utilization

    def db_evaluation(self, sql: str, rate: float, values: dict[Key, float]) -> float:
        """Seconds of one evaluation of the pure-DuckDB plan's DB-op (Ji: the SQL's cost)."""
        o = self.optimization(sql, rate, "duckdb", values)
        return values.get(("duckdb", "query", "per_call"), 0.0) + sum(
            o.model.db_work(n) for n in o.logical.operators)

    def fit(self, function: tuple[str, str], names: list[str], rows: list[tuple[float, Callable]]
            ) -> Fitted:
        """Fit ``function``'s coefficients ``names`` to ``rows`` of (measured, predict), where
        predict(values) is the model's prediction with those coefficients."""
        keys = [(*function, n) for n in names]
        rest = {k: v for k, v in self.values.items() if k not in keys}
        y = np.array([m for m, _ in rows])
        offset = np.array([predict(rest) for _, predict in rows])
        x = np.array([[predict({**rest, k: 1.0}) - o for k in keys]
                      for (_, predict), o in zip(rows, offset, strict=True)])
        beta = _nnls(x / y[:, None], (y - offset) / y)
        values = dict(zip(keys, beta, strict=True))
        self.values.update(values)
        fitted = offset + x @ beta
        return Fitted(values, fit_error(fitted, y), len(rows), list(zip(y, fitted, strict=True)))


def fit_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """RMS of the residuals relative to the mean measurement."""
    return float(np.sqrt(np.mean((predicted - measured) ** 2)) / np.mean(measured))


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients: drop the most negative and refit."""
    active = list(range(a.shape[1]))
    beta = np.zeros(a.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (sol >= 0).all():
            beta[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    return beta


# -- the gateway ----------------------------------------------------------------------------

GATEWAY_RATES = (20_000, 100_000, 200_000, 400_000)  # tuples/s of the files landed

def _gateway(spark, rate: float, seconds: int, file_format: str = "parquet") -> list[dict]:
    """One streaming query over files landed at ``rate``, read as ``tandem run`` reads them
    (Spark's own file source, rowstream/native.py): per micro-batch, the seconds of each timed
    job and of Spark's work outside them (its control of the batch). CSV times only "read": it
    differs from Parquet only in the parse, which every job repeats. "reference" is DuckDB
    reading and judging the batch's files itself (rowstream/by_reference.py), "stored" the
    same with their rows stored."""
    import polars as pl

    from rowstream.landing import batch_files
    from rowstream.native import admit_batch, judged_columns, native_stream
    from runtime.settings import example_stream

    plugs = example_stream("plugs")
    rows: list[dict] = []
    left: list[float] = []  # when the last micro-batch's jobs ended

    def each(batch, batch_id: int) -> None:
        entered = time.perf_counter()
        row = {"outside": entered - left[-1] if left else None, "tuples": batch.count()}
        # Each job is one stage that ends in toArrow, as the MIG's is. "scan" keeps no row;
        # "read" moves every row to the MIG and judges it, as the native gateway does; the
        # others differ from "scan" only in what they move.
        row["read"] = elapsed(lambda: admit_batch(
            pl.from_arrow(batch.select(*judged_columns(plugs)).toArrow()), plugs,
            high_water=None, lateness=0.0, slide=1.0))
        files = tuple(batch_files(checkpoint, batch_id))  # as the gateway finds them

        row["reference"] = elapsed(lambda: _by_reference(store, plugs, files, False, batch_id))
        row["stored"] = elapsed(lambda: _by_reference(store, plugs, files, True, batch_id))
        if file_format == "parquet":
            none = "plug_id < 0"
            row["scan"] = elapsed(lambda: batch.where(none).toArrow())
            row["select"] = elapsed(lambda: batch.where(f"{none} AND value > -1").toArrow())
            row["project"] = elapsed(lambda: batch.selectExpr(
                "house_id * 1000000 + household_id * 1000 + plug_id AS k", "value * 0.9 AS v")
                .where("k < 0").toArrow())
            moved = {}
            row["transfer"] = elapsed(lambda: moved.update(n=store.append(
                "calibrate", "rows", batch.where("property = 1").select(*plugs.names).toArrow(),
                batch_id)))
            row["moved"] = moved["n"]
        if row["tuples"]:
            rows.append(row)
        left.append(time.perf_counter())

    with scratch("tandem-calibrate-") as tmp:
        landing, checkpoint = Path(tmp) / "landing", Path(tmp) / "checkpoint"
        SmartPlugs(rate=rate).write_files(landing, seconds + 1, 1.0, file_format=file_format)
        with ColumnarStore(Path(tmp) / "c.duckdb") as store:
            store.create("calibrate", fresh=True)
            query = (native_stream(spark, plugs, str(landing)).writeStream.foreachBatch(each)
                     .trigger(availableNow=True)
                     .option("checkpointLocation", str(checkpoint)).start())
            try:
                query.awaitTermination()
            finally:
                query.stop()
    return rows[1:]  # the first batch compiles the jobs


def _by_reference(store: ColumnarStore, plugs, files, kept: bool, batch_id: int) -> None:
    """DuckDB reads and judges a batch's ``files`` of the stream ``plugs`` itself
    (rowstream/by_reference.py)."""
    from rowstream.by_reference import FileReferences
    from rowstream.suite_sql import identifier

    read = FileReferences(plugs, tuple(files), None, 0.0, 1.0).read(store.con)
    if kept:  # as a window whose rows a DB-op reads is stored
        store.append("calibrate", "referenced", read.rows, batch_id)
    else:  # a pass over every column, as the pane partials' upkeep makes one
        every = ", ".join(f"max({identifier(c)})" for c in plugs.names)
        store.con.execute(f"SELECT {every} FROM ({read.rows})").fetchall()
    read.close(store.con)


# DuckDB's read by reference at the rates the sweeps reach, where Spark's jobs over the same
# files would take most of the step: a capacity run at 1M tuples/s reads batches of
# FILES_PER_BATCH one-second files. Without these the scan's line, fitted up to 400k, priced
# Q3-Q6 at 1M at 1.37-1.48x what they measured (bench/results/2026-12-01/stretch-high).
REFERENCE_RATE = 1_000_000


def _referenced(rate: float, file_format: str, *, stored: bool, repeats: int = 3) -> list[dict]:
    """Per file, the seconds DuckDB takes to read and judge batches of ``FILES_PER_BATCH``
    files landed at ``rate`` ("reference") and, if ``stored``, to store their rows, as
    ``_gateway``'s rows have them, without Spark."""
    from runtime.settings import example_stream

    plugs = example_stream("plugs")
    with scratch("tandem-calibrate-") as tmp:
        files = SmartPlugs(rate=rate).write_files(Path(tmp) / "landing", FILES_PER_BATCH, 1.0,
                                                  file_format=file_format)
        with ColumnarStore(Path(tmp) / "c.duckdb") as store:
            store.create("calibrate", fresh=True)
            _by_reference(store, plugs, files, True, 0)  # creates the table; warms the reader
            rows = []
            for batch_id in range(1, repeats + 1):
                row = {"tuples": rate, "reference": elapsed(lambda bid=batch_id: _by_reference(
                    store, plugs, files, False, bid)) / len(files)}
                if stored:
                    row["stored"] = elapsed(lambda bid=batch_id: _by_reference(
                        store, plugs, files, True, bid)) / len(files)
                rows.append(row)
    return rows


def calibrate(out: str | Path = settings.CALIBRATED_PROFILE, *,
              on_step: Callable[[str], None] | None = None) -> Calibration:
    from rowstream.session import spark_session

    started = time.perf_counter()
    say = on_step or (lambda _: None)
    model = _Model()
    fits: dict[tuple[str, str], Fitted] = {}
    say(speed.STEP)
    before = speed.probe()
    spark = spark_session(log=settings.spark_log_path(out), master=settings.spark_master())

    say("gateway: Parquet files read, judged, selected, projected and moved to DuckDB, or read "
        "by DuckDB itself, at 4 rates")
    batches = [b for rate in GATEWAY_RATES for b in _gateway(spark, rate, 5)]
    n = np.array([b["tuples"] for b in batches], dtype=float)
    moved = np.array([b["moved"] for b in batches], dtype=float)
    outside = statistics.median(b["outside"] for b in batches if b["outside"] is not None)

    read = np.array([b["read"] for b in batches])
    fits["spark", "source"] = _line(model, ("spark", "source"), n, read, fixed=outside)
    scan = np.array([b["scan"] for b in batches])
    reading = np.polyval(np.polyfit(n, scan, 1), n)  # what every job spends reading the files
    for function in ("select", "project"):
        fits["spark", function] = _line(model, ("spark", function), n, np.array(
            [b[function] for b in batches]) - reading, per_call=False)
    transfer = np.array([b["transfer"] for b in batches]) - reading
    fits["duckdb", "transfer_in"] = _line(model, ("duckdb", "transfer_in"), moved, transfer)
    # The result sink is the same move (toArrow, then an insert).
    fits["spark", "sink"] = _line(model, ("spark", "sink"), moved, transfer)

    # By reference, Spark's part of a batch is its control alone, and DuckDB reads the files.
    fits["spark", "control"] = _set(model, "spark", "control", 0.0, len(batches),
                                    per_call=outside)
    referenced = batches + _referenced(REFERENCE_RATE, "parquet", stored=True)
    tuples = np.array([b["tuples"] for b in referenced], dtype=float)
    reference = np.array([b["reference"] for b in referenced])
    fits["duckdb", "scan"] = _line(model, ("duckdb", "scan"), tuples, reference)
    fits["duckdb", "store"] = _line(model, ("duckdb", "store"), tuples, np.array(
        [b["stored"] for b in referenced]) - reference, per_call=False)

    say("gateway: CSV files read, parsed and judged by Spark, or by DuckDB, at 4 rates")
    batches = [b for rate in GATEWAY_RATES for b in _gateway(spark, rate, 5, "csv")]
    # Per micro-batch the job costs what Parquet's does (CostModel.source); the parse is
    # per tuple, so CSV's reads less that fixed part are fitted through the origin.
    job = model.values["spark", "source", "per_call"] - outside
    lines = np.array([b["tuples"] for b in batches], dtype=float)
    fits["spark", "source_csv"] = _line(model, ("spark", "source_csv"), lines,
                                        np.array([b["read"] for b in batches]) - job,
                                        per_call=False)
    referenced = batches + _referenced(REFERENCE_RATE, "csv", stored=False)
    fits["duckdb", "scan_csv"] = _line(
        model, ("duckdb", "scan_csv"), np.array([b["tuples"] for b in referenced], dtype=float),
        np.array([b["reference"] for b in referenced]))

    say("DuckDB: fragment SQL over windows of growing cardinality")
    fits.update(_duckdb(model))

    say("DuckDB -> Spark: createDataFrame from Arrow, 1k to 3M rows")
    fits["duckdb", "transfer_out"] = _transfer_out(spark, model)

    for function, names, sql in (
            ("aggregate", ["per_tuple", "per_window_instance", "per_call"], "AVG"),
            ("holistic", ["per_tuple", "per_window_tuple", "per_call"], "MAX")):
        say(f"Spark: windowed {sql} at two window sizes and two rates")
        rows = [_spark_row(model, _aggregate(sql, size, "WHERE property = 1"), rate, size)
                for size, rate in ((10, 4000), (60, 4000), (10, 12000))]
        fits["spark", function] = model.fit(("spark", function), names, rows)
    say("Spark: window joins (of two aggregates; of a window's rows with its aggregate)")
    rows = [_spark_row(model, _join_aggregates(20), 4000, 20),
            _spark_row(model, _join_aggregates(20), 12000, 20),
            _spark_row(model, _join_rows(10), 2000, 10)]
    fits["spark", "join"] = model.fit(("spark", "join"), ["per_tuple", "per_match", "per_call"],
                                      rows)
    say("the MIG's pipeline: MEDIANs whose job (Spark's selection, or its control by "
        "reference) and DuckDB's evaluation weigh alike")
    overlap, fits["meta", "overlap"] = _overlap(model, "value")
    overlap_reference, fits["meta", "overlap_reference"] = _overlap(model, "reference")
    say("duckdb-partitioned: Q1's shape in the executors' DuckDBs at three rates")
    model.parallelism = spark.sparkContext.defaultParallelism
    fits.update(_partitioned(model))
    say("split aggregates: Spark's partials per pane of a windowed SUM at three rates")
    fits["spark", "partial"] = _split(model)
    say("Spark after the MIG: windowed AVGs over DuckDB's rows of each window_end, at three "
        "sizes, and a MAX over DuckDB's windowed sums")
    fits["spark", "batch_aggregate"] = _batch(model, "batch_aggregate", BATCH_AGGREGATE_POINTS)
    say("Spark after the MIG: a join of two windowed AVGs over DuckDB's rows, by plug and by "
        "household")
    fits["spark", "batch_join"] = _batch(model, "batch_join", BATCH_JOIN_POINTS)
    say("the speed probe again")
    after = speed.probe()
    say(f"writing {out}")
    profile = replace(model.profile(model.values, f"calibrated on {platform.node()} "
                                    f"{time.strftime('%Y-%m-%d %H:%M')}"), overlap=overlap,
                      overlap_reference=overlap_reference)
    write_profile(Path(out), profile, fits, {e: [before[e], after[e]] for e in speed.ENGINES})
    # Beside the profile, what each function was fitted to (seconds measured and fitted).
    Path(out).with_suffix(".json").write_text(json.dumps({
        f"{e}.{f}": {"coefficients": {k[2]: v for k, v in fit.coefficients.items()},
                     "fit_error": fit.error, "measured_fitted": fit.points}
        for (e, f), fit in fits.items()}, indent=1) + "\n")
    return Calibration(load_profile(out), fits, time.perf_counter() - started)


# A table DuckDB hands Spark: its fixed cost is timed on small tables, its cost per row on
# large ones, where a least-squares line through all would let the seconds of the largest set
# the intercept too. The plans that pay per row hand millions: every row of a window, W/beta
# times, to a Spark operator after the MIG. (With Spark's default local-relation threshold a
# row cost 3-4 us in tables under 48 MB and 1-2 us above; rowstream.session sets it to 0.)
MOVE_OUT_FIXED, MOVE_OUT_ROWS = (1_000, 10_000, 50_000), (1_000_000, 3_000_000)


def _transfer_out(spark, model: _Model) -> Fitted:
    """``[duckdb.transfer_out]``: per_call the intercept of a line through the small tables'
    hand-over, per_tuple the slope through the large ones' hand-over and read from that
    intercept. The hand-over (``createDataFrame``: the driver writes the Arrow batches to the
    JVM) runs no job: the rows are read in the one job of the part after the MIG, whose fixed
    cost its move back prices (``[spark.sink]``, ``[duckdb.transfer_in]``). A job here too
    charged it twice: 2026-12-02, plans by reference with a Spark operator after the MIG were
    predicted at half the capacity they measured."""
    def took(size: int, job: bool) -> float:
        table = utc_instants(SmartPlugs(rate=size).between(0, 1))
        spark.createDataFrame(table).count()  # warm

        def hand_over():
            frame = spark.createDataFrame(table)
            return frame.count() if job else frame
        return min(elapsed(hand_over) for _ in range(3))

    small = [(n, took(n, job=False)) for n in MOVE_OUT_FIXED]
    large = [(n, took(n, job=True)) for n in MOVE_OUT_ROWS]
    per_call, per_tuple = fit_two_regimes(small, large)
    sizes, times = (np.array(c, float) for c in zip(*large, strict=True))
    fitted = per_call + per_tuple * sizes
    found = _set(model, "duckdb", "transfer_out", fit_error(fitted, times), len(large),
                 per_tuple=per_tuple, per_call=per_call)
    found.points = list(zip(times, fitted, strict=True))
    return found


def fit_two_regimes(small: list[tuple[float, float]], large: list[tuple[float, float]]
                    ) -> tuple[float, float]:
    """(fixed, per row) from (rows, seconds): the fixed cost the intercept of a line through
    ``small``, the cost per row the least-squares slope through ``large`` from that intercept;
    neither below zero."""
    x, y = (np.array(c, float) for c in zip(*small, strict=True))
    fixed = max(float(np.polyfit(x, y, 1)[1]), 0.0)
    x, y = (np.array(c, float) for c in zip(*large, strict=True))
    return fixed, max(float(np.dot(x, y - fixed) / np.dot(x, x)), 0.0)


def _line(model: _Model, function: tuple[str, str], x: np.ndarray, y: np.ndarray, *,
          per_call: bool = True, fixed: float = 0.0) -> Fitted:
    """``y = per_call + per_tuple * x`` by least squares, per_call plus ``fixed`` (the work
    outside the timed jobs); a function without per_call is fitted through the origin."""
    columns = np.c_[x, np.ones_like(x)] if per_call else x[:, None]
    beta, *_ = np.linalg.lstsq(columns, y, rcond=None)
    beta = np.maximum(beta, 0.0)
    coefficients = {"per_tuple": float(beta[0])}
    if per_call:
        coefficients["per_call"] = float(beta[1]) + fixed
    fitted = columns @ beta + fixed
    found = _set(model, *function, fit_error(fitted, y + fixed), len(y), **coefficients)
    found.points = list(zip(y + fixed, fitted, strict=True))
    return found


def _set(model: _Model, engine: str, function: str, error: float, count: int,
         **coefficients: float) -> Fitted:
    values = {(engine, function, k): float(v) for k, v in coefficients.items()}
    model.values.update(values)
    return Fitted(values, error, count)


def _duckdb(model: _Model) -> dict[tuple[str, str], Fitted]:
    """Fragment SQL of pure-DuckDB micro-queries, one evaluation per window_end, over windows
    of 60 s and of 300 s (Q1-Q6's) at growing rates (cardinality = rate x window: 1.2 M to 60 M
    rows; hash tables outgrow the caches on the way). COUNT, SUM, AVG, MIN and MAX read pane
    partials, whose number grows with the window, not the rate; MEDIAN reads the window's rows;
    Q1's shape reads lists of rows per pane. Selections and projections run inside the
    partials' upkeep; over tagged rows they and aggregates keep the shipped defaults (their
    windows are a few thousand rows: too little to measure). Each query is timed over one
    window_end and over FILES_PER_BATCH at once, as a batch by reference evaluates them: what
    each further window_end adds, as a share of the first one's work, is the query's
    ``further_end`` (``cost.CostModel.evaluation``)."""
    size, rates = 60, (20_000, 100_000, 200_000)
    stages = [
        ("panes", ["per_window_tuple"], [(_aggregate("AVG", s), s) for s in (size, 300)]
         + [(_aggregate("MAX", size), size)]),
        ("holistic", ["per_window_tuple"], [(_aggregate("MEDIAN", s), s) for s in (size, 300)]),
        ("join", ["per_window_tuple", "per_match"], [(_join_aggregates(size), size)]),
        ("lists", ["per_window_tuple"], [(_join_rows(s), s) for s in (size, 300)]),
    ]
    fits = {}
    with scratch("tandem-calibrate-") as tmp, ColumnarStore(Path(tmp) / "d.duckdb") as store:
        loaded: set[tuple[str, str]] = set()  # (schema, table): every query reads the window

        def evaluation(sql: str, rate: float, window: int) -> tuple[float, float]:
            fragment = fragments(model.optimization(sql, rate, "duckdb", {}).plan)[0]
            schema = f"rate_{rate}_{window}"  # one per rate and window, loaded once
            for table in fragment.sources:
                if (schema, table.table) not in loaded:
                    store.create(schema)
                    rows = SmartPlugs(rate=rate).between(0, window).select(list(table.columns))
                    store.append_input(schema, table, rows, 0)
                    loaded.add((schema, table.table))
            for pane in fragment.panes:  # the queries' aggregates differ: panes of their own
                store.rebuild_panes(schema, pane)
            # Window_ends one slide apart, as a run evaluates them: where the aggregate keeps
            # stacks, each extends them by a pane (the first, untimed, builds them). Then the
            # last FILES_PER_BATCH of them at once, three times, as a batch by reference.
            ends = [EPOCH + timedelta(seconds=DEBS_START + window - k)
                    for k in range(FILES_PER_BATCH - 1, -1, -1)]
            store.evaluate(schema, fragment.sql, ends[:1], fragment.stacks)

            def least(ends_) -> float:
                return min(elapsed(lambda e=e: store.evaluate(schema, fragment.sql, e,
                                                            fragment.stacks)) for e in ends_)
            return least([e] for e in ends[1:]), least([ends] * 3)

        # The fixed cost of an evaluation first, from a window of a few rows.
        per_call = evaluation(_aggregate("AVG", size), 100, size)[0]
        fits["duckdb", "query"] = _set(model, "duckdb", "query", 0.0, 1, per_call=per_call)
        _pane_upkeep(model, store, rates)  # per tuple and call; the stages below the rest
        first, further = [], []  # seconds of one window_end's work, and of the others'
        for function, names, queries in stages:
            rows = []
            for q, w in queries:
                for r in rates:
                    one, batch = evaluation(q, r, w)
                    rows.append((one, lambda v, q=q, r=r: model.db_evaluation(q, r, v)))
                    first.append((FILES_PER_BATCH - 1) * max(one - per_call, 0.0))
                    further.append(batch - one)
            fits["duckdb", function] = model.fit(("duckdb", function), names, rows)
        # further = first * share, through the origin
        x, y = np.array(first), np.array(further)
        share = max(float(x @ y / (x @ x)), 0.0)
        fits["duckdb", "query"] = _set(model, "duckdb", "query", fit_error(share * x, y), len(x),
                                       per_call=per_call, further_end=share)
    # Inserting result rows into the results table: per tuple, from the transfer's insert.
    fits["duckdb", "sink"] = _set(model, "duckdb", "sink", 0.0, 0, per_tuple=_insert_cost())
    return fits


def _pane_upkeep(model: _Model, store: ColumnarStore, rates) -> None:
    """Seconds to keep pane partials (Q3's two AVGs) and lists (Q1's) up to date: one second
    of rows appended, less the same append without them, per arriving tuple and per micro-batch
    (an insert into each table: by reference it is all a window costs a batch besides the scan,
    ``cost.CostModel.db_cost``). Q1's shape keeps its MAX's partials beside the lists: the
    lists' share is what the partials' line leaves."""
    def append(schema: str, table, rows, batch: int, panes=()) -> float:
        return min(elapsed(lambda: store.append_input(schema, table, rows, batch, panes))
                   for _ in range(3))

    measured: list[tuple[list[float], list[float]]] = []
    for n, sql in enumerate((_join_aggregates(60), _join_rows(60))):
        fragment = fragments(model.optimization(sql, rates[0], "duckdb", {}).plan)[0]
        tuples, seconds = [], []
        for rate in rates:
            schema = f"upkeep_{n}_{rate}"  # the two queries' pane tables differ
            store.create(schema)
            for k, table in enumerate(fragment.sources):
                rows = SmartPlugs(rate=rate).between(0, 1).select(list(table.columns))
                bare, full = (append(schema, table, rows, k, panes)
                              for panes in ((), fragment.panes))
                tuples.append(rows.num_rows)
                seconds.append(max(full - bare, 0.0))
        measured.append((tuples, seconds))
    (pane_tuples, pane_seconds), (list_tuples, list_seconds) = (
        (np.array(t, float), np.array(s)) for t, s in measured)
    panes = _line(model, ("duckdb", "panes"), pane_tuples, pane_seconds)
    partials = (panes.coefficients["duckdb", "panes", "per_tuple"] * list_tuples
                + panes.coefficients["duckdb", "panes", "per_call"])
    _line(model, ("duckdb", "lists"), list_tuples, np.maximum(list_seconds - partials, 0.0))


def _insert_cost() -> float:
    table = SmartPlugs(rate=200_000).between(0, 1)
    with ColumnarStore(":memory:") as store:
        store.create("calibrate")
        store.append("calibrate", "sink", table, 0)  # creates the table
        took = min(elapsed(lambda: store.append("calibrate", "sink", table, 1)) for _ in range(3))
    return took / table.num_rows


def _spark_row(model: _Model, sql: str, rate: float, size: int) -> tuple[float, Callable]:
    """Measured C_u of ``sql`` deployed in Spark at ``rate`` (seconds of work per second of
    arrivals: the rate over the capacity), and the model's prediction."""
    measured, _ = _measured_load(model, sql, rate, size, "spark")
    return measured, lambda v: model.utilization(sql, rate, "spark", v)


def _measured_load(model: _Model, sql: str, rate: float, size: int, placement: str,
                   measure: float = 8):
    """Wall seconds per second of arrivals of ``sql`` placed by ``placement`` at ``rate``,
    measured as ``tandem bench`` measures capacity, and its optimisation with the values fitted
    so far. As in a sweep, a plan is measured for ``measure`` event seconds at least and for
    ten wall seconds at the capacity those values predict: at 8 event seconds Q5's shape with
    its outer aggregate in Spark, which keeps up 6-10 times over, was timed over about a second
    and weighed 0.09 and 0.18 s a second in two calibrations half an hour apart (2026-12-02)."""
    o = model.optimization(sql, rate, placement, model.values)
    plan = Explanation(Path(f"calibrate_{abs(hash(sql)) % 10**6}.sql"), model.catalog_path,
                       Path(), o, fragments(o.plan))
    found = capacity(plan, rate, warmup=size,
                     measure=event_seconds(measure, rate, predicted_capacity(plan, rate)))
    return rate / found.tuples_per_second, o


def _partitioned(model: _Model) -> dict[tuple[str, str], Fitted]:
    """duckdb-partitioned's exchange (per tuple and per batch), from the capacity of Q1's shape
    with every operator in the partitions, once DuckDB's own unit costs are fitted. Its result
    rows reach the driver by ``toArrow``, as the result sink's do: collect is the sink's move."""
    engine = "duckdb-partitioned"
    model.values[engine, "collect", "per_tuple"] = model.values["spark", "sink", "per_tuple"]
    sql = _join_rows(10)
    rows = []
    for rate in (20_000, 60_000, 120_000):
        measured, _ = _measured_load(model, sql, rate, 10, engine)
        rows.append((measured, lambda v, rate=rate: model.utilization(sql, rate, engine, v)))
    return {(engine, "exchange"): model.fit((engine, "exchange"), ["per_tuple", "per_call"], rows),
            (engine, "collect"): Fitted({(engine, "collect", "per_tuple"):
                                         model.values[engine, "collect", "per_tuple"]}, 0.0, 0)}


def _split(model: _Model) -> Fitted:
    """A split aggregate's Spark side (per tuple and per batch), from the capacity of a
    1-minute windowed SUM whose partials Spark computes, once DuckDB's moves in and merges are
    fitted: the executors judge the rows, aggregate them per (group, pane) and the driver
    collects the partials."""
    sql, placement = _aggregate("SUM", 60, "WHERE property = 1"), "select_1=spark,aggregate_1=split"
    rows = []
    for rate in (20_000, 100_000, 300_000):
        measured, _ = _measured_load(model, sql, rate, 60, placement)
        rows.append((measured, lambda v, rate=rate: model.utilization(sql, rate, placement, v)))
    return model.fit(("spark", "partial"), ["per_tuple", "per_call"], rows)


AFTER_MIG = "select_1=duckdb,aggregate_1=spark"  # the aggregate over DuckDB's rows
OVER_AGGREGATE = "select_1=duckdb,aggregate_1=duckdb,aggregate_2=spark"  # Q5's outer one


def _over_aggregate(size: int) -> str:
    """Q5's shape: a per-household MAX over the plugs' windowed sums."""
    return (f"WITH t AS ({_aggregate('SUM', size, 'WHERE property = 1')}) "
            f"SELECT house_id, household_id, window_end, MAX(v) AS m FROM t "
            f"GROUP BY house_id, household_id, window_end")


# (SQL, placement, window seconds, tuples/s). The first three hand Spark 0.3 M to 1.5 M rows a
# second: createDataFrame and the aggregation cost 8-9 us a row of a 100k-row table and
# 2.3-2.8 us of a 3M-row one (bench/results/after_mig.json), and the plans priced hand
# millions. Their intercept is loose: fitted on them alone, per_call took up whatever the
# hand-over's fixed cost left (0.009 s, then 0.104 s on 2026-12-02), and Q5's outer aggregate,
# a few thousand rows a batch, was predicted at 0.28-0.45 of its capacity. The last point hands
# those few rows, so the batch's fixed cost is measured where it is most of the work.
BATCH_AGGREGATE_POINTS = (
    *((_aggregate("AVG", size, "WHERE property = 1"), AFTER_MIG, size, rate)
      for size, rate in ((60, 10_000), (300, 10_000), (60, 40_000))),
    (_over_aggregate(60), OVER_AGGREGATE, 60, 20_000))


# Q3's shape with its join (and the projection above it) in Spark after the MIG, by plug and by
# household: 4,250 and 800 rows handed a second, so the job's fixed cost and the rows' part
# come apart.
JOIN_AFTER_MIG = "aggregate_1=duckdb,aggregate_2=duckdb,join_1=spark,project_1=spark"
BATCH_JOIN_POINTS = ((_join_aggregates(60), JOIN_AFTER_MIG, 60, 20_000),
                     (_join_aggregates(60, HOUSEHOLDS), JOIN_AFTER_MIG, 60, 20_000))


def _batch(model: _Model, function: str, points) -> Fitted:
    """Spark's batch ``function`` after the MIG (per row DuckDB hands it and per batch), from
    the capacity of plans that run it in Spark over DataFrames of each window_end's rows, once
    DuckDB's functions and the moves out and into the results are fitted. ``points``' windows,
    rates and groups vary the rows handed apart from the batches."""
    rows = []
    for sql, placement, size, rate in points:
        measured, _ = _measured_load(model, sql, rate, size, placement)
        rows.append((measured, lambda v, sql=sql, rate=rate, placement=placement:
                     model.utilization(sql, rate, placement, v)))
    return model.fit(("spark", function), ["per_tuple", "per_call"], rows)


# The MIG's pipeline, measured on MEDIANs of a window's rows, where the job and DuckDB's
# thread weigh within a fifth of each other by the functions fitted before: (placement,
# (window seconds, tuples/s)). By value Spark's job selects the rows on every core; by reference
# it is the driver's control of the next batch alone, small beside a window's work but at low
# rates and short windows. The two overlap differently (``cost.Objective``): by value the sides
# ran one after another (sigma 1.00), by reference most of the control hid (0.44), 2026-12-02.
OVERLAP_POINTS = {"value": ("select_1=spark,aggregate_1=duckdb", ((300, 50_000), (120, 200_000))),
                  "reference": ("duckdb", ((10, 20_000), (60, 20_000)))}
OVERLAP_MEASURE = 40  # event seconds: at a tenth of a second a batch, 8 would be two batches


def _overlap(model: _Model, crossing: str) -> tuple[float, Fitted]:
    """sigma of ``Objective.load`` for plans whose crossings go by ``crossing``: the share of
    the smaller side of the MIG's pipeline that the larger one does not hide, once every unit
    cost is fitted: load = max + sigma * min."""
    placement, points = OVERLAP_POINTS[crossing]
    rows = []
    for size, rate in points:
        sql = _aggregate("MEDIAN", size, "WHERE property = 1")
        measured, o = _measured_load(model, sql, rate, size, placement, OVERLAP_MEASURE)
        assert o.plan.by_reference == (crossing == "reference"), placement
        a, e = o.plan.cost.arrival, o.plan.cost.evaluation
        rows.append((measured, max(a, e), min(a, e)))
    return fit_overlap(rows)


def fit_overlap(rows: list[tuple[float, float, float]]) -> tuple[float, Fitted]:
    """sigma in [0, 1] from rows of (measured load, larger side, smaller side), by least
    squares on relative error as every other fit: (t - larger) / t = sigma * smaller / t."""
    t, larger, smaller = (np.array(c) for c in zip(*rows, strict=True))
    x, y = smaller / t, (t - larger) / t
    sigma = float(np.clip(np.dot(x, y) / np.dot(x, x), 0.0, 1.0))
    fitted = larger + sigma * smaller
    return sigma, Fitted({("meta", "overlap", "sigma"): sigma}, fit_error(fitted, t), len(rows),
                         list(zip(t, fitted, strict=True)))


def write_profile(path: Path, profile: Profile, fits: dict,
                  probe: dict[str, list[float]] | None = None) -> None:
    lines = ["# Tandem calibration profile: unit costs of the cost model (Ji Sec. 6.3.2), in",
             "# seconds, measured by `tandem calibrate`. fit_error: RMS of the fit's residuals over the",
             "# mean of the function's measurements (0 where one measurement sets it).", "",
             "[meta]", f'name = "{profile.name}"', "micro_batch_seconds = 1.0",
             "# The operators share this machine's cores. The MIG's evaluation of a batch runs",
             "# beside Spark's job for the next one: a plan keeps up when",
             "# max(job, evaluation) + overlap * min(job, evaluation) <= 1 (cost.Objective.load);",
             "# overlap_reference where the crossings go by reference and the job is Spark's",
             "# control alone.", "time_shared = true", f"overlap = {profile.overlap:.3f}"]
    if profile.overlap_reference is not None:
        lines.append(f"overlap_reference = {profile.overlap_reference:.3f}")
    lines += [f"# {key}: fit error {fits['meta', key].error:.3f}" if ("meta", key) in fits
              else f"# {key}: not measured" for key in ("overlap", "overlap_reference")]
    if probe:
        lines += ["# The speed probe's seconds at the calibration's start and end "
                  "(benchmarking/speed.py):", "# `tandem bench` times it again against them."]
        lines += [f"probe_{e} = [{', '.join(f'{t:.4f}' for t in probe[e])}]" for e in probe]
    lines += ["# duckdb-partitioned: hash partitions that run at once (Spark's cores)",
              f"parallelism = {profile.parallelism}", ""]
    for engine, functions in profile.functions.items():
        for function, coefficients in functions.items():
            lines.append(f"[{engine}.{function}]")
            lines += [f"{k} = {v:.6g}" for k, v in coefficients.items()]
            fitted = fits.get((engine, function))
            if fitted is not None:
                lines.append(f"fit_error = {fitted.error:.3f}")
            elif function != "memory":
                lines.append("# not measured: the shipped default")
            lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))

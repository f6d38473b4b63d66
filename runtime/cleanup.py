"""The nightly clean-up (``tandem_nightly_cleanup`` in Airflow, ``tandem cleanup`` on the command
line): purge old state and results, compact the DuckDB file, prune Spark's checkpoint logs,
archive the landing files every micro-batch run has read, refresh the catalog's statistics from
those files and optimise the queries again, recording each plan that changes and why."""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import tomli_w

from columnar.store import ColumnarStore
from optimizer.catalog import parse_catalog
from optimizer.logical import windows
from optimizer.tomlfile import read_toml
from rowstream.landing import committed_batches, landed_files, last_file_read, read_landed
from runtime import settings
from runtime.explain import explain
from runtime.microbatch import exclusive, live_checkpoints, microbatch_name
from workload.schema import StreamSchema

ARCHIVE = "archive"  # subdirectory of the landing directory


@dataclass
class CleanupReport:
    state_rows: int = 0  # window state older than the retention
    result_rows: int = 0
    progress_rows: int = 0
    store_bytes_before: int = 0  # of the DuckDB file's blocks in use
    store_bytes_after: int = 0
    checkpoint_files: int = 0
    checkpoint_bytes: int = 0
    archived: list[str] = field(default_factory=list)
    statistics: dict = field(default_factory=dict)
    plans: list[dict] = field(default_factory=list)  # per query: placement, changed, reason

    @property
    def bytes_reclaimed(self) -> int:
        return max(self.store_bytes_before - self.store_bytes_after, 0) + self.checkpoint_bytes

    @property
    def rows_reclaimed(self) -> int:
        return self.state_rows + self.result_rows + self.progress_rows

    def to_json(self) -> dict:
        return {**asdict(self), "bytes_reclaimed": self.bytes_reclaimed,
                "rows_reclaimed": self.rows_reclaimed}


def purge_store(store: ColumnarStore, retention: timedelta, longest_window: timedelta,
                keep_batches: int, report: CleanupReport) -> None:
    """Delete, in every query's schema, the results more than ``retention`` older than the last
    window_end evaluated (and the K-slack decisions), the window state older than that and than
    the longest window (open windows need the rest), and the progress of all but the last
    ``keep_batches`` micro-batches.
    The MIG purges state as windows close; this catches what a stopped query left behind."""
    tables = store.con.sql("SELECT schema_name, table_name FROM duckdb_tables() "
                           "WHERE schema_name LIKE 'q\\_%' ESCAPE '\\'").fetchall()
    columns = {(s, t): dict(store.con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = ? AND "
        "table_name = ?", [s, t]).fetchall()) for s, t in tables}
    for schema in sorted({s for s, _ in tables}):
        if (schema, "progress") not in columns:
            continue
        latest, last_batch = store.con.execute(
            f"SELECT max(last_end), max(batch_id) FROM {schema}.progress").fetchall()[0]
        if last_batch is not None:
            report.progress_rows += store.con.execute(
                f"DELETE FROM {schema}.progress WHERE batch_id <= ?",
                [last_batch - keep_batches]).fetchall()[0][0]
        if latest is None:
            continue
        for (s, table), names in columns.items():
            if s != schema or table in ("progress", "quarantine", "window_ends"):
                continue
            # A crossing's rows carry the stream's time column, its only TIMESTAMP (a stream
            # with several is left to the MIG's own purge).
            times = [c for c, kind in names.items() if kind == "TIMESTAMP"]
            column = ("window_end" if "window_end" in names else
                      "high_water" if table == "slack" else  # K's decisions, kept as results
                      times[0] if len(times) == 1 else None)
            if column is None:  # pane tables: the MIG keeps them to the open windows
                continue
            cutoff = latest - (retention if table in ("results", "slack")
                               else max(retention, longest_window))
            deleted = store.con.execute(f"DELETE FROM {schema}.{table} WHERE {column} < ?",
                                        [cutoff]).fetchall()[0][0]
            if table == "slack":
                report.progress_rows += deleted
            elif table == "results":
                report.result_rows += deleted
            else:
                report.state_rows += deleted


def used_bytes(store: ColumnarStore) -> int:
    """The bytes of the DuckDB file's blocks in use (freed blocks are reused by later writes;
    the file shrinks only where they lie at its end)."""
    blocks, size = store.con.execute(
        "SELECT used_blocks, block_size FROM pragma_database_size()").fetchall()[0]
    return blocks * size


def compact(store: ColumnarStore) -> None:
    """Write the deletions out, so that their blocks are free."""
    store.con.execute("VACUUM")
    store.con.execute("FORCE CHECKPOINT")


def prune_checkpoint(checkpoint: Path, keep: int, report: CleanupReport) -> None:
    """Delete the offset and commit logs of all but the last ``keep`` committed micro-batches
    (at least two: a restart re-reads the last offsets, and the ones before them to replay an
    uncommitted batch). Spark keeps its state store files itself."""
    committed = committed_batches(checkpoint)
    if not committed:
        return
    first_kept = max(committed) - max(keep, 2) + 1
    for log in ("offsets", "commits"):
        for path in (checkpoint / log).iterdir():
            batch = path.name.removeprefix(".").removesuffix(".crc")
            if batch.isdigit() and int(batch) < first_kept:
                report.checkpoint_bytes += path.stat().st_size
                report.checkpoint_files += 1
                path.unlink()


def archive_landed(landing: Path, checkpoints: list[Path], report: CleanupReport) -> list[Path]:
    """Move the files that every micro-batch checkpoint has read to ``landing/archive``, all
    but the last one read (an interrupted run's closing batch reads it again). The runs wait
    meanwhile. Returns the archived paths."""
    with ExitStack() as locks:
        for checkpoint in checkpoints:
            locks.enter_context(exclusive(checkpoint))
        read = min((last_file_read(c) for c in checkpoints), default="")
        names = [f for f in landed_files(landing) if f < read]
        (landing / ARCHIVE).mkdir(exist_ok=True)
        for name in names:
            shutil.move(landing / name, landing / ARCHIVE / name)
    report.archived = names
    return [landing / ARCHIVE / n for n in names]


def observe(files: list[Path], catalog: dict, stream: str) -> dict:
    """Statistics of ``stream`` as the files show them: its rate, the distinct values of the
    catalog's column sets, and the selectivity of the catalog's predicates that a row decides
    alone (a correlated predicate such as ``value > 0.9 * max_load`` keeps its estimate)."""
    entry = parse_catalog(catalog).streams[stream]
    schema = StreamSchema.of(entry)
    rows = pl.concat([read_landed(p, schema) for p in files]).filter(pl.col("reason").is_null())
    if rows.height < 2:
        return {}
    ts = rows[schema.time_column]
    seconds = (ts.max() - ts.min()).total_seconds()
    # The column sets the catalog counts, and the stream's key: its groups are the likeliest.
    counted = [*catalog["streams"][stream].get("distinct", {}), ", ".join(entry.key)]
    observed = {"rows": rows.height, "rate": rows.height / max(seconds, 1.0),
                "distinct": {key: rows.select(pl.struct([c.strip() for c in key.split(",")])
                                              .n_unique()).item()
                             for key in counted if key},
                "selectivity": {}}
    con = duckdb.connect()
    con.register("sample", rows.to_arrow())
    for predicate in catalog.get("selectivity", {}):
        try:
            observed["selectivity"][predicate] = con.execute(
                f"SELECT avg(CASE WHEN {predicate} THEN 1.0 ELSE 0.0 END) FROM sample").fetchall()[0][0]
        except duckdb.Error:  # it names columns that only a query computes
            pass
    con.close()
    return observed


def refreshed_catalog(catalog: dict, observed: dict, stream: str, base: Path) -> dict:
    """The catalog with the observed statistics in place of its estimates; ``base``: where it
    was read from (its landing directories are relative to it)."""
    refreshed = json.loads(json.dumps(catalog))  # a deep copy
    for entry in refreshed["streams"].values():
        if "landing" in entry:
            entry["landing"] = str((base.parent / entry["landing"]).resolve())
    spec = refreshed["streams"][stream]
    spec["rate"] = observed["rate"]
    spec.setdefault("distinct", {}).update(observed["distinct"])
    refreshed.setdefault("selectivity", {}).update(observed["selectivity"])
    return refreshed


def _changes(before: dict, after: dict) -> str:
    """What moved between two sets of statistics, for the plan log."""
    def flat(stats: dict) -> dict:
        return {"rate": stats.get("rate"),
                **{f"distinct({k})": v for k, v in stats.get("distinct", {}).items()},
                **{f"selectivity({k})": v for k, v in stats.get("selectivity", {}).items()}}

    old, new = flat(before), flat(after)
    moved = [f"{k} {old.get(k):.4g} → {v:.4g}" for k, v in new.items()
             if old.get(k) is not None and v is not None and abs(v - old[k]) > 0.05 * abs(old[k])]
    return "; ".join(moved) or "statistics within 5 % of the last plan's"


def reoptimise(queries: list[str], catalog: Path, statistics: dict, store: ColumnarStore,
               report: CleanupReport) -> None:
    """Optimise each query with the refreshed catalog; log the plan if it differs from the last
    one logged, with the statistics that moved."""
    for query in queries:
        explanation = explain(query, catalog=str(catalog))
        plan = explanation.optimization.plan
        name = explanation.query.stem
        last = store.recent("plans", name, 1)
        previous = json.loads(last[0]["placement"]) if last else None
        changed = previous != plan.placement
        reason = ("first plan logged" if previous is None else
                  _changes(json.loads(last[0]["statistics"]), statistics))
        if changed:
            store.record("plans", {
                "query": name, "logged_at": datetime.now(UTC).replace(tzinfo=None),
                "rate": explanation.optimization.rate, "placement": plan.placement,
                "feasible": explanation.optimization.feasible,
                "bottleneck_cost": plan.cost.bottleneck,
                "utilization_cost": plan.cost.utilization, "statistics": statistics,
                "reason": reason})
        report.plans.append({"query": name, "placement": plan.placement, "changed": changed,
                             "reason": reason if changed else "unchanged"})


def cleanup(queries: list[str], *, retention: timedelta = timedelta(days=1),
            keep_batches: int = 10, store: Path | None = None, checkpoints: Path | None = None,
            landing: Path | None = None, catalog: Path | None = None) -> CleanupReport:
    """The nightly clean-up of the deployment in ``settings.state_dir()``. ``queries`` are the
    queries the micro-batch runs keep up to date over ``landing``."""
    store = store or settings.store_path()
    checkpoints = checkpoints or settings.checkpoints_dir()
    landing = landing or settings.landing_dir()
    report = CleanupReport()
    if store.is_file():
        longest = max(w.size for q in queries
                      for w in windows(explain(q).optimization.logical.root))
        with ColumnarStore(store) as columnar:
            report.store_bytes_before = used_bytes(columnar)
            purge_store(columnar, retention, timedelta(seconds=longest), keep_batches, report)
            compact(columnar)
            report.store_bytes_after = used_bytes(columnar)
    query_checkpoints = []
    for query in queries:
        # One lock for all the plans of a query's micro-batch runs (runtime.microbatch).
        with exclusive(checkpoints / microbatch_name(query)):
            for checkpoint in (live_checkpoints(query, checkpoints, store) if store.is_file()
                               else [checkpoints / microbatch_name(query)]):
                query_checkpoints.append(checkpoint)
                if checkpoint.is_dir():
                    prune_checkpoint(checkpoint, keep_batches, report)
    if landing.is_dir():
        archived = archive_landed(landing, query_checkpoints, report)
        base = catalog or settings.catalog_path(settings.query_path(queries[0]))
        raw = read_toml(base, "catalog", "pass --catalog or set TANDEM_CATALOG")
        stream = settings.query_stream(queries[0], base).name
        report.statistics = observe(archived, raw, stream) if archived else {}
        if report.statistics:
            observed = settings.state_dir() / settings.OBSERVED_CATALOG
            observed.parent.mkdir(parents=True, exist_ok=True)
            refreshed = refreshed_catalog(raw, report.statistics, stream, base)
            refreshed[settings.REFRESHED_FROM] = str(raw.get(settings.REFRESHED_FROM)
                                                     or base.resolve())
            observed.write_text(tomli_w.dumps(refreshed))
            with ColumnarStore(store) as columnar:
                reoptimise(queries, observed, report.statistics, columnar, report)
    return report

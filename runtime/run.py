"""`tandem run`: optimise a query (unless a placement is forced), deploy it on Spark and DuckDB
and run it over the generator or a landing directory. The CLI and the Airflow operators call
``run``."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from columnar.store import ColumnarStore, schema_name
from optimizer import load_catalog
from optimizer.catalog import Stream
from optimizer.deployment import Deployment, deploy
from optimizer.errors import TandemError
from optimizer.logical import windows
from rowstream.buckets import WHOLE_PLAN
from rowstream.by_reference import ReferencedFiles, ReferencedStreams
from rowstream.by_reference import fits as fits_by_reference
from rowstream.dsps import SPARK_DESIGNS
from rowstream.gateway import Gateway, Quarantined
from rowstream.generator import GeneratedStream
from rowstream.generator_source import last_window_end
from rowstream.landing_source import LandingDirectory
from rowstream.mig import EPOCH, BatchReport, Mig, Transfers
from rowstream.native import NativeFiles, fits, native_format
from rowstream.session import jvm_log, spark_session
from rowstream.shared import SharedBatches
from runtime.explain import Explanation, explain
from runtime.quality import Quality, describe_slack, policy, slack_summary
from runtime.settings import spark_log_path, spark_master
from runtime.spec import RunSpec, Takeover
from workload.schema import StreamSchema
from workload.smart_plugs import PLUGS_STREAM, SmartPlugs, format_steps

_STARTING = threading.Lock()
ENDED_GRACE = 10.0  # a generated stream waited for after its last batch, seconds
JVM_EXIT_SECONDS = 10.0  # how long a broken gateway waits for the JVM's launcher to exit
OWNER = "tandem-run.json"  # in a checkpoint: the store and run it belongs to
# How a run that a dead or silent engine stopped ends its one line.
KEPT = "what both engines committed is kept: `--resume` continues from the last checkpoint"


@dataclass(frozen=True)
class RunSummary:
    query: str
    placement: dict[str, str]
    tuples: int
    batches: int
    window_ends: int
    result_rows: int
    quarantined: Quarantined  # rows the gateway could not read or that arrived late
    dropped_by_watermark: int  # rows Spark's stateful operators dropped as late (0: see run)
    lateness: float
    wall_seconds: float
    transfers: Transfers
    store: str
    results_table: str
    # How Spark read the stream: "generator", "reference" (Spark planned the batches, DuckDB
    # read their files, rowstream/by_reference.py), "native" (Spark's own Parquet or text
    # source, rowstream/native.py) or "python" (the landing directory's Python data source).
    gateway: str = "generator"
    # With a K-slack buffer: the quality stated and K over the run (``slack_summary``).
    slack: dict | None = None

    @property
    def throughput(self) -> float:
        return self.tuples / self.wall_seconds if self.wall_seconds else 0.0

    def to_json(self) -> dict:
        moved = self.transfers
        return {**{f.name: getattr(self, f.name) for f in fields(self)
                   if f.name not in ("transfers", "quarantined")},
                "throughput": self.throughput, **self.quarantined.to_json(),
                "transfers": {"to_duckdb_tuples": moved.to_duckdb_tuples,
                              "to_duckdb_bytes": moved.to_duckdb_bytes,
                              "to_spark_tuples": moved.to_spark_tuples,
                              "to_spark_bytes": moved.to_spark_bytes}}


def run(spec: RunSpec, *, explanation: Explanation | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
        on_start: Callable[[Mig], None] | None = None,
        stop_when: Callable[[], bool] | None = None) -> RunSummary:
    """Run ``spec``. ``explanation``: its plan, explained already (the Airflow DAG's optimise
    task, a benchmark); else ``spec``'s is explained here. ``on_batch`` gets each micro-batch's
    report, ``on_start`` the MIG once the query runs; the run stops once ``stop_when`` returns
    true (a benchmark gives up on a plan far from feasible). Within L a row counts exactly, a
    later one goes to the quarantine (``rowstream/eventtime.py``); a run in which no micro-batch
    finishes for ``spec.stall_timeout`` seconds stops with an error (``Watchdog``)."""
    if spec.spark_design not in SPARK_DESIGNS and spec.spark_design not in WHOLE_PLAN:
        raise TandemError(f"Spark design {spec.spark_design!r}: give one of "
                          f"{', '.join(SPARK_DESIGNS)}")
    given = explanation
    explanation = explanation or _planned(spec)
    schemas = stream_schemas(explanation)
    schema = schemas[0]
    source, spec = spec.source, (read_from(spec, schema, explanation) if len(schemas) == 1
                                 else spec)
    if given is None and spec.source != source:  # priced by the format of what it reads
        explanation = _planned(spec)
    physical = explanation.optimization.plan
    name = spec.name or explanation.query.stem
    takeover, generated, store = spec.takeover, spec.generated, spec.store
    reports: list[BatchReport] = []

    def record(report: BatchReport) -> None:
        reports.append(report)
        if on_batch:
            on_batch(report)

    if takeover and not generated and (takeover.begin != takeover.replay_until
                                       or takeover.tables):
        raise TandemError("over a landing directory a run migrates by Parallel Track only: "
                          "its stream cannot be read again from an event time")
    if not physical.logical.operators:
        raise TandemError("the query only windows a stream: give it an operator to run")
    streams = catalog_streams(explanation)
    lateness = default_lateness(streams) if spec.lateness is None else spec.lateness
    quality = _quality(explanation, spec)
    deployment = deploy(physical)
    checkpoint = Path(spec.checkpoint) if spec.checkpoint else default_checkpoint(store, name)
    with ColumnarStore(store) as columnar:
        # A resumed run reads the way its checkpoint's query did: Spark restores its source.
        # A plan that takes over over a landing directory begins after a file: the Python
        # data source's offsets are file names, Spark's own file source has none to begin at.
        kind = pair(checkpoint, columnar, [name], spec.resume,
                    joined_gateway(spec, schemas, deployment) if len(schemas) > 1
                    else "generator" if generated else
                    landing_gateway(spec.source, deployment,
                                    "python" if takeover else spec.gateway))
        slide = physical.logical.root.slide
        final_end = None
        if generated:
            plugs = SmartPlugs(rate=spec.rate, steps=spec.steps, **(spec.topology or {}))
            final_end = EPOCH + timedelta(microseconds=last_window_end(plugs, spec.duration, slide))
        if spec.last_end is not None:
            final_end = min(final_end or spec.last_end, spec.last_end)
        if quality.disorder != "fixed":
            # The buffer sizes K file by file where one process judges the files in order:
            # DuckDB by reference, or the MIG on the driver over Spark's own file source.
            on_driver = kind == "native" and not deployment.judged_in_executors
            if kind == "generator":
                raise TandemError(
                    f"K-slack buffers ({quality.describe()}) are sized over landed files; the "
                    "generator's stream arrives in order: give a landing directory "
                    "(--source DIR), or no quality")
            if kind != "reference" and not on_driver:
                raise TandemError(
                    f"K-slack buffers ({quality.describe()}) are sized over landed files judged "
                    f"on the driver, and this run reads {spec.source} by {kind}"
                    + (" in Spark's executors" if kind == "native" else "")
                    + ": give a landing directory and a plan whose Spark operators are "
                    "stateless, not duckdb-partitioned nor split, or no quality")

        if len(schemas) == 1:
            gateway = replace(_gateway(kind, spec, schema, physical.logical.root,
                                       lateness=lateness, checkpoint=checkpoint),
                              **_buffer(quality, physical.logical, streams[0], lateness))
        else:
            gateway = referenced_streams(spec, schemas, streams, checkpoint, slide,
                                         partial(_buffer, quality, physical.logical))

        def bridge_of(spark) -> Mig:
            return Mig(name, deployment, columnar, spark, explanation.fragments, gateway,
                       record, final_end=final_end, spark_design=spec.spark_design,
                       lateness=lateness, checkpoint=str(checkpoint), stop_after=spec.stop_after,
                       **(taking_over(takeover, plugs.start if generated else 0, columnar, name,
                                      spec.resume) if takeover else {}))

        bridge, wall, dropped = _drive(spec, name, checkpoint, gateway, bridge_of, reports,
                                       final_end, on_start=on_start, stop_when=stop_when)
        return _summarised(columnar, spec, name, physical.placement, reports, dropped, lateness,
                           wall, bridge.transfers, takeover.results if takeover else name,
                           gateway.name, quality)


def run_together(spec: RunSpec, *, on_batch: Callable[[str, BatchReport], None] | None = None
                 ) -> list[RunSummary]:
    """Run ``spec.query`` and the queries ``spec.together`` over the same stream (or the same
    streams) in one run: one Spark query plans the micro-batches of the landing directory, and
    DuckDB reads and judges each batch's files once for the queries that judge alike
    (``rowstream/shared.py``); each query keeps its own plan, window state, K-slack buffer,
    progress and results, under its own name, as a run of it alone would. Every query's
    operators over the stream run in DuckDB (by reference). ``on_batch`` gets each query's
    name and micro-batch report. Returns a summary per query, in order."""
    queries = [spec.query, *spec.together]
    if spec.generated:
        raise TandemError("several queries in one run share a landing directory's read: give "
                          "--source DIR")
    if spec.name or spec.takeover:
        raise TandemError("several queries in one run are named by their files: give no name")
    explanations = [_planned(replace(spec, query=q)) for q in queries]
    names = [e.query.stem for e in explanations]
    if len(set(names)) < len(names):
        raise TandemError(f"the queries {', '.join(names)} of one run need names of their own")
    schemas = stream_schemas(explanations[0])
    for explanation in explanations[1:]:
        if [s.name for s in stream_schemas(explanation)] != [s.name for s in schemas]:
            raise TandemError(
                f"{explanation.query.stem} reads {_streams_of(explanation)}, and "
                f"{names[0]} {_streams_of(explanations[0])}: queries share a run over the same "
                "streams; run the others apart")
    deployments = [deploy(e.optimization.plan) for e in explanations]
    qualities = [_quality(e, spec) for e in explanations]
    for explanation, deployment in zip(explanations, deployments, strict=True):
        if (joined_gateway(spec, schemas, deployment) if len(schemas) > 1 else landing_gateway(
                spec.source, deployment, spec.gateway)) != "reference":
            raise TandemError(f"{explanation.query.stem}'s plan runs operators over the stream "
                              "in Spark: queries share a run where DuckDB reads the files by "
                              "reference; place every operator over the stream in DuckDB "
                              f"(--placement duckdb), or run it apart")
    streams = catalog_streams(explanations[0])
    lateness = default_lateness(streams) if spec.lateness is None else spec.lateness
    group = "+".join(names)
    checkpoint = Path(spec.checkpoint) if spec.checkpoint else default_checkpoint(spec.store,
                                                                                  group)
    reports: dict[str, list[BatchReport]] = {name: [] for name in names}
    every: list[BatchReport] = []  # the watchdog's
    with ColumnarStore(spec.store) as columnar:
        pair(checkpoint, columnar, names, spec.resume, "reference")
        root = explanations[0].optimization.logical.root
        gateway = (_gateway("reference", spec, schemas[0], root, lateness=lateness,
                            checkpoint=checkpoint) if len(schemas) == 1 else
                   referenced_streams(spec, schemas, streams, checkpoint, root.slide))

        def judging(quality: Quality, explanation: Explanation) -> Gateway:
            """The query's gateway: the shared one, or, where the query states a quality, one
            with a K-slack buffer of its own (whose files are read once for all,
            ``SharedBatches``)."""
            if quality.disorder == "fixed":
                return gateway
            plan = explanation.optimization.logical
            if len(schemas) == 1:
                return replace(gateway, **_buffer(quality, plan, streams[0], lateness))
            return referenced_streams(spec, schemas, streams, checkpoint, root.slide,
                                      partial(_buffer, quality, plan))

        def recorder(name: str) -> Callable[[BatchReport], None]:
            def record(report: BatchReport) -> None:
                reports[name].append(report)
                every.append(report)
                if on_batch:
                    on_batch(name, report)
            return record

        def bridge_of(spark) -> SharedBatches:
            return SharedBatches([
                Mig(name, deployment, columnar, spark, explanation.fragments,
                    judging(quality, explanation), recorder(name), lateness=lateness,
                    checkpoint=str(checkpoint))
                for name, explanation, deployment, quality in zip(
                    names, explanations, deployments, qualities, strict=True)])

        bridge, wall, dropped = _drive(spec, group, checkpoint, gateway, bridge_of, every, None,
                                       on_start=None, stop_when=None)
        return [_summarised(columnar, spec, name, e.optimization.plan.placement, reports[name],
                            dropped, lateness, wall, mig.transfers, name, gateway.name, q)
                for name, e, mig, q in zip(names, explanations, bridge.migs, qualities,
                                           strict=True)]


def _buffer(quality: Quality, plan, stream: Stream, lateness: float) -> dict:
    """How ``stream``'s K-slack buffer is sized for ``plan``, where ``quality`` asks for one:
    the gateway's ``policy`` and ``value``."""
    if quality.disorder == "fixed":
        return {}
    return dict(zip(("policy", "value"), policy(quality, plan, stream, lateness), strict=True))


def _streams_of(explanation: Explanation) -> str:
    return " and ".join(s.name for s in stream_schemas(explanation))


def _quality(explanation: Explanation, spec: RunSpec) -> Quality:
    """The quality the query states, with the run's options over it."""
    return explanation.quality.overridden(disorder=spec.disorder, max_error=spec.max_error,
                                          min_recall=spec.min_recall,
                                          confidence=spec.confidence)


def referenced_streams(spec: RunSpec, schemas: list[StreamSchema], streams: list[Stream],
                       checkpoint: Path, slide: float,
                       buffer: Callable[[Stream, float], dict] | None = None
                       ) -> ReferencedStreams:
    """The gateway of a join between streams: each stream from its own landing directory
    under ``spec.source``, with its own lateness and, where ``buffer`` sizes one, K-slack
    buffer; synchronised by the earliest watermark."""
    parts = []
    for schema, stream in zip(schemas, distinct(streams), strict=True):
        own = stream.lateness if spec.lateness is None else spec.lateness
        parts.append(ReferencedFiles(schema, str(Path(spec.source) / schema.name),
                                     str(checkpoint), own, slide, spec.files_per_batch,
                                     **(buffer(stream, own) if buffer else {})))
    return ReferencedStreams(tuple(parts))


def _summarised(columnar: ColumnarStore, spec: RunSpec, name: str, placement: dict,
                reports: list[BatchReport], dropped: dict[int, int], lateness: float,
                wall: float, transfers: Transfers, results: str, gateway: str,
                quality: Quality) -> RunSummary:
    """A query's summary of a run, also recorded in the runs' log."""
    summary = RunSummary(name, placement, sum(r.tuples for r in reports), len(reports),
                         sum(r.window_ends for r in reports), sum(r.result_rows for r in reports),
                         Quarantined.total_of(r.quarantined for r in reports),
                         sum(dropped.values()), lateness, wall, transfers, str(spec.store),
                         f"{schema_name(results)}.results", gateway,
                         slack_summary(quality, columnar.slack(name),
                                       columnar.progress(name, before=2**62).slack)
                         if quality.disorder != "fixed" else None)
    columnar.record("runs", {
        "query": name, "logged_at": datetime.now(UTC).replace(tzinfo=None),
        "source": spec.source, "placement": placement, "tuples": summary.tuples,
        "batches": summary.batches, "result_rows": summary.result_rows,
        **summary.quarantined.to_json(),
        "wall_seconds": wall, "throughput": summary.throughput})
    return summary


def _drive(spec: RunSpec, name: str, checkpoint: Path, gateway: Gateway,
           bridge_of: Callable, reports: list[BatchReport], final_end: datetime | None, *,
           on_start: Callable | None, stop_when: Callable[[], bool] | None) -> tuple:
    """Start Spark's query over ``gateway``'s stream, its ``foreachBatch`` the bridge that
    ``bridge_of(spark)`` builds (a query's MIG, or several queries' sharing the stream), and
    run it until the stream ends, the landing directory is drained, or ``stop_when``; a
    failure of either engine becomes a TandemError. Returns the bridge, the wall seconds and
    Spark's rows dropped by its watermark per micro-batch."""
    generated = spec.generated
    with _STARTING:  # concurrent runs (tandem verify --parallel) name their queries apart
        spark = spark_session(log=spark_log_path(spec.store), master=spark_master())
        bridge = bridge_of(spark)
        if spec.resume:
            bridge.recover()
        stream = gateway.stream(spark)
        writer = (bridge.stream(stream).writeStream
                  .outputMode("append").foreachBatch(bridge)
                  .option("checkpointLocation", str(checkpoint)))
        if spec.available_now:
            writer = writer.trigger(availableNow=True)
        started = time.perf_counter()
        handle = writer.queryName(_query_name(spark, name)).start()
    log = jvm_log() or spark_log_path(spec.store)  # a JVM started by an earlier run logs there
    if on_start:
        on_start(bridge)
    dropped: dict[int, int] = {}  # Spark's rows dropped by watermark, per batch
    watchdog = Watchdog(spec.stall_timeout, log)
    asked = partial(answered, spec.stall_timeout)
    try:
        while (asked(lambda: handle.isActive) and not bridge.finished
               and bridge.failure is None and not bridge.interrupted
               and (generated or spec.available_now or not asked(_drained, handle))):
            if stop_when is not None and stop_when():
                bridge.paused = True  # what it has taken is evaluated; nothing more
                break
            if watchdog.due():  # it parses a hundred JSON documents: once a second
                asked(_count_dropped, handle, dropped)
                watchdog.check(len(reports), max(dropped, default=-1),
                               generated and asked(_drained, handle) and not bridge.busy(),
                               final_end)
            time.sleep(0.05)
        bridge.drain()  # the last batch's evaluation
        asked(_count_dropped, handle, dropped)
        # A query that stopped with an error is inactive: its results so far are not the run's.
        # One interrupted on purpose stopped with the MIG's refusal of its next batch.
        if bridge.failure or (not bridge.interrupted and asked(handle.exception)):
            cause = bridge.failure or handle.exception()
            if _source_died(cause):
                raise TandemError(f"Spark's Python stream source stopped during the run "
                                  f"(killed, or out of memory: see the kernel's log, `dmesg`, "
                                  f"and {log}); {KEPT}")
            full = "No space left on device" in str(cause)
            raise TandemError(f"{'a disk is full' if full else 'the Spark query failed'}: "
                              f"{_reason(cause)} (details in {log}; "
                              f"{'free space, then ' if full else ''}"
                              "`--resume` continues from the last checkpoint)") from cause
    # Py4J reports a JVM gone mid-call as its own error, one gone before a new connection
    # as the socket's refusal.
    except (Py4JError, ConnectionError) as err:
        if isinstance(err, Py4JJavaError) or jvm_alive(spark, wait=JVM_EXIT_SECONDS):
            raise
        raise TandemError(f"Spark's JVM stopped during the run (killed, or out of memory: "
                          f"see {log}); {KEPT}") from None
    except Unanswered:
        kill_jvm(spark)
        raise TandemError(f"Spark's JVM answered no call for {spec.stall_timeout:.0f} s "
                          f"(threads lost to an OutOfMemoryError, or the process stopped: "
                          f"see {log}), so the run killed it; {KEPT}") from None
    finally:
        _stop(handle, spark)
        bridge.close()
    return bridge, time.perf_counter() - started, dropped


def taking_over(takeover: Takeover, start: int, store: ColumnarStore, name: str,
                resume: bool) -> dict:
    """The state a plan that a run migrates to takes over, copied into its schema, and the
    MIG's arguments that continue the run. A resumed plan whose batches have begun to arrive
    has the copy already, and has changed it since."""
    if not (resume and store.arrivals(name)):
        store.take_over(takeover.previous, name, takeover.tables)
    until = (EPOCH + timedelta(microseconds=round((start + takeover.replay_until) * 1e6))
             if takeover.taken else None)
    return {"results": takeover.results, "batch_base": takeover.batch_base,
            "floor": takeover.floor, "taken": takeover.taken, "taken_until": until}


def by_rule(rules: dict[str, int]) -> str:
    """Quarantined rows per rule other than late, as a clause ("" for none)."""
    return "".join(f"; {n:,} fail {rule}" for rule, n in sorted(rules.items()) if rule != "late")


def describe(summary: dict) -> str:
    """A run's summary (``RunSummary.to_json``) in words."""
    placed = ", ".join(f"{op}={engine}" for op, engine in summary["placement"].items())
    return (f"{summary['query']} ({placed}): {summary['tuples']:,} tuples in "
            f"{summary['wall_seconds']:.1f} s ({summary['throughput']:,.0f} tuples/s), "
            f"{summary['window_ends']:,} slides, {summary['result_rows']:,} result rows, "
            f"{summary['quarantined']:,} quarantined ({summary['late']:,} late, "
            + ("K-slack" if summary.get("slack") else f"lateness {summary['lateness']:g} s")
            + f"{by_rule(summary['rules'])}); results in {summary['results_table']} "
            f"of {summary['store']}"
            + (f"; {describe_slack(summary['slack'])}" if summary.get("slack") else "")
            + "".join(f"; migration {m['number']} ({m['strategy']}): {m['reason']}"
                      for m in summary.get("migrations", [])))


class Watchdog:
    """Fails a run that makes no progress: no micro-batch of Spark's finished (nor of the MIG's)
    for ``timeout`` seconds, or a generated stream that Spark has read to its end while the
    plan's last window_end never completed."""

    def __init__(self, timeout: float, log: Path):
        self.timeout, self.log = timeout, log
        self.seen: tuple[int, int] | None = None
        self.moved = self.checked = time.perf_counter()
        self.ended_since: float | None = None

    def due(self) -> bool:
        return time.perf_counter() - self.checked > 1.0

    def check(self, reports: int, spark_batch: int, ended: bool, final_end) -> None:
        now = self.checked = time.perf_counter()
        if (reports, spark_batch) != self.seen:
            self.seen, self.moved = (reports, spark_batch), now
        if now - self.moved > self.timeout:
            raise TandemError(f"no micro-batch finished in {self.timeout:.0f} s (the last was "
                              f"Spark's batch {spark_batch}); the run is stopped: see {self.log}, "
                              "then `--resume` continues from the last checkpoint")
        self.ended_since = (self.ended_since or now) if ended else None
        if self.ended_since is not None and now - self.ended_since > ENDED_GRACE:
            raise TandemError(f"Spark read the whole generated stream, but the plan's windows "
                              f"never completed up to its last window_end {final_end}: this is a "
                              f"bug of Tandem's, please report it with {self.log}")


def catalog_streams(explanation: Explanation) -> list[Stream]:
    """The catalog's entries of the streams the explained query reads."""
    known = load_catalog(explanation.catalog).streams
    return [known[w.stream] for w in windows(explanation.optimization.logical.root)]


def distinct(streams: list[Stream]) -> list[Stream]:
    """Each stream once, in the order the query's windows first read it."""
    return list({s.name: s for s in streams}.values())


def stream_schemas(explanation: Explanation) -> list[StreamSchema]:
    """The schemas of the streams the explained query reads (its windows may read one more
    than once), in the order its windows first read them."""
    return [StreamSchema.of(s) for s in distinct(catalog_streams(explanation))]


def stream_schema(explanation: Explanation, what: str = "this") -> StreamSchema:
    """The schema of the one stream the explained query reads, for ``what`` (a command that
    reads one stream)."""
    schemas = stream_schemas(explanation)
    if len(schemas) != 1:
        raise TandemError(f"the query joins the streams {', '.join(s.name for s in schemas)}, "
                          f"and {what} reads one stream; a join between streams runs with "
                          f"`tandem run {explanation.query.stem} --source DIR`")
    return schemas[0]


def joined_gateway(spec: RunSpec, schemas: list[StreamSchema], deployment: Deployment) -> str:
    """How a run reads several streams, a join between them: by reference, each stream from
    its own landing directory, ``spec.source``'s subdirectory named by the stream."""
    names = ", ".join(s.name for s in schemas)
    if spec.generated:
        raise TandemError(f"the query joins the streams {names}, and the generator writes one "
                          f"stream: give --source DIR, with one landing directory per stream "
                          f"in it ({', '.join(f'DIR/{s.name}' for s in schemas)}; `tandem "
                          "generate DIR/<stream> --stream <stream>` writes the examples)")
    for s in schemas:
        directory = Path(spec.source) / s.name
        if not directory.is_dir():
            raise TandemError(f"the query joins the streams {names}: {spec.source} has no "
                              f"landing directory {s.name}/ for {s.name}; land its files in "
                              f"{directory}")
        if spec.gateway not in ("auto", "reference") or not fits_by_reference(directory,
                                                                              deployment):
            raise TandemError(f"a join between streams ({names}) runs by reference: every "
                              "operator over the streams in DuckDB (not duckdb-partitioned), "
                              f"each stream's files all CSV or all Parquet ({directory} is not "
                              "so, or --gateway asked otherwise); pin no operator to Spark")
    return "reference"


def read_from(spec: RunSpec, schema: StreamSchema, explanation: Explanation) -> RunSpec:
    """``spec`` reading its stream where it can be read: the generator writes the smart plugs
    only, so a run of another stream with no ``--source`` reads the landing directory its
    catalog entry names."""
    if not spec.generated or schema.columns == PLUGS_STREAM.columns:
        return spec
    landing = next(s.landing for s in catalog_streams(explanation) if s.name == schema.name)
    if landing is None or not Path(landing).is_dir():
        where = f"its landing {landing} does not exist" if landing else "its catalog entry " \
            "names no landing directory"
        raise TandemError(f"the generator writes only the smart plugs' stream, and {schema.name} "
                          f"has other columns; {where}: give --source DIR")
    return replace(spec, source=landing)


def default_lateness(streams: list[Stream]) -> float:
    """A run's allowed lateness L unless it is given: the largest of its streams'."""
    return max(s.lateness for s in streams)


def _reason(cause: BaseException) -> str:
    """The first line of what went wrong; for an error from Spark's JVM, of its root cause
    (Py4J's own first line names only the call: "An error occurred while calling o1836.getResult",
    and a failed query's may end in "(no cause message)")."""
    text = str(cause)
    if isinstance(cause, Py4JJavaError):
        with suppress(Py4JError, ConnectionError):  # the JVM may be gone
            error = cause.java_exception
            while error.getCause() is not None:
                error = error.getCause()
            text = error.toString()
    elif (root := _captured_root(cause)) is not None:
        text = root._desc
    return f"{type(cause).__name__}: {(text.strip().splitlines() or [''])[0]}"


def _captured_root(cause: BaseException) -> CapturedException | None:
    """The last of a PySpark error's causes, where it has any. PySpark converts each cause of a
    failed query's exception, keeping the JVM's text (``_desc``, its ``toString``) and stack
    (``_stackTrace``), for which it has no public accessor, and not the JVM's object."""
    if not isinstance(cause, CapturedException) or cause._cause is None:
        return None
    while cause._cause is not None:
        cause = cause._cause
    return cause


def _source_died(cause: BaseException) -> bool:
    """The Python process that runs a Python data source's reader for Spark (the generator's,
    the landing directory's) died: Spark, asking it for the next offset, read the end of its
    socket, and says no more than EOFException."""
    root = _captured_root(cause)
    return (root is not None and root._desc.startswith("java.io.EOFException")
            and "PythonStreamingSourceRunner" in (root._stackTrace or ""))


def _stop(handle, spark) -> None:
    """Stop the query. A JVM that dies between the check and the call leaves nothing to stop,
    and the run's own error (a failed query, often the same death) must reach the caller
    rather than Py4J's broken socket."""
    try:
        if jvm_alive(spark):
            handle.stop()
    except (Py4JError, ConnectionError):
        if jvm_alive(spark, wait=JVM_EXIT_SECONDS):
            raise


class Unanswered(Exception):
    """Spark's JVM did not answer a call in time."""


def answered(seconds: float, call: Callable, *args):
    """``call(*args)``, a call into Spark's JVM, with a bound on the wait for its answer. A JVM
    whose threads died of an OutOfMemoryError can live on without serving Python's calls: the
    call then waits forever (it did, for 14 minutes, in a sweep), and so would a watchdog in the
    same loop. The call runs in a daemon thread, which is left behind if it gets no answer."""
    done, outcome = threading.Event(), {}

    def ask() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread
            outcome["error"] = err
        finally:
            done.set()

    threading.Thread(target=ask, name="tandem-spark-call", daemon=True).start()
    if not done.wait(seconds):
        raise Unanswered(call)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def kill_jvm(spark) -> None:
    """Kill the JVM behind a local session (the next session starts another: ``rowstream.session``)."""
    process = getattr(spark.sparkContext._gateway, "proc", None)
    if process is not None:
        process.kill()
        process.wait()


def jvm_alive(spark, wait: float = 0.0) -> bool:
    """Whether the JVM behind a local session still runs. ``wait``: seconds to give one that
    is going down: the process Python holds is spark-submit's launcher, which exits only after
    the JVM, and the gateway's socket can break first."""
    process = getattr(spark.sparkContext._gateway, "proc", None)
    if process is None:
        return True
    try:
        process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return True
    return False


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory for a run's store and checkpoint. On a cluster, the executors'
    RocksDB state stores go on writing snapshots into the checkpoint after the query stops
    (their maintenance ends with the application): its removal waits for them to finish."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        _remove(path)


def _remove(path: Path, attempts: int = 20) -> None:
    for attempt in range(attempts):
        try:
            shutil.rmtree(path)
            return
        except OSError:  # a file written, or removed, while the tree was removed
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)


def default_checkpoint(store: str | Path, name: str) -> Path:
    """Spark's checkpoint of run ``name`` over ``store``: beside the store, keyed by both."""
    store = Path(store)
    return store.parent / "checkpoints" / store.stem / name


def landing_format(source: str) -> str | None:
    """The format the files of a run's ``source`` land in, which prices the gateway: a landing
    directory's one format, else None (the catalog's)."""
    return native_format(source) if source != "generator" and Path(source).is_dir() else None


def _gateway(kind: str, spec: RunSpec, schema: StreamSchema, root, *, lateness: float,
             checkpoint: Path) -> Gateway:
    """The gateway of kind ``kind`` (``landing_gateway``) that reads ``spec``'s stream for a plan
    whose root is ``root``."""
    slide, takeover = root.slide, spec.takeover
    if kind == "generator":
        # The last heartbeat goes far enough past the last window_end for chained operators.
        flush = max(w.size for w in windows(root)) + 10 * slide + lateness
        replay = ({"begin": takeover.begin, "warmup": takeover.replay_until,
                   "warmup_span": max(takeover.replay_until - takeover.begin, slide)}
                  if takeover else {"begin": spec.begin, "warmup": spec.warmup,
                                   **({"warmup_span": spec.warmup_span} if spec.warmup_span else {})})
        return GeneratedStream(schema, spec.rate, spec.duration, spec.batch or slide, slide,
                               {"flush": flush, "steps": format_steps(spec.steps), **replay,
                                **(spec.topology or {})})
    if kind == "native":
        return NativeFiles(schema, spec.source, str(checkpoint), lateness, slide)
    if kind == "reference":
        return ReferencedFiles(schema, spec.source, str(checkpoint), lateness, slide,
                               spec.files_per_batch)
    return LandingDirectory(schema, spec.source, lateness, slide,
                            **({"start_after": takeover.start_after,
                                "high_water": takeover.high_water} if takeover else {}))


def _planned(spec: RunSpec) -> Explanation:
    """The plan of ``spec``, priced by the format of what it reads and its batches' files."""
    return explain(spec.query, rate=spec.rate, catalog=spec.catalog, profile=spec.profile,
                   placement=spec.placement, file_format=landing_format(spec.source),
                   files_per_batch=spec.files_per_batch)


def landing_gateway(directory: str, deployment: Deployment, wanted: str) -> str:
    """How a run reads a landing directory: "reference" (Spark plans the batches, DuckDB reads
    their files, ``rowstream/by_reference.py``) where no Spark operator reads the stream,
    else "native" (Spark's own file source, ``rowstream/native.py``) where Spark's operators
    below the crossings are stateless, else "python" (the Python data source). ``wanted``
    "auto" chooses so; another insists (``bench/gateways.py`` compares them)."""
    if wanted == "python":
        return wanted
    if wanted in ("auto", "reference") and fits_by_reference(directory, deployment):
        return "reference"
    if wanted == "reference":
        raise TandemError(f"--gateway reference: DuckDB reads {directory} itself only when its "
                          "files are all CSV or all Parquet and every operator over the stream "
                          "runs in DuckDB (not duckdb-partitioned): give --gateway auto")
    if fits(directory, deployment):
        return "native"
    if wanted == "native":
        raise TandemError(f"--gateway native: Spark's own file sources read {directory} only "
                          "when its files are all CSV or all Parquet and the plan runs no "
                          "stateful Spark operator: give --gateway auto")
    return "python"


def pair(checkpoint: Path, store: ColumnarStore, names: list[str], resume: bool,
         gateway: str) -> str:
    """Tie a checkpoint to the store and the schemas its run writes (a query's, or each of
    several queries' that share the run), or, to resume, check that they belong together:
    Spark's offsets and state must match the rows and progress in DuckDB. A run that does not
    resume starts both afresh. Returns the gateway the run reads by: the checkpoint's, when it
    resumes one that names it, else ``gateway``."""
    owner = checkpoint / OWNER
    if resume and owner.is_file():
        mine = json.loads(owner.read_text())
        runs = mine.get("queries") or {mine.get("query"): mine.get("run")}
        theirs = {name: store.run_id(name) for name in names}
        if mine.get("store") != str(Path(store.path).resolve()) or runs != theirs:
            raise TandemError(
                f"the checkpoint {checkpoint} belongs to the runs {_runs(runs)} over "
                f"{mine.get('store')}, not to the store {store.path} ({_runs(theirs)}): resume "
                "with that store, or give --checkpoint, or run without --resume to start afresh")
        return mine.get("gateway", gateway)
    if not resume:
        shutil.rmtree(checkpoint, ignore_errors=True)
    # A resume without an owner file keeps what the store holds: a first micro-batch run, a
    # checkpoint older than owner files, or windows a benchmark loaded into the store.
    runs = {}
    for name in names:
        store.create(name, fresh=not resume)
        runs[name] = store.run_id(name) or store.start_run(name)
    checkpoint.mkdir(parents=True, exist_ok=True)
    owner.write_text(json.dumps({"store": str(Path(store.path).resolve()), "queries": runs,
                                 "gateway": gateway}) + "\n")
    return gateway


def _runs(runs: dict) -> str:
    return ", ".join(f"{run} of {name}" for name, run in runs.items())


def _count_dropped(handle, dropped: dict[int, int]) -> None:
    """Spark's own count of rows its stateful operators dropped as late, per micro-batch (its
    recent progress holds the last hundred). The gateway quarantines every late row before
    them, so it stays 0; a run reports it either way."""
    for progress in handle.recentProgress:
        dropped[progress.batchId] = sum(op.numRowsDroppedByWatermark
                                        for op in progress.stateOperators)


def _query_name(spark, name: str) -> str:
    """``tandem_<query>``, numbered while a query of that name is active (``tandem verify``
    runs placements side by side)."""
    active = {q.name for q in spark.streams.active}
    return next(n for n in (f"tandem_{name}" + (f"_{k}" if k else "") for k in range(len(active) + 1))
                if n not in active)


def _drained(handle) -> bool:
    """A landing directory is drained once Spark waits for new files after having read some
    (and run the batch that moves the watermark past them)."""
    status = handle.status
    return (handle.lastProgress is not None and not status["isDataAvailable"]
            and not status["isTriggerActive"] and status["message"] == "Waiting for data to arrive")

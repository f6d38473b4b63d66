"""The `tandem` command line: a thin layer over the library that renders with rich."""

from __future__ import annotations

import csv
import json
import logging
import os
import signal
import sys
import time
from contextlib import contextmanager, redirect_stderr, suppress
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table
from rich.tree import Tree

from optimizer.errors import QueryError, TandemError
from optimizer.logical import Node, Window
from optimizer.migration import moved
from optimizer.physical import PARTIAL
from runtime.explain import Explanation, explain
from runtime.spec import FILES_PER_BATCH

app = typer.Typer(help="Tandem: windowed SPJA continuous queries across Spark and DuckDB.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console()
errors = Console(stderr=True)

ENGINE_STYLE = {"spark": "bold dark_orange", "duckdb": "bold yellow",
                "duckdb-partitioned": "bold green"}
SHORT_ENGINE = {"spark": "s", "duckdb": "d", "duckdb-partitioned": "p", "split": "x"}  # verify's

# Arguments the commands share.
Query = Annotated[str, typer.Argument(
    help="A .sql file, or a name from the queries folder (q1 ... q6, j2, j5, j8, a1, a2, m1, "
    "m2).")]
Catalog = Annotated[str | None, typer.Option(
    help="Catalog TOML (default: catalog.toml beside the query).")]
Profile = Annotated[str | None, typer.Option(
    help="Calibration profile TOML (default: calibrated, else shipped).")]
Placement = Annotated[str, typer.Option(help="auto | spark | duckdb | duckdb-partitioned | split | op=engine,... (pins operators; split: aggregates' partials in Spark, their merge in DuckDB).")]
FilesPerBatch = Annotated[int, typer.Option(min=1, help="The most landed files a micro-batch read by reference takes: one while the run keeps up, up to this many while it catches up, each judged as a batch of its own.")]
Lateness = Annotated[float | None, typer.Option(
    min=0.0, help="Allowed lateness L, seconds: later readings go to the quarantine; windows "
    "are evaluated L after their end (default: the catalog's, 5 s for queries/).")]
Disorder = Annotated[str | None, typer.Option(
    help="How the K-slack buffer is sized: fixed (K = the allowed lateness), none (K = 0), max "
    "(the largest delay so far), am or pd (AM-adt, PD-adt: the least K that meets the result "
    "quality; Ji ch. 4). Default: am where the query states a quality, else fixed.")]
MaxError = Annotated[float | None, typer.Option(
    min=0.0, max=1.0, help="The result quality: a relative error of at most this (0.01: 1 %), "
    "over the query's QUALITY hint or catalog entry; K is sized to meet it.")]
Confidence = Annotated[float | None, typer.Option(
    min=0.0, max=1.0, help="With --max-error: the probability of meeting it (default 0.95).")]
MinRecall = Annotated[float | None, typer.Option(
    min=0.0, max=1.0, help="The result quality of a join between streams: a recall of at least "
    "this (0.99: 99 % of the join's rows), instead of --max-error; K is sized to meet it.")]


@contextmanager
def user_errors(query: str | None = None):
    """A TandemError is the user's to fix: one line on stderr, exit code 2, no traceback."""
    try:
        yield
    except QueryError as err:
        errors.print(f"[red]error:[/red] {query}: {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except TandemError as err:
        errors.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@contextmanager
def engine_output_to(log: Path):
    """What the engines' threads print while a run lasts (Py4J's callback server reports the
    death of Spark's JVM with pages of tracebacks) goes to Spark's log, not to the user."""
    log.parent.mkdir(parents=True, exist_ok=True)
    # Py4J logs with logging's module functions, whose first call gives the root logger a
    # handler on the stderr of that moment: the file below, closed once the run ends. A
    # callback thread that outlives the run by a moment then wrote pages of "--- Logging
    # error ---" to the user's terminal. The root's own handler on the log stays open.
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.FileHandler(log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    target = open(log, "a")  # its close may fail on a full disk, below
    try:
        with redirect_stderr(target):
            yield
    finally:
        # On a full disk the flush of what the engines printed fails: the run's own error
        # (a disk is full) is what the user must see, not this one's traceback.
        with suppress(OSError):
            target.close()


@app.callback()
def main(
    master: Annotated[str | None, typer.Option(help="Spark master, e.g. spark://host:7077, for every command (default: TANDEM_SPARK_MASTER, else tandem.toml's spark_master, else local[*]).")] = None,
) -> None:
    """Optimise, run and inspect continuous queries."""
    if master:  # the environment carries it to the library and to the processes it starts
        os.environ["TANDEM_SPARK_MASTER"] = master


@app.command("explain")
def explain_command(
    query: Query,
    rate: Annotated[float | None, typer.Option(help="Total arrival rate, tuples/s (default: the catalog's).")] = None,
    catalog: Catalog = None,
    profile: Profile = None,
    memory_budget: Annotated[str | None, typer.Option(help="State memory budget, e.g. 2GB; plans above it are infeasible.")] = None,
    placement: Placement = "auto",
    exhaustive: Annotated[bool, typer.Option(help="Also enumerate every placement and compare.")] = False,
    feasibility: Annotated[bool, typer.Option(help="--no-feasibility ranks plans by C_u alone (ablation, Sec. 6.4.3).")] = True,
    decompose: Annotated[bool, typer.Option(help="Split plans of more than 15 R2R operators (Sec. 6.4.1).")] = True,
    files_per_batch: FilesPerBatch = FILES_PER_BATCH,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Optimise QUERY and show the chosen hybrid plan, its costs and the DuckDB SQL of its DB-ops."""
    with user_errors(query):
        result = explain(query, rate=rate, catalog=catalog, profile=profile,
                         memory_budget=memory_budget, placement=placement, exhaustive=exhaustive,
                         feasibility=feasibility, decompose=decompose,
                         files_per_batch=files_per_batch)
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
        return
    render(result)


@app.command("generate")
def generate_command(
    directory: Annotated[Path, typer.Argument(help="Where the files go (a landing directory).")],
    stream: Annotated[str, typer.Option(help="The example stream to write: plugs (DEBS 2014's smart plugs), meters (their households' meters, which m1 joins with the plugs: write each in DIR/<stream>) or air (air-quality stations), as the catalog declares it.")] = "plugs",
    rate: Annotated[float | None, typer.Option(help="Arrival rate, tuples/s (default: the catalog's rate of the stream).")] = None,
    duration: Annotated[float, typer.Option(help="Event time to generate, seconds.")] = 360.0,
    file_seconds: Annotated[float, typer.Option(
        min=0.01, help="Event time per file (arrival time with --disorder), seconds.")] = 60.0,
    disorder: Annotated[bool, typer.Option(help="Readings arrive out of order, shaped like Ji's Table 4.1: about half late, most by under 100 ms, a tail of seconds (files are cut by arrival time).")] = False,
    max_delay: Annotated[float, typer.Option(min=0.1, help="With --disorder: the longest delay, seconds (Ji's two streams: 4.49 and 16.95).")] = 4.5,
    seed: Annotated[int, typer.Option(help="With --disorder: the seed of the delays (the same seed, the same arrival order).")] = 2014,
    file_format: Annotated[str, typer.Option("--format", help="csv (DEBS 2014's, which Spark parses line by line) or parquet (typed columns, cheaper to read).")] = "csv",
) -> None:
    """Write an example stream as landed files (CSV, DEBS 2014's for the plugs, or Parquet),
    with the columns its catalog entry declares, for `tandem run --source DIRECTORY`."""
    import math

    from rich.progress import Progress

    from optimizer.catalog import FILE_FORMATS
    from workload.disorder import Disorder
    from workload.examples import GENERATORS, generator
    from workload.schema import StreamSchema

    if file_format not in FILE_FORMATS:
        raise typer.BadParameter(f"give one of {', '.join(FILE_FORMATS)}", param_hint="--format")
    if stream not in GENERATORS:
        raise typer.BadParameter(f"give one of {', '.join(GENERATORS)}", param_hint="--stream")
    if disorder and stream == "air":
        raise typer.BadParameter("the air stations' generator writes in order only",
                                 param_hint="--disorder")
    from optimizer import load_catalog
    from runtime.settings import REPOSITORY_QUERIES, catalog_path

    entry = load_catalog(catalog_path()).stream(stream) or load_catalog(
        REPOSITORY_QUERIES / "catalog.toml").streams[stream]  # a catalog of one's own lacks it
    source = generator(stream, entry.rate if rate is None else rate)
    extra: dict = {"schema": StreamSchema.of(entry)}
    if disorder:
        extra["disorder"] = Disorder(max_delay=max_delay, seed=seed)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"writing {file_format} files", total=math.ceil(
            (duration + (max_delay if disorder else 0.0)) / file_seconds - 1e-9))
        paths = source.write_files(directory, duration, file_seconds,
                                   on_file=lambda _: progress.advance(task),
                                   file_format=file_format, **extra)
    order = f", out of order by up to {max_delay:g} s" if disorder else ""
    # The meters are joined with the plugs (m1), which reads each stream's directory in one.
    first, source_of = (("m1", directory.parent) if stream == "meters"
                        else ("q1" if stream == "plugs" else "a1", directory))
    console.print(f"{len(paths)} files, {round(source.rate * duration):,} readings of {stream}"
                  f"{order} in {_short(directory)}. Run a query over them with: tandem run "
                  f"{first} --source {_short(source_of)}", highlight=False, soft_wrap=True)


READERS = {"generator": "the smart-plug generator (a Python data source)",
           "reference": "DuckDB from the files of each batch Spark's file source planned",
           "native": "Spark's own file source (the MIG judged the rows)",
           "python": "the landing directory's Python data source"}


def _run_together(spec) -> None:
    """`tandem run` of several queries over one stream (``runtime.run.run_together``)."""
    from runtime.run import by_rule, run_together
    from runtime.settings import spark_log_path, store_path

    names = ", ".join([spec.query, *spec.together])
    console.print(f"[bold]{names}[/] together, DuckDB reading {_short(Path(spec.source))} once "
                  "for all", highlight=False)
    progress: dict = {"tuples": 0, "batches": 0, "rows": {}, "started": time.perf_counter()}

    def view() -> Table:
        table = Table(show_header=False, box=None, padding=(0, 2))
        wall = time.perf_counter() - progress["started"]
        table.add_row("tuples", f"{progress['tuples']:,}")
        table.add_row("throughput", f"{progress['tuples'] / wall:,.0f} tuples/s" if wall else "-")
        table.add_row("micro-batches", f"{progress['batches']:,}")
        for name, rows in progress["rows"].items():
            table.add_row(f"{name} result rows", f"{rows:,}")
        return table

    with Live(view(), console=console, refresh_per_second=4, transient=False) as live:
        def on_batch(name: str, report) -> None:
            if name == spec.query:  # every query reads the same batches
                progress["tuples"] += report.tuples
                progress["batches"] += 1
            progress["rows"][name] = progress["rows"].get(name, 0) + report.result_rows
            live.update(view())

        with user_errors(spec.query), engine_output_to(spark_log_path(spec.store)):
            summaries = run_together(spec, on_batch=on_batch)
    on_store = "" if Path(spec.store) == store_path() else f" --store {spec.store}"
    first = summaries[0]
    console.print()
    console.print(f"[bold]done[/]: {first.tuples:,} tuples in {first.wall_seconds:.1f} s "
                  f"({first.throughput:,.0f} tuples/s), read by DuckDB once for "
                  f"{len(summaries)} queries.")
    for summary in summaries:
        console.print(
            f"  {summary.query}: {summary.window_ends:,} slides, {summary.result_rows:,} result "
            f"rows, {summary.quarantined.total:,} quarantined ({summary.quarantined.late:,} "
            f"later than the allowed lateness of {summary.lateness:g} s"
            f"{by_rule(summary.quarantined.rules)}); `tandem results {summary.query}{on_store}`",
            highlight=False, soft_wrap=True)


@app.command("run")
def run_command(
    queries: Annotated[list[str], typer.Argument(
        metavar="QUERY...", help="A .sql file, or a name from the queries folder (q1 ... q6, "
        "j2, j5, j8, a1, a2, m1, m2); several run together over one stream, which DuckDB "
        "reads once for all.")],
    placement: Placement = "auto",
    rate: Annotated[float, typer.Option(help="Arrival rate of the generator, tuples/s.")] = 1000.0,
    duration: Annotated[float, typer.Option(help="Event time to generate, seconds.")] = 360.0,
    batch: Annotated[float | None, typer.Option(help="Event time per micro-batch, seconds (default: one slide).")] = None,
    source: Annotated[str, typer.Option(help="'generator' or a landing directory of DEBS 2014 CSV files or Parquet files.")] = "generator",
    catalog: Catalog = None,
    profile: Profile = None,
    store: Annotated[str | None, typer.Option(help="The DuckDB file (default: tandem.duckdb in TANDEM_STATE, else .tandem).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the checkpoint of an earlier run.")] = False,
    spark_design: Annotated[str, typer.Option(help="How a pure-Spark plan runs: built-in, panes or buckets (docs/execution.md).")] = "built-in",
    lateness: Lateness = None,
    disorder: Disorder = None,
    max_error: MaxError = None,
    confidence: Confidence = None,
    min_recall: MinRecall = None,
    stall_timeout: Annotated[float, typer.Option(min=1.0, help="Stop with an error when no micro-batch finishes for this long, seconds.")] = 600.0,
    gateway: Annotated[str, typer.Option(help="How a landing directory is read: auto (DuckDB reads the files by reference, else Spark's own file source, where either fits), reference, native or python (docs/execution.md).")] = "auto",
    files_per_batch: FilesPerBatch = FILES_PER_BATCH,
    adaptive: Annotated[bool, typer.Option(help="Re-optimise at the observed rate and migrate the plan live when a better one pays for its migration (docs/adaptive.md); `tandem migrate` asks for a migration by hand.")] = False,
    steps: Annotated[str, typer.Option(help="Rate steps of the generator: SECOND:RATE,... (60:40000,120:2000).")] = "",
    migrate_at: Annotated[list[str] | None, typer.Option(help="With --adaptive: migrate once the stream passes SECOND of event time, SECOND:PLACEMENT:ms|pt (300:duckdb:pt); repeat it for more.")] = None,
) -> None:
    """Optimise QUERY (unless --placement forces a plan), deploy it on Spark and DuckDB, run it;
    several QUERY run together over one landing directory."""
    from runtime.migration import parse_migrate_at, refuse_unreplayable, run_adaptive
    from runtime.quality import describe_slack
    from runtime.run import by_rule, landing_format, run  # imports Spark: only to run
    from runtime.settings import spark_log_path, store_path
    from runtime.spec import RunSpec
    from workload.smart_plugs import parse_steps

    query, *together = queries
    store = store or str(store_path())
    with user_errors(query):
        if together and adaptive:
            raise TandemError("--adaptive migrates one query's plan: run one query")
        try:
            rate_steps = parse_steps(steps)
        except ValueError as err:
            raise TandemError(f"--steps: {err}") from None
        if adaptive:
            refuse_unreplayable(source)  # before the plan is shown
        if migrate_at and not adaptive:
            raise TandemError("--migrate-at migrates an adaptive run: give --adaptive too")
        forced = [parse_migrate_at(m) for m in migrate_at or []]
        spec = RunSpec(query, placement=placement, rate=rate, duration=duration, batch=batch,
                       source=source, catalog=catalog, profile=profile, store=store,
                       resume=resume, spark_design=spark_design, lateness=lateness,
                       disorder=disorder, max_error=max_error, confidence=confidence,
                       min_recall=min_recall, stall_timeout=stall_timeout, gateway=gateway,
                       files_per_batch=files_per_batch, steps=rate_steps,
                       together=tuple(together))
    if together:
        _run_together(spec)
        return
    with user_errors(query):
        plan = explain(query, rate=rate, catalog=catalog, profile=profile, placement=placement,
                       file_format=landing_format(source), files_per_batch=files_per_batch)
    placed = ", ".join(f"{op}={engine}" for op, engine in plan.optimization.plan.placement.items())
    console.print(f"[bold]{plan.query}[/] with {placed or 'nothing to place'}")
    progress = {"tuples": 0, "batches": 0, "rows": 0, "started": time.perf_counter(),
                "event_time": None, "advanced": None, "work": None}

    def view() -> Table:
        table = Table(show_header=False, box=None, padding=(0, 2))
        wall = time.perf_counter() - progress["started"]
        table.add_row("tuples", f"{progress['tuples']:,}")
        table.add_row("event time", str(progress["event_time"] or "-"))
        table.add_row("throughput", f"{progress['tuples'] / wall:,.0f} tuples/s" if wall else "-")
        table.add_row("micro-batches", f"{progress['batches']:,}")
        # A run keeps up while a batch takes less wall time than the event time it covers.
        advanced = progress["advanced"]
        table.add_row("batch lag", "-" if progress["work"] is None else (
            f"{progress['work']:.2f} s of work for the last batch"
            + (f" ({advanced:.1f} s of event time)" if advanced else "")))
        table.add_row("result rows", f"{progress['rows']:,}")
        return table

    with Live(view(), console=console, refresh_per_second=4, transient=False) as live:
        def on_batch(report) -> None:
            # A batch without tuples (the heartbeat that ends a generated stream) moves event
            # time past the data: the lag is the last data batch's.
            if report.tuples and report.event_time and progress["event_time"]:
                progress["advanced"] = (report.event_time - progress["event_time"]).total_seconds()
            if report.tuples:
                progress["event_time"] = report.event_time or progress["event_time"]
                progress["work"] = report.seconds
            progress["tuples"] += report.tuples
            progress["batches"] += 1
            progress["rows"] += report.result_rows
            live.update(view())

        def on_migration(migration) -> None:
            live.console.print(f"[bold]migration {migration.number}[/] ({migration.strategy}): "
                               f"{moved(migration.old, migration.new)}; {migration.reason}; "
                               f"reading {migration.replayed_seconds:g} s of event time again",
                               highlight=False)

        with user_errors(query), engine_output_to(spark_log_path(store)):
            if adaptive:
                summary = run_adaptive(query, rate=rate, duration=duration, batch=batch,
                                       steps=rate_steps, placement=placement, store=store,
                                       catalog=catalog, profile=profile, lateness=lateness,
                                       migrate_at=forced, resume=resume, on_batch=on_batch,
                                       on_migration=on_migration).combined()
            else:
                summary = run(spec, explanation=plan, on_batch=on_batch)
    on_store = "" if Path(summary.store) == store_path() else f" --store {summary.store}"
    console.print()
    console.print(
        f"[bold]done[/]: {summary.tuples:,} tuples in {summary.wall_seconds:.1f} s "
        f"({summary.throughput:,.0f} tuples/s), {summary.window_ends:,} slides, "
        f"{summary.result_rows:,} result rows, {summary.quarantined.total:,} quarantined rows "
        f"({summary.quarantined.late:,} later than "
        + ("the K-slack buffer waited" if summary.slack else
           f"the allowed lateness of {summary.lateness:g} s")
        + f"; Spark dropped {summary.dropped_by_watermark:,} by its watermark"
        f"{by_rule(summary.quarantined.rules)}).")
    transfers = summary.transfers
    if summary.slack:
        console.print(f"K-slack: {describe_slack(summary.slack)}.", highlight=False)
    console.print(f"Read by {READERS[summary.gateway]}.", highlight=False)
    console.print(f"Moved to DuckDB: {transfers.to_duckdb_tuples:,} tuples "
                  f"({_bytes(transfers.to_duckdb_bytes)}); back to Spark: "
                  f"{transfers.to_spark_tuples:,} tuples ({_bytes(transfers.to_spark_bytes)}).")
    if summary.quarantined.total:
        # An adaptive run's later plans keep their rows under their own names.
        console.print("Quarantined rows, with their reason and origin:", highlight=False)
        console.print(f"  tandem sql{on_store} \"SELECT * FROM tandem_log.quarantine WHERE query "
                      f"= '{summary.query}' OR starts_with(query, '{summary.query}__plan')\"",
                      highlight=False, soft_wrap=True)
    console.print(f"Results: {summary.results_table} in {summary.store}. The latest windows:")
    console.print(f"  tandem results {summary.query}{on_store}", highlight=False, soft_wrap=True)


@app.command("migrate")
def migrate_command(
    query: Query,
    to: Annotated[str, typer.Option(help="The placement to migrate to: spark | duckdb | duckdb-partitioned | split | op=engine,...")],
    strategy: Annotated[str, typer.Option(help="ms: Moving State (pause, move the matched state, rebuild the rest from the open windows, resume); pt: Parallel Track (run both plans until the old one's windows hold no old tuple; output goes on). docs/adaptive.md.")] = "ms",
    store: Annotated[str | None, typer.Option(help="The DuckDB file of the run (default: tandem.duckdb in TANDEM_STATE, else .tandem).")] = None,
    catalog: Catalog = None,
    profile: Profile = None,
) -> None:
    """Ask the running `tandem run --adaptive` of QUERY to migrate its plan live."""
    from runtime.migration import ask
    from runtime.settings import store_path

    store = store or str(store_path())
    with user_errors(query):
        path = ask(query, to, strategy, store, catalog=catalog, profile=profile)
    console.print(f"Asked: the adaptive run of {query} over {store} migrates at its next "
                  f"micro-batch ({path}).", highlight=False)


@app.command("verify")
def verify_command(
    query: Query,
    placements: Annotated[str, typer.Option(help="'all' of phase two's space, or a sample of N (always with the uniform plans and the optimiser's).")] = "all",
    rate: Annotated[float, typer.Option(help="Rate of the small test stream, tuples/s.")] = 3.0,
    duration: Annotated[float, typer.Option(help="Event time, seconds (fills 5-minute windows).")] = 400.0,
    parallel: Annotated[int, typer.Option(help="Placements to run at once.")] = 1,
    source: Annotated[str | None, typer.Option(help="A landing directory to verify over (default: the generator's small stream for the smart plugs, else the stream's catalog landing).")] = None,
    catalog: Catalog = None,
    profile: Profile = None,
    lateness: Lateness = None,
) -> None:
    """Run QUERY under many placements and compare every row with the reference evaluator."""
    from benchmarking.verify import STATUSES, verify

    def show(outcome) -> None:
        placed = ",".join(f"{op}={SHORT_ENGINE[e]}" for op, e in outcome.placement.items())
        style = {"same": "green", "different": "red", "failed": "yellow"}[outcome.status]
        console.print(f"[{style}]{outcome.status:>12}[/]  {placed}  {outcome.rows} rows",
                      highlight=False)
        if outcome.status != "same":
            console.print(outcome.detail, highlight=False)

    with user_errors(query):
        outcomes = verify(query, placements, rate=rate, duration=duration, parallel=parallel,
                          catalog=catalog, profile=profile, on_outcome=show, lateness=lateness,
                          source=source)
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    console.print(f"{len(outcomes)} placements: {counts['same']} same as the reference, "
                  f"{counts['different']} different, {counts['failed']} failed")
    if counts["different"] or counts["failed"]:
        raise typer.Exit(1)


@app.command("validate")
def validate_command(
    queries: Annotated[list[str] | None, typer.Argument(help="Queries whose results to check (q1 ... q6, j2, j5, j8); none: only the landed files.")] = None,
    landing: Annotated[Path | None, typer.Option(help="The landing directory (default: the first QUERY's stream's catalog landing, else TANDEM_LANDING, else .tandem/landing).")] = None,
    stream: Annotated[str | None, typer.Option(help="The stream whose files land there (default: the catalog's stream whose landing it is, else the one that names none).")] = None,
    again: Annotated[bool, typer.Option(help="Validate every landed file, also those validated before.")] = False,
    microbatch: Annotated[bool, typer.Option(help="Check the results of the micro-batch runs (tandem microbatch, the DAG).")] = False,
    catalog: Catalog = None,
) -> None:
    """Validate with Great Expectations, as the micro-batch DAG does: the input suite over the
    landed files not validated yet (failing rows go to the quarantine), then the results suite
    over each QUERY's results. Exit code 1 when results fail their suite."""
    from runtime import settings
    from runtime.microbatch import microbatch_name
    from runtime.validation import validate_landed, validate_results

    store = settings.store_path()

    def show(f) -> None:
        failed = ", ".join(f"{n:,} {rule}" for rule, n in sorted(f.quarantined.rules.items()))
        console.print(f"{f.file}: {f.rows:,} rows, {f.quarantined.total:,} quarantined"
                      + (f" ({failed})" if failed else ""), highlight=False)

    problems = 0
    with user_errors(), console.status("starting Great Expectations"):
        # The files of the first query's stream, unless told otherwise.
        first = (queries or [None])[0]
        landing = landing or (first and settings.stream_landing(first)) or settings.landing_dir()
        report = validate_landed(landing, store, catalog=catalog, stream=stream,
                                 query=None if stream else first, again=again, on_file=show)
        console.print(f"{len(report)} landed files validated; quarantined rows: "
                      f"tandem_log.quarantine in {store}.", highlight=False)
        for query in queries or []:
            name = microbatch_name(query) if microbatch else None
            result = validate_results(query, store, name=name, catalog=catalog)
            problems += len(result.problems)
            verdict = ("[green]passes[/]" if result.passed
                       else "[red]fails[/]: " + "; ".join(result.problems))
            console.print(f"{result.table}: {result.rows:,} rows, {verdict}", highlight=False)
    if problems:
        raise typer.Exit(1)


class Output(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


Store = Annotated[Path | None, typer.Option(help="The DuckDB file (default: tandem.duckdb in TANDEM_STATE, else .tandem).")]
Format = Annotated[Output, typer.Option("--format", help="How to print the rows.")]
Limit = Annotated[int, typer.Option(min=1, help="Print at most this many rows.")]


@app.command("sql")
def sql_command(
    statement: Annotated[str, typer.Argument(help="One SELECT (or WITH … SELECT) over the store's tables.")],
    store: Store = None,
    output: Format = Output.table,
    limit: Limit = 1000,
) -> None:
    """Run a read-only query over the store: results (q_<query>.results), progress, the
    quarantine (tandem_log.quarantine), the runs' logs. Nothing can be written or read from
    files."""
    from columnar.inspect import read_only_query
    from runtime.settings import store_path

    with user_errors():
        answer = read_only_query(store or store_path(), statement, limit=limit, timeout=None)
    print_answer(answer, output, limit)


@app.command("results")
def results_command(
    query: Query,
    windows: Annotated[int, typer.Option(min=1, help="How many of the latest window_ends.")] = 3,
    store: Store = None,
    output: Format = Output.table,
    limit: Limit = 1000,
) -> None:
    """Show QUERY's result rows at its latest window_ends (a run's results, read-only)."""
    from columnar.inspect import latest_results
    from runtime.settings import store_path

    with user_errors():
        answer = latest_results(store or store_path(), Path(query).stem, windows, limit)
    print_answer(answer, output, limit)


def print_answer(answer, output: Output, limit: int) -> None:
    """Rows as a table, CSV or JSON on stdout; that rows were left out goes to stderr, so that
    CSV and JSON stay clean."""
    if output is Output.csv:
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(answer.columns)
        out.writerows(["" if v is None else v for v in row] for row in answer.rows)
    elif output is Output.json:
        rows = [dict(zip(answer.columns, row, strict=True)) for row in answer.rows]
        sys.stdout.write(json.dumps(rows, indent=2, default=_json_value) + "\n")
    else:
        table = Table(*answer.columns, box=None, header_style="bold")
        for row in answer.rows:
            table.add_row(*("NULL" if v is None else str(v) for v in row))
        console.print(table, highlight=False)
        if not answer.rows:
            errors.print("(no rows)")
    if answer.truncated:
        errors.print(f"(the first {limit:,} rows: --limit shows more)")


def _json_value(value) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _bytes(x: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if x < 1000 or unit == "TB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1000
    return ""


def _short(path: Path) -> str:
    """A path relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def render(result: Explanation) -> None:
    o = result.optimization
    plan, logical = o.plan, o.logical
    by_member = {m: op for op in plan.operators for m in op.members if op.kind != PARTIAL}
    partials = {op.members[0]: op for op in plan.operators if op.kind == PARTIAL}
    engine_tag = {e: f"[{s}]{e}[/]" for e, s in ENGINE_STYLE.items()}

    def label(node: Node) -> str:
        if isinstance(node, Window):
            return f"{logical.ids[node]}  {escape(node.describe())}  {engine_tag['spark']} (S2R)"
        op = by_member[logical.ids[node]]
        text = f"{logical.ids[node]}  {escape(node.describe())}  {engine_tag[op.engine]}"
        if op.kind != "db-op":
            text += f"  λin {_fmt(op.lambda_in)}  λout {_fmt(op.lambda_out)}  u {op.u:.4f}"
        if (partial := partials.get(logical.ids[node])) is not None:
            text += (f"  (split: its partials per pane in {engine_tag['spark']}'s executors  "
                     f"λin {_fmt(partial.lambda_in)}  u {partial.u:.4f})")
        return text

    def grow(branch: Tree, node: Node, fragment: str | None) -> None:
        op_id = logical.ids.get(node)
        op = by_member.get(op_id)
        if op is not None and op.kind == "db-op" and op.id != fragment:
            where = ("one DuckDB query" if op.engine == "duckdb" else
                     "one DuckDB query per hash partition, in Spark's executors")
            branch = branch.add(
                f"[{ENGINE_STYLE[op.engine]}]{op.id}[/]  DB-op: {len(op.members)} "
                f"operator{'s' if len(op.members) > 1 else ''} in {where}  "
                f"λin {_fmt(op.lambda_in)}  λout {_fmt(op.lambda_out)}  "
                f"u {op.u:.4f}")
            fragment = op.id
        elif op is None or op.kind != "db-op":
            fragment = None
        child = branch.add(label(node))
        for c in node.inputs:
            grow(child, c, fragment)

    sink = next(op for op in plan.operators if op.kind == "sink")
    source = next(op for op in plan.operators if op.kind == "source")
    tree = Tree(f"sink → DuckDB results table  u {sink.u:.4f}")
    grow(tree, logical.root, None)
    console.print(f"[bold]{result.query}[/] at {_fmt(o.rate)} tuples/s "
                  f"(profile: {_short(result.profile)}, catalog: {_short(result.catalog)})")
    console.print(tree)
    gateway = (f"by reference: Spark plans the batches of up to {o.model.files_per_batch} "
               "files, DuckDB reads them" if plan.by_reference
               else "Spark gateway: the rows cross by value")
    console.print(f"source ({gateway})  λ {_fmt(source.lambda_out)}  u {source.u:.4f}")

    summary = Table(show_header=False, box=None, padding=(0, 2))
    feasible = "[green]yes[/]" if o.feasible else "[red]no[/]"
    summary.add_row("C_b (bottleneck, Eq. 6.5)", f"{plan.cost.bottleneck:.4f}")
    summary.add_row("C_u (utilisation, Eq. 6.6)", f"{plan.cost.utilization:.4f}")
    if o.objective.time_shared:
        summary.add_row(f"load (shared cores, σ = {o.objective.sigma:g})",
                        f"{o.objective.load(plan.cost):.4f}: job {plan.cost.arrival:.4f}, "
                        f"evaluation {plan.cost.evaluation:.4f}")
    budget = o.objective.memory_budget
    condition = ("load" if o.objective.time_shared else "C_b") + " ≤ 1" + (
        ", memory ≤ budget" if budget else "")
    summary.add_row(f"feasible ({condition})" + ("" if o.objective.feasibility else ", not checked"),
                    feasible)
    summary.add_row("state memory (Zhu Eq. 4.3–4.5)",
                    _bytes(plan.cost.memory) + (f" of {_bytes(budget)} budget" if budget else ""))
    exhaustive = "not run (--exhaustive)" if o.exhaustive_examined is None else (
        f"{o.exhaustive_examined:,} exhaustive, "
        + ("same plan" if o.exhaustive_placement == plan.placement else "[red]different plan[/]"))
    summary.add_row("plans examined", f"{o.plans_examined:,} pruned; {exhaustive}")
    summary.add_row("R2R operators", f"{len(logical)}" + (
        f" in {o.subplans} subplans" if o.subplans > 1 else ""))
    summary.add_row("optimisation time", f"{o.optimization_ms:.1f} ms (phase one "
                    f"{o.phase_one_ms:.1f} ms, phase two {o.phase_two_ms:.1f} ms)")
    summary.add_row("result quality", escape(result.quality.describe()))
    console.print(summary)
    for fragment in result.fragments:
        console.print(f"\n[{ENGINE_STYLE['duckdb']}]{fragment.id}[/] DuckDB SQL "
                      f"(reads {', '.join(fragment.reads)}, window_ends):")
        console.print(Syntax(fragment.sql, "sql", theme="ansi_dark", word_wrap=True))


@contextmanager
def steps(what: str):
    """A spinner for a long command, and each step it reports printed with the time so far."""
    started = time.perf_counter()
    with console.status(what) as status:
        def step(text: str) -> None:
            console.print(f"[dim]{time.perf_counter() - started:6.0f} s[/] {text}", highlight=False)
            status.update(text)

        yield step


@app.command("calibrate")
def calibrate_command(
    out: Annotated[Path, typer.Option(help="Where the profile goes (the default one of explain and run).")] = Path(".tandem/profile.toml"),
) -> None:
    """Measure the cost model's unit costs on this machine (5 to 15 minutes) and write a profile."""
    from benchmarking.calibrate import calibrate

    with steps("calibrating") as step, user_errors():
        result = calibrate(out, on_step=step)
    table = Table("function", "coefficients", "fit error", "measurements")
    for (engine, function), fitted in result.fits.items():
        table.add_row(f"{engine}.{function}",
                      ", ".join(f"{k[2]} {v:.3g}" for k, v in fitted.coefficients.items()),
                      f"{fitted.error:.1%}", str(fitted.measurements))
    console.print(table)
    console.print(f"Profile written to {_short(out)} in {result.seconds / 60:.1f} min: "
                  "`tandem explain` and `tandem run` use it from now on.", highlight=False)


@app.command("bench")
def bench_command(
    quick: Annotated[bool, typer.Option(help="Q1 and Q5 at 2k and 20k tuples/s, the four main plans (about 6 min).")] = False,
    queries: Annotated[str, typer.Option(help="Comma-separated queries.")] = "q1,q2,q3,q4,q5,q6",
    rates: Annotated[str, typer.Option(help="Comma-separated rates, tuples/s.")] = "1000,2000,5000,10000,20000,40000",
    extend: Annotated[bool, typer.Option(help="The sweep doubles past the rates until every plan is infeasible.")] = True,
    others: Annotated[int, typer.Option(help="Other plans of phase two's space sampled per point.")] = 2,
    rivals: Annotated[int, typer.Option(help="Plans ranked next after the optimiser's, measured per point.")] = 0,
    measure: Annotated[float, typer.Option(help="Event seconds measured per plan, in 1-s micro-batches.")] = 10.0,
    precision: Annotated[float, typer.Option(help="Bisection narrows the max rates of the optimiser, pure-Spark and pure-DuckDB until the smallest rate each fell behind at is within this factor of the largest it kept up with (0: no bisection).")] = 1.1,
    profile: Profile = None,
    out: Annotated[Path, typer.Option(help="Results directory; the report goes to OUT/<date>/.")] = Path("bench/results"),
    spark_design: Annotated[str | None, typer.Option(help="How pure-Spark runs: built-in, panes or buckets (default: the fastest, bench/spark_designs.py compares them).")] = None,
    report_of: Annotated[Path | None, typer.Option(help="Measure nothing: write the report of this bench.json again (or of the bench.partial.json a sweep cut short left).")] = None,
    lateness: Lateness = None,
) -> None:
    """Capacity against arrival rate of the optimiser's plan, pure-Spark, pure-DuckDB and others."""
    from benchmarking import bench
    from benchmarking import report as bench_report
    from benchmarking import speed as machine
    from runtime import settings

    if report_of:
        data = json.loads(report_of.read_text())
        report = bench_report.write(bench.points_from(data), report_of.parent, data["command"],
                                    str(report_of.parent / "profile.toml"), data["minutes"],
                                    data.get("spark_design", "built-in"), latest=False,
                                    speed=data.get("speed"))
        console.print(f"Report: {_short(report)}", highlight=False)
        return
    if quick:
        chosen = dict(bench.QUICK)
    else:
        with user_errors():
            try:
                chosen = dict(queries=[q.strip() for q in queries.split(",") if q.strip()],
                              rates=[float(r) for r in rates.split(",")], others=others, rivals=rivals,
                              extend=extend, measure=measure, precision=precision if precision > 1 else None)
            except ValueError:
                raise TandemError(f"--rates {rates!r}: give numbers separated by commas") from None
    command = " ".join(["tandem bench", *sys.argv[2:]])  # as typed, for the report
    calibration = str(settings.profile_path(profile))
    started = time.perf_counter()
    out_dir = out / time.strftime("%Y-%m-%d")
    partial = out_dir / "bench.partial.json"
    spark_design = spark_design or bench.SPARK_BASELINE

    def keep(points) -> None:  # a sweep cut short keeps its points: --report-of reads them
        bench_report.write_json(points, partial, command, calibration,
                                (time.perf_counter() - started) / 60, spark_design, speed)

    with steps("benchmarking") as step, user_errors(), \
            engine_output_to(settings.spark_log_path(settings.store_path())):
        step(machine.STEP)
        speed = machine.now(calibration)
        if warning := machine.warning(speed, calibration):
            console.print(warning, highlight=False)
        points = bench.sweep(**chosen, profile=profile, spark_design=spark_design,
                             on_progress=step, on_point=keep, lateness=lateness)
        step("the speed probe again")
        speed = machine.now(calibration, speed)
    report = bench_report.write(points, out_dir, command, calibration,
                                (time.perf_counter() - started) / 60, spark_design, speed=speed)
    partial.unlink(missing_ok=True)
    console.print(report.read_text().split("\n## Q")[0])
    console.print(f"Report: {_short(report)}; figures for scripts: {_short(out / 'bench.json')}",
                  highlight=False)


@app.command("microbatch")
def microbatch_command(
    query: Query,
    landing: Annotated[Path | None, typer.Option(help="The landing directory (default: TANDEM_LANDING, else .tandem/landing).")] = None,
    lateness: Lateness = None,
) -> None:
    """Run QUERY over the files that landed since its last micro-batch run, then stop."""
    from runtime import settings
    from runtime.microbatch import run_microbatch
    with console.status("reading the new files"), user_errors(query), \
            engine_output_to(settings.spark_log_path(settings.store_path())):
        summary = run_microbatch(query, landing or settings.landing_dir(),
                                 checkpoints=settings.checkpoints_dir(),
                                 store=settings.store_path(), lateness=lateness)
    if not summary.files:
        console.print(f"{summary.query}: no new files.")
        return
    from runtime.run import by_rule

    console.print(f"{summary.query}: {len(summary.files)} files ({summary.files[0]} … "
                  f"{summary.files[-1]}), {summary.tuples:,} tuples, {summary.result_rows:,} "
                  f"result rows into {summary.results_table}, {summary.quarantined.total:,} "
                  f"quarantined ({summary.quarantined.late:,} late"
                  f"{by_rule(summary.quarantined.rules)}).", highlight=False)


@app.command("cleanup")
def cleanup_command(
    retention_days: Annotated[float, typer.Option(help="Keep results (and state) of this many days of event time.")] = 1.0,
    keep_batches: Annotated[int, typer.Option(help="Micro-batches whose checkpoint logs and progress are kept.")] = 10,
) -> None:
    """The nightly clean-up of the scheduled micro-batch runs' state (what
    tandem_nightly_cleanup runs), landing directory by landing directory."""
    from datetime import timedelta

    from runtime.cleanup import cleanup
    from runtime.settings import scheduled_by_landing

    for landing, queries in scheduled_by_landing().items():
        with console.status(f"cleaning up {', '.join(queries)}"), user_errors():
            report = cleanup(queries, retention=timedelta(days=retention_days),
                             keep_batches=keep_batches, landing=landing)
        console.print(f"{', '.join(queries)}: reclaimed {report.rows_reclaimed:,} rows and "
                      f"{_bytes(report.bytes_reclaimed)}; archived {len(report.archived)} files "
                      f"of {landing}.", highlight=False)
        for plan in report.plans:
            console.print(f"{plan['query']}: "
                          f"{'new plan' if plan['changed'] else 'plan unchanged'} "
                          f"({plan['reason']})", highlight=False)


@app.command("airflow")
def airflow_command(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8080,
    home: Annotated[Path, typer.Option(help="AIRFLOW_HOME: SQLite metadata and logs.")] = Path(".airflow"),
) -> None:
    """Start Airflow standalone with this repository's DAGs and plugin; Ctrl-C stops it."""
    from airflow_tandem.server import USER, password, start, stop, wait_healthy

    home = home.resolve()
    process = start(home, port)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop Airflow too
    try:
        with console.status(f"starting Airflow (log: {_short(home / 'standalone.log')})"), \
                user_errors():
            wait_healthy(port, process)
        console.print(f"Airflow is up: http://127.0.0.1:{port}  user [bold]{USER}[/], password "
                      f"[bold]{password(home)}[/] (kept in "
                      f"{_short(home / 'simple_auth_manager_passwords.json.generated')}). "
                      "The Tandem page is in the navigation. Ctrl-C stops Airflow.",
                      highlight=False, soft_wrap=True)
        process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(process)


if __name__ == "__main__":
    app()

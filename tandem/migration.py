"""Live migration of a running query from one plan to another (Zhu, Part II), and the adaptive
run that re-optimises it from observed statistics (``tandem run --adaptive``).

A run's successive plans are runs of their own (``tandem.run.run``), each with its Spark query and
checkpoint: the first keeps its window state under the run's name, the n-th under
``<name>__plan<n>``, and all of them write the run's results table, the n-th numbering its batches
from n·``PLAN_BATCHES``.

**Moving State** (Zhu Alg. 7), over the generated stream:

1. *Pause* (``clean_accumulated_tuples``): the old plan's MIG takes no batch after the one in
   flight; that one is evaluated and committed, and its Spark query stops. Its results are final
   up to the last window_end it evaluated, the *floor*.
2. *Match* (Sec. 12.1.1): a relation of the stream whose DuckDB tables (rows, pane partials) the
   new plan keeps exactly as the old one did (``Layout.stored``).
3. *Move* (Sec. 12.1.2): those tables are copied into the new plan's schema.
4. *Recompute* (Alg. 6): every other state of the new plan (Spark's operators, the partitions'
   DuckDBs, unmatched tables) is rebuilt from the rows of the open windows, read again from the
   stream in one micro-batch: the event time from floor + β − W_max, the first instant that a
   window after the floor holds, up to where the old plan had read. Spark's state store has no
   API that writes a built-in operator's state, so its contents cannot be moved in; and the
   source, not the old plan's state, is what holds every row of every open window, whichever
   placement kept them. Rows of the matched relations are skipped: their tables hold them.
5. *Resume*: the new plan evaluates the window_ends after the floor, and none before.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from columnar.store import DEFAULT_PATH, ColumnarStore, schema_name
from optimizer.deployment import deploy
from optimizer.errors import TandemError
from optimizer.logical import windows
from optimizer.migration import MS, MigrationCost, decide, migration_costs
from optimizer.observed import BatchObservation, Monitor
from optimizer.optimizer import placement_spec
from rowstream.eventtime import EPOCH
from rowstream.mig import STREAM, BatchReport, Transfers, layout
from tandem.explain import Explanation, explain
from tandem.run import RunSummary, Takeover, catalog_streams, default_lateness, run
from tandem.workload import SmartPlugs

PLAN_BATCHES = 1_000_000_000  # the batch ids of a run's n-th plan start at n times this
# Seconds to stop a plan's Spark query and start the next one's, for Moving State's cost
# (Zhu Eq. 12.3 has no such term: CAPE swaps operators in one process).
RESTART_SECONDS = 4.0
STRATEGIES = (MS,)


@dataclass(frozen=True)
class Request:
    """A migration asked for, by hand or by the adaptive rule."""

    placement: str  # where to (``optimizer.parse_placement``)
    strategy: str
    reason: str
    predicted: MigrationCost | None = None  # the cost model's (``optimizer.migration``)


@dataclass
class Migration:
    """One migration of a run, as it happened."""

    number: int
    strategy: str
    old: dict[str, str]
    new: dict[str, str]
    reason: str
    floor: datetime | None  # the last window_end the old plan evaluated
    replayed_seconds: float  # event time read again to rebuild the new plan's states
    taken: tuple[str, ...]  # tables moved from the old plan's schema
    predicted_seconds: float | None  # T_MS (optimizer.migration.moving_state)
    paused_at: float  # perf_counter when the old plan was asked to stop
    last_output: float | None  # perf_counter of the old plan's last batch with results
    resumed_at: float | None = None  # of the new plan's first committed batch
    first_output: float | None = None  # of the new plan's first batch with results

    @property
    def duration(self) -> float | None:
        """T_MS as measured: from the pause to the new plan's first committed batch."""
        return None if self.resumed_at is None else self.resumed_at - self.paused_at

    @property
    def silence(self) -> float | None:
        """Wall seconds between the last results of the old plan and the first of the new."""
        if self.first_output is None or self.last_output is None:
            return None
        return self.first_output - self.last_output

    def to_json(self) -> dict:
        kept = {k: v for k, v in asdict(self).items()
                if k not in ("paused_at", "last_output", "resumed_at", "first_output")}
        return {**kept, "floor": self.floor.isoformat() if self.floor else None,
                "duration_seconds": self.duration, "silence_seconds": self.silence}


@dataclass
class AdaptiveSummary:
    query: str
    plans: list[RunSummary] = field(default_factory=list)
    migrations: list[Migration] = field(default_factory=list)

    @property
    def results_table(self) -> str:
        return f"{schema_name(self.query)}.results"

    @property
    def tuples(self) -> int:
        return sum(p.tuples for p in self.plans)

    def combined(self) -> RunSummary:
        """The run as one: its plans' counts added up (tuples read again included), its last
        plan's placement."""
        last, plans = self.plans[-1], self.plans
        moved = Transfers()
        for p in plans:
            for f in ("to_duckdb_tuples", "to_duckdb_bytes", "to_spark_tuples", "to_spark_bytes"):
                setattr(moved, f, getattr(moved, f) + getattr(p.transfers, f))
        rules: Counter = sum((Counter(p.rules) for p in plans), Counter())
        return replace(last, query=self.query, results_table=self.results_table,
                       transfers=moved, rules=dict(rules),
                       **{f: sum(getattr(p, f) for p in plans) for f in (
                           "tuples", "batches", "window_ends", "result_rows", "quarantined",
                           "late", "dropped_by_watermark", "wall_seconds")})




def request_path(store: str | Path, name: str) -> Path:
    """Where ``tandem migrate`` leaves a request for the adaptive run of ``name`` over
    ``store``, beside its checkpoints."""
    return Path(store).parent / "checkpoints" / Path(store).stem / f"{name}.migrate.json"


def ask(query: str, placement: str, strategy: str, store: str | Path = DEFAULT_PATH,
        catalog: str | None = None, profile: str | None = None) -> Path:
    """Ask the adaptive run of ``query`` to migrate to ``placement`` by ``strategy`` at its
    next micro-batch; the placement is checked first. Returns the request's file."""
    if strategy not in STRATEGIES:
        raise TandemError(f"--strategy {strategy}: give one of {', '.join(STRATEGIES)}")
    target = explain(query, catalog=catalog, profile=profile, placement=placement)
    path = request_path(store, target.query.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"placement": placement_spec(
        target.optimization.plan.placement), "strategy": strategy}) + "\n")
    return path


def _asked(store: str | Path, name: str) -> Request | None:
    """A request ``tandem migrate`` left, taken once."""
    path = request_path(store, name)
    if not path.is_file():
        return None
    asked = json.loads(path.read_text())
    path.unlink()
    return Request(asked["placement"], asked["strategy"], "asked for with tandem migrate")


def plan_name(name: str, number: int) -> str:
    """The store schema and checkpoint name of a run's ``number``-th plan."""
    return name if number == 0 else f"{name}__plan{number}"


def run_adaptive(query: str, *, rate: float, duration: float, batch: float | None = None,
                 steps: tuple[tuple[float, float], ...] = (), placement: str = "auto",
                 adaptive: bool = True, migrate_at: list[tuple[float, str, str]] | None = None,
                 store: str | Path = DEFAULT_PATH, catalog: str | None = None,
                 profile: str | None = None, lateness: float | None = None,
                 topology: dict | None = None, margin: float = 0.2, horizon: float = 600.0,
                 name: str | None = None,
                 on_batch: Callable[[BatchReport], None] | None = None,
                 on_migration: Callable[[Migration], None] | None = None) -> AdaptiveSummary:
    """Run ``query`` over the generated stream (``rate`` tuples/s, with rate ``steps``),
    migrating its plan live. ``adaptive``: re-optimise at the observed rate whenever the
    monitor (``optimizer.observed``) finds it shifted, and migrate when the hysteresis rule
    (``optimizer.migration.decide``) says the better plan pays for its migration.
    ``migrate_at``: migrations by hand, (second of event time, placement, strategy) each, made
    once the stream has passed that second. ``batch``: event time per micro-batch."""
    explanation = explain(query, rate=rate, catalog=catalog, profile=profile,
                          placement=placement)
    name = name or explanation.query.stem
    if lateness is None:
        lateness = default_lateness(catalog_streams(explanation))
    forced = sorted(migrate_at or [])
    for _, _, strategy in forced:
        if strategy not in STRATEGIES:
            raise TandemError(f"--strategy {strategy}: give one of {', '.join(STRATEGIES)}")
    plugs = SmartPlugs(rate=rate, steps=steps, **(topology or {}))
    summary = AdaptiveSummary(name)
    _forget_plans(store, name)
    request_path(store, name).unlink(missing_ok=True)  # asked of an earlier run
    takeover: Takeover | None = None
    number = 0
    while True:
        watch = _Watch(plugs.start, explanation, on_batch)
        current = summary.migrations[-1] if summary.migrations else None

        def observe(report: BatchReport, watch=watch, current=current) -> None:
            watch.observe(report)
            if current is not None and current.resumed_at is None:
                current.resumed_at = time.perf_counter()
            if current is not None and current.first_output is None and report.result_rows:
                current.first_output = time.perf_counter()

        def stop_when(watch=watch) -> bool:
            if forced and watch.seconds is not None and watch.seconds >= forced[0][0]:
                _, where, strategy = forced.pop(0)
                watch.request = Request(where, strategy, "asked for by hand")
            elif watch.request is None and (asked := _asked(store, name)):
                watch.request = asked
            elif adaptive and watch.request is None:
                watch.request = watch.reoptimise(query, catalog, profile, lateness, margin,
                                                 horizon)
            if watch.request is not None and watch.requested_at is None:
                watch.requested_at = time.perf_counter()  # the pause begins
            return watch.request is not None

        summary.plans.append(run(
            query, explanation=explanation, name=plan_name(name, number), takeover=takeover,
            rate=rate, steps=steps, duration=duration, batch=batch, store=store, lateness=lateness,
            topology=topology, stop_when=stop_when, on_batch=observe))
        if current is not None:  # measured now that the plan it migrated to has run
            _record(store, name, current)
        request = watch.request
        if request is None:
            return summary
        target = explain(query, rate=watch.planned_rate, catalog=catalog, profile=profile,
                         placement=request.placement)
        number += 1
        takeover, migration = moving_state_takeover(
            store, name, number, explanation, target, plugs.start, lateness, request,
            watch.requested_at, watch.last_output)
        summary.migrations.append(migration)
        if on_migration:
            on_migration(migration)
        explanation = target


class _Watch:
    """One plan's batches: the statistics monitor, and where the stream has got to."""

    def __init__(self, start: int, explanation: Explanation,
                 on_batch: Callable[[BatchReport], None] | None):
        self.start, self.explanation, self.on_batch = start, explanation, on_batch
        self.monitor = Monitor()
        self.planned_rate = explanation.optimization.rate
        self.seconds: float | None = None  # event time the stream has reached, from its start
        self.request: Request | None = None
        self.requested_at: float | None = None
        self.last_output: float | None = None
        self._latest: datetime | None = None
        self._reported = time.perf_counter()
        self._fresh = False

    def observe(self, report: BatchReport) -> None:
        now = time.perf_counter()
        if report.event_time is not None:
            if self._latest is not None:  # a plan's first batch may read open windows again
                advanced = (report.event_time - self._latest).total_seconds()
                self.monitor.observe(BatchObservation(report.tuples, advanced,
                                                      now - self._reported))
                self._fresh = True
            self._latest = max(report.event_time, self._latest or report.event_time)
            self.seconds = (self._latest - EPOCH).total_seconds() - self.start
        self._reported = now
        if report.result_rows:
            self.last_output = now
        if self.on_batch:
            self.on_batch(report)

    def reoptimise(self, query: str, catalog: str | None, profile: str | None, lateness: float,
                   margin: float, horizon: float) -> Request | None:
        """A migration to the plan that is best at the observed rate, if it pays for itself."""
        if not self._fresh or not self.monitor.due(self.planned_rate):
            return None
        self._fresh = False
        observed = self.monitor.estimate()
        running = placement_spec(self.explanation.optimization.plan.placement)
        best = explain(query, rate=observed.rate, catalog=catalog, profile=profile)
        now = explain(query, rate=observed.rate, catalog=catalog, profile=profile,
                      placement=running)
        self.planned_rate = observed.rate
        self.monitor.outside = 0
        if best.optimization.plan.placement == now.optimization.plan.placement:
            return None
        ms, _ = migration_costs(now.optimization, best.optimization, lateness=lateness,
                                restart=RESTART_SECONDS)
        decision = decide(now.optimization.plan.cost, best.optimization.plan.cost, [ms],
                          best.optimization.objective, margin=margin, horizon=horizon,
                          observed_load=observed.load)
        if not decision.migrate:
            return None
        return Request(placement_spec(best.optimization.plan.placement), decision.cost.strategy,
                       f"at {observed.rate:,.0f} tuples/s: {decision.reason}", decision.cost)


def moving_state_takeover(store: str | Path, name: str, number: int, old: Explanation,
                  new: Explanation, start: int, lateness: float, request: Request,
                  paused_at: float, last_output: float | None) -> tuple[Takeover, Migration]:
    """Steps 2-4 of Moving State (module docstring), once the old plan has stopped: what the new
    plan takes over and which event time it reads again."""
    previous = plan_name(name, number - 1)
    columnar = ColumnarStore(store)
    try:
        progress = columnar.progress(previous, before=number * PLAN_BATCHES)
        # A plan whose root runs in Spark emits each window whole, as Spark completes it,
        # before any punctuation reaches the MIG: its last result is evaluated too.
        emitted = columnar.last_result_end(name, range((number - 1) * PLAN_BATCHES,
                                                       number * PLAN_BATCHES))
    finally:
        columnar.close()
    floor = max((e for e in (progress.last_end, emitted) if e is not None), default=None)
    logical = new.optimization.logical
    slide = logical.root.slide
    widest = max(w.size for w in windows(logical.root))
    reached = progress.frontiers.get(STREAM)

    def seconds(instant: datetime) -> float:
        return (instant - EPOCH).total_seconds() - start

    # The first instant any window after the floor holds; from the start if none was evaluated.
    begin = max(seconds(floor) + slide - widest, 0.0) if floor else 0.0
    until = max(seconds(reached) + lateness, begin) if reached else begin
    before, after = layout(deploy(old.optimization.plan)), layout(deploy(new.optimization.plan))
    stored = {before.stored(rid) for rid, node in before.central.items() if not node.instantiated}
    taken = frozenset(rid for rid, node in after.central.items()
                      if not node.instantiated and after.stored(rid) in stored)
    tables = tuple(t for rid in sorted(taken) for t in _tables(after.stored(rid)))
    if set(after.crossings) <= taken and not _spark_state(new):
        begin = until  # every state is taken over: nothing to read again
    takeover = Takeover(name, number * PLAN_BATCHES, floor, begin, until, previous, taken, tables)
    return takeover, Migration(number, request.strategy, old.optimization.plan.placement,
                               new.optimization.plan.placement, request.reason, floor,
                               until - begin, tables,
                               request.predicted.duration if request.predicted else None,
                               paused_at, last_output)


def _tables(stored: tuple) -> list[str]:
    _, rows, panes = stored
    return ([rows.table] if rows is not None else []) + [p.table.table for p in panes]


def _spark_state(explanation: Explanation) -> bool:
    """Does the plan keep state outside the driver's DuckDB (Spark's stateful operators, or
    duckdb-partitioned)?"""
    plan = explanation.optimization.plan
    return any(op.engine != "duckdb" and op.kind in ("aggregate", "join", "db-op")
               for op in plan.operators)


def _forget_plans(store: str | Path, name: str) -> None:
    """Drop the schemas of an earlier run's later plans: a fresh run starts with one plan."""
    columnar = ColumnarStore(store)
    try:
        prefix = schema_name(plan_name(name, 1)).removesuffix("1")
        for (schema,) in columnar.con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE starts_with(schema_name, ?)",
                [prefix]).fetchall():
            columnar.con.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        columnar.close()


def _record(store: str | Path, name: str, migration: Migration) -> None:
    """Log a migration for the Tandem page (``tandem_log.migrations``)."""
    columnar = ColumnarStore(store)
    try:
        # Every value typed, whatever the first row holds: the log's columns are its types.
        row = {k: float("nan") if v is None else v for k, v in migration.to_json().items()}
        columnar.record("migrations", {
            "query": name, "logged_at": datetime.now(UTC).replace(tzinfo=None), **row,
            "floor": row["floor"] if migration.floor else "", "taken": json.dumps(list(migration.taken))})
    finally:
        columnar.close()


__all__ = ["run_adaptive", "ask", "AdaptiveSummary", "Migration", "Request", "plan_name"]

"""Live migration of a running query from one plan to another (Zhu, Part II), and the adaptive
run that re-optimises it from observed statistics (``tandem run --adaptive``).

A run's successive plans are runs of their own (``runtime.run.run``), each with its Spark query and
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

**Parallel Track** (Zhu Alg. 8): the new plan starts beside the old one on the stream from the
event time the old one has reached; the old one emits the window_ends up to the last whose
window holds an earlier tuple and stops, and the new one's results, held in its own table until
then, join the run's (docs/adaptive.md).

Each plan is recorded (``tandem_log.adaptive_plans``: running, pausing, held, done) before it
changes what it does, so that ``--resume`` continues a run stopped in the middle of a migration;
``runtime.adoption`` records the micro-batch runs' plans alike.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from columnar.store import DEFAULT_PATH, LOG_SCHEMA, QUARANTINE, ColumnarStore, schema_name
from optimizer.deployment import deploy
from optimizer.errors import TandemError
from optimizer.logical import windows
from optimizer.migration import MS, PT, STRATEGIES, MigrationCost, decide, migration_costs
from optimizer.observed import (
    BatchObservation,
    Monitor,
    catalog_statistics,
    merged,
    planned_statistics,
)
from optimizer.optimizer import placement_spec
from rowstream.eventtime import EPOCH
from rowstream.gateway import STREAM, Quarantined
from rowstream.mig import BatchReport, Mig, Transfers, layout
from runtime.explain import Explanation, explain
from runtime.run import RunSummary, catalog_streams, default_lateness, run, stream_schema
from runtime.spec import RunSpec, Takeover
from workload.smart_plugs import PLUGS_STREAM, SmartPlugs

PLAN_BATCHES = 1_000_000_000  # the batch ids of a run's n-th plan start at n times this
# Seconds to stop a plan's Spark query and start the next one's, for Moving State's cost
# (Zhu Eq. 12.3 has no such term: CAPE swaps operators in one process). Measured here: Q1 from
# Spark to DuckDB with 1,200 rows to read again took 1.3 s from the pause to the first batch.
RESTART_SECONDS = 1.3


@dataclass(frozen=True)
class Request:
    """A migration asked for, by hand or by the adaptive rule."""

    placement: str  # where to (``optimizer.parse_placement``)
    strategy: str
    reason: str
    predicted: MigrationCost | None = None  # the cost model's (``optimizer.migration``)
    # The statistics the new plan is explained with: its arrival rate, and the selectivities
    # and distinct counts (``Catalog.statistics``: the catalog's, or those observed).
    rate: float | None = None
    statistics: dict | None = None


@dataclass
class Migration:
    """One migration of a run, as it happened."""

    number: int
    strategy: str
    old: dict[str, str]
    new: dict[str, str]
    reason: str
    floor: datetime | None  # the last window_end the old plan evaluates
    replayed_seconds: float  # event time read again to rebuild the new plan's states
    taken: tuple[str, ...]  # tables moved from the old plan's schema
    predicted_seconds: float | None  # T_MS or T_PT (optimizer.migration)
    started_at: float  # perf_counter when the migration began (Moving State: the pause)
    # perf_counter of each batch whose results reached the run's results table, from the old
    # plan's last before the migration to the new plan's first after it.
    outputs: list[float] = field(default_factory=list)
    ended_at: float | None = None  # the new plan's first batch (Parallel Track: the release)

    @property
    def duration(self) -> float | None:
        """As measured: from its start to the new plan's first committed batch (Moving State)
        or to the release of the new plan's results (Parallel Track)."""
        return None if self.ended_at is None else self.ended_at - self.started_at

    @property
    def silence(self) -> float | None:
        """The longest wall time in which no result reached the run's results table."""
        gaps = [b - a for a, b in zip(self.outputs, self.outputs[1:], strict=False)]
        return max(gaps) if gaps else None

    def to_json(self) -> dict:
        kept = {k: v for k, v in asdict(self).items()
                if k not in ("started_at", "outputs", "ended_at")}
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

    def combined(self) -> RunSummary:
        """The run as one: its plans' counts added up (tuples read again included), its last
        plan's placement."""
        last, plans = self.plans[-1], self.plans
        moved = Transfers()
        for p in plans:
            for f in ("to_duckdb_tuples", "to_duckdb_bytes", "to_spark_tuples", "to_spark_bytes"):
                setattr(moved, f, getattr(moved, f) + getattr(p.transfers, f))
        return replace(last, query=self.query, results_table=self.results_table,
                       transfers=moved,
                       quarantined=Quarantined.total_of(p.quarantined for p in plans),
                       **{f: sum(getattr(p, f) for p in plans) for f in (
                           "tuples", "batches", "window_ends", "result_rows",
                           "dropped_by_watermark", "wall_seconds")})




def request_path(store: str | Path, name: str) -> Path:
    """Where ``tandem migrate`` leaves a request for the adaptive run of ``name`` over
    ``store``, beside its checkpoints."""
    return Path(store).parent / "checkpoints" / Path(store).stem / f"{name}.migrate.json"


def ask(query: str, placement: str, strategy: str, store: str | Path = DEFAULT_PATH,
        catalog: str | None = None, profile: str | None = None) -> Path:
    """Ask the adaptive run of ``query`` to migrate to ``placement`` by ``strategy`` at its
    next micro-batch; the placement is checked first. Returns the request's file."""
    _check(strategy)
    target = explain(query, catalog=catalog, profile=profile, placement=placement)
    path = request_path(store, target.query.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"placement": placement_spec(
        target.optimization.plan.placement), "strategy": strategy}) + "\n")
    return path


def parse_migrate_at(text: str) -> tuple[float, str, str]:
    """A migration by hand written ``SECOND:PLACEMENT:STRATEGY`` (``300:duckdb:pt``)."""
    second, _, rest = text.partition(":")
    placement, _, strategy = rest.rpartition(":")
    try:
        at = float(second)
    except ValueError:
        at = None
    if at is None or not placement:
        raise TandemError(f"--migrate-at {text}: write it SECOND:PLACEMENT:STRATEGY "
                          "(300:duckdb:pt)")
    _check(strategy)
    return at, placement, strategy


def _check(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise TandemError(f"--strategy {strategy}: give one of {', '.join(STRATEGIES)}")


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


def refuse_unreplayable(source: str) -> None:
    """An adaptive run migrates by reading its stream again from an event time (Zhu's
    strategies replay it): only the generator's stream can be."""
    if source != "generator":
        raise TandemError("an adaptive run reads the generator: a landing directory's stream "
                          "cannot be read again from an event time")


def run_adaptive(query: str, *, rate: float, duration: float, batch: float | None = None,
                 steps: tuple[tuple[float, float], ...] = (), placement: str = "auto",
                 adaptive: bool = True, migrate_at: list[tuple[float, str, str]] | None = None,
                 store: str | Path = DEFAULT_PATH, catalog: str | None = None,
                 profile: str | None = None, lateness: float | None = None,
                 topology: dict | None = None, margin: float = 0.2, horizon: float = 600.0,
                 name: str | None = None, strategies: tuple[str, ...] = STRATEGIES,
                 resume: bool = False, source: str = "generator",
                 on_batch: Callable[[BatchReport], None] | None = None,
                 on_migration: Callable[[Migration], None] | None = None) -> AdaptiveSummary:
    """Run ``query`` over the generated stream (``rate`` tuples/s, with rate ``steps``),
    migrating its plan live. ``adaptive``: re-optimise at the observed rate whenever the
    monitor (``optimizer.observed``) finds it shifted, and migrate when the hysteresis rule
    (``optimizer.migration.decide``) says the better plan pays for its migration.
    ``migrate_at``: migrations by hand, (second of event time, placement, strategy) each, made
    once the stream has passed that second. ``batch``: event time per micro-batch.
    ``strategies``: those the adaptive rule chooses from, by their predicted work.
    ``resume``: continue a run that stopped, in the middle of a migration or not, from the
    plans it recorded (``tandem_log.adaptive_plans``) and their checkpoints; give it the
    arguments the run was started with. ``source``: the generator only
    (``refuse_unreplayable``)."""
    refuse_unreplayable(source)
    explanation = explain(query, rate=rate, catalog=catalog, profile=profile,
                          placement=placement)
    if (schema := stream_schema(explanation, "an adaptive run")).columns != PLUGS_STREAM.columns:
        raise TandemError(f"an adaptive run reads the generator, which writes only the smart "
                          f"plugs' stream: {schema.name} has other columns")
    name = name or explanation.query.stem
    for strategy in [s for _, _, s in migrate_at or []] + list(strategies):
        _check(strategy)
    runner = _Adaptive(
        query=query, name=name, catalog=catalog, profile=profile, store=store,
        stream=RunSpec(query, rate=rate, steps=steps, duration=duration, batch=batch,
                       store=store, topology=topology),
        start_second=SmartPlugs(rate=rate, steps=steps, **(topology or {})).start,
        lateness=(default_lateness(catalog_streams(explanation)) if lateness is None
                  else lateness),
        adaptive=adaptive, forced=sorted(migrate_at or []), strategies=tuple(strategies),
        margin=margin, horizon=horizon, on_batch=on_batch, on_migration=on_migration)
    if resume:
        return runner.resume(recorded_plans(store, name))
    _forget_plans(store, name)
    request_path(store, name).unlink(missing_ok=True)  # asked of an earlier run
    return runner.run(explanation)


# What each plan of an adaptive run is doing, as recorded for its resume.
PAUSING = "pausing"  # Moving State: it stops; the next plan is not chosen yet
RUNNING = "running"
HELD = "held"  # Parallel Track's new plan: its results wait in its own table
DONE = "done"
PLANS_LOG = "adaptive_plans"  # in tandem_log: a row per plan of each adaptive run


@dataclass
class _Plan:
    """One plan of an adaptive run, its run in a thread of its own."""

    number: int
    explanation: Explanation
    takeover: Takeover | None
    watch: _Watch
    migration: Migration | None  # the migration that started it
    released: bool = True  # its results go to the run's table (Parallel Track: once released)
    bridge: Mig | None = None
    summary: RunSummary | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    beside: _Plan | None = None  # Parallel Track: the plan that runs beside this one
    started: threading.Event = field(default_factory=threading.Event)  # its MIG exists
    cancelled: bool = False  # the run failed elsewhere: stop


@dataclass
class _Adaptive:
    query: str
    name: str
    stream: RunSpec  # what every plan's run shares
    catalog: str | None
    profile: str | None
    store: str | Path
    adaptive: bool
    forced: list[tuple[float, str, str]]
    lateness: float
    margin: float
    horizon: float
    on_batch: Callable[[BatchReport], None] | None
    on_migration: Callable[[Migration], None] | None
    start_second: int  # the stream's start, Unix seconds
    strategies: tuple[str, ...]  # those the adaptive rule may choose
    summary: AdaptiveSummary = field(init=False)
    numbers: int = 0
    # What each plan is doing, by number: recorded before it changes, so that a resumed run
    # finds every plan that was running, and what it took over (``_save``).
    history: dict[int, dict] = field(default_factory=dict)

    def __post_init__(self):
        self.summary = AdaptiveSummary(self.name)

    def run(self, explanation: Explanation) -> AdaptiveSummary:
        return self._follow(self._start(explanation, None, None))

    def resume(self, history: dict[int, dict]) -> AdaptiveSummary:
        """Continue from the plans a stopped run recorded: each that was running resumes from
        its checkpoint; a pause or a release under way completes first."""
        where = f"the adaptive run of {self.name} over {self.store}"
        if not history:
            raise TandemError(f"{where} recorded no plan to resume: run without --resume")
        live = live_numbers(history)
        if not live:
            raise TandemError(f"{where} has ended: run without --resume to start it again")
        self.history, self.numbers = history, max(history)
        pausing = history[live[-1]]["status"] == PAUSING
        del self.forced[:self.numbers + pausing]  # the migrations made already
        if pausing:
            entry = history[live[-1]]
            return self._follow(self._moving_state(
                live[-1], self._explain(entry["placement"], entry["rate"], entry["statistics"]),
                _request(entry["request"]), time.perf_counter(), None))
        # Parallel Track with both plans running: the new one first, for the old one's sake.
        beside = self._restart(history[live[1]]) if len(live) == 2 else None
        return self._follow(self._restart(history[live[0]], beside))

    def _restart(self, entry: dict, beside: _Plan | None = None) -> _Plan:
        """A recorded plan, started again from its checkpoint (``beside``: Parallel Track's new
        plan, started already). A held plan whose old plan is done has its results released
        first."""
        takeover = restored_takeover(entry["takeover"]) if entry["takeover"] else None
        held = entry["status"] == HELD
        if held and self.history[entry["number"] - 1]["status"] == DONE:
            release_held(self.store, takeover.results, self.name)
            held, entry["status"] = False, RUNNING
        if takeover is not None and not held:
            takeover = replace(takeover, results=self.name)
        migration = restored_migration(entry["migration"]) if entry["migration"] else None
        if migration is not None:
            self._announce(migration)
        end = entry["last_end"]
        return self._start(self._explain(entry["placement"], entry["rate"], entry["statistics"]),
                           takeover, migration, released=not held, resume=True,
                           last_end=datetime.fromisoformat(end) if end else None,
                           number=entry["number"], beside=beside)

    def _follow(self, plan: _Plan) -> AdaptiveSummary:
        """Wait for the running plan; go on with the plan it migrates to, until the last."""
        while True:
            plan.thread.join()
            if plan.error is not None:
                if plan.beside is not None:
                    plan.beside.cancelled = True
                    plan.beside.thread.join()
                raise plan.error
            self.summary.plans.append(plan.summary)
            if plan.migration is not None and plan.migration.strategy == MS:
                record_migration(self.store, self.name, plan.migration)
            if plan.beside is not None:  # Parallel Track: the old plan emitted its last window
                self._mark(plan.number, DONE)
                plan = self._release(plan.beside)
                continue
            watch = plan.watch
            if watch.request is None:
                self._mark(plan.number, DONE)
                return self.summary
            plan = self._moving_state(plan.number, plan.explanation, watch.request,
                                      watch.requested_at, watch.last_output)

    def _moving_state(self, old: int, explanation: Explanation, request: Request,
                      paused_at: float, last_output: float | None) -> _Plan:
        """Steps 2-5 of Moving State, once plan ``old`` has stopped: the next plan starts."""
        target = self._target(request)
        self.numbers += 1
        takeover, migration = moving_state_takeover(
            self.store, self.name, self.numbers, explanation, target, self.start_second,
            self.lateness, request, paused_at, last_output)
        self._announce(migration)
        self.history[old]["status"] = DONE  # recorded with the next plan, at once
        return self._start(target, takeover, migration)

    def _priced(self, request: Request, plan: _Plan) -> Request:
        """A request with its strategy's cost (``optimizer.migration``) at its statistics."""
        now = self._explain(placement_spec(plan.explanation.optimization.plan.placement),
                            request.rate, request.statistics)
        costs = migration_costs(now.optimization, self._target(request).optimization,
                                lateness=self.lateness, restart=RESTART_SECONDS)
        return replace(request, predicted=next(c for c in costs if c.strategy == request.strategy))

    def _explain(self, placement: str, rate: float, statistics: dict | None) -> Explanation:
        return explain(self.query, rate=rate, catalog=self.catalog, profile=self.profile,
                       placement=placement, statistics=statistics)

    def _target(self, request: Request) -> Explanation:
        return self._explain(request.placement, request.rate, request.statistics)

    def _announce(self, migration: Migration) -> None:
        self.summary.migrations.append(migration)
        if self.on_migration:
            self.on_migration(migration)

    def _start(self, explanation: Explanation, takeover: Takeover | None,
               migration: Migration | None, released: bool = True, resume: bool = False,
               last_end: datetime | None = None, number: int | None = None,
               beside: _Plan | None = None) -> _Plan:
        """Record the plan (``_save``), then run it in a thread of its own: the run's latest
        unless ``number`` is given (a resumed plan). ``last_end``: the last window_end it
        evaluates."""
        plan = _Plan(self.numbers if number is None else number, explanation, takeover,
                     _Watch(self.start_second, explanation, self.on_batch), migration, released,
                     beside=beside)
        self.history[plan.number] = plan_entry(
            plan.number, RUNNING if released else HELD, explanation,
            takeover=takeover_json(takeover) if takeover else None,
            migration=migration.to_json() if migration else None,
            last_end=last_end.isoformat() if last_end else None)
        self._save()

        def started(bridge: Mig) -> None:
            plan.bridge = bridge
            plan.started.set()

        def body() -> None:
            try:
                spec = replace(self.stream, name=plan_name(self.name, plan.number),
                               takeover=takeover, lateness=self.lateness, resume=resume,
                               last_end=last_end)
                plan.summary = run(spec, explanation=explanation, on_start=started,
                                   stop_when=lambda: self._stop_when(plan),
                                   on_batch=lambda report: self._observe(plan, report))
            except BaseException as err:  # the coordinating thread raises it
                plan.error = err
            finally:
                plan.started.set()

        plan.thread = threading.Thread(target=body, name=f"tandem-{plan_name(self.name, plan.number)}")
        plan.thread.start()
        return plan

    def _mark(self, number: int, status: str, **details) -> None:
        self.history[number].update(status=status, **details)
        self._save()

    def _save(self) -> None:
        save_plans(self.store, self.name, self.history)

    def _observe(self, plan: _Plan, report: BatchReport) -> None:
        plan.watch.observe(report)
        now = time.perf_counter()
        migration = plan.migration
        if migration is not None and migration.strategy == MS and migration.ended_at is None:
            migration.ended_at = now
        if report.result_rows and plan.released:
            if migration is not None and len(migration.outputs) == 1:  # its first results
                migration.outputs.append(now)
            beside = plan.beside
            if beside is not None and beside.migration is not None:  # Parallel Track's old plan
                beside.migration.outputs.append(now)

    def _stop_when(self, plan: _Plan) -> bool:
        """Polled by a plan's run: True stops it for Moving State. Parallel Track starts the new
        plan beside it instead, and the old one stops once it has emitted its last window."""
        watch = plan.watch
        if plan.cancelled:
            return True
        if plan.beside is not None or not plan.released:
            return False  # migrating already
        if watch.request is None:
            if self.forced and watch.seconds is not None and watch.seconds >= self.forced[0][0]:
                _, where, strategy = self.forced.pop(0)
                watch.request = Request(where, strategy, "asked for by hand")
            elif asked := _asked(self.store, self.name):
                watch.request = asked
            elif self.adaptive:
                watch.request = watch.reoptimise(self.query, self.catalog, self.profile,
                                                 self.lateness, self.margin, self.horizon,
                                                 self.strategies)
            if watch.request is None:
                return False
            watch.requested_at = time.perf_counter()
            if watch.request.rate is None:
                watch.request = replace(watch.request, rate=watch.planned_rate,
                                        statistics=watch.statistics)
            if watch.request.predicted is None:  # by hand: priced all the same
                watch.request = self._priced(watch.request, plan)
        if watch.request.strategy != PT:
            # Moving State: the pause begins. Its batches from now on are skipped, so a
            # resumed run does not start this plan again, but goes on with the migration.
            self._mark(plan.number, PAUSING, request=asdict(watch.request))
            return True
        self._parallel_track(plan)
        return False

    def _parallel_track(self, old: _Plan) -> None:
        """Start the new plan beside ``old`` on the stream from where ``old`` has got to; ``old``
        emits the window_ends up to the last that holds a tuple before it, the new one those
        after, held back until ``old`` is done."""
        request, watch = old.watch.request, old.watch
        target = self._target(request)
        logical = target.optimization.logical
        step = round(logical.root.slide * 1e6)
        switch = watch.seconds  # the new plan's tuples are those from here on
        widest = max(w.size for w in windows(logical.root))
        last_old_us = -(-round((self.start_second + switch + widest) * 1e6) // step) * step - step
        last_old = EPOCH + timedelta(microseconds=last_old_us)
        self.numbers += 1
        own = plan_name(self.name, self.numbers)
        takeover = Takeover(own, self.numbers * PLAN_BATCHES, last_old, switch, switch,
                            plan_name(self.name, old.number))
        migration = Migration(self.numbers, PT, old.explanation.optimization.plan.placement,
                              target.optimization.plan.placement, request.reason, last_old, 0.0,
                              (), request.predicted.duration if request.predicted else None,
                              watch.requested_at, [watch.last_output or watch.requested_at])
        self._announce(migration)
        old.bridge.final_end = min(old.bridge.final_end or last_old, last_old)
        self.history[old.number]["last_end"] = last_old.isoformat()  # recorded with the new
        old.beside = self._start(target, takeover, migration, released=False)

    def _release(self, plan: _Plan) -> _Plan:
        """Parallel Track's end: the old plan is done; the new one's results held so far join
        the run's, and it writes there from now on."""
        plan.started.wait()
        if plan.bridge is not None:
            plan.bridge.release(self.name)
        plan.released = True
        self._mark(plan.number, RUNNING)
        migration = plan.migration
        migration.ended_at = time.perf_counter()
        migration.outputs.append(migration.ended_at)
        record_migration(self.store, self.name, migration)
        return plan


class _Watch:
    """One plan's batches: the statistics monitor, and where the stream has got to."""

    def __init__(self, start: int, explanation: Explanation,
                 on_batch: Callable[[BatchReport], None] | None):
        self.start, self.explanation, self.on_batch = start, explanation, on_batch
        self.monitor = Monitor()
        optimization = explanation.optimization
        self.planned_rate = optimization.rate
        # The selectivities and groups the plan was chosen with (by relation id), and the
        # catalog's statistics with those observed once a re-optimisation has used them.
        self.planned = planned_statistics(optimization.logical, optimization.model.stats)
        self.statistics = optimization.model.stats.catalog.statistics()
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
                                                      now - self._reported, report.crossed,
                                                      report.groups, report.timings))
                self._fresh = True
            self._latest = max(report.event_time, self._latest or report.event_time)
            self.seconds = (self._latest - EPOCH).total_seconds() - self.start
        self._reported = now
        if report.result_rows:
            self.last_output = now
        if self.on_batch:
            self.on_batch(report)

    def reoptimise(self, query: str, catalog: str | None, profile: str | None, lateness: float,
                   margin: float, horizon: float, strategies: tuple[str, ...]
                   ) -> Request | None:
        """A migration to the plan that is best at the observed rate and selectivities, if it
        pays for itself."""
        if not self._fresh or not self.monitor.due(self.planned_rate, self.planned):
            return None
        self._fresh = False
        observed = self.monitor.estimate()
        running = placement_spec(self.explanation.optimization.plan.placement)
        logical = self.explanation.optimization.logical
        seen = catalog_statistics(logical, observed)
        self.statistics = merged(self.statistics, seen)
        best = explain(query, rate=observed.rate, catalog=catalog, profile=profile,
                       statistics=self.statistics)
        now = explain(query, rate=observed.rate, catalog=catalog, profile=profile,
                      placement=running, statistics=self.statistics)
        self.planned_rate = observed.rate
        self.planned = {rid: value for rid, value in observed.statistics().items()
                        if rid in self.planned}
        self.monitor.outside = 0
        if best.optimization.plan.placement == now.optimization.plan.placement:
            return None
        costs = migration_costs(now.optimization, best.optimization, lateness=lateness,
                                restart=RESTART_SECONDS)
        decision = decide(now.optimization.plan.cost, best.optimization.plan.cost,
                          [c for c in costs if c.strategy in strategies],
                          best.optimization.objective, margin=margin, horizon=horizon,
                          observed_load=observed.load,
                          current_objective=now.optimization.objective)
        if not decision.migrate:
            return None
        said = "".join(f", selectivity of {key} {value:.2f}"
                       for key, value in sorted(seen["selectivity"].items()))
        said += "".join(f", {value:,.0f} groups of {key}" for counts in seen["distinct"].values()
                        for key, value in sorted(counts.items()))
        if observed.work:
            said += "; work per second: " + ", ".join(
                f"{part} {spent:.2f} s" for part, spent in sorted(observed.work.items()))
        return Request(placement_spec(best.optimization.plan.placement), decision.cost.strategy,
                       f"at {observed.rate:,.0f} tuples/s{said}: {decision.reason}",
                       decision.cost)


def live_plans(store: str | Path, name: str) -> list[str]:
    """The names of the plans of run ``name`` that still run, oldest first; [] if it recorded
    none (a run that never migrated)."""
    return [plan_name(name, n) for n in live_numbers(recorded_plans(store, name))]


def live_numbers(history: dict[int, dict]) -> list[int]:
    """The numbers of a run's recorded plans that are not done, oldest first."""
    return [n for n in sorted(history) if history[n]["status"] != DONE]


def plan_entry(number: int, status: str, explanation: Explanation, **details) -> dict:
    """A plan as a run records it (``_Adaptive._start``, ``runtime.adoption``)."""
    optimization = explanation.optimization
    return {"number": number, "status": status,
            "placement": placement_spec(optimization.plan.placement),
            "rate": optimization.rate,
            "statistics": optimization.model.stats.catalog.statistics(),
            "takeover": None, "migration": None, "last_end": None, **details}


def save_plans(store: str | Path, name: str, history: dict[int, dict]) -> None:
    """Record every plan of a run in one transaction (``tandem_log.adaptive_plans``)."""
    rows = pa.Table.from_pylist([
        {"target": name, "number": n, "status": entry["status"], "plan": json.dumps(entry),
         "logged_at": datetime.now(UTC).replace(tzinfo=None)}
        for n, entry in sorted(history.items())])
    with ColumnarStore(store) as columnar:
        columnar.replace_logged(PLANS_LOG, name, rows)


def moving_state_takeover(store: str | Path, name: str, number: int, old: Explanation,
                          new: Explanation, start: int, lateness: float, request: Request,
                          paused_at: float, last_output: float | None
                          ) -> tuple[Takeover, Migration]:
    """Steps 2-4 of Moving State (module docstring), once the old plan has stopped: what the new
    plan takes over and which event time it reads again."""
    previous = plan_name(name, number - 1)
    with ColumnarStore(store) as columnar:
        progress = columnar.progress(previous, before=number * PLAN_BATCHES)
        # A plan whose root runs in Spark emits each window whole, as Spark completes it,
        # before any punctuation reaches the MIG: its last result is evaluated too.
        emitted = columnar.last_result_end(name, range((number - 1) * PLAN_BATCHES,
                                                       number * PLAN_BATCHES))
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
    before, after = (layout(deploy(old.optimization.plan), old.fragments),
                     layout(deploy(new.optimization.plan), new.fragments))
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
                               paused_at, [last_output or paused_at])


def recorded_plans(store: str | Path, name: str) -> dict[int, dict]:
    """The plans the adaptive run ``name`` recorded, by number (``_Adaptive._save``)."""
    with ColumnarStore(store) as columnar:
        if not columnar.logged(PLANS_LOG):
            return {}
        rows = columnar.query(f"SELECT number, plan FROM {LOG_SCHEMA}.{PLANS_LOG} "
                              "WHERE target = ?", [name])
    return {row["number"]: json.loads(row["plan"]) for row in rows}


def takeover_json(takeover: Takeover) -> dict:
    return {**asdict(takeover), "floor": takeover.floor.isoformat() if takeover.floor else None,
            "taken": sorted(takeover.taken), "tables": list(takeover.tables)}


def restored_takeover(recorded: dict) -> Takeover:
    floor = recorded["floor"]
    return Takeover(**{**recorded, "floor": datetime.fromisoformat(floor) if floor else None,
                       "taken": frozenset(recorded["taken"]),
                       "tables": tuple(recorded["tables"])})


def _request(recorded: dict) -> Request:
    predicted = recorded["predicted"]
    return Request(**{**recorded, "reason": f"{recorded['reason']} (resumed after a stop)",
                      "predicted": MigrationCost(**predicted) if predicted else None})


def restored_migration(recorded: dict) -> Migration:
    """A migration under way when its run stopped; its timings start again with the resume."""
    now, floor = time.perf_counter(), recorded["floor"]
    return Migration(recorded["number"], recorded["strategy"], recorded["old"], recorded["new"],
                     f"{recorded['reason']} (resumed after a stop)",
                     datetime.fromisoformat(floor) if floor else None,
                     recorded["replayed_seconds"], tuple(recorded["taken"]),
                     recorded["predicted_seconds"], now, [now])


def release_held(store: str | Path, held: str, name: str) -> None:
    """Release a held plan's results into the run's (``Mig.release``, for a plan not running)."""
    with ColumnarStore(store) as columnar:
        columnar.move_results(held, name)


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
    with ColumnarStore(store) as columnar:
        prefix = plan_name(name, 1).removesuffix("1")
        for (schema,) in columnar.con.execute(
                "SELECT schema_name FROM duckdb_schemas() WHERE starts_with(schema_name, ?)",
                [schema_name(prefix)]).fetchall():
            columnar.con.execute(f"DROP SCHEMA {schema} CASCADE")
        if columnar.logged(QUARANTINE):
            columnar.con.execute(f"DELETE FROM {LOG_SCHEMA}.{QUARANTINE} "
                                 "WHERE starts_with(query, ?)", [prefix])


def record_migration(store: str | Path, name: str, migration: Migration) -> None:
    """Log a migration for the Tandem page (``tandem_log.migrations``)."""
    with ColumnarStore(store) as columnar:
        # Every value typed, whatever the first row holds: the log's columns are its types.
        row = {k: float("nan") if v is None else v for k, v in migration.to_json().items()}
        columnar.record("migrations", {
            "query": name, "logged_at": datetime.now(UTC).replace(tzinfo=None), **row,
            "floor": row["floor"] if migration.floor else "", "taken": json.dumps(list(migration.taken))})


__all__ = ["run_adaptive", "ask", "AdaptiveSummary", "Migration", "Request", "plan_name",
           "recorded_plans", "live_plans", "live_numbers", "save_plans", "plan_entry", "release_held",
           "record_migration"]

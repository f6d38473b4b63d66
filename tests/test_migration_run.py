"""Live plan migration on the real engines: a run that migrates between Spark and DuckDB, in
both directions, gives exactly the reference evaluator's rows, none missing and none twice;
and so does one killed in the middle of a migration and resumed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from benchmarking import reference
from optimizer import optimize
from runtime.cleanup import cleanup
from runtime.microbatch import run_microbatch
from runtime.migration import (
    DONE,
    HELD,
    PAUSING,
    PLAN_BATCHES,
    RUNNING,
    live_numbers,
    recorded_plans,
    run_adaptive,
)
from tests.conftest import lost_and_duplicated, query_sql, short
from tests.crash.points import MIGRATION_POINTS, POINTS, environment
from tests.matrix import FULL
from tests.test_crash import land
from tests.test_reference import assert_same_rows
from tests.test_run import results
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

# The rate steps 20-fold and back, as 2,000 -> 40,000 -> 2,000 tuples/s does, at a scale the
# reference evaluator handles: six plugs at 6, then 120, then 6 tuples/s. The queries'
# short-window variants (tests/conftest.py:short), whose largest window is 20 s; 4 s
# micro-batches (with 8-s ones, pure Spark's Q1 had evaluated no window when Moving State
# began at 30 s).
TOPOLOGY = dict(houses=2, households_per_house=2, plugs=6)
RATE, STEPS, DURATION, BATCH = 6, ((20, 120), (30, 6)), 52, 4
WINDOW = 20  # seconds: the largest window of the short variants


@pytest.fixture(scope="module")
def truth():
    stream = SmartPlugs(rate=RATE, steps=STEPS, **TOPOLOGY).between(0, DURATION)
    return reference.Evaluator({"plugs": pl.from_arrow(stream)})


# A migration's class is its strategy, its direction and the kind of window state the plans
# keep: of raw tuples (Q1 joins the loads with their peaks) or of aggregates joined (Q3 joins
# two, Q6 three). `make test` runs each strategy both ways, and each kind of state: Q3's
# Moving State runs in the crash chain below and in the takeover test. `make test-matrices`
# (TANDEM_FULL_MATRICES=1) runs them all, Q6 included.
MOVING_STATE = ["q1", "q3", "q6"] if FULL else ["q1"]
PARALLEL_TRACK = [("q1", "spark", "duckdb"), ("q3", "duckdb", "spark")] + (
    [("q6", "spark", "duckdb")] if FULL else [])


@pytest.mark.parametrize("name", MOVING_STATE)
def test_moving_state_both_ways_gives_the_reference_rows(tmp_path, truth, catalog, profile,
                                                         name):
    # Spark -> DuckDB in the burst, DuckDB -> Spark after it; both once the first whole
    # windows have been evaluated.
    summary = run_adaptive(short(name), rate=RATE, steps=STEPS, duration=DURATION, batch=BATCH,
                           topology=TOPOLOGY, placement="spark", adaptive=False,
                           migrate_at=[(30, "duckdb", "ms"), (42, "spark", "ms")],
                           store=tmp_path / "tandem.duckdb")
    assert [set(m.new.values()) for m in summary.migrations] == [{"duckdb"}, {"spark"}]
    root = optimize(query_sql(short(name)), catalog, profile).logical.root
    got = results(tmp_path / "tandem.duckdb", name).select(root.columns)
    want = truth.result(root)
    assert lost_and_duplicated(got, want) == (0, 0)
    assert_same_rows(got, want)
    for migration in summary.migrations:
        # Neither plan keeps a DuckDB table the other keeps alike: every state was rebuilt
        # from the stream, read again from at least a whole window before the floor on.
        assert migration.taken == () and migration.replayed_seconds >= WINDOW - 1
        assert migration.floor is not None and migration.duration > 0


def test_moving_state_takes_over_the_tables_kept_alike(tmp_path, truth, catalog, profile):
    # Q3's join moves from Spark into DuckDB, beside its aggregates: their pane partials move
    # to the new plan's schema, and there is no other state to rebuild.
    aggregates = "select_1=spark,aggregate_1=duckdb,select_2=spark,aggregate_2=duckdb"
    summary = run_adaptive(short("q3"), rate=RATE, steps=STEPS, duration=DURATION, batch=BATCH,
                           topology=TOPOLOGY, placement=f"{aggregates},join_1=spark,project_1=spark",
                           adaptive=False, store=tmp_path / "tandem.duckdb",
                           migrate_at=[(30, f"{aggregates},join_1=duckdb,project_1=duckdb", "ms")])
    (migration,) = summary.migrations
    assert migration.taken == ("panes_aggregate_1", "panes_aggregate_2")
    assert migration.replayed_seconds == 0
    root = optimize(query_sql(short("q3")), catalog, profile).logical.root
    got = results(tmp_path / "tandem.duckdb", "q3").select(root.columns)
    want = truth.result(root)
    assert lost_and_duplicated(got, want) == (0, 0)
    assert_same_rows(got, want)


@pytest.mark.parametrize("name, before, after", PARALLEL_TRACK)
def test_parallel_track_gives_the_reference_rows_and_output_all_along(tmp_path, truth, catalog,
                                                                      profile, name, before,
                                                                      after):
    summary = run_adaptive(short(name), rate=RATE, steps=STEPS, duration=DURATION, batch=BATCH,
                           topology=TOPOLOGY, placement=before, adaptive=False,
                           migrate_at=[(24, after, "pt")], store=tmp_path / "tandem.duckdb")
    (migration,) = summary.migrations
    assert set(migration.new.values()) == {after}
    root = optimize(query_sql(short(name)), catalog, profile).logical.root
    got = results(tmp_path / "tandem.duckdb", name).select(root.columns)
    want = truth.result(root)
    assert lost_and_duplicated(got, want) == (0, 0)
    assert_same_rows(got, want)
    # The old plan went on emitting while both ran: results came out between the migration's
    # start and the release of the new plan's.
    assert len(migration.outputs) > 2
    # It emitted the window_ends up to the last that holds a tuple from before the switch.
    assert migration.floor < max(want["window_end"])


ROOT = Path(__file__).resolve().parents[1]
# run_adaptive in a process of its own, which a crash point kills with its Spark.
ADAPTIVE = "import json, sys; from runtime.migration import run_adaptive; " \
           "run_adaptive(**json.loads(sys.argv[1]))"


def adaptive_arguments(store: Path, name: str, placement: str, migrate_at: list[tuple],
                       resume: bool) -> dict:
    return dict(query=short(name), rate=RATE, steps=STEPS, duration=DURATION, batch=BATCH,
                topology=TOPOLOGY, placement=placement, adaptive=False, migrate_at=migrate_at,
                store=str(store), resume=resume)


def killed_adaptive(crash: str, *arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ADAPTIVE,
                           json.dumps(adaptive_arguments(*arguments))], cwd=ROOT,
                          env=environment(crash), capture_output=True, text=True, timeout=900,
                          start_new_session=True)


# One run killed in turn at each point of both strategies, each kill a resume of the run before
# (as tests/test_crash.py chains the points of a plain run): Q3 (a join and two aggregates)
# moves from DuckDB to Spark by Parallel Track in the burst, then back by Moving State.
CHAIN = ("q3", "duckdb", [(16, "spark", "pt"), (40, "duckdb", "ms")])
# Each point with the plans it leaves to the resume, and their status.
CHAINED_POINTS = [
    # Parallel Track: both plans run (the new one was started at 16 s, in batch 4); the old one
    # evaluates its batch 6, before the last window_end it emits (36 s).
    ("evaluation:6", {0: RUNNING, 1: HELD}),
    # Parallel Track: the old plan is done, the new one's results are still held.
    ("release:1", {1: HELD}),
    # Moving State: the old plan has stopped, and the new one is not recorded yet.
    ("migration:2", {1: PAUSING}),
    # Moving State: the new plan evaluates the batch that read the open windows again.
    (f"evaluation:{2 * PLAN_BATCHES}", {2: RUNNING}),
]


def test_a_run_killed_in_the_middle_of_each_migration_resumes_exactly(tmp_path, truth, catalog,
                                                                      profile):
    store = tmp_path / "tandem.duckdb"
    name, placement, migrate_at = CHAIN
    for number, (crash, left) in enumerate(CHAINED_POINTS):
        killed = killed_adaptive(crash, store, name, placement, migrate_at, number > 0)
        point = crash.split(":")[0]
        assert killed.returncode == -signal.SIGKILL, (
            f"the run did not reach the crash point {crash} "
            f"({({**POINTS, **MIGRATION_POINTS})[point]}): {killed.stderr[-2000:]}")
        plans = recorded_plans(store, name)
        assert {n: plans[n]["status"] for n in live_numbers(plans)} == left, crash
    # The last resume, which is not killed, in this process: a new JVM's start is most of what
    # a short run costs.
    run_adaptive(**adaptive_arguments(store, name, placement, migrate_at, True))
    plans = recorded_plans(store, name)
    assert [({p.split("=")[1] for p in plan["placement"].split(",")}, plan["status"])
            for _, plan in sorted(plans.items())] == [
        ({"duckdb"}, DONE), ({"spark"}, DONE), ({"duckdb"}, DONE)]
    root = optimize(query_sql(short(name)), catalog, profile).logical.root
    got = results(store, name).select(root.columns)
    want = truth.result(root)
    assert lost_and_duplicated(got, want) == (0, 0)
    assert_same_rows(got, want)


def test_a_microbatch_run_adopts_the_nightly_plan_by_parallel_track(tmp_path, monkeypatch,
                                                                   catalog, profile):
    # The checkpoint's first plan is pure Spark; the nightly job logs the optimiser's plan for
    # the stream it archived; the runs that follow migrate to it by Parallel Track.
    stream = SmartPlugs(rate=RATE, **TOPOLOGY)
    files = stream.write_files(tmp_path / "files", 80, 10)
    state = tmp_path / "state"
    monkeypatch.setenv("TANDEM_STATE", str(state))

    def scheduled(files_so_far: slice):
        land(files, state / "landing", files_so_far)
        return run_microbatch(short("q1"), state / "landing", checkpoints=state / "checkpoints",
                              store=state / "tandem.duckdb", placement="spark")

    # The plan is adopted after the second run (the 20-second windows fill up in the first);
    # the third runs both plans, until the old one emits its last window; the fourth the new.
    scheduled(slice(0, 2))
    nightly = cleanup([short("q1")], store=state / "tandem.duckdb", checkpoints=state / "checkpoints",
                      landing=state / "landing", catalog=ROOT / "queries" / "catalog.toml")
    (logged,) = nightly.plans
    assert logged["changed"] and set(logged["placement"].values()) != {"spark"}
    for files_so_far in (slice(2, 3), slice(3, 6), slice(6, None)):
        scheduled(files_so_far)
    history = recorded_plans(state / "tandem.duckdb", "q1_microbatch")
    assert [history[n]["status"] for n in sorted(history)] == ["done", "running"]
    assert history[1]["migration"]["new"] == logged["placement"]
    # Every window_end up to where the stream's files have got to, exactly once.
    root = optimize(query_sql(short("q1")), catalog, profile).logical.root
    got = results(state / "tandem.duckdb", "q1_microbatch").select(root.columns)
    truth = reference.Evaluator({"plugs": pl.from_arrow(stream.between(0, 80))})
    want = truth.result(root).filter(pl.col("window_end") <= got["window_end"].max())
    assert lost_and_duplicated(got, want) == (0, 0)
    assert_same_rows(got, want)

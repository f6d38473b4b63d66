"""A checkpointed run adopts the plan the nightly job logs (docs/adaptive.md): the micro-batch
runs of ``runtime.microbatch`` migrate to it live, by Parallel Track over the scheduled runs that
follow. Moving State would read the open windows' files again, some of them archived by then."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from columnar.store import ColumnarStore
from optimizer.logical import windows
from optimizer.migration import PT
from optimizer.optimizer import placement_spec
from rowstream.eventtime import EPOCH
from rowstream.landing import last_file_read, last_offset
from rowstream.mig import HIGH_WATER
from runtime.explain import explain
from runtime.migration import (
    DONE,
    HELD,
    PLAN_BATCHES,
    RUNNING,
    Migration,
    live_numbers,
    plan_entry,
    plan_name,
    record_migration,
    recorded_plans,
    release_held,
    restored_migration,
    restored_takeover,
    save_plans,
    takeover_json,
)
from runtime.run import RunSummary, landing_format, run
from runtime.spec import RunSpec, Takeover


def scheduled_run(query: str, name: str, landing: str | Path, checkpoints: Path,
                  store: str | Path, *, placement: str, catalog: str | None,
                  profile: str | None, lateness: float | None) -> RunSummary:
    """One scheduled run of a checkpointed query (``runtime.microbatch``) over the files that
    landed since the last, and the adoption of the plan the nightly job logged as better, by
    Parallel Track over the runs that follow:

    1. Once a run of the running plan has read its files, the switch is where it got to: its
       last file and the stream's high-water mark there. The old plan will emit the
       window_ends up to e*, the first at or after high water + W_max; every window after e*
       begins after the high-water mark, so it holds only rows of files to come.
    2. From the next run on, both plans read the new files, each from its own checkpoint (the
       new one's query begins after the switch's file, at its high-water mark, so it marks the
       same rows late). The new plan's results wait in its own table.
    3. The run in which the old plan evaluates e* releases them into the run's table, and the
       new plan runs alone from then on.

    Returns the summary of the plan whose results are the run's."""
    history = recorded_plans(store, name)
    common = RunSpec(query, source=str(landing), catalog=catalog, profile=profile, store=store,
                     resume=True, available_now=True, lateness=lateness)
    if not history:  # the checkpoint's first plan, never migrated
        summary = run(replace(common, placement=placement, checkpoint=checkpoints / name,
                              name=name))
        history = {0: plan_entry(0, RUNNING, explain(
            query, catalog=catalog, profile=profile, placement=placement_spec(summary.placement),
            file_format=landing_format(str(landing))))}
    else:
        live = [history[n] for n in live_numbers(history)]
        summaries = [_run_entry(query, name, entry, checkpoints, common) for entry in live]
        summary = summaries[0]
        if len(live) == 2 and _reached(store, name, live[0]):
            old, new = live
            # Recorded before the release: the old plan must not run again once the new
            # one's results are the run's. A stop in between releases them in the next run.
            old["status"], new["status"] = DONE, RUNNING
            save_plans(store, name, history)
            release_held(store, plan_name(name, new["number"]), name)
            # Its timings span runs and processes: logged without them, with its own reason.
            record_migration(store, name, replace(restored_migration(new["migration"]),
                                                  reason=new["migration"]["reason"]))
    if len(live := live_numbers(history)) == 1:
        history = _adopt(query, name, history, history[live[0]], checkpoints, store, landing,
                         catalog, profile) or history
    save_plans(store, name, history)
    return summary


def _run_entry(query: str, name: str, entry: dict, checkpoints: Path, common: RunSpec
               ) -> RunSummary:
    """A recorded plan's run over the new files, from its checkpoint."""
    takeover = restored_takeover(entry["takeover"]) if entry["takeover"] else None
    own = plan_name(name, entry["number"])
    if takeover is not None and entry["status"] == RUNNING:  # released
        release_held(common.store, own, name)  # what a stop left held (none twice)
        takeover = replace(takeover, results=name)
    end = entry["last_end"]
    explanation = explain(query, rate=entry["rate"], catalog=common.catalog,
                          profile=common.profile, placement=entry["placement"],
                          statistics=entry["statistics"],
                          file_format=landing_format(common.source))
    return run(replace(common, checkpoint=checkpoints / own, name=own, takeover=takeover,
                       last_end=datetime.fromisoformat(end) if end else None),
               explanation=explanation)


def _reached(store: str | Path, name: str, entry: dict) -> bool:
    """Whether a plan that Parallel Track replaces has evaluated its last window_end."""
    with ColumnarStore(store) as columnar:
        done = columnar.progress(plan_name(name, entry["number"]), before=2**62).last_end
    return done is not None and done >= datetime.fromisoformat(entry["last_end"])


def _adopt(query: str, name: str, history: dict[int, dict], current: dict, checkpoints: Path,
           store: str | Path, landing: str | Path, catalog: str | None, profile: str | None
           ) -> dict[int, dict] | None:
    """Begin Parallel Track to the plan the nightly job logged last (``runtime.cleanup``), if it
    is not the running one's: the history with both plans, or None."""
    with ColumnarStore(store) as columnar:
        logged = columnar.recent("plans", Path(query).stem, 1)
        own = plan_name(name, current["number"])
        progress = columnar.progress(own, before=2**62)
    if not logged:
        return None
    better = json.loads(logged[0]["placement"])
    if better == dict(op.split("=") for op in current["placement"].split(",")):
        return None
    checkpoint = checkpoints / own
    offset = last_offset(checkpoint) or {}
    high_water = offset.get("high_water")
    if high_water is None and HIGH_WATER in progress.frontiers:  # the native gateway's
        high_water = round((progress.frontiers[HIGH_WATER] - EPOCH).total_seconds() * 1e6)
    if high_water is None:  # nothing read yet: the next runs will tell
        return None
    target = explain(query, rate=logged[0]["rate"], catalog=catalog, profile=profile,
                     placement=placement_spec(better), file_format=landing_format(str(landing)))
    old = explain(query, rate=current["rate"], catalog=catalog, profile=profile,
                  placement=current["placement"], statistics=current["statistics"],
                  file_format=landing_format(str(landing)))
    logical = target.optimization.logical
    step = round(logical.root.slide * 1e6)
    widest = round(max(w.size for w in windows(logical.root)) * 1e6)
    last_old = EPOCH + timedelta(microseconds=-(-(high_water + widest) // step) * step)
    number = max(history) + 1
    takeover = Takeover(plan_name(name, number), number * PLAN_BATCHES, last_old, 0.0, 0.0, own,
                        start_after=last_file_read(checkpoint), high_water=high_water)
    migration = Migration(number, PT, old.optimization.plan.placement,
                          target.optimization.plan.placement,
                          f"the nightly job's plan: {logged[0]['reason']}", last_old, 0.0, (),
                          None, time.perf_counter())
    return {**history, current["number"]: {**current, "last_end": last_old.isoformat()},
            number: plan_entry(number, HELD, target, takeover=takeover_json(takeover),
                           migration=migration.to_json())}

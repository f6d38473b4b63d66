"""`tandem verify`: run a query under many placements on a small stream and compare every result
row with the reference evaluator."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import polars as pl

from benchmarking import reference
from columnar.store import ColumnarStore
from optimizer.cost import PARTITIONED, SPARK, SPLIT
from optimizer.deployment import deploy
from optimizer.errors import TandemError
from optimizer.optimizer import placement_spec
from optimizer.partitioning import splittable
from optimizer.phase_two import ENGINES, allowed_engines, valid
from rowstream.by_reference import reads_no_rows
from rowstream.eventtime import EPOCH, admit, watermark
from rowstream.landing import landed_files, read_landed
from runtime.explain import explain
from runtime.run import (
    catalog_streams,
    default_lateness,
    read_from,
    run,
    scratch,
    stream_schemas,
)
from runtime.spec import RunSpec
from workload.schema import StreamSchema
from workload.smart_plugs import SmartPlugs

# A small stream that fills and slides 5-minute windows: six plugs, each reporting every 4 s.
SMALL = dict(houses=2, households_per_house=2, plugs=6)
TOLERANCE = 1e-9  # relative, for floats
STATUSES = ("same", "different", "failed")  # failed: the run stopped with an error


@dataclass(frozen=True)
class Outcome:
    placement: dict[str, str]
    status: str  # one of STATUSES
    rows: int
    detail: str = ""


def placements(query: str, how: str, keep: Callable[[dict[str, str]], bool] | None = None,
               **explain_args) -> list[dict[str, str]]:
    """Every plan of phase two's space (``all``), or a random sample of N that always holds the
    pure-Spark, the pure-DuckDB, the all-partitioned (where it can run), Spark's with its
    aggregates split (where one can be) and the optimiser's plan; of those ``keep`` keeps."""
    optimization = explain(query, **explain_args).optimization
    chosen, plan = optimization.plan, optimization.logical
    ops = list(chosen.placement)
    allowed = allowed_engines(plan, {}, optimization.model.profile.prices(PARTITIONED),
                              optimization.model.prices_split)
    space = [p for p in (dict(zip(ops, engines, strict=True))
                         for engines in itertools.product(*allowed))
             if valid(plan, p) and (keep is None or keep(p))]
    if how == "all":
        return space
    try:
        n = int(how)
    except ValueError:
        raise TandemError(f"--placements {how!r}: give 'all' or a number") from None
    must = [{op: engine for op in ops} for engine in ENGINES if engine != SPLIT]
    # And Spark's with every aggregate it can split split.
    must.append({op: SPLIT if splittable(plan.by_id[op]) else SPARK for op in ops})
    must = [p for p in must if p in space] + [
        p for p in [dict(chosen.placement)] if keep is None or keep(p)]
    rest = [p for p in space if p not in must]
    random.Random(len(ops)).shuffle(rest)
    picked = []
    for p in must + rest:
        if p not in picked:
            picked.append(p)
    return picked[:max(n, len(must))]


def verify(query: str, how: str = "all", *, rate: float = 3.0, duration: float = 400.0,
           batch: float = 50.0, catalog: str | None = None, profile: str | None = None,
           parallel: int = 1, done: Iterable[dict[str, str]] = (),
           on_outcome: Callable[[Outcome], None] | None = None,
           lateness: float | None = None, source: str | None = None) -> list[Outcome]:
    """Run ``query`` under the placements (but those ``done`` before) and compare each run's
    rows with the reference. The stream is the generator's small one (``rate``, ``duration``)
    where the query reads the smart plugs and no ``source`` is given, else the files of the
    landing directory ``source`` (by default its catalog entry's ``landing``); a join between
    streams reads each stream's subdirectory of ``source``, under the placements in which
    DuckDB reads them by reference. ``parallel``
    runs that many placements at once, as concurrent Spark queries of one session (each
    micro-batch waits on more than the two cores)."""
    explanation = explain(query, rate=rate, catalog=catalog, profile=profile)
    schemas = stream_schemas(explanation)
    # The reference is exact within the allowed lateness: a quality the query states, which
    # would size K instead, is set aside.
    spec = RunSpec(query, rate=rate, duration=duration, batch=batch, topology=SMALL,
                   source=source or "generator", lateness=lateness, disorder="fixed")
    if len(schemas) > 1:  # a join between streams: each stream's directory under the source
        if spec.generated:
            raise TandemError(f"{query} joins the streams "
                              f"{', '.join(s.name for s in schemas)}: verify it over their "
                              "landed files, --source DIR with a directory per stream")
        streams = {s.name: s for s in catalog_streams(explanation)}
        truth, last_end = landed_truth(
            [(str(Path(spec.source) / s.name), s, streams[s.name].lateness
              if lateness is None else lateness) for s in schemas], explanation)
    elif (spec := read_from(spec, schemas[0], explanation)).generated:
        stream = pl.from_arrow(SmartPlugs(rate=rate, **SMALL).between(0, duration))
        truth, last_end = reference.Evaluator({schemas[0].name: stream}), None
    else:
        truth, last_end = landed_truth([(spec.source, schemas[0], spec.lateness if spec.lateness
                                         is not None else default_lateness(
                                             catalog_streams(explanation)))], explanation)

    def one(placement: dict[str, str]) -> Outcome:
        plan = explain(query, rate=rate, catalog=catalog, profile=profile,
                       placement=placement_spec(placement) or "auto")
        root = plan.optimization.logical.root
        with scratch("tandem-verify-") as tmp:
            try:
                run(replace(spec, store=Path(tmp) / "verify.duckdb",
                            checkpoint=Path(tmp) / "checkpoint"), explanation=plan)
            except TandemError as err:
                outcome = Outcome(placement, "failed", 0, str(err))
            else:
                with ColumnarStore(Path(tmp) / "verify.duckdb") as store:
                    got = pl.from_arrow(store.results(plan.query.stem)).select(root.columns)
                want = truth.result(root)
                if last_end is not None:
                    want = want.filter(pl.col("window_end") <= last_end)
                outcome = compare(placement, got, want)
        if on_outcome:
            on_outcome(outcome)
        return outcome

    done = list(done)
    keep = None if len(schemas) == 1 else partial(by_reference, query, catalog=catalog)
    chosen = [p for p in placements(query, how, keep, rate=rate, catalog=catalog,
                                    profile=profile) if p not in done]
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return list(pool.map(one, chosen))


def by_reference(query: str, placement: dict[str, str], *, catalog: str | None) -> bool:
    """Whether DuckDB reads the streams by reference under ``placement``, as a join between
    streams runs (``runtime.run.joined_gateway``)."""
    plan = explain(query, catalog=catalog, placement=placement_spec(placement) or "auto")
    return reads_no_rows(deploy(plan.optimization.plan))


def landed_truth(landings: list[tuple[str, StreamSchema, float]],
                 explanation) -> tuple[reference.Evaluator, datetime | None]:
    """The reference over landing directories' files, each ``(directory, stream, lateness)``:
    the rows the input suite and the lateness rule admit, file by file in landing order as a
    run reads them, and the last window_end a run evaluates (a directory has no end: as far
    as its watermark, ``rowstream/eventtime.py``, or the earliest of the streams' where the
    query joins several)."""
    slide = explanation.optimization.logical.root.slide
    streams, last_end = {}, None
    for directory, schema, lateness in landings:
        admitted, high_water = [], None
        for name in landed_files(directory):
            rows, high_water = admit(read_landed(Path(directory) / name, schema), high_water,
                                     lateness, slide, schema.time_column)
            admitted.append(rows.filter(pl.col("reason").is_null()).select(schema.names))
        streams[schema.name] = (pl.concat(admitted) if admitted
                                else pl.DataFrame(schema=schema.polars))
        mark = watermark(high_water, lateness)
        if mark is None:
            return reference.Evaluator(streams), None
        mine = EPOCH + timedelta(microseconds=mark)
        last_end = mine if last_end is None else min(last_end, mine)
    return reference.Evaluator(streams), last_end


def compare(placement: dict[str, str], got: pl.DataFrame, want: pl.DataFrame) -> Outcome:
    """Same rows, floats within TOLERANCE; otherwise the first rows that differ."""
    floats = [c for c in want.columns if want[c].dtype.is_float()]
    keys = [c for c in want.columns if c not in floats]
    # A full join on the exact columns: a row on one side only leaves the other's marker null.
    joined = want.with_columns(pl.lit(True).alias("__want")).join(
        got.with_columns(pl.lit(True).alias("__got")), on=keys, how="full", suffix="_got",
        coalesce=True, nulls_equal=True)
    bad = pl.col("__want").is_null() | pl.col("__got").is_null()
    for c in floats:
        bad = bad | ((pl.col(c) - pl.col(f"{c}_got")).abs() > TOLERANCE * (1 + pl.col(c).abs()))
        bad = bad | (pl.col(c).is_null() != pl.col(f"{c}_got").is_null())
    differing = joined.filter(bad)
    if got.height == want.height and differing.height == 0:
        return Outcome(placement, "same", want.height)
    detail = (f"{got.height} rows against the reference's {want.height}; first differences:\n"
              f"{differing.head(5)}")
    return Outcome(placement, "different", got.height, detail)

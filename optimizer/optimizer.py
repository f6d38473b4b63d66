"""The two-phase optimiser: front-end, phase one, phase two, as one pure function.

    optimize(query_sql, catalog, profile, rate) -> Optimization

Each step is a module of its own (frontend, phase_one, phase_two, physical); this one only
composes them and times them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from optimizer.catalog import Catalog
from optimizer.cost import (
    DUCKDB,
    FILES_PER_BATCH,
    PARTITIONED,
    SPARK,
    SPLIT,
    CostModel,
    Objective,
)
from optimizer.errors import TandemError
from optimizer.frontend import parse_query
from optimizer.logical import (
    LogicalPlan,
    Project,
    Select,
    is_r2r,
    post_order,
    r2r_operators,
    windows,
)
from optimizer.ordered_lists import counted_by_order
from optimizer.partitioning import partitionable, splittable
from optimizer.phase_one import phase_one
from optimizer.phase_two import ENGINES, allowed_engines, exhaustive, search
from optimizer.physical import PhysicalPlan, evaluate
from optimizer.profile import Profile
from optimizer.statistics import Statistics

DECOMPOSE_ABOVE = 15  # R2R operators per subplan (Ji Sec. 6.4.1)
EXHAUSTIVE_LIMIT = 2 ** 20  # placements: about a minute to cost one by one


@dataclass(frozen=True)
class Optimization:
    sql: str
    rate: float
    objective: Objective
    plan: PhysicalPlan
    plans_examined: int  # pruned phase two
    partial_plans: int
    subplans: int
    exhaustive_examined: int | None
    exhaustive_placement: dict[str, str] | None
    phase_one_ms: float
    phase_two_ms: float
    exhaustive_ms: float | None
    model: CostModel

    @property
    def logical(self) -> LogicalPlan:
        return self.plan.logical

    @property
    def optimization_ms(self) -> float:
        return self.phase_one_ms + self.phase_two_ms

    @property
    def feasible(self) -> bool:
        return self.objective.feasible(self.plan.cost)


def parse_placement(spec: str, plan: LogicalPlan) -> dict[str, str]:
    """``auto``, ``spark``, ``duckdb``, ``duckdb-partitioned``, ``split`` or ``op=engine,...`` as
    operator pins (``split`` for an aggregate: ``split_placement``)."""
    spec = spec.strip().lower()
    if spec in ("", "auto"):
        return {}
    if spec == SPLIT:
        return split_placement(plan)
    if spec in ENGINES:
        return parse_placement(",".join(f"{plan.ids[op]}={spec}" for op in plan.operators), plan)
    pins = {}
    for part in spec.split(","):
        op, _, engine = part.partition("=")
        op, engine = op.strip(), engine.strip()
        if op not in plan.by_id or op.startswith("window"):
            valid = ", ".join(plan.ids[o] for o in plan.operators)
            raise TandemError(f"--placement: no operator {op!r} (operators: {valid})")
        if engine not in ENGINES:
            raise TandemError(f"--placement: {op} must be one of {', '.join(ENGINES)}, "
                              f"not {engine!r}")
        if engine == PARTITIONED and not partitionable(plan.by_id[op]):
            raise TandemError(f"--placement: {op} cannot run on {PARTITIONED}: no stream column "
                              "is a key of every aggregate and join at or below it")
        if engine == SPLIT and not splittable(plan.by_id[op]):
            raise TandemError(f"--placement: {op} cannot be {SPLIT}: only an aggregate of "
                              "COUNT, SUM, AVG, MIN or MAX over a stream's window, whose size "
                              "is a whole number of slides, has partials per pane")
        pins[op] = engine
    return pins


def split_placement(plan: LogicalPlan) -> dict[str, str]:
    """``--placement split``: every aggregate that can be split split, Spark's selections and
    projections below it in Spark, the rest in the driver's DuckDB."""
    pins = {plan.ids[op]: DUCKDB for op in plan.operators}
    for op in filter(splittable, plan.operators):
        below = [n for n in post_order(op.input) if is_r2r(n)]
        if all(isinstance(n, Select | Project) for n in below):
            pins[plan.ids[op]] = SPLIT
            pins.update({plan.ids[n]: SPARK for n in below})
    if SPLIT not in pins.values():
        raise TandemError("--placement split: no aggregate of this query can be split (COUNT, "
                          "SUM, AVG, MIN or MAX over a stream's window of whole slides)")
    return pins


def placement_spec(placement: dict[str, str]) -> str:
    """The ``op=engine,...`` that ``parse_placement`` reads back."""
    return ",".join(f"{op}={engine}" for op, engine in placement.items())


def optimize(sql: str, catalog: Catalog, profile: Profile, rate: float | None = None, *,
             placement: str = "auto", feasibility: bool = True,
             memory_budget: float | None = None, exhaustive_check: bool = False,
             decompose_above: int | None = DECOMPOSE_ABOVE,
             span: float | None = None, files_per_batch: int = FILES_PER_BATCH) -> Optimization:
    """Optimise ``sql`` at ``rate`` total tuples per second over its streams (the catalog's
    rates when None). ``decompose_above=None`` searches plans of any size whole.
    ``files_per_batch``: the most landed files a micro-batch by reference takes."""
    root = parse_query(sql, catalog)
    if rate is not None:
        catalog = catalog.with_total_rate(sorted({w.stream for w in windows(root)}), rate)
    rate = sum(catalog.streams[s].rate for s in {w.stream for w in windows(root)})
    objective = Objective(feasibility=feasibility, memory_budget=memory_budget,
                          time_shared=profile.time_shared, overlap=profile.overlap,
                          overlap_reference=profile.overlap_reference)

    def profile_model(ordered: frozenset = frozenset()) -> CostModel:
        return CostModel(Statistics(catalog), profile, span, files_per_batch, ordered)

    start = time.perf_counter()
    root = phase_one(root, profile_model(), objective)
    plan = LogicalPlan(root)
    phase_one_ms = (time.perf_counter() - start) * 1000

    # A fresh memo (the tree phase one returns has new nodes) that knows the counts DuckDB
    # finds by order.
    model = profile_model(counted_by_order(root))
    pins = parse_placement(placement, plan)
    start = time.perf_counter()
    limit = decompose_above if decompose_above and len(plan) > decompose_above else None
    result = search(plan, model, objective, pins, decompose_above=limit)
    phase_two_ms = (time.perf_counter() - start) * 1000

    ex_examined = ex_placement = ex_ms = None
    if exhaustive_check:
        space = math.prod(map(len, allowed_engines(plan, pins, profile.prices(PARTITIONED))))
        if space > EXHAUSTIVE_LIMIT:
            raise TandemError(f"--exhaustive would cost {space:,} placements; it is limited to "
                              f"{EXHAUSTIVE_LIMIT:,}")
        start = time.perf_counter()
        ex = exhaustive(plan, model, objective, pins)
        ex_ms = (time.perf_counter() - start) * 1000
        ex_examined, ex_placement = ex.plans_examined, ex.placement

    physical = evaluate(plan, result.placement, model)
    return Optimization(sql, rate, objective.crossing(physical.by_reference), physical,
                        result.plans_examined, result.partial_plans, result.subplans,
                        ex_examined, ex_placement, phase_one_ms, phase_two_ms, ex_ms, model)


__all__ = ["optimize", "Optimization", "parse_placement", "placement_spec", "r2r_operators"]

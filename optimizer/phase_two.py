"""Phase two: place every operator of the phase-one plan on Spark, DuckDB or duckdb-partitioned,
or split an aggregate across the two (Ji Sec. 6.3.4).

The enumeration is bottom-up over the R2R operators. At each operator it keeps

* the best partial plan rooted at a DSPS-op: a DSPS-op's u is the same in every plan and does
  not change as the plan grows, so the principle of optimality holds for it (Ji's proof, Parts
  1 and 2). With a memory budget, memory adds up rather than maxes, so the partial plans kept
  are those that no other beats both by Definition 6.1 and in memory. With a load that overlaps
  the two sides of the MIG's pipeline (``cost.Objective.load``), the sides add up separately,
  so the plans kept are those that no other beats on both sides; and since an operator above
  runs on the evaluation thread iff a DB-op is below it, plans with and without one are kept
  apart;
* every partial plan rooted at a DB-op: its cost is not additive, so it cannot be pruned.

A DB-op is a connected fragment on one DuckDB engine: central DuckDB, or duckdb-partitioned
where the operator allows it (``optimizer/partitioning.py``); a partitioned fragment below a
central one is closed, and its rows are the central one's input. A split aggregate (where the
profile prices Spark's partials) is a second operator in Spark, its partials per pane, and a
central DB-op that begins at its merge: the central operators above grow into it.

With a feasible query (the pure-Spark or the pure-DuckDB plan is feasible), partial plans that
are already infeasible are dropped too ("Other Pruning Methods"). Plans with more R2R operators
than ``decompose_above`` are cut into subplans that are optimised in post-order (Sec. 6.4.1).

``exhaustive`` enumerates all placements (2^n, up to 3^n with duckdb-partitioned): it verifies
the pruned search.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

from optimizer.cost import (
    DUCKDB,
    PARTITIONED,
    SPARK,
    SPLIT,
    ZERO,
    CostModel,
    Fragment,
    Objective,
    PlanCost,
    fragment_engine,
)
from optimizer.errors import TandemError
from optimizer.logical import LogicalPlan, Node, is_r2r
from optimizer.partitioning import partitionable, problem, splittable
from optimizer.physical import by_reference as crosses_by_reference
from optimizer.physical import plan_cost, stream_readers, uniform

# Partial plans hold engine indexes: ties break towards Spark, then central DuckDB, in post-order.
ENGINES = (SPARK, DUCKDB, PARTITIONED, SPLIT)
IN_SPARK, IN_SPLIT = ENGINES.index(SPARK), ENGINES.index(SPLIT)


@dataclass(frozen=True)
class Partial:
    """A partial execution plan for the subtree of one operator."""

    root: int  # post-order index of the operator the partial plan is rooted at
    engines: tuple[int, ...]  # engines (indexes into ENGINES) of the subtree's operators, post-order
    closed: PlanCost  # cost of every operator whose cost is final
    open: Fragment | None  # the DB-op at the root, still growing


@dataclass(frozen=True)
class SearchResult:
    placement: dict[str, str]
    plans_examined: int  # complete plans compared at the root(s)
    partial_plans: int  # partial plans constructed along the way
    subplans: int  # 1 unless the plan was decomposed


def allowed_engines(plan: LogicalPlan, pinned: dict[str, str], partitioned: bool = True,
                    split: bool = False) -> list[tuple[str, ...]]:
    """Each operator's engines: its pin, or every engine that can run it (duckdb-partitioned
    where ``partitioned``, split where ``split``: the profile prices them). Whether its inputs
    let it run on duckdb-partitioned or split depends on their placement, which the search
    checks."""
    return [(pinned[plan.ids[op]],) if plan.ids[op] in pinned
            else (SPARK, DUCKDB, *((PARTITIONED,) if partitioned and partitionable(op) else ()),
                  *((SPLIT,) if split and splittable(op) else ()))
            for op in plan.operators]


def search(plan: LogicalPlan, model: CostModel, objective: Objective,
           pinned: dict[str, str] | None = None,
           decompose_above: int | None = None) -> SearchResult:
    """Phase two: the pruned search over each class of crossing, each priced as it runs
    (``physical.plan_cost``), and the best plan of all. The crossing by reference is chosen
    like any placement: once over the placements that allow it (``reference_pins``), once for
    each operator that reads a window placed where the rows must cross by value (Spark, or
    duckdb-partitioned), which together are all the others."""
    pinned = pinned or {}
    referenced = reference_pins(plan, pinned) if model.prices_reference else None
    if referenced is None or not plan.operators:
        return pruned_search(plan, model, objective, pinned, decompose_above)
    results, refused = [], None
    try:
        results.append(pruned_search(plan, model, objective, referenced, decompose_above,
                                     by_reference=True))
    except TandemError as err:  # no plan by reference honours the pins: one by value may
        refused = err
    partitioned = model.profile.prices(PARTITIONED)
    for op in stream_readers(plan):
        for engine in (SPARK, *((PARTITIONED,) if partitioned and partitionable(op) else ()),
                       *((SPLIT,) if model.prices_split and splittable(op) else ())):
            if pinned.get(plan.ids[op], engine) != engine:
                continue
            try:
                results.append(pruned_search(plan, model, objective,
                                             {**pinned, plan.ids[op]: engine}, decompose_above))
            except TandemError:  # no plan honours that pin
                continue
    if not results:
        raise refused
    rank = lambda r: (ranked(plan, r.placement, model, objective),  # noqa: E731
                      tuple(r.placement.values()))
    return replace(min(results, key=rank),
                   plans_examined=sum(r.plans_examined for r in results),
                   partial_plans=sum(r.partial_plans for r in results))


def reference_pins(plan: LogicalPlan, pinned: dict[str, str]) -> dict[str, str] | None:
    """``pinned`` with every operator that reads a stream's window on the driver's DuckDB: the
    placements whose crossings go by reference (``physical.by_reference``); None where the pins
    rule them out."""
    readers = {plan.ids[op]: DUCKDB for op in stream_readers(plan)}
    if any(pinned.get(op, DUCKDB) != DUCKDB for op in readers) or PARTITIONED in pinned.values():
        return None
    return {**pinned, **readers}


def pruned_search(plan: LogicalPlan, model: CostModel, objective: Objective,
                  pinned: dict[str, str] | None = None,
                  decompose_above: int | None = None, by_reference: bool = False) -> SearchResult:
    """Phase two's bottom-up search with the pruning of Sec. 6.3.4. ``by_reference``: among the
    placements whose crossings go by reference only (``reference_pins``), priced so."""
    pinned = pinned or {}
    if not plan.operators:
        return SearchResult({}, 1, 0, 1)  # only a window: nothing to place
    objective = objective.crossing(by_reference)
    allowed = allowed_engines(plan, pinned, model.profile.prices(PARTITIONED) and not by_reference,
                              model.prices_split and not by_reference)
    source = model.source(plan.streams, by_reference)
    prune_infeasible = objective.feasibility and _known_feasible(plan, model, objective, pinned,
                                                                 by_reference)
    cut = _cut_points(plan, decompose_above) if decompose_above else set()
    plans: dict[Node, list[Partial]] = {}
    constructed = examined = 0

    def close(p: Partial, to_sink: bool = False) -> PlanCost:
        if p.open is None:
            return p.closed
        return p.closed.add(model.db_cost(p.open, plan.operators[p.root], to_sink))

    def keep(p: Partial) -> bool:
        return not prune_infeasible or objective.feasible(p.closed.add(source))

    parents = {c: parent for parent in plan.operators for c in parent.inputs}
    position = {op: i for i, op in enumerate(plan.operators)}
    partitions = any(PARTITIONED in engines for engines in allowed)
    rows_through_spark = any(
        DUCKDB in allowed[position[op]] and SPARK in allowed[position[c]]
        and not c.instantiated and any(map(is_r2r, c.inputs))
        for op in plan.operators for c in op.inputs if is_r2r(c))

    def by_kind(consumer: Node | None) -> bool:
        """Must the best subtree with a DB-op below be kept beside the best of all, for
        ``consumer`` to read? Only a subtree without DB-ops can feed duckdb-partitioned; and a
        Spark operator costs what it costs after the MIG where a DB-op is below (cost.after_mig:
        a batch job over DuckDB's rows, and the moves of Spark's rows it also reads), its
        streaming cost elsewhere. Where the first is no less, the dearer subtree cannot win.
        Nor can a DB-op read a window's rows from a Spark operator with a DB-op below
        (``partitioning.windows_rows_in_spark``): where a plan could place one so, both kinds
        are kept everywhere, as for duckdb-partitioned."""
        return partitions or rows_through_spark or (
            consumer is not None and SPARK in allowed[position[consumer]]
            and model.after_mig(consumer, (), by_reference).u < model.dsps(consumer).u)

    def best_closed(candidates: list[Partial], kinds: bool) -> list[Partial]:
        """The DSPS-side survivors: one plan (one of each kind, with ``kinds``: ``by_kind``),
        or the plans no other dominates when the cost is more than one number (a memory budget;
        the pipeline's two sides)."""
        scored = [(close(p), p) for p in candidates]
        order = lambda cp: (objective.rank(cp[0]), cp[1].engines)  # noqa: E731
        if objective.memory_budget is None and not objective.two_sided:
            best = _best_of_kinds(scored, kinds, order, lambda cp: cp[1])
            return [Partial(p.root, p.engines, cost, None) for cost, p in best]
        scored.sort(key=order)
        survivors: list[tuple[PlanCost, Partial]] = []
        for cost, p in scored:
            # What an operator above adds lands on the evaluation thread iff a DB-op is below
            # it: only plans alike in that compare.
            if not any(objective.dominates(c, cost) and _fed_by_db(q) == _fed_by_db(p)
                       for c, q in survivors):
                survivors.append((cost, p))
        return [Partial(p.root, p.engines, cost, None) for cost, p in survivors]

    for i, op in enumerate(plan.operators):
        children = [c for c in op.inputs if is_r2r(c)]
        child_plans = [plans.pop(c) for c in children]
        new: list[Partial] = []
        if SPARK in allowed[i]:
            for combo in itertools.product(*(best_closed(cp, by_kind(op)) for cp in child_plans)):
                if any(map(_fed_by_db, combo)):  # after the MIG, as physical.spark_cost
                    spark = dict(zip(children, combo, strict=True))
                    closed = ZERO.add(model.after_mig(op, tuple(
                        c for c in op.inputs if c not in spark or not _fed_by_db(spark[c])),
                        by_reference))
                else:
                    closed = ZERO.add(model.dsps(op))
                for p in combo:
                    closed = closed.combine(p.closed)
                new.append(Partial(i, sum((p.engines for p in combo), ()) + (IN_SPARK,), closed, None))
            constructed += len(new)
            new = best_closed(new, by_kind(parents.get(op)))
        if SPLIT in allowed[i]:
            # Spark's partials over the rows below (which must be the stream's, as Spark hands
            # them over: optimizer/partitioning.py), and a DB-op that begins at their merge.
            merge = Fragment(frozenset({model.partials_signature(op)}), model.db_work(op), 0.0,
                             False, by_reference)
            for combo in itertools.product(*child_plans):
                if all(_stream_rows(c, p) for c, p in zip(children, combo, strict=True)):
                    closed = ZERO.add(model.partial(op))
                    for p in combo:
                        closed = closed.combine(p.closed)
                    new.append(Partial(i, sum((p.engines for p in combo), ()) + (IN_SPLIT,),
                                       closed, merge))
                    constructed += 1
        for engine in (e for e in (DUCKDB, PARTITIONED) if e in allowed[i]):
            index, external = ENGINES.index(engine), frozenset(
                model.signature(c) for c in op.inputs if not is_r2r(c))
            for combo in itertools.product(*child_plans):
                closed, inputs = ZERO, external
                work, kept = model.db_work(op), model.rows_read(op)
                arrival = model.db_arrival(op, by_reference)
                for child, p in zip(children, combo, strict=True):
                    if (not _feeds_partitions(child, p) if engine == PARTITIONED
                            else not child.instantiated and ENGINES[p.engines[-1]] == PARTITIONED
                            or _windows_rows_in_spark(child, p)):
                        break  # optimizer/partitioning.py
                    closed = closed.combine(p.closed)
                    if p.open is not None and fragment_engine(ENGINES[p.engines[-1]]) == engine:
                        # the child's DB-op grows into this one
                        inputs |= p.open.inputs
                        work += p.open.work
                        arrival += p.open.arrival
                        kept |= p.open.kept
                    else:  # a Spark operator, or a DB-op of the other engine, feeds the DB-op
                        if p.open is not None:
                            closed = closed.add(model.db_cost(p.open, child))
                        inputs |= {model.signature(child)}
                else:
                    new.append(Partial(i, sum((p.engines for p in combo), ()) + (index,), closed,
                                       Fragment(inputs, work, arrival, engine == PARTITIONED,
                                                by_reference, kept)))
                    constructed += 1
        new = _undominated_fragments([p for p in new if keep(p)])
        if op in cut:
            # Decomposition: this subplan is optimised on its own, as if Spark consumed it (the
            # best of each kind, where its consumer tells them apart: ``by_kind``).
            examined += len(new)
            new = _best_of_kinds(new, by_kind(parents.get(op)),
                                 lambda p: (objective.rank(close(p)), p.engines))
        plans[op] = new

    # Infeasible partial plans are dropped only when a feasible plan exists, so none is missing
    # unless pins forbid every plan.
    finals = plans[plan.root]
    if not finals:
        if all(plan.ids[op] in pinned for op in plan.operators if is_r2r(op)):  # why, in words
            raise TandemError(problem(plan, pinned) or "--placement: no plan honours these pins")
        raise TandemError(f"--placement: no plan honours these pins: {PARTITIONED} and {SPLIT} "
                          "read only the stream's rows as Spark hands them over, and duckdb "
                          "reads a partitioned operator's rows only once they are tagged with "
                          "their window (docs/optimizer.md)")
    examined += len(finals)

    def complete(p: Partial) -> PlanCost:
        engine = SPARK if p.open is None else ENGINES[p.engines[-1]]
        sink = model.sink(plan.root, engine, p.open is None and _fed_by_db(p), by_reference)
        return close(p, to_sink=True).add(sink).add(source)

    best = min(finals, key=lambda p: (objective.rank(complete(p)), p.engines))
    placement = {plan.ids[op]: ENGINES[e] for op, e in zip(plan.operators, best.engines, strict=True)}
    return SearchResult(placement, examined, constructed, len(cut) + 1)


def exhaustive(plan: LogicalPlan, model: CostModel, objective: Objective,
               pinned: dict[str, str] | None = None) -> SearchResult:
    """Every placement (fewer with pins), each costed from scratch by ``physical.plan_cost``."""
    best_key, best, count = None, None, 0
    allowed = allowed_engines(plan, pinned or {}, model.profile.prices(PARTITIONED),
                              model.prices_split)
    for engines in itertools.product(*allowed):
        placement = {plan.ids[op]: e for op, e in zip(plan.operators, engines, strict=True)}
        if not valid(plan, placement):
            continue
        key = (ranked(plan, placement, model, objective), tuple(ENGINES.index(e) for e in engines))
        count += 1
        if best_key is None or key < best_key:
            best_key, best = key, placement
    return SearchResult(best, count, count, 1)


def ranked(plan: LogicalPlan, placement: dict[str, str], model: CostModel,
           objective: Objective) -> tuple:
    """A complete placement's rank (Definition 6.1), its load overlapped as its crossings go."""
    return objective.crossing(crosses_by_reference(plan, placement, model)).rank(
        plan_cost(plan, placement, model))


def _undominated_fragments(partials: list[Partial]) -> list[Partial]:
    """Drop a partial plan rooted at a DB-op when another of the same engine, whose open DB-op
    reads the same relations, is no worse in every part of its cost so far and its DB-op's work:
    whatever is built above, it costs no less. (Ji prunes DSPS-rooted plans only; with two DB
    engines the DB-rooted plans multiply.) On a tie the smaller engine tuple stays, as in
    ``exhaustive``."""
    survivors: list[Partial] = []
    # Only a plan of the same engine over the same relations can dominate: comparing within
    # those groups alone took j8's undecomposed search from 54 s to 1.3 s.
    rivals: dict[tuple, list[Partial]] = {}
    for p in sorted(partials, key=lambda p: (p.closed.utilization, p.open.work if p.open else 0,
                                             p.engines)):
        if p.open is None:
            survivors.append(p)
            continue
        group = rivals.setdefault((p.engines[-1], p.open.inputs), [])
        if not any(_no_worse(q, p) for q in group):
            group.append(p)
            survivors.append(p)
    return survivors


def _no_worse(q: Partial, p: Partial) -> bool:
    """Is ``q`` (of ``p``'s engine, over its relations) no worse than ``p`` in every part?"""
    a, b = q.closed, p.closed
    return (q.open.work <= p.open.work and q.open.arrival <= p.open.arrival
            and q.open.kept <= p.open.kept
            and a.bottleneck <= b.bottleneck and a.utilization <= b.utilization
            and a.memory <= b.memory and a.evaluation <= b.evaluation
            and a.arrival <= b.arrival)


def valid(plan: LogicalPlan, placement: dict[str, str]) -> bool:
    """Does every operator on a DuckDB engine read what it can (``optimizer/partitioning.py``)?"""
    return problem(plan, placement) is None


def _fed_by_db(p: Partial) -> bool:
    """Is a DB-op in the partial plan? Then its root, if in Spark, runs after the MIG."""
    return any(e != IN_SPARK for e in p.engines)


def _best_of_kinds(items: list, kinds: bool, key: Callable, partial: Callable = lambda p: p
                   ) -> list:
    """The best of ``items`` by ``key``, or with ``kinds`` the best of those whose partial
    plan has a DB-op below and the best of the others (``by_kind``)."""
    if not items:  # pins that leave no plan
        return []
    classes = {_fed_by_db(partial(i)) for i in items} if kinds else {None}
    return [min((i for i in items if c is None or _fed_by_db(partial(i)) == c), key=key)
            for c in classes]


def _windows_rows_in_spark(child: Node, p: Partial) -> bool:
    """``partitioning.windows_rows_in_spark`` for a child's partial plan."""
    return ENGINES[p.engines[-1]] == SPARK and not child.instantiated and _fed_by_db(p)


def _feeds_partitions(child: Node, p: Partial) -> bool:
    """``partitioning.feeds_partitions`` for a child's partial plan: a partitioned DB-op, or
    Spark's stateless rows of the stream with nothing but Spark below."""
    return ENGINES[p.engines[-1]] == PARTITIONED or _stream_rows(child, p)


def _stream_rows(child: Node, p: Partial) -> bool:
    """``partitioning.stream_rows`` for a child's partial plan."""
    return ENGINES[p.engines[-1]] == SPARK and not child.instantiated and not _fed_by_db(p)


def _known_feasible(plan: LogicalPlan, model: CostModel, objective: Objective,
                    pinned: dict[str, str], by_reference: bool) -> bool:
    """Is the pure-Spark or the pure-DuckDB plan (with the pins applied) feasible, priced as
    the search prices it?"""
    for engine in (SPARK, DUCKDB):
        placement = {**uniform(plan, engine), **pinned}
        if objective.feasible(plan_cost(plan, placement, model, by_reference)):
            return True
    return False


def _cut_points(plan: LogicalPlan, limit: int) -> set[Node]:
    """Roots of subplans of at most ``limit`` R2R operators, cut bottom-up (largest child
    subplan first) whenever an operator's uncut subtree would exceed the limit."""
    size: dict[Node, int] = {}
    cut: set[Node] = set()
    for op in plan.operators:
        children = sorted((c for c in op.inputs if is_r2r(c)), key=lambda c: -size[c])
        total = 1 + sum(size[c] for c in children)
        for c in children:
            if total <= limit:
                break
            cut.add(c)
            total -= size[c]
        size[op] = total
    return cut

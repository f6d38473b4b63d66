"""Phase two: place every operator of the phase-one plan on Spark or DuckDB (Ji Sec. 6.3.4).

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

With a feasible query (the pure-Spark or the pure-DuckDB plan is feasible), partial plans that
are already infeasible are dropped too ("Other Pruning Methods"). Plans with more R2R operators
than ``decompose_above`` are cut into subplans that are optimised in post-order (Sec. 6.4.1).

``exhaustive`` enumerates all 2^n placements: it verifies the pruned search.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from optimizer.cost import DUCKDB, SPARK, ZERO, CostModel, Fragment, Objective, PlanCost
from optimizer.logical import LogicalPlan, Node, is_r2r
from optimizer.physical import plan_cost, uniform

ENGINES = (SPARK, DUCKDB)  # partial plans hold engine indexes: ties break towards Spark, in post-order
IN_SPARK, IN_DUCKDB = ENGINES.index(SPARK), ENGINES.index(DUCKDB)


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


def allowed_engines(plan: LogicalPlan, pinned: dict[str, str]) -> list[tuple[str, ...]]:
    return [(pinned[plan.ids[op]],) if plan.ids[op] in pinned else (SPARK, DUCKDB)
            for op in plan.operators]


def pruned_search(plan: LogicalPlan, model: CostModel, objective: Objective,
                  pinned: dict[str, str] | None = None,
                  decompose_above: int | None = None) -> SearchResult:
    pinned = pinned or {}
    if not plan.operators:
        return SearchResult({}, 1, 0, 1)  # only a window: nothing to place
    allowed = allowed_engines(plan, pinned)
    source = model.source(plan.streams)
    prune_infeasible = objective.feasibility and _known_feasible(plan, model, objective, pinned)
    cut = _cut_points(plan, decompose_above) if decompose_above else set()
    plans: dict[Node, list[Partial]] = {}
    constructed = examined = 0

    def close(p: Partial, to_sink: bool = False) -> PlanCost:
        if p.open is None:
            return p.closed
        return p.closed.add(model.db_cost(p.open, plan.operators[p.root], to_sink))

    def keep(p: Partial) -> bool:
        return not prune_infeasible or objective.feasible(p.closed.add(source))

    def best_closed(candidates: list[Partial]) -> list[Partial]:
        """The DSPS-side survivors: one plan, or the plans no other dominates when the cost is
        more than one number (a memory budget; the pipeline's two sides)."""
        scored = [(close(p), p) for p in candidates]
        order = lambda cp: (objective.rank(cp[0]), cp[1].engines)  # noqa: E731
        if objective.memory_budget is None and not objective.two_sided:
            cost, p = min(scored, key=order)
            return [Partial(p.root, p.engines, cost, None)]
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
            u = model.dsps(op)
            for combo in itertools.product(*(best_closed(cp) for cp in child_plans)):
                closed = ZERO.add(u.after_mig() if any(map(_fed_by_db, combo)) else u)
                for p in combo:
                    closed = closed.combine(p.closed)
                new.append(Partial(i, sum((p.engines for p in combo), ()) + (IN_SPARK,), closed, None))
            constructed += len(new)
            new = best_closed(new)
        if DUCKDB in allowed[i]:
            external = frozenset(model.signature(c) for c in op.inputs if not is_r2r(c))
            for combo in itertools.product(*child_plans):
                closed, inputs = ZERO, external
                work, arrival = model.db_work(op), model.db_arrival(op)
                for child, p in zip(children, combo, strict=True):
                    closed = closed.combine(p.closed)
                    if p.open is None:  # a Spark operator feeds the DB-op
                        inputs |= {model.signature(child)}
                    else:  # the child's DB-op grows into this one
                        inputs |= p.open.inputs
                        work += p.open.work
                        arrival += p.open.arrival
                new.append(Partial(i, sum((p.engines for p in combo), ()) + (IN_DUCKDB,), closed,
                                   Fragment(inputs, work, arrival)))
                constructed += 1
        new = [p for p in new if keep(p)]
        if op in cut:
            # Decomposition: this subplan is optimised on its own, as if Spark consumed it.
            examined += len(new)
            new = [min(new, key=lambda p: (objective.rank(close(p)), p.engines))]
        plans[op] = new

    # Not empty: infeasible partial plans are dropped only when a feasible plan exists.
    finals = plans[plan.root]
    examined += len(finals)

    def complete(p: Partial) -> PlanCost:
        engine = SPARK if p.open is None else DUCKDB
        sink = model.sink(plan.root, engine, after_mig=p.open is None and _fed_by_db(p))
        return close(p, to_sink=True).add(sink).add(source)

    best = min(finals, key=lambda p: (objective.rank(complete(p)), p.engines))
    placement = {plan.ids[op]: ENGINES[e] for op, e in zip(plan.operators, best.engines, strict=True)}
    return SearchResult(placement, examined, constructed, len(cut) + 1)


def exhaustive(plan: LogicalPlan, model: CostModel, objective: Objective,
               pinned: dict[str, str] | None = None) -> SearchResult:
    """All 2^n placements (fewer with pins), each costed from scratch by ``physical.plan_cost``."""
    best_key, best, count = None, None, 0
    for engines in itertools.product(*allowed_engines(plan, pinned or {})):
        placement = {plan.ids[op]: e for op, e in zip(plan.operators, engines, strict=True)}
        cost = plan_cost(plan, placement, model)
        key = (objective.rank(cost), tuple(ENGINES.index(e) for e in engines))
        count += 1
        if best_key is None or key < best_key:
            best_key, best = key, placement
    return SearchResult(best, count, count, 1)


def _fed_by_db(p: Partial) -> bool:
    """Is a DB-op in the partial plan? Then its root, if in Spark, runs after the MIG."""
    return IN_DUCKDB in p.engines


def _known_feasible(plan: LogicalPlan, model: CostModel, objective: Objective,
                    pinned: dict[str, str]) -> bool:
    """Is the pure-Spark or the pure-DuckDB plan (with the pins applied) feasible?"""
    for engine in (SPARK, DUCKDB):
        placement = {**uniform(plan, engine), **pinned}
        if objective.feasible(plan_cost(plan, placement, model)):
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

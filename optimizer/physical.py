"""Physical plans: a placement of every R2R operator on Spark or DuckDB, with its DB-ops (the
maximal connected fragments placed in DuckDB, Ji Sec. 6.2) and the cost of every operator."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.cost import DUCKDB, SPARK, CostModel, Objective, OperatorCost, PlanCost
from optimizer.logical import LogicalPlan, Node


@dataclass(frozen=True)
class PhysicalOperator:
    id: str  # the logical id of a DSPS-op, dbop_N for a DB-op, source or sink
    kind: str  # select, project, join, aggregate, db-op, source, sink
    engine: str
    members: tuple[str, ...]  # logical operators it maps to (Ji's mapping M)
    inputs: tuple[str, ...]  # physical operators (or windows) it reads from
    lambda_in: float
    lambda_out: float
    u: float
    memory: float


@dataclass(frozen=True)
class PhysicalPlan:
    logical: LogicalPlan
    placement: dict[str, str]  # logical operator id -> spark | duckdb
    operators: tuple[PhysicalOperator, ...]
    cost: PlanCost

    @property
    def db_ops(self) -> list[PhysicalOperator]:
        return [op for op in self.operators if op.kind == "db-op"]

    def engine_of(self, node: Node) -> str:
        return self.placement[self.logical.ids[node]]


def db_fragments(plan: LogicalPlan, placement: dict[str, str]) -> list[frozenset[Node]]:
    """Maximal connected sets of DuckDB-placed operators, in post-order of their roots."""
    fragments: dict[Node, set[Node]] = {}
    for op in plan.operators:  # post-order: children first
        if placement[plan.ids[op]] != DUCKDB:
            continue
        fragment = {op}
        for child in op.inputs:
            if child in fragments:
                fragment |= fragments.pop(child)
        fragments[op] = fragment
    return [frozenset(f) for f in fragments.values()]


def evaluate(plan: LogicalPlan, placement: dict[str, str], model: CostModel) -> PhysicalPlan:
    """Cost a complete placement (Eq. 6.4-6.6): the reference against which the pruned search
    of phase two is tested, and the plan that `tandem explain` reports."""
    st = model.stats
    fragments = db_fragments(plan, placement)
    owner: dict[Node, str] = {}
    db_names = {}
    for n, fragment in enumerate(fragments, 1):
        for m in fragment:
            owner[m] = f"dbop_{n}"
        db_names[f"dbop_{n}"] = fragment

    def physical_input(child: Node) -> str:
        return owner.get(child, plan.ids[child])

    root_engine = placement[plan.ids[plan.root]]
    ops: list[PhysicalOperator] = []
    source = model.source(plan.streams)
    ops.append(PhysicalOperator("source", "source", SPARK, (), (),
                                sum(st.catalog.streams[s].rate for s in plan.streams),
                                sum(st.catalog.streams[s].rate for s in plan.streams),
                                source.u, source.memory))
    for op in plan.operators:
        op_id = plan.ids[op]
        if placement[op_id] == SPARK:
            c = model.dsps(op)
            ops.append(PhysicalOperator(
                op_id, op.kind, SPARK, (op_id,), tuple(physical_input(i) for i in op.inputs),
                sum(st[i].lambda_out for i in op.inputs), st[op].lambda_out, c.u, c.memory))
            continue
        name = owner[op]
        fragment = db_names[name]
        if any(op in p.inputs for p in fragment):
            continue  # a DB-op is listed once, at its root
        c = model.db(fragment, op, to_sink=op is plan.root)
        inputs = model.db_inputs(fragment)
        members = tuple(plan.ids[m] for m in plan.operators if m in fragment)
        ops.append(PhysicalOperator(
            name, "db-op", DUCKDB, members, tuple(physical_input(i) for i in inputs),
            sum(st[i].lambda_out for i in inputs), st[op].lambda_out, c.u, c.memory))
    sink = model.sink(plan.root, root_engine)
    ops.append(PhysicalOperator("sink", "sink", DUCKDB, (), (physical_input(plan.root),),
                                st[plan.root].lambda_out, st[plan.root].lambda_out, sink.u, 0.0))
    cost = PlanCost(0.0, 0.0, 0.0)
    for op in ops:
        cost = cost.add(OperatorCost(op.u, op.memory))
    return PhysicalPlan(plan, dict(placement), tuple(ops), cost)


def uniform(plan: LogicalPlan, engine: str) -> dict[str, str]:
    return {plan.ids[op]: engine for op in plan.operators}


def is_feasible(physical: PhysicalPlan, objective: Objective) -> bool:
    return objective.feasible(physical.cost)

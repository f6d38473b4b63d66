"""Physical plans: a placement of every R2R operator on Spark, DuckDB, duckdb-partitioned or, for
an aggregate, split across the two (its partials per pane in Spark, their merge in DuckDB), with
its DB-ops (the maximal connected fragments placed on one DuckDB engine, Ji Sec. 6.2) and the
cost of every operator. A split aggregate is two physical operators: ``<id>_partial`` in Spark,
and its merge, a member of a DB-op."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.cost import (
    DB_ENGINES,
    DUCKDB,
    PARTITIONED,
    SPARK,
    SPLIT,
    ZERO,
    CostModel,
    OperatorCost,
    PlanCost,
    fragment_engine,
)
from optimizer.logical import LogicalPlan, Node, is_r2r


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
    placement: dict[str, str]  # logical operator id -> spark | duckdb | duckdb-partitioned | split
    operators: tuple[PhysicalOperator, ...]
    cost: PlanCost
    # Its crossings go by reference: DuckDB reads the stream's landed files (``by_reference``).
    by_reference: bool = False

    @property
    def db_ops(self) -> list[PhysicalOperator]:
        return [op for op in self.operators if op.kind == "db-op"]

    def engine_of(self, node: Node) -> str:
        return self.placement[self.logical.ids[node]]


def db_fragments(plan: LogicalPlan, placement: dict[str, str]) -> dict[Node, frozenset[Node]]:
    """Maximal connected sets of operators placed on one DuckDB engine, keyed by their root, in
    post-order. A split aggregate reads Spark's partials: it begins a fragment."""
    fragments: dict[Node, set[Node]] = {}
    for op in plan.operators:  # post-order: children first
        engine = placement[plan.ids[op]]
        if engine not in DB_ENGINES:
            continue
        fragment = {op}
        for child in op.inputs if engine != SPLIT else ():
            if child in fragments and fragment_engine(placement[plan.ids[child]]) == engine:
                fragment |= fragments.pop(child)
        fragments[op] = fragment
    return {root: frozenset(f) for root, f in fragments.items()}


def split(plan: LogicalPlan, placement: dict[str, str],
          members: frozenset[Node] | None = None) -> frozenset[Node]:
    """The split aggregates (of ``members``, if given)."""
    return frozenset(op for op in plan.operators if placement[plan.ids[op]] == SPLIT
                     and (members is None or op in members))


def stream_readers(plan: LogicalPlan) -> list[Node]:
    """The operators that read a stream's window."""
    return [op for op in plan.operators if not all(is_r2r(c) for c in op.inputs)]


def by_reference(plan: LogicalPlan, placement: dict[str, str], model: CostModel) -> bool:
    """Whether a placement's crossings go by reference (``rowstream/by_reference.py``): every
    operator that reads a window of a stream runs in the driver's DuckDB, none in Spark's
    executors, so Spark hands DuckDB the files of each micro-batch and no row. The profile must
    price it (``tandem calibrate``)."""
    return (model.prices_reference
            and all(placement[plan.ids[op]] == DUCKDB for op in stream_readers(plan))
            and PARTITIONED not in placement.values())


def after_mig(plan: LogicalPlan, placement: dict[str, str]) -> set[Node]:
    """The Spark operators a DB-op feeds, directly or through others: they run on the MIG's
    evaluation thread, over DataFrames of DuckDB's rows."""
    after: set[Node] = set()
    for op in plan.operators:  # post-order: children first
        if placement[plan.ids[op]] == SPARK and any(
                c in after or (is_r2r(c) and placement[plan.ids[c]] in DB_ENGINES)
                for c in op.inputs):
            after.add(op)
    return after


def spark_cost(plan: LogicalPlan, placement: dict[str, str], after: set[Node], op: Node,
               model: CostModel, referenced: bool = False) -> OperatorCost:
    """A Spark operator's cost: Eq. 6.4's streaming one, or, after the MIG (``after``), its
    batch job's with the moves of its inputs that are Spark's rows before the MIG: they cross
    into DuckDB and come back for each window_end."""
    if op not in after:
        return model.dsps(op)
    return model.after_mig(op, tuple(c for c in op.inputs if c not in after and not (
        is_r2r(c) and placement[plan.ids[c]] in DB_ENGINES)), referenced)


def plan_cost(plan: LogicalPlan, placement: dict[str, str], model: CostModel,
              referenced: bool | None = None) -> PlanCost:
    """C(P) = <C_b, C_u> (Eq. 6.5, 6.6) with the state memory, of a complete placement, its
    crossings by reference where it allows them (``referenced``: priced so, or not, whatever
    it allows)."""
    if referenced is None:
        referenced = by_reference(plan, placement, model)
    cost = ZERO.add(model.source(plan.streams, referenced))
    after = after_mig(plan, placement)
    for op in plan.operators:
        if placement[plan.ids[op]] == SPARK:
            cost = cost.add(spark_cost(plan, placement, after, op, model, referenced))
        elif placement[plan.ids[op]] == SPLIT:
            cost = cost.add(model.partial(op))
    for root, fragment in db_fragments(plan, placement).items():
        cost = cost.add(model.db(fragment, root, to_sink=root is plan.root,
                                 partitioned=placement[plan.ids[root]] == PARTITIONED,
                                 by_reference=referenced, split=split(plan, placement, fragment)))
    return cost.add(model.sink(plan.root, root_engine(plan, placement), plan.root in after,
                               referenced))


def evaluate(plan: LogicalPlan, placement: dict[str, str], model: CostModel) -> PhysicalPlan:
    """The physical plan of a complete placement, every operator with its costs: the reference
    against which the pruned search of phase two is tested, and what `tandem explain` shows."""
    st = model.stats
    fragments = db_fragments(plan, placement)
    owner: dict[Node, str] = {}
    for n, fragment in enumerate(fragments.values(), 1):
        for m in fragment:
            owner[m] = f"dbop_{n}"

    def physical_input(child: Node) -> str:
        return owner.get(child, plan.ids[child])

    rate = sum(st.catalog.streams[s].rate for s in plan.streams)
    referenced = by_reference(plan, placement, model)
    source = model.source(plan.streams, referenced)
    ops = [PhysicalOperator("source", "source", SPARK, (), (), rate, rate, source.u, source.memory)]
    after = after_mig(plan, placement)
    for op in plan.operators:
        op_id = plan.ids[op]
        lambda_in = sum(st[i].lambda_out for i in op.inputs)
        inputs = tuple(physical_input(i) for i in op.inputs)
        if placement[op_id] == SPARK:
            c = spark_cost(plan, placement, after, op, model, referenced)
            ops.append(PhysicalOperator(op_id, op.kind, SPARK, (op_id,), inputs, lambda_in,
                                        st[op].lambda_out, c.u, c.memory))
        elif placement[op_id] == SPLIT:
            c = model.partial(op)
            ops.append(PhysicalOperator(partial_id(op_id), PARTIAL, SPARK, (op_id,), inputs,
                                        lambda_in, 0.0, c.u, c.memory))
        if op in fragments:  # a DB-op is listed once, at its root
            fragment = fragments[op]
            engine = fragment_engine(placement[op_id])
            splits = split(plan, placement, fragment)
            c = model.db(fragment, op, to_sink=op is plan.root, partitioned=engine == PARTITIONED,
                         by_reference=referenced, split=splits)
            inputs = model.db_inputs(fragment, splits)
            ops.append(PhysicalOperator(
                owner[op], "db-op", engine, tuple(plan.ids[m] for m in plan.operators if m in fragment),
                tuple(partial_id(plan.ids[i]) if i in splits else physical_input(i)
                      for i in inputs), sum(model.partials_rate(i) if i in splits
                                            else st[i].lambda_out for i in inputs),
                st[op].lambda_out, c.u, c.memory))
    sink = model.sink(plan.root, root_engine(plan, placement), plan.root in after, referenced)
    ops.append(PhysicalOperator("sink", "sink", DUCKDB, (), (physical_input(plan.root),),
                                st[plan.root].lambda_out, st[plan.root].lambda_out, sink.u, 0.0))
    return PhysicalPlan(plan, dict(placement), tuple(ops),
                        plan_cost(plan, placement, model, referenced), referenced)


def root_engine(plan: LogicalPlan, placement: dict[str, str]) -> str:
    """Where the result is produced; a query that only windows a stream ends in Spark."""
    return fragment_engine(placement.get(plan.ids[plan.root], SPARK))


PARTIAL = "partial-aggregate"  # the kind of a split aggregate's Spark operator


def partial_id(op_id: str) -> str:
    """The physical operator of a split aggregate's partials in Spark."""
    return f"{op_id}_partial"


def uniform(plan: LogicalPlan, engine: str) -> dict[str, str]:
    return {plan.ids[op]: engine for op in plan.operators}

"""How a physical plan is deployed on the two engines (Ji Sec. 6.2, Fig. 6.2).

The stream enters Spark. Every Spark operator with only the stream below it (no DuckDB operator
among its inputs, transitively) runs as a Spark Structured Streaming operator. The relations
that leave that streaming part, because a DB-op or the result sink reads them, cross the MIG
into DuckDB. After it, per micro-batch and for the window_ends the batch completes, the plan
runs bottom-up in *steps*: each DB-op as one DuckDB query, and each Spark operator that sits
above a DB-op as a Spark operator over the instantaneous relations of those window_ends (the
MIG hands DuckDB's rows back as DataFrames). Such relations are finite and complete, so these
Spark operators need no state across micro-batches. A DB-op on duckdb-partitioned is evaluated
in Spark's executors over the batch's rows of its crossings, before the steps of the batch run;
its step hands its result rows on.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.cost import DB_ENGINES, PARTITIONED, SPLIT
from optimizer.logical import Node, Window, post_order
from optimizer.physical import PhysicalPlan, db_fragments


@dataclass(frozen=True)
class Step:
    """One operator of the part after the MIG: a DB-op (``db_op`` its id) or a Spark operator."""

    node: Node  # the DB-op's root, or the Spark operator
    db_op: str | None = None
    partitioned: bool = False  # a DB-op on duckdb-partitioned (rowstream/partitioned.py)

    @property
    def in_duckdb(self) -> bool:
        return self.db_op is not None


@dataclass(frozen=True)
class Deployment:
    physical: PhysicalPlan
    streaming: frozenset[Node]  # windows and Spark streaming operators
    crossings: tuple[Node, ...]  # streaming relations read after the MIG, one per relation id
    steps: tuple[Step, ...]  # post-order

    def relation_id(self, node: Node) -> str:
        return self.physical.logical.relation_ids[node]

    @property
    def judged_in_executors(self) -> bool:
        """The stream's rows stay in Spark's executors, where a DB-op runs on duckdb-partitioned
        or Spark computes a split aggregate's partials: the MIG judges each task's there."""
        return (any(step.partitioned for step in self.steps)
                or SPLIT in self.physical.placement.values())


def deploy(physical: PhysicalPlan) -> Deployment:
    plan = physical.logical
    streaming: set[Node] = set()
    for node in post_order(plan.root):
        if isinstance(node, Window) or (
                physical.engine_of(node) not in DB_ENGINES and all(i in streaming for i in node.inputs)):
            streaming.add(node)
    crossing: dict[str, Node] = {}
    for node in post_order(plan.root):
        readers = [i for i in node.inputs if i in streaming] if node not in streaming else []
        if node is plan.root and node in streaming:
            readers.append(node)
        for i in readers:
            crossing.setdefault(plan.relation_ids[i], i)
    fragments = db_fragments(plan, physical.placement)
    by_root = {plan.by_id[op.members[-1]]: op.id for op in physical.db_ops}
    steps = []
    for node in plan.operators:  # post-order
        if node in fragments:
            steps.append(Step(node, by_root[node], physical.engine_of(node) == PARTITIONED))
        elif node not in streaming and physical.engine_of(node) not in DB_ENGINES:
            steps.append(Step(node))
    return Deployment(physical, frozenset(streaming), tuple(crossing.values()), tuple(steps))

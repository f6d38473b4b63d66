"""Live plan migration between two placements of one logical plan (Zhu, Part II): the state each
placement keeps, how the states of two placements match, what Moving State and Parallel Track
cost (Zhu Sec. 12.3), and the hysteresis rule that decides whether a better plan pays for its
migration.

Every R2R operator applies to the instantaneous relations of one window_end (docs/design.md, Semantics). A
placement keeps, between micro-batches, the contents of the windows still open:

* the central DuckDB keeps the rows of each relation a DB-op reads from Spark, in its table
  ``in_<relation id>`` (``columnar/store.py``);
* Spark keeps, in its state store, the rows of both inputs of a join and the partial aggregates
  of every open (window, group) of an aggregate;
* duckdb-partitioned keeps the rows of its inputs in per-partition DuckDB files under Spark's
  checkpoint.

**Moving State** (Alg. 7) pauses the old plan at a micro-batch boundary, matches the old and the
new states by their schema (Sec. 12.1.1: here, the relation they hold and whether as rows or as
partials), keeps the matched ones and recomputes the others (Alg. 6) from the rows of the open
windows, then resumes with the new plan. A central DuckDB table is matched when both placements
read the relation from Spark: the new plan's DB-op reads the old one's table, which is Zhu's new
cursor on a shared queue (Sec. 12.1.2), and nothing is copied. Spark's state belongs to one
streaming query and its checkpoint; a new placement is a new query, so its Spark states, and the
partitions' files under its checkpoint, are recomputed.

**Parallel Track** (Alg. 8) runs the new plan beside the old one on the same new input. The old
plan's root must skip the all-new combinations; under window_end semantics these are exactly
the window_ends whose windows hold new tuples only, which the new plan computes whole. The old
plan therefore emits every window_end up to the last one holding an old tuple and stops; the
new plan emits those after it, its output held back until the old one is done (Sec. 12.2.3).
No window is split between the plans, so no result needs Sec. 14.1.2's combining group-by and
non-distributive aggregates (AVG, MEDIAN) migrate as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.cost import DUCKDB, PARTITIONED, SPARK, SPLIT, CostModel, Objective, PlanCost
from optimizer.logical import Aggregate, Join, LogicalPlan, Node, signature, windows
from optimizer.optimizer import Optimization
from optimizer.physical import PhysicalPlan, after_mig, db_fragments, split

MS, PT = "ms", "pt"
STRATEGIES = (MS, PT)
ROWS, PARTIALS = "rows", "partials"
# T_m of Zhu's Table 12.1: one comparison of two state schemas (two short strings in Python).
MATCH_SECONDS = 1e-7


@dataclass(frozen=True)
class State:
    """The contents of open windows that a placement keeps for one relation."""

    relation: str  # the relation's id in its plan (LogicalPlan.relation_ids)
    schema: str  # Zhu's state schema: the relation's structure (logical.signature), any plan
    form: str  # ROWS: its tuples; PARTIALS: a partial aggregate per open (window, group)
    engine: str
    tuples: float  # held at the catalog's rate (Zhu's |S|)
    window: float  # seconds of event time the state covers: its largest window's size
    work: float  # seconds of work to rebuild it from the rows of its window: W·u (Eq. 12.1)


@dataclass(frozen=True)
class Matching:
    """Zhu's state matching (Sec. 12.1.1) between an old and a new placement."""

    kept: tuple[State, ...]  # new states whose contents the old plan's serve as they are
    recomputed: tuple[State, ...]  # new states with no match: rebuilt (Alg. 6)
    discarded: tuple[State, ...]  # old states with no match (Sec. 12.1.4)


@dataclass(frozen=True)
class MigrationCost:
    """What a migration is predicted to cost (Zhu Sec. 12.3)."""

    strategy: str
    duration: float  # seconds: T_MS (Eq. 12.3) of wall time; T_PT (Eq. 12.4) of event time
    silence: float  # wall seconds with no output
    work: float  # seconds of work beyond running the old plan: what the gain must pay back
    state_tuples: float  # tuples recomputed (MS) or computed twice (PT)
    feasible: bool = True  # PT: the machine runs both plans and keeps up (Sec. 12.3.2)


def states(physical: PhysicalPlan, model: CostModel) -> tuple[State, ...]:
    """The states a placement keeps between micro-batches, one per (relation, form, engine).
    A DuckDB table of rows that Spark's stateful operators tagged with their window_end holds
    only window_ends not evaluated yet: their state is the Spark operator's."""
    plan, placement, st = physical.logical, physical.placement, model.stats
    found: dict[tuple[str, str, str], State] = {}

    def keep(node: Node, form: str, engine: str, tuples: float, u: float) -> None:
        window = max(w.size for w in windows(node))
        state = State(plan.relation_ids[node], signature(node), form, engine, tuples, window,
                      window * u)
        found.setdefault((state.schema, form, engine), state)

    after = after_mig(plan, placement)  # Spark operators over complete window_ends: no state
    for op in plan.operators:
        if placement[plan.ids[op]] != SPARK or op in after:
            continue
        u = model.dsps(op).u
        if isinstance(op, Aggregate):
            keep(op, PARTIALS, SPARK, st.groups(op) * model.windows_per_tuple(op.input), u)
        elif isinstance(op, Join):
            for side in op.inputs:  # each side's share of the join's work rebuilds its state
                share = st[side].lambda_out / max(sum(st[i].lambda_out for i in op.inputs), 1e-12)
                keep(side, ROWS, SPARK, st[side].cardinality, u * share)
    for root, fragment in db_fragments(plan, placement).items():
        engine, splits = placement[plan.ids[root]], split(plan, placement, fragment)
        cost = model.db(fragment, root, partitioned=engine == PARTITIONED, split=splits)
        inputs = [n for n in model.db_inputs(fragment, splits)
                  if n in splits or not n.instantiated]
        arrival = (cost.u - cost.evaluation) / max(len(inputs), 1)  # moves in, partials' upkeep
        for node in inputs:
            if node in splits:  # the partials Spark computed: kept apart from DuckDB's own
                keep(node, PARTIALS, SPLIT,
                     model.partials_rate(node) * max(w.size for w in windows(node)), arrival)
            else:
                keep(node, ROWS, engine, st[node].cardinality, arrival)
    return tuple(found.values())


def match(old: tuple[State, ...], new: tuple[State, ...]) -> Matching:
    """States match when they hold the same relation in the same form in the central DuckDB,
    whose tables outlive a plan. Spark's state and the partitions' files belong to the old
    plan's streaming query and are rebuilt for the new one."""
    shared = {(s.schema, s.form) for s in old if s.engine == DUCKDB}
    kept = tuple(s for s in new if s.engine == DUCKDB and (s.schema, s.form) in shared)
    used = {(s.schema, s.form) for s in kept}
    return Matching(kept, tuple(s for s in new if s not in kept),
                    tuple(s for s in old if not (s.engine == DUCKDB
                                                 and (s.schema, s.form) in used)))


def migration_costs(old: Optimization, new: Optimization, *, lateness: float,
                    restart: float) -> tuple[MigrationCost, MigrationCost]:
    """Moving State's and Parallel Track's costs of migrating from the plan ``old`` to the plan
    ``new``, both optimised at the same rate (their logical plans may differ: states match by
    their schema). ``restart``: seconds to stop the old plan's Spark query and start the new
    one's."""
    widest = max(w.size for w in windows(new.logical.root))
    # Moving State rebuilds the new states from the open windows' rows read again in one
    # micro-batch: their fixed costs per batch count once, not once per slide.
    once = CostModel(new.model.stats, new.model.profile, span=widest, ordered=new.model.ordered)
    before, after = states(old.plan, old.model), states(new.plan, once)
    return (moving_state(new.logical, before, after, once, restart),
            parallel_track(old.plan.cost, new.plan.cost, states(new.plan, new.model), widest,
                           lateness, new.objective))


def moving_state(plan: LogicalPlan, old: tuple[State, ...], new: tuple[State, ...],
                 model: CostModel, restart: float) -> MigrationCost:
    """T_MS = T_match + T_move + T_S (Eq. 12.3), plus ``restart``.

    * T_match = 4·N·M·T_m (Sec. 12.3.1), N and M the old and the new states.
    * T_move = 0: a matched state is a table both plans read (Zhu's 2·min(N, M)·T_c creates a
      cursor per matched state; here the new plan's SQL names the table).
    * T_S: each unmatched state rebuilt from its window's rows, W·u of the operator keeping it.
      For a join this is Eq. 12.1, λ_A·λ_B·W²·(T_j + T_s·σ): u is the join's work per second of
      arrivals, λ_A·|S_B|·T_j + ..., and |S_B| = λ_B·W. The rows themselves are read again
      through the gateway: W_max of the source's u.

    The output is silent throughout."""
    matching = match(old, new)
    t_match = 4 * len(old) * len(new) * MATCH_SECONDS
    recomputed = matching.recomputed
    t_s = sum(s.work for s in recomputed)
    if recomputed:
        t_s += max(s.window for s in recomputed) * model.source(plan.streams).u
    duration = t_match + t_s + restart
    return MigrationCost(MS, duration, duration, duration, sum(s.tuples for s in recomputed))


def parallel_track(old_cost: PlanCost, new_cost: PlanCost, new: tuple[State, ...],
                   window: float, lateness: float, objective: Objective) -> MigrationCost:
    """T_PT (Eq. 12.4) in event time: the old plan runs until its windows hold new tuples only.
    Eq. 12.4's second case, 2W, is for a join above a join, whose state keeps rows that joined
    an old tuple for another W; here every operator pairs rows of one window_end, so the last
    window holding an old tuple closes W_max after the switch, plus the allowed lateness L for
    it to be evaluated. Meanwhile both plans run: the new plan's work for T_PT is the price, and
    the strategy needs a machine that keeps up with both (Sec. 12.3.2: "given sufficient system
    processing power"). Output never stops."""
    duration = window + lateness
    both = old_cost.combine(new_cost)
    return MigrationCost(PT, duration, 0.0, duration * new_cost.utilization,
                         sum(s.tuples for s in new), objective.feasible(both))


def moved(old: dict[str, str], new: dict[str, str]) -> str:
    """The operators a migration moves between placements, with their engines before and
    after."""
    return ", ".join(f"{op} {old.get(op)} → {engine}" for op, engine in new.items()
                     if old.get(op) != engine) or "no operator"


@dataclass(frozen=True)
class Decision:
    migrate: bool
    reason: str
    cost: MigrationCost | None = None  # the strategy chosen


def decide(current: PlanCost, candidate: PlanCost, costs: list[MigrationCost],
           objective: Objective, *, margin: float, horizon: float,
           observed_load: float | None = None,
           current_objective: Objective | None = None) -> Decision:
    """Whether to migrate from the running plan (``current``) to ``candidate``, and how.

    * A plan that falls behind is left for a feasible one at once, by the cheapest strategy
      that can run: a queue that grows costs more every second. ``observed_load``, the running
      plan's wall seconds per second of arrivals as measured, overrides the model for it.
    * Between feasible plans, the candidate must save more than ``margin`` of the current C_u
      (Definition 6.1 orders them by C_u; smaller differences are within the noise of the
      statistics and of the model), and the work it saves must pay the migration's work back
      within ``horizon`` seconds.
    * An infeasible candidate is never adopted.

    ``objective`` is the candidate's, ``current_objective`` the running plan's where its
    crossings go otherwise (``Objective.crossing``)."""
    running = current_objective or objective
    behind = (observed_load > 1) if observed_load is not None else not running.feasible(current)
    if not objective.feasible(candidate):
        return Decision(False, "the better plan would not keep up either")
    # Parallel Track keeps the old plan running: not while it falls behind.
    runnable = [c for c in costs if c.feasible and not (behind and c.strategy == PT)]
    if not runnable:
        return Decision(False, "no strategy fits: the machine cannot run both plans at once")
    cheapest = min(runnable, key=lambda c: (c.work, c.silence))
    if behind:
        return Decision(True, "the running plan falls behind the arrival rate", cheapest)
    gain = current.utilization - candidate.utilization
    if gain <= margin * current.utilization:
        return Decision(False, f"saves {gain:.3f} s per second of arrivals, within the "
                               f"{margin:.0%} margin of the running plan's C_u")
    payback = cheapest.work / gain
    if payback > horizon:
        return Decision(False, f"pays its migration back in {payback:.0f} s, beyond the "
                               f"{horizon:.0f} s horizon")
    return Decision(True, f"saves {gain:.3f} s per second of arrivals; the migration pays back "
                          f"in {payback:.0f} s", cheapest)

"""Ji's cost model (Eq. 6.4-6.6, Definition 6.1) with Zhu's state-memory estimate (Eq. 4.3-4.5).

Every physical operator gets its source-driven input processing cost u (Eq. 6.4): the seconds of
work that one second of source arrivals causes it. A DSPS-op's u depends on that operator alone.
A DB-op's u is transfer in + SQL evaluation + transfer out of the whole fragment, which is not
the sum of the costs of its parts (Ji's non-additivity).

A DB-op's SQL is priced as ``columnar/fragment_sql.py`` writes it. An aggregate of COUNT, SUM,
AVG, MIN or MAX over a windowed stream's rows reads W/β partial aggregates per group, not the
window's tuples, or, from ``STACKED_FROM`` panes per window on, two (a prefix and a suffix of
the two stacks, ``columnar/stacks.py``); the store updates the pane partials as the rows arrive
(a cost per arriving tuple). A join of a window's rows with a relation of the same window reads each (group, pane)'s
rows as one list: the cost per tuple of the window is a list element's, not a hash join's,
and the selections and the aggregate above the join become lambdas over the lists. (That holds
when the aggregate above the join is in the DB-op too, fragment_sql's correlated aggregate;
otherwise the rows are expanded and move back to Spark, whose transfer dominates.) Selections
and projections of a windowed stream's rows cost nothing per evaluation: the store applies them
as the rows arrive, inside the partials' upkeep, and an operator that expands the rows to their
windows (MEDIAN, a join of two windows' rows) pays per expanded row itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from optimizer.logical import (
    DECOMPOSABLE,
    Aggregate,
    Join,
    Node,
    Project,
    Select,
    Window,
    signature,
    source_window,
)
from optimizer.ordered_lists import values_read
from optimizer.profile import Profile
from optimizer.statistics import Estimate, Statistics

SPARK, DUCKDB = "spark", "duckdb"
PARTITIONED = "duckdb-partitioned"  # DuckDB in Spark's executors, one per hash partition
# An aggregate split across the engines: its partials per pane computed in Spark's executors
# from each micro-batch's rows, their merge into windows in the driver's DuckDB.
SPLIT = "split"
DB_ENGINES = (DUCKDB, PARTITIONED, SPLIT)
SOURCE = {"parquet": "source", "csv": "source_csv"}  # the gateway's function, by file format
# DuckDB reading and judging a stream's landed files itself, by file format: the crossing by
# reference (rowstream/by_reference.py), where every operator over the stream runs in DuckDB.
SCAN = {"parquet": "scan", "csv": "scan_csv"}
# The most landed files a micro-batch read by reference takes (Spark's maxFilesPerTrigger,
# ``tandem run --files-per-batch``). A run that keeps up finds one new file per batch; one
# that falls behind takes up to this many, so near its limit, where feasibility is decided,
# each cost per batch is paid once for this many spans: Spark's control of the batch, DuckDB's
# inserts into the pane partials and lists, and one evaluation of the batch's window_ends.
FILES_PER_BATCH = 4

# Panes per window from which an aggregate by panes keeps two stacks (columnar/stacks.py): below,
# merging W/β partials per group costs less than a stack's step, lookups and share of the front's
# build (bench/results/stacks.md, 2,125 groups: 6.9 against 8.2 ms per window at 300 panes, 11.8
# against 8.5 at 600, 59.2 against 9.6 at 3,600).
STACKED_FROM = 512


def fragment_engine(engine: str) -> str:
    """The DuckDB a DB-op member runs on: a split aggregate's merge runs in the driver's, with
    the central operators above it."""
    return DUCKDB if engine == SPLIT else engine


def whole_panes(rows: Node) -> bool:
    """Is the window of ``rows`` a whole number of slides (panes)?"""
    window = source_window(rows)
    return (window.size / window.slide).is_integer()


def by_panes(node: Aggregate) -> bool:
    """Does DuckDB combine ``node`` from partial aggregates per pane (``fragment_sql``)? Then
    Spark may compute those partials (``SPLIT``)."""
    return (not node.input.instantiated and whole_panes(node.input)
            and all(a.func in DECOMPOSABLE for a in node.aggregates))


@dataclass(frozen=True)
class OperatorCost:
    u: float  # Eq. 6.4
    memory: float  # bytes of state held
    # The share of u spent on the MIG's evaluation thread (rowstream/mig.py): a DB-op's SQL and
    # what follows it, and by reference DuckDB's read of the files and the DB-op's upkeep too.
    # The rest (the gateway, Spark's operators before the MIG, the moves into DuckDB) runs in
    # the micro-batch's job, beside the previous batch's evaluation.
    evaluation: float = 0.0


@dataclass(frozen=True)
class PlanCost:
    bottleneck: float  # C_b, Eq. 6.5
    utilization: float  # C_u, Eq. 6.6
    memory: float  # bytes of state, Zhu Eq. 4.3/4.5
    evaluation: float = 0.0  # the part of C_u on the MIG's evaluation thread

    @property
    def arrival(self) -> float:
        """The part of C_u in the micro-batch's job."""
        return self.utilization - self.evaluation

    def add(self, op: OperatorCost) -> PlanCost:
        return PlanCost(max(self.bottleneck, op.u), self.utilization + op.u,
                        self.memory + op.memory, self.evaluation + op.evaluation)

    def combine(self, other: PlanCost) -> PlanCost:
        return PlanCost(max(self.bottleneck, other.bottleneck),
                        self.utilization + other.utilization, self.memory + other.memory,
                        self.evaluation + other.evaluation)


ZERO = PlanCost(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Fragment:
    """What a DB-op's cost depends on besides its root: the distinct relations it reads from
    Spark (by structural signature) and the seconds one evaluation spends on its operators.
    Phase two grows it operator by operator instead of rescanning the members."""

    inputs: frozenset[str]
    work: float
    arrival: float = 0.0  # seconds per second of arrivals: the pane partials' upkeep
    partitioned: bool = False  # runs on duckdb-partitioned (``db_cost``)
    by_reference: bool = False  # the stream's windows are read from its files, not moved
    kept: frozenset[str] = frozenset()  # the windows whose rows it reads (``rows_read``)


@dataclass(frozen=True)
class Objective:
    """How plans are compared: Definition 6.1, optionally with a memory budget, or by C_u alone
    for the ablation of Sec. 6.4.3."""

    feasibility: bool = True
    memory_budget: float | None = None  # bytes
    # Ji assumes every operator has processors of its own (Sec. 6.3.2), so the busiest one
    # bounds the rate (C_b). Where a micro-batch runs its operators on shared cores, as Spark
    # local mode and an embedded DuckDB do, the two sides of the MIG's pipeline bound it.
    time_shared: bool = False
    # sigma: the share of the smaller side of the pipeline that does not overlap the larger;
    # 1 when the operators run one after another (the load is then C_u). By value the job is
    # Spark's tasks on every core; by reference it is the driver's control of the next batch
    # alone, which overlaps the MIG's thread otherwise (``overlap_reference``; None: alike).
    overlap: float = 1.0
    overlap_reference: float | None = None
    by_reference: bool = False  # the crossings of the plans this objective compares

    def crossing(self, by_reference: bool) -> Objective:
        """This objective for plans whose crossings go by reference, or by value."""
        return self if by_reference == self.by_reference else replace(
            self, by_reference=by_reference)

    @property
    def sigma(self) -> float:
        if self.by_reference and self.overlap_reference is not None:
            return self.overlap_reference
        return self.overlap

    def load(self, cost: PlanCost) -> float:
        """Seconds of wall time one second of arrivals takes: C_b (Eq. 6.5) on Ji's machine; on
        shared cores, the job's side and the evaluation's side of the MIG overlapped,
        max(A, E) + sigma * min(A, E), which is C_u (Eq. 6.6) when sigma = 1."""
        if not self.time_shared:
            return cost.bottleneck
        a, e = cost.arrival, cost.evaluation
        return max(a, e) + self.sigma * min(a, e)

    @property
    def two_sided(self) -> bool:
        """Does the load depend on how C_u splits between the pipeline's two sides?"""
        return self.time_shared and self.sigma < 1 and self.feasibility

    def effective_bottleneck(self, cost: PlanCost) -> float:
        # Memory grows with the rate as the load does, so a plan over budget by x behaves like
        # a bottleneck of x: it is infeasible, and less so the closer it is to the budget.
        load = self.load(cost)
        if self.memory_budget is None:
            return load
        return max(load, cost.memory / self.memory_budget)

    def feasible(self, cost: PlanCost) -> bool:
        return self.effective_bottleneck(cost) <= 1

    def rank(self, cost: PlanCost) -> tuple:
        """A key whose order is Definition 6.1: feasible plans first (condition 1), feasible
        plans by C_u (condition 2), infeasible plans by C_b (condition 3)."""
        if not self.feasibility:
            return (cost.utilization,)
        b = self.effective_bottleneck(cost)
        return (0, cost.utilization) if b <= 1 else (1, b)

    def dominates(self, a: PlanCost, b: PlanCost) -> bool:
        """a is at least as good as b under every extension (Ji Sec. 6.3.4). An extension adds
        the same memory to both, so with a memory budget memory must be no worse as well; and
        the same work to each side of the pipeline, so with an overlapped load each side must be
        no worse: the load rises with either side, and C_u with both."""
        if self.two_sided:
            if a.arrival > b.arrival or a.evaluation > b.evaluation:
                return False
        elif self.rank(a) > self.rank(b):
            return False
        return self.memory_budget is None or not self.feasibility or a.memory <= b.memory


def better(a: PlanCost, b: PlanCost) -> bool:
    """Definition 6.1: is a plan of cost a at least as good as one of cost b?"""
    if a.bottleneck <= 1 < b.bottleneck:  # condition 1
        return True
    if a.bottleneck <= 1 and b.bottleneck <= 1:  # condition 2
        return a.utilization <= b.utilization
    return 1 < a.bottleneck <= b.bottleneck  # condition 3


class CostModel:
    """Unit costs of the operators of one logical plan at one arrival rate."""

    def __init__(self, stats: Statistics, profile: Profile, span: float | None = None,
                 files_per_batch: int = FILES_PER_BATCH, ordered: frozenset[Join] = frozenset()):
        self.stats = stats
        self.ordered = ordered  # joins below a count DuckDB finds by order (ordered_lists.py)
        self.profile = profile
        self.span = span or profile.micro_batch_seconds  # event time per micro-batch
        self.files_per_batch = files_per_batch  # the most a batch by reference takes
        self._dsps: dict[Node, OperatorCost] = {}
        self._after_mig: dict[tuple[Node, tuple[Node, ...], bool], OperatorCost] = {}
        self._db: dict[tuple[Fragment, Node, bool], OperatorCost] = {}
        self._db_of_members: dict[tuple[frozenset[Node], Node, bool, bool], OperatorCost] = {}
        self._work: dict[Node, float] = {}
        self._signature: dict[Node, str] = {}
        self._by_signature: dict[str, Node] = {}
        self._inputs: dict[str, tuple[float, float]] = {}
        self._partials: dict[str, Aggregate] = {}  # signature of a split aggregate's partials
        self._memory = {e: (profile.get(e, "memory", "bytes_per_tuple"),
                            profile.get(e, "memory", "bytes_per_value")) for e in (SPARK, DUCKDB)}
        # Does the profile price the crossing by reference (``source``)? A profile calibrated
        # before it existed does not: its plans cross by value.
        self.prices_reference = all(
            profile.get(e, f, "per_call" if f == "control" else "per_tuple") > 0
            for e, f in ((SPARK, "control"), *((DUCKDB, f) for f in SCAN.values())))
        # And the split aggregate's Spark side (``partial``)?
        self.prices_split = profile.get(SPARK, "partial", "per_tuple") > 0
        # And Spark's batch jobs after the MIG, its aggregation and its join? A profile
        # calibrated before one was priced apart prices it as the streaming operator (Eq. 6.4),
        # as it did then. (Its presence decides, not its value: a calibration fits it from zero.)
        self.batch_jobs = {kind: function for kind, function in (
            (Aggregate, "batch_aggregate"), (Join, "batch_join"))
            if function in profile.functions.get(SPARK, {})}
        # What each window_end after the first adds to one evaluation of a DB-op's SQL, as a
        # share of the first's work (``evaluation``). A profile calibrated before it was
        # measured prices every window_end as a whole evaluation's work, as it did then.
        self.further_end = profile.functions.get(DUCKDB, {}).get("query", {}).get(
            "further_end", 1.0)

    # -- helpers ---------------------------------------------------------------------------

    def _c(self, engine: str, function: str, name: str) -> float:
        return self.profile.coef(engine, function, name)

    def _bytes(self, engine: str, node: Node) -> float:
        per_tuple, per_value = self._memory[engine]
        return per_tuple + per_value * len(node.columns)

    def batch_span(self, by_reference: bool = False) -> float:
        """Event seconds a micro-batch covers near the plan's limit (``FILES_PER_BATCH``)."""
        return self.span * (self.files_per_batch if by_reference else 1)

    def _per_batch(self, engine: str, function: str, by_reference: bool = False) -> float:
        return self.profile.get(engine, function, "per_call") / self.batch_span(by_reference)

    def evaluation(self, out: Estimate, work: float, by_reference: bool = False
                   ) -> tuple[float, float]:
        """Seconds per second of arrivals that a DB-op's SQL takes, and its evaluations per
        second. The MIG evaluates the window_ends a batch completes in one query
        (rowstream/mig.py): the query's fixed cost and the reads of partials, lists and rows
        that the window_ends share are paid once, and each further window_end adds a share of
        the first one's ``work`` (bench/results/evaluation-ends.md)."""
        ends = max(1.0, out.n_slide * self.batch_span(by_reference))
        calls = out.n_slide / ends
        once = (self._c(DUCKDB, "query", "per_call")
                + work * (1 + (ends - 1) * self.further_end))
        return calls * once, calls

    @staticmethod
    def windows_per_tuple(node: Node) -> float:
        """Window instances one input row belongs to: W/beta for rows of a windowed stream, 1 once
        rows are tagged with their window_end."""
        return 1.0 if node.instantiated else source_window(node).windows_per_tuple

    # -- DSPS-ops (Eq. 6.4) -----------------------------------------------------------------

    def dsps(self, node: Node) -> OperatorCost:
        found = self._dsps.get(node)
        if found is None:
            found = self._dsps[node] = self._dsps_cost(node)
        return found

    def _dsps_cost(self, node: Node) -> OperatorCost:
        st = self.stats
        if isinstance(node, (Select, Project)):
            lam = st[node.input].lambda_out
            return OperatorCost(lam * self._c(SPARK, node.kind, "per_tuple"), 0.0)
        if isinstance(node, Aggregate):
            child = st[node.input]
            k = self.windows_per_tuple(node.input)
            groups = st.groups(node)
            if node.incremental:
                # Constant unit cost: each tuple updates k partial aggregates.
                c = self._c(SPARK, "aggregate", "per_tuple") + k * self._c(
                    SPARK, "aggregate", "per_window_instance")
                u = child.lambda_out * c + self._per_batch(SPARK, "aggregate")
                return OperatorCost(u, groups * k * self._bytes(SPARK, node))
            # c(|w|) = a + b * n_slide * |w| / lambda: each slide rescans the window.
            u = (child.lambda_out * self._c(SPARK, "holistic", "per_tuple")
                 + child.n_slide * child.cardinality * self._c(SPARK, "holistic", "per_window_tuple")
                 + self._per_batch(SPARK, "holistic"))
            return OperatorCost(u, child.cardinality * self._bytes(SPARK, node.input))
        if isinstance(node, Join):
            left, right = st[node.left], st[node.right]
            a = self._c(SPARK, "join", "per_tuple")
            if node.keys:  # symmetric hash join: probe, then each match (KNV03)
                f = st.selectivity(node)
                per_l = a + self._c(SPARK, "join", "per_match") * f * right.cardinality
                per_r = a + self._c(SPARK, "join", "per_match") * f * left.cardinality
            else:  # nested loops: compare with every tuple of the other window (KNV03)
                per_l = a + self._c(SPARK, "join", "per_comparison") * right.cardinality
                per_r = a + self._c(SPARK, "join", "per_comparison") * left.cardinality
            u = left.lambda_out * per_l + right.lambda_out * per_r + self._per_batch(SPARK, "join")
            # Zhu Eq. 4.3: a join holds one window state per input (4.5 when an input is a join).
            memory = (left.cardinality * self._bytes(SPARK, node.left)
                      + right.cardinality * self._bytes(SPARK, node.right))
            return OperatorCost(u, memory)
        raise TypeError(f"{node.kind} is not a DSPS-op")

    def handed(self, node: Node) -> float:
        """Rows per second of ``node``'s instantaneous relations: what the MIG hands Spark from
        DuckDB, one relation per window_end (``rowstream/mig.py``). A windowed relation's row is
        in W/beta of them; a relation tagged with its window_end (an aggregate's) is in one."""
        found = self.stats[node]
        return found.n_slide * found.cardinality

    def after_mig(self, node: Node, crossings: tuple[Node, ...] = (),
                  by_reference: bool = False) -> OperatorCost:
        """A Spark operator over DataFrames of DuckDB's rows (``physical.after_mig``): a batch
        job on the MIG's evaluation thread over the instantaneous relations of the window_ends
        a micro-batch completes. It reads every row DuckDB hands it, keeps no state across
        batches (the windows are DuckDB's), and an aggregate there is Spark's batch aggregation
        (``batch_aggregate``), not the streaming one's update per window instance, a join
        Spark's batch join of the window_ends' relations (``batch_join``), not the streaming
        one's probes of windows.
        ``crossings``: its inputs that are Spark's rows before the MIG (``physical.spark_cost``).
        Each moves into DuckDB with its micro-batch, as a DB-op's input does, is kept there as
        its window, and comes back for each window_end, every row of its instantaneous
        relations, as a DB-op's output does: its moves are this operator's, as a DB-op's are.
        ``by_reference``: the plan's batches are by reference, its job one per batch of theirs."""
        key = (node, crossings, by_reference)
        found = self._after_mig.get(key)
        if found is not None:
            return found
        rows = sum(self.handed(i) for i in node.inputs)
        if isinstance(node, (Select, Project)):
            u = rows * self._c(SPARK, node.kind, "per_tuple")
        elif (batch := self.batch_jobs.get(type(node))) is not None:
            u = (rows * self._c(SPARK, batch, "per_tuple")
                 + self._per_batch(SPARK, batch, by_reference))
        else:  # a profile calibrated before the batch functions: Eq. 6.4's streaming terms
            u = self.dsps(node).u
        terms = [self._input_term(self.signature(c)) for c in crossings]
        arrive = self._moved_in(sum(lam for lam, _ in terms), len(terms))
        evaluated = u + sum(self._moved_out(c) for c in crossings)
        found = self._after_mig[key] = OperatorCost(arrive + evaluated,
                                                    sum(state for _, state in terms), evaluated)
        return found

    # -- DB-ops -----------------------------------------------------------------------------

    def db(self, members: frozenset[Node], root: Node, to_sink: bool = False,
           partitioned: bool = False, by_reference: bool = False,
           split: frozenset[Node] = frozenset()) -> OperatorCost:
        """A DB-op: the connected R2R fragment ``members`` (whose output is ``root``'s) evaluated
        as one SQL query in DuckDB. ``to_sink``: its result stays in DuckDB, in the results
        table, instead of returning to Spark. ``partitioned``: in the executors' DuckDBs;
        ``by_reference``: the plan's crossings go by reference (``source``); ``split``: the
        members whose partials Spark computes (they read those, not rows)."""
        # The exhaustive enumeration prices the same fragments over and over (j5: 131,074
        # calls for 32,768 placements): summarising one again cost 40 % of its time.
        key = (members, root, to_sink, partitioned, by_reference, split)
        found = self._db_of_members.get(key)
        if found is None:
            found = self._db_of_members[key] = self.db_cost(
                Fragment(frozenset(self._db_input_signatures(members, split)),
                         sum(self.db_work(m) for m in members),
                         sum(self.db_arrival(m, by_reference) for m in members
                             if m not in split),
                         partitioned, by_reference,
                         frozenset().union(*(self.rows_read(m) for m in members
                                             if m not in split))),
                root, to_sink)
        return found

    def _db_input_signatures(self, members: frozenset[Node], split: frozenset[Node]) -> set[str]:
        return {self.partials_signature(m) if m in split else self.signature(c)
                for m in members for c in m.inputs if c not in members}

    def db_inputs(self, members: frozenset[Node],
                  split: frozenset[Node] = frozenset()) -> list[Node]:
        """The distinct relations a DB-op reads from Spark, two copies of one CTE once: the
        split aggregates among ``members`` for the partials Spark computes for them."""
        inputs = self._db_input_signatures(members, split)
        return [self._partials.get(s) or self._by_signature[s] for s in sorted(inputs)]

    def partials_signature(self, node: Aggregate) -> str:
        """What a split aggregate's merge reads: the partials Spark computes for it."""
        found = f"partials({self.signature(node)})"
        self._partials.setdefault(found, node)
        return found

    def partials_rate(self, node: Aggregate) -> float:
        """Rows of partials per second a split aggregate's Spark side hands DuckDB."""
        return self._input_term(self.partials_signature(node))[0]

    def partial(self, node: Aggregate) -> OperatorCost:
        """A split aggregate's Spark side: each micro-batch's rows aggregated per (group, pane)
        in the executors, a job per batch whose partials the driver collects (their move into
        DuckDB is the merge's transfer in)."""
        u = (self.stats[node.input].lambda_out * self._c(SPARK, "partial", "per_tuple")
             + self._per_batch(SPARK, "partial"))
        return OperatorCost(u, 0.0)

    def signature(self, node: Node) -> str:
        found = self._signature.get(node)
        if found is None:
            found = self._signature[node] = signature(node)
            self._by_signature.setdefault(found, node)
        return found

    def db_cost(self, fragment: Fragment, root: Node, to_sink: bool = False) -> OperatorCost:
        """Transfer in + SQL evaluation + transfer out of a DB-op summarised by ``fragment``."""
        key = (fragment, root, to_sink)
        found = self._db.get(key)
        if found is not None:
            return found
        if fragment.partitioned:
            found = self._db[key] = self._partitioned_cost(fragment, root)
            return found
        st = self.stats
        terms = {s: self._input_term(s) for s in fragment.inputs}
        moved, stored, moves = sum(lam for lam, _ in terms.values()), 0.0, len(terms)
        if fragment.by_reference:
            # The stream's windows cross as file names: DuckDB reads and judges the files once
            # (``source``) and stores the rows only of the windows a member reads as rows (the
            # others feed pane partials and lists, whose inserts ``db_arrival`` prices). A
            # relation Spark computes still moves, and is stored as it moves in.
            crossing = [s for s in terms if self._is_window(s)]
            moved -= sum(terms[s][0] for s in crossing)
            moves -= len(crossing)
            stored = (sum(terms[s][0] for s in fragment.kept & terms.keys())
                      * self.profile.get(DUCKDB, "store", "per_tuple"))
        transfer_in = self._moved_in(moved, moves, fragment.by_reference) + stored
        out = st[root]
        evaluation, calls = self.evaluation(out, fragment.work, fragment.by_reference)
        transfer_out = 0.0 if to_sink else self._moved_out(root, calls)
        # The moves in and the partials' upkeep run in the micro-batch's job (the MIG's
        # foreachBatch); the SQL and the move out on its evaluation thread. By reference no
        # job reads the batch: the MIG's thread reads the files, keeps the partials up and
        # evaluates, one after another, while Spark plans the next batch (rowstream/mig.py).
        evaluated = evaluation + transfer_out
        memory = sum(state for _, state in terms.values())
        u = transfer_in + fragment.arrival + evaluated
        found = self._db[key] = OperatorCost(u, memory, u if fragment.by_reference else evaluated)
        return found

    def _moved_in(self, tuples: float, moves: int, by_reference: bool = False) -> float:
        """Spark -> DuckDB: ``tuples`` a second in ``moves`` relations, each a call a batch."""
        return (tuples * self._c(DUCKDB, "transfer_in", "per_tuple")
                + moves * self._per_batch(DUCKDB, "transfer_in", by_reference))

    def _moved_out(self, node: Node, calls: float | None = None) -> float:
        """DuckDB -> Spark: every row of ``node``'s instantaneous relations, a call an
        evaluation (``calls`` a second; a slide's when None)."""
        calls = self.stats[node].n_slide if calls is None else calls
        return (self.handed(node) * self._c(DUCKDB, "transfer_out", "per_tuple")
                + calls * self._c(DUCKDB, "transfer_out", "per_call"))

    def _partitioned_cost(self, fragment: Fragment, root: Node) -> OperatorCost:
        """A DB-op on duckdb-partitioned (``rowstream/partitioned.py``): Spark exchanges its
        input rows by the partition key into the executors' Python workers (per tuple), each of
        the P partitions appends its share to its DuckDB and evaluates the fragment over it (the
        central DB-op's work, divided by P), and the result rows travel to the driver. A batch
        also costs a fixed time for the job and its P partitions. All of it runs in the
        micro-batch's job: the driver's evaluation thread only commits the results."""
        st, P = self.stats, self.profile.parallelism
        terms = [self._input_term(s) for s in fragment.inputs]
        arriving = sum(lam for lam, _ in terms)
        out = st[root]
        per_partition = (arriving * self._c(DUCKDB, "transfer_in", "per_tuple") + fragment.arrival
                         + self.evaluation(out, fragment.work)[0])
        u = (arriving * self._c(PARTITIONED, "exchange", "per_tuple")
             + self._per_batch(PARTITIONED, "exchange")
             + per_partition / P
             + out.lambda_out * self._c(PARTITIONED, "collect", "per_tuple"))
        return OperatorCost(u, sum(state for _, state in terms))

    def _input_term(self, signature_: str) -> tuple[float, float]:
        """Tuples per second a DB-op input moves into DuckDB, and the bytes of its window there:
        a split aggregate's, its partials' rows (one per group with a tuple in a pane)."""
        found = self._inputs.get(signature_)
        if found is None:
            split = self._partials.get(signature_)
            if split is not None:
                window = source_window(split.input)
                held = self._pane_rows(split.input, split.group_by)
                found = (held / window.size, held * self._bytes(DUCKDB, split))
            else:
                node = self._by_signature[signature_]
                estimate = self.stats[node]
                found = (estimate.lambda_out, estimate.cardinality * self._bytes(DUCKDB, node))
            self._inputs[signature_] = found
        return found

    def db_work(self, node: Node) -> float:
        found = self._work.get(node)
        if found is None:
            found = self._work[node] = self._db_work_of(node)
        return found

    def _db_work_of(self, node: Node) -> float:
        """Seconds the DB-op's evaluation of one window_end spends on ``node``: linear in the
        cardinalities of what it reads for it (DuckDB recomputes the fragment for each
        window_end; ``evaluation`` prices several at once): its instantaneous input windows, or
        their pane partials and lists (module docstring)."""
        st = self.stats
        if isinstance(node, (Select, Project, Aggregate)) and self._over_listed(node.input):
            # Folded into the lambdas over the lists (priced with the join): an aggregate
            # writes one row per group.
            return st[node].cardinality * self._c(DUCKDB, "aggregate", "per_window_tuple") \
                if isinstance(node, Aggregate) else 0.0
        if isinstance(node, (Select, Project)):
            if not node.input.instantiated:  # applied once per row as it arrives (panes.per_tuple)
                return 0.0
            return st[node.input].cardinality * self._c(DUCKDB, node.kind, "per_window_tuple")
        if isinstance(node, Aggregate):
            if by_panes(node):
                return (self._window_partials(node.input, node.group_by)
                        * self._c(DUCKDB, "panes", "per_window_tuple"))
            function = "aggregate" if node.incremental else "holistic"
            return st[node.input].cardinality * self._c(DUCKDB, function, "per_window_tuple")
        if isinstance(node, Join):
            left, right = st[node.left].cardinality, st[node.right].cardinality
            listed = self._listed(node)
            if listed is not None:
                rows, other = listed
                keys = [l if rows is node.left else r for l, r in node.keys]
                lists, values = self._pane_rows(rows, keys), st[rows].cardinality
                if node in self.ordered:
                    values = values_read(values, lists)
                return (values * self._c(DUCKDB, "lists", "per_window_tuple")
                        + lists * self._c(DUCKDB, "panes", "per_window_tuple")
                        + st[other].cardinality * self._c(DUCKDB, "join", "per_window_tuple"))
            if node.keys:
                return ((left + right) * self._c(DUCKDB, "join", "per_window_tuple")
                        + st[node].cardinality * self._c(DUCKDB, "join", "per_match"))
            return left * right * self._c(DUCKDB, "join", "per_comparison")
        raise TypeError(f"{node.kind} cannot run in DuckDB")

    def rows_read(self, node: Node) -> frozenset[str]:
        """The stream windows whose rows ``node`` reads when it is evaluated rather than through
        pane partials or lists (``_db_work_of``): a DB-op's store keeps their rows
        (``fragment_sql.rows_kept``)."""
        if isinstance(node, Aggregate):
            rows = [] if by_panes(node) else [node.input]
        elif isinstance(node, Join):
            rows = [] if self._listed(node) is not None else [node.left, node.right]
        else:
            return frozenset()
        return frozenset(self.signature(source_window(r)) for r in rows if not r.instantiated)

    def _is_window(self, signature_: str) -> bool:
        return isinstance(self._by_signature.get(signature_), Window)

    def db_arrival(self, node: Node, by_reference: bool = False) -> float:
        """Seconds per second of arrivals the store spends keeping ``node``'s pane partials or
        lists up to date: per tuple, and per micro-batch an insert into their table (0 for an
        operator that has none). A profile calibrated before lists had costs of their own
        prices them as partials, and neither per batch."""
        if isinstance(node, Aggregate) and by_panes(node):
            rows, kept = node.input, "panes"
        elif isinstance(node, Join) and (listed := self._listed(node)) is not None:
            rows, kept = listed[0], "lists"
        else:
            return 0.0
        per_tuple = (self.profile.get(DUCKDB, kept, "per_tuple")
                     or self._c(DUCKDB, "panes", "per_tuple"))
        return (self.stats[rows].lambda_out * per_tuple
                + self._per_batch(DUCKDB, kept, by_reference))

    def _listed(self, node: Join) -> tuple[Node, Node] | None:
        """(rows, other) when the join pairs a windowed stream's rows with a relation of the
        same window by keys, which DuckDB reads as lists of rows per (group, pane)."""
        sides = [s for s in (node.left, node.right) if not s.instantiated]
        if not node.keys or len(sides) != 1 or not whole_panes(sides[0]):
            return None
        return (node.left, node.right) if sides[0] is node.left else (node.right, node.left)

    def _over_listed(self, node: Node) -> bool:
        """Is ``node``, through selections and projections, a join read as lists?"""
        while isinstance(node, (Select, Project)):
            node = node.input
        return isinstance(node, Join) and self._listed(node) is not None

    def _window_partials(self, rows: Node, keys) -> float:
        """Rows of partials that one window of an aggregate by panes merges: its W/β panes', or
        from STACKED_FROM panes on, the rows of the two stacks it reads and writes
        (columnar/stacks.py): a prefix and a suffix per group with a tuple in the window, a
        step of the back stack per group, and a step of the front's build (once per W/β
        windows, W/β steps)."""
        window = source_window(rows)
        if window.size / window.slide < STACKED_FROM:
            return self._pane_rows(rows, keys)
        return 4 * min(self.stats.distinct(rows, keys), self.stats[rows].lambda_out * window.size)

    def _pane_rows(self, rows: Node, keys) -> float:
        """Rows of pane partials (or lists) that one window reads: W/β panes, each with a row
        per group that has a tuple in it."""
        window = source_window(rows)
        per_pane = min(self.stats.distinct(rows, keys),
                       self.stats[rows].lambda_out * window.slide)
        return window.size / window.slide * per_pane

    # -- fixed operators --------------------------------------------------------------------

    def source(self, streams: list[str], by_reference: bool = False) -> OperatorCost:
        """Spark is the gateway of every stream, whatever the placement. Its cost per tuple is
        the file format's (CSV lines are parsed, Parquet's columns arrive typed); its cost per
        micro-batch, the job's, is the same for both. ``by_reference``: where every operator
        over the streams runs in DuckDB, Spark only plans and checkpoints the micro-batches
        (its control cost per batch of ``files_per_batch`` files) and DuckDB reads and judges the
        files' tuples itself (its cost per call is per file)."""
        found = [self.stats.catalog.streams[s] for s in streams]
        if by_reference:
            # DuckDB's read is on the MIG's thread, Spark's control of the next batch beside it.
            read = sum(s.rate * self._c(DUCKDB, SCAN[s.file_format], "per_tuple")
                       + self._per_batch(DUCKDB, SCAN[s.file_format]) for s in found)
            return OperatorCost(read + self._per_batch(SPARK, "control", by_reference),
                                0.0, read)
        u = sum(s.rate * self._c(SPARK, SOURCE[s.file_format], "per_tuple") for s in found)
        return OperatorCost(u + self._per_batch(SPARK, "source"), 0.0)

    def sink(self, root: Node, engine: str, after_mig: bool = False,
             by_reference: bool = False) -> OperatorCost:
        """R2S into the DuckDB results table: a MIG transfer when the root runs in Spark. The
        insert is the evaluation thread's commit; the transfer is in the job unless the root
        runs after a DB-op (``after_mig``), on the evaluation thread."""
        lam = self.stats[root].lambda_out
        insert = lam * self._c(DUCKDB, "sink", "per_tuple")
        if engine in DB_ENGINES:  # duckdb-partitioned's rows reach the driver in the DB-op
            return OperatorCost(insert, 0.0, insert)
        move = (lam * self._c(SPARK, "sink", "per_tuple")
                + self._per_batch(SPARK, "sink", by_reference))
        return OperatorCost(insert + move, 0.0, insert + (move if after_mig else 0.0))

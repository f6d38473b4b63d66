"""`tandem bench`: capacity against arrival rate of the optimiser's plan and the others
(Ji Sec. 6.4, Fig. 6.6-6.8), measured as docs/design.md defines it (Benchmarks).

For every query and rate it measures, one after another on the same stream, the capacity of
pure-Spark, pure-DuckDB (Spark stays the gateway), the optimiser's choice with and without the
feasibility check, and a sample of the other plans of phase two's space. A placement is
measured once per point whatever roles it plays, and the order of the placements rotates from
rate to rate. A placement found infeasible is not measured at higher rates: its capacity there
is taken as the one it had (rates only add work). The sweep goes on past the given rates,
doubling, until every plan is infeasible. Then bisection narrows the maximum sustainable rate
of pure-Spark, pure-DuckDB and the optimiser's plan to within 10 % (``PRECISION``): each step
measures a role's plan at the geometric middle of the largest rate it kept up with and the
smallest above it that it did not, one step per role in turn, so that a ratio of two maximum
rates is not a step of the grid.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from benchmarking.measure import Capacity, capacity, event_seconds, preloadable, warmup_stream
from benchmarking.verify import placements
from optimizer.errors import TandemError
from optimizer.logical import windows
from optimizer.optimizer import placement_spec
from runtime.explain import Explanation, explain

QUERIES = ("q1", "q2", "q3", "q4", "q5", "q6")
RATES = (1_000, 2_000, 5_000, 10_000, 20_000, 40_000)
QUICK = {"queries": ("q1", "q5"), "rates": (2_000, 20_000), "others": 0, "measure": 8.0,
         "extend": False, "precision": None}
MAX_RATE = 2_560_000  # the sweep stops here even if a plan keeps up
# Warm-up rows generated once per (query, rate) and shared by the plans measured there, up to
# this many (about 2 GB); above it each plan's preload generates them again, part by part: at
# 640k tuples/s, 5 minutes of rows held at once took the 24 GB machine out of memory.
SHARED_ROWS = 50_000_000
SPARK, DUCKDB, CHOICE, NO_FEASIBILITY, PIPELINED = (
    "pure-Spark", "pure-DuckDB", "optimiser", "optimiser without feasibility",
    "optimiser with Ji's C_b check")
ROLES = (SPARK, DUCKDB, CHOICE, NO_FEASIBILITY, PIPELINED)
NEAR_BEST = 0.9  # the choice is accurate within 10 % of the best measured capacity
PRECISION = 1.1  # bisection stops when the smallest rate a plan fell behind at is this close
BISECTED = {SPARK: "spark", DUCKDB: "duckdb", CHOICE: "auto"}  # role: its --placement
# pure-Spark runs as the fastest exact design of rowstream.dsps.SPARK_DESIGNS
# (bench/spark_designs.py measures them); the other plans' Spark operators are the built-ins
# the cost model knows.
SPARK_BASELINE = "buckets"


@dataclass
class Measured:
    placement: dict[str, str]
    roles: list[str]
    rate: float
    predicted: float | None  # the cost model's capacity, rate / C_u (None: not modelled)
    capacity: float | None = None  # tuples/s
    bound: bool = False  # stopped in the warm-up: capacity is an upper bound
    carried_from: float | None = None  # the lower rate whose capacity stands in for this one
    preloaded: bool = False  # the warm-up went straight into DuckDB
    seconds: float = 0.0  # wall seconds the measurement took
    batches: int = 0  # micro-batches measured (Capacity.batches)
    failed: str | None = None  # the engine's error where the run failed (out of memory)

    @property
    def feasible(self) -> bool:
        return self.capacity is not None and self.capacity >= self.rate


@dataclass
class Point:
    query: str
    rate: float
    plans: list[Measured] = field(default_factory=list)
    probe: bool = False  # a bisection step: one role's plan only

    def role(self, role: str) -> Measured:
        return next(p for p in self.plans if role in p.roles)

    def best(self) -> Measured:
        return max(self.plans, key=lambda p: p.capacity or 0.0)


def plans_at(query: str, rate: float, others: int, profile: str | None = None, rivals: int = 0
             ) -> list[tuple[dict[str, str], list[str], Explanation]]:
    """The distinct placements to measure at ``rate`` and the roles each plays: the roles'
    plans, ``rivals`` plans that Definition 6.1 ranks next after the optimiser's (where the
    choice is a ranking, its nearest rivals are what it must beat) and ``others`` sampled."""
    chosen = {SPARK: explain(query, rate=rate, profile=profile, placement="spark"),
              DUCKDB: explain(query, rate=rate, profile=profile, placement="duckdb"),
              CHOICE: explain(query, rate=rate, profile=profile),
              NO_FEASIBILITY: explain(query, rate=rate, profile=profile, feasibility=False),
              PIPELINED: explain(query, rate=rate, profile=profile, pipelined=True)}
    found: dict[str, tuple[dict[str, str], list[str], Explanation]] = {}
    for role, plan in chosen.items():
        placement = dict(plan.optimization.plan.placement)
        found.setdefault(placement_spec(placement), (placement, [], plan))[1].append(role)
    space = placements(query, "all", rate=rate, profile=profile)
    if rivals:
        choice = placement_spec(dict(chosen[CHOICE].optimization.plan.placement))
        explained = {spec: explain(query, rate=rate, profile=profile, placement=spec)
                     for spec in map(placement_spec, space) if spec != choice}
        by_rank = sorted(explained, key=lambda spec: (rank(explained[spec]), spec))
        for n, spec in enumerate(by_rank[:rivals], start=2):
            plan = explained[spec]
            found.setdefault(spec, (dict(plan.optimization.plan.placement), [], plan)
                             )[1].append(f"rival {n}: {spec}")
    random.Random(f"{query}").shuffle(space)  # the same sample at every rate
    rest = [p for p in space if placement_spec(p) not in found][:others]
    for placement in rest:
        spec = placement_spec(placement)
        found[spec] = (placement, [f"other: {spec}"],
                       explain(query, rate=rate, profile=profile, placement=spec))
    return list(found.values())


def rank(plan: Explanation) -> tuple:
    """The plan's place in Definition 6.1's order, its load overlapped as its crossings go."""
    o = plan.optimization
    return o.objective.rank(o.plan.cost)


def predicted_capacity(plan: Explanation, rate: float) -> float:
    """What the cost model expects: the rate over the wall seconds one second of arrivals
    takes (``Objective.load``: on a calibrated profile, the MIG's two sides overlapped)."""
    o = plan.optimization
    load = o.objective.load(o.plan.cost)
    return rate / load if load else math.inf


def sweep(queries=QUERIES, rates=RATES, *, others: int = 2, rivals: int = 0,
          measure: float = 10.0,
          extend: bool = True, profile: str | None = None, spark_design: str = SPARK_BASELINE,
          on_progress: Callable[[str], None] | None = None,
          on_point: Callable[[list[Point]], None] | None = None,
          lateness: float | None = None, precision: float | None = PRECISION) -> list[Point]:
    """Measure every point; ``on_point`` gets the points so far after each one; ``lateness``
    (default: the catalog's) delays each window's evaluation, not the capacity; ``precision``
    (None: no bisection) how close bisection brings each role's maximum sustainable rate."""
    say = on_progress or (lambda _: None)
    points: list[Point] = []

    def design(roles: list[str]) -> str:
        return spark_design if SPARK in roles else "built-in"

    def predicted(plan: Explanation, roles: list[str], rate: float) -> float | None:
        # The cost model prices Spark's built-in operators, not another pure-Spark design.
        return predicted_capacity(plan, rate) if design(roles) == "built-in" else None

    def measured(plan: Explanation, roles: list[str], rate: float, stream=None) -> Measured:
        m = Measured(dict(plan.optimization.plan.placement), roles, rate,
                     predicted(plan, roles, rate))
        say(f"{plan.query.stem} at {rate:,.0f} tuples/s: {', '.join(roles)}")
        started = time.perf_counter()
        try:
            found: Capacity = capacity(plan, rate, warmup=_warmup(plan),
                                       measure=event_seconds(measure, rate, m.predicted),
                                       stream=stream, spark_design=design(roles),
                                       lateness=lateness)
        except TandemError as error:
            # A plan whose state outgrows the engine's memory at this rate does not keep up
            # with it: the sweep records why and goes on, as for a plan that fell behind.
            m.failed = str(error).split(" (details in")[0]
            say(f"{plan.query.stem} at {rate:,.0f} tuples/s: {', '.join(roles)} failed: "
                f"{m.failed}")
        else:
            m.capacity, m.bound, m.batches = found.tuples_per_second, found.bound, found.batches
            m.preloaded = found.preloaded
        m.seconds = time.perf_counter() - started
        return m

    def add(point: Point) -> None:
        points.append(point)
        if on_point:
            on_point(points)

    for query in queries:
        failed_at: dict[str, Measured] = {}  # placement -> its measurement where it fell short
        schedule = list(rates)
        k = 0
        while k < len(schedule):
            rate = schedule[k]
            point = Point(query, rate)
            plans = plans_at(query, rate, others, profile, rivals)
            warmup = _warmup(plans[0][2])
            stream = None
            turn = k % len(plans)
            for placement, roles, plan in plans[turn:] + plans[:turn]:
                spec = placement_spec(placement)
                if spec in failed_at:
                    earlier = failed_at[spec]
                    m = Measured(placement, roles, rate, predicted(plan, roles, rate),
                                 earlier.capacity, earlier.bound,
                                 earlier.carried_from or earlier.rate, failed=earlier.failed)
                else:
                    if stream is None and preloadable(plan) and rate * warmup <= SHARED_ROWS:
                        stream = list(warmup_stream(rate, warmup))
                    m = measured(plan, roles, rate, stream)
                    if not m.feasible:
                        failed_at[spec] = m
                point.plans.append(m)
            point.plans.sort(key=lambda p: [r in p.roles for r in ROLES], reverse=True)
            add(point)
            k += 1
            if (extend and k == len(schedule) and any(p.feasible for p in point.plans)
                    and rate * 2 <= MAX_RATE):
                schedule.append(rate * 2)
        while precision and (steps := [
                (role, math.sqrt(lo * hi)) for role in BISECTED
                for lo, hi in [bracket([p for p in points if p.query == query], role)]
                if lo and hi and hi / lo > precision]):
            for role, rate in steps:  # one step per role in turn: the roles interleave
                rate = float(round(rate, -2))
                plan = explain(query, rate=rate, profile=profile, placement=BISECTED[role])
                add(Point(query, rate, [measured(plan, [role], rate)], probe=True))
    return points


def bracket(points: list[Point], role: str) -> tuple[float, float | None]:
    """(the largest rate the role's plan kept up with, the smallest rate above it measured
    where it fell behind; None if none)."""
    return rates_bracket([(m.rate, m.feasible) for p in points for m in p.plans
                          if role in m.roles and m.capacity is not None
                          and m.carried_from is None])


def rates_bracket(tried: list[tuple[float, bool]]) -> tuple[float, float | None]:
    """From ``(rate, kept up)`` pairs: (the largest rate kept up with, 0 if none; the smallest
    rate above it fallen behind at, None if none)."""
    lo = max((rate for rate, kept in tried if kept), default=0.0)
    return lo, min((rate for rate, kept in tried if not kept and rate > lo), default=None)


def bracket_text(bracket: tuple[float, float | None] | list | None) -> str:
    """A ``rates_bracket`` as reports write it: "lo (hi)", "lo (none fell behind)", or "–"."""
    if not bracket:
        return "–"
    lo, hi = bracket
    return f"{lo:,.0f} ({'none fell behind' if hi is None else f'{hi:,.0f}'})"


def next_rate(tried: list[tuple[float, float, bool]], precision: float = PRECISION,
              most: float = 2.0) -> float | None:
    """The next rate at which to measure a system whose runs are too long for a grid (a peer's
    two full runs per rate), from its ``(rate, capacity, kept up)`` so far; None once the
    largest rate it kept up with and the smallest above it where it fell behind are within
    ``precision``. Until both are known, a step goes to the last capacity measured, at least
    ``precision`` and at most ``most`` times away: a capacity that changes little with the rate
    is bracketed in two or three steps. Then bisection, at the geometric middle."""
    lo, hi = rates_bracket([(rate, kept) for rate, _, kept in tried])
    if lo and hi:
        return None if hi / lo <= precision else _three_figures(math.sqrt(lo * hi))
    rate, found, _ = tried[-1]
    if lo:  # kept up at every rate so far
        return _three_figures(min(max(found, rate * precision), rate * most))
    return _three_figures(max(min(found, rate / precision), rate / most))


def _three_figures(rate: float) -> float:
    return float(round(rate, 2 - math.floor(math.log10(rate))))


def _warmup(plan: Explanation) -> float:
    """Event seconds that fill the plan's longest window."""
    return max(w.size for w in windows(plan.optimization.logical.root))


# -- what the figures say ---------------------------------------------------------------------

def max_rate(points: list[Point], role: str) -> float:
    """The largest rate at which the role's plan kept up (0 if at none), bisection's included."""
    return max((m.rate for p in points for m in p.plans if role in m.roles and m.feasible),
               default=0.0)


def grid(points: list[Point]) -> list[Point]:
    """The points that measured every plan at their rate (not bisection's steps)."""
    return [p for p in points if not p.probe]


def accuracy(points: list[Point]) -> float:
    """Share of points where the optimiser's plan is within 10 % of the best measured one."""
    good = [_near_best(p) for p in grid(points)]
    return sum(good) / len(good) if good else 0.0


def ranked_points(points: list[Point]) -> tuple[int, int]:
    """(accurate, all) over the points where more than one plan kept up: there the choice is a
    ranking of feasible plans, not the one plan that keeps up."""
    ranked = [p for p in grid(points) if sum(m.feasible for m in p.plans) > 1]
    return sum(map(_near_best, ranked)), len(ranked)


def _near_best(point: Point) -> bool:
    chosen = point.role(CHOICE).capacity
    return chosen is not None and chosen >= NEAR_BEST * (point.best().capacity or 0.0)


def prediction_share(points: list[Point], factor: float = 1.5) -> tuple[int, int]:
    """(within ``factor``, all) over the measured (plan, rate) points."""
    pairs = [(m.predicted, m.capacity) for _, m in predictions(points)]
    within = sum(1 for predicted, got in pairs if max(predicted / got, got / predicted) <= factor)
    return within, len(pairs)


def predictions(points: list[Point]) -> list[tuple[Point, Measured]]:
    """The measurements a prediction can be held against: measured at their rate (not carried,
    not bounds) of plans the cost model prices."""
    return [(p, m) for p in points for m in p.plans
            if m.capacity and m.predicted and m.carried_from is None and not m.bound]


def summary(points: list[Point]) -> dict:
    """bench.json: the newest run's figures for scripts."""
    queries = sorted({p.query for p in points}, key=QUERIES.index)
    out = {"points": [], "queries": {}, "overall": {}}
    for p in points:
        out["points"].append({
            "query": p.query, "rate": p.rate, "probe": p.probe,
            "choice": None if p.probe else p.role(CHOICE).placement,
            "plans": [asdict(m) | {"feasible": m.feasible} for m in p.plans]})
    for q in queries:
        mine = [p for p in points if p.query == q]
        rates = {role: max_rate(mine, role) for role in ROLES}
        out["queries"][q] = {
            "max_rate": rates,
            "ratio_vs_spark": _ratio(rates[CHOICE], rates[SPARK]),
            "ratio_vs_duckdb": _ratio(rates[CHOICE], rates[DUCKDB])}
        for name, role in (("spark", SPARK), ("duckdb", DUCKDB)):
            rate, ours, theirs = _capacities(mine, role)
            out["queries"][q][f"capacity_ratio_vs_{name}"] = _ratio(ours, theirs)
            out["queries"][q][f"capacity_ratio_rate_vs_{name}"] = rate
    within, total = prediction_share(points)
    accurate, ranked = ranked_points(points)
    out["overall"] = {"optimizer_accuracy": accuracy(points),
                      "optimizer_accuracy_ranked": accurate / ranked if ranked else None,
                      "ranked_points": ranked,
                      "prediction_within_1_5x": within / total if total else None,
                      "prediction_points": total}
    return out


def points_from(data: dict) -> list[Point]:
    """The points of a bench.json (``summary``), to write its report again."""
    fields = set(Measured.__dataclass_fields__)
    return [Point(p["query"], p["rate"], [Measured(**{k: v for k, v in m.items() if k in fields})
                                          for m in p["plans"]], p.get("probe", False))
            for p in data["points"]]


def _capacities(points: list[Point], role: str) -> tuple[float, float, float]:
    """(rate, the optimiser's capacity, the role's) at the highest rate where both were
    measured, neither carried from a lower rate nor a bound: their ratio at equal load, which a
    doubling grid of rates does not blur."""
    for p in reversed(grid(points)):
        a, b = p.role(CHOICE), p.role(role)
        if all(m.capacity and m.carried_from is None and not m.bound for m in (a, b)):
            return p.rate, a.capacity, b.capacity
    return 0.0, 0.0, 0.0


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None

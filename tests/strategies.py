"""Random logical plans, statistics and unit costs for property tests of the search."""

from __future__ import annotations

import math

from hypothesis import strategies as st
from sqlglot import exp

from optimizer.catalog import Catalog, Stream
from optimizer.cost import Objective
from optimizer.logical import AggCall, Aggregate, Join, Node, Project, Select, Window
from optimizer.profile import Profile, load_profile

COLUMNS = ("ts", "k", "v", "window_start", "window_end")
DEFAULT = load_profile()


def _tree(draw, n: int, streams: int) -> Node:
    """A tree with exactly n R2R operators over windows of the given streams."""
    if n == 0:
        size = draw(st.integers(1, 600))
        return Window(COLUMNS, stream=f"s{draw(st.integers(0, streams - 1))}", time_column="ts",
                      size=float(size), slide_seconds=1.0)
    kind = draw(st.sampled_from(["select", "project", "aggregate", "join", "join"]))
    if kind == "join":
        left = draw(st.integers(0, n - 1))
        l, r = _tree(draw, left, streams), _tree(draw, n - 1 - left, streams)
        columns = l.columns + tuple(c for c in r.columns if c not in l.columns)
        keyed = draw(st.integers(0, 4)) > 0  # mostly equi-joins, sometimes theta joins
        return Join(columns, left=l, right=r, keys=(("k", "k"),) if keyed else (),
                    condition=None if keyed else exp.condition("v > 1"))
    child = _tree(draw, n - 1, streams)
    if kind == "select":
        return Select(child.columns, input=child,
                      predicate=exp.condition(f"v > {draw(st.integers(0, 4))}"))
    if kind == "project":
        return Project(child.columns, input=child,
                       expressions=tuple((c, exp.column(c)) for c in child.columns))
    func = draw(st.sampled_from(["COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN"]))
    return Aggregate(("k", "window_end", "v"), input=child, group_by=("k", "window_end"),
                     aggregates=(AggCall("v", func, exp.column("v")),))


@st.composite
def search_problems(draw, max_operators: int = 14):
    streams = draw(st.integers(1, 3))
    catalog = Catalog(
        streams={f"s{i}": Stream(f"s{i}", "ts", {"ts": "TIMESTAMP", "k": "INTEGER", "v": "DOUBLE"},
                                 draw(st.floats(10, 50_000)),
                                 {frozenset({"k"}): float(draw(st.integers(1, 5000)))})
                 for i in range(streams)},
        selectivity={f"v > {i}": draw(st.floats(0.01, 1.0)) for i in range(5)})
    scale = {}
    for engine, functions in DEFAULT.functions.items():
        scale[engine] = {f: {k: v * 10 ** draw(st.floats(-1.5, 1.5)) for k, v in coefs.items()}
                         for f, coefs in functions.items()}
    profile = Profile("random", 1.0, scale, "<random>")
    root = _tree(draw, draw(st.integers(1, max_operators)), streams)
    budget = draw(st.one_of(st.none(), st.floats(1e5, 1e10)))
    objective = Objective(feasibility=draw(st.booleans()), memory_budget=budget,
                          time_shared=draw(st.booleans()), overlap=draw(st.floats(0.0, 1.0)),
                          overlap_reference=draw(st.one_of(st.none(), st.floats(0.0, 1.0))))
    return catalog, profile, root, objective


def close(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        x == y if isinstance(x, int) else math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
        for x, y in zip(a, b, strict=True))

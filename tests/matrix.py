"""The integration tests' placement matrices, reduced to their equivalence classes.

A placement's class is what decides which code runs it (docs/design.md, Contracts):

* the gateway: the rows cross whole to the driver, or a DB-op runs on duckdb-partitioned inside
  Spark's executors, or Spark aggregates them there for a split aggregate, or, where every
  operator over the stream runs in the driver's DuckDB, no row crosses and DuckDB reads a
  landing directory's files by reference (over a landing directory the plan's Spark state also
  picks Spark's own file source or the Python source, so the class below decides it too);
* whether Spark keeps window state before the MIG (a stateful Spark operator below a crossing);
* the engine of the root: Spark, the driver's DuckDB or DuckDB in the executors.

Two placements of one class run the same gateway, the same MIG paths and the same root; they
differ in which DB-op SQL runs, which ``tests/test_reference.py`` checks for every placement
without Spark. ``make test`` runs one placement per class, spreading the classes over the
queries; ``make test-matrices`` (``TANDEM_FULL_MATRICES=1``) runs every placement of the sample
(and ``tests/test_search.py`` checks J5 against its exhaustive enumeration everywhere).
"""

from __future__ import annotations

import os
from collections import Counter

from benchmarking.verify import placements
from optimizer.cost import SPLIT
from optimizer.deployment import deploy
from rowstream.by_reference import reads_no_rows
from runtime.explain import explain

FULL = os.environ.get("TANDEM_FULL_MATRICES") == "1"


def spec(placement: dict[str, str]) -> str:
    return ",".join(f"{op}={engine}" for op, engine in placement.items())


def placement_class(query: str, placement: str) -> tuple[str, bool, str]:
    """(gateway, Spark state before the MIG, root engine) of ``query`` under ``placement``."""
    deployment = deploy(explain(query, placement=placement).optimization.plan)
    physical = deployment.physical
    return ("partitioned" if any(s.partitioned for s in deployment.steps)
            else SPLIT if SPLIT in physical.placement.values()
            else "reference" if reads_no_rows(deployment) else "whole",
            any(node.instantiated for node in deployment.crossings),
            physical.engine_of(physical.logical.root))


def matrix(queries: tuple[str, ...], sample: str = "8") -> list[tuple[str, str]]:
    """(query, placement) pairs: ``sample`` placements of each query (``tandem verify``'s
    sample, which holds the uniform plans and the optimiser's), or one per class of them."""
    return reduced([(q, spec(p)) for q in queries for p in placements(q, sample)])


def reduced(cases: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``cases``, or one (query, placement) of each class among them."""
    if FULL:
        return cases
    classes: dict[tuple, list[tuple[str, str]]] = {}
    for query, placement in cases:
        classes.setdefault(placement_class(query, placement), []).append((query, placement))
    # Each class's representative is a placement of the query least used so far: every query
    # keeps some of its classes.
    used: Counter[str] = Counter()
    picked = []
    for members in classes.values():
        query, placement = min(members, key=lambda c: used[c[0]])
        used[query] += 1
        picked.append((query, placement))
    return picked

"""`tandem explain`: optimise a query and describe the chosen plan (the CLI, the Airflow operators
and the plugin all build on ``explain``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from columnar.fragment_sql import Fragment, fragments
from optimizer import Optimization, load_catalog, load_profile, optimize
from optimizer.cost import FILES_PER_BATCH
from optimizer.errors import TandemError
from optimizer.logical import post_order
from runtime import settings
from runtime.quality import Quality, stated

MEMORY_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
                "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(text: str) -> float:
    """``2GB``, ``512MiB`` or a plain number of bytes."""
    raw = text.strip().upper().replace(" ", "")
    digits = raw.rstrip("KMGTIB")
    unit = raw[len(digits):]
    try:
        value = float(digits)
    except ValueError:
        raise TandemError(f"--memory-budget {text!r}: write a size such as 2GB or 512MiB") from None
    if unit not in MEMORY_UNITS or value <= 0:
        raise TandemError(f"--memory-budget {text!r}: write a size such as 2GB or 512MiB")
    return value * MEMORY_UNITS[unit]


@dataclass(frozen=True)
class Explanation:
    query: Path
    catalog: Path
    profile: Path
    optimization: Optimization
    fragments: list[Fragment]
    quality: Quality = Quality()  # the result quality the query states (runtime/quality.py)

    def to_json(self) -> dict:
        o = self.optimization
        plan = o.plan
        return {
            "query": str(self.query),
            "catalog": str(self.catalog),
            "profile": str(self.profile),
            "rate": o.rate,
            "placement": plan.placement,
            "operators": [
                {"id": op.id, "kind": op.kind, "engine": op.engine, "members": list(op.members),
                 "inputs": list(op.inputs), "lambda_in": op.lambda_in, "lambda_out": op.lambda_out,
                 "u": op.u, "memory_bytes": op.memory}
                for op in plan.operators],
            "logical_operators": [
                {"id": o.logical.ids[n], "kind": n.kind, "description": n.describe(),
                 "inputs": [o.logical.ids[c] for c in n.inputs],
                 "engine": plan.placement.get(o.logical.ids[n], "spark")}
                for n in post_order(o.logical.root)],
            "bottleneck_cost": plan.cost.bottleneck,
            "utilization_cost": plan.cost.utilization,
            # Wall seconds per second of arrivals (Objective.load) and the MIG's two sides.
            "load": o.objective.load(plan.cost),
            "job_cost": plan.cost.arrival,
            "evaluation_cost": plan.cost.evaluation,
            "overlap": o.objective.sigma if o.objective.time_shared else None,
            "feasible": o.feasible,
            # How the stream reaches the DB-ops from landed files: "reference" (DuckDB reads
            # each micro-batch's files, rowstream/by_reference.py) or "value" (Spark's rows).
            "crossing": "reference" if plan.by_reference else "value",
            "files_per_batch": o.model.files_per_batch if plan.by_reference else None,
            "feasibility_check": o.objective.feasibility,
            "memory_bytes": plan.cost.memory,
            "memory_budget": o.objective.memory_budget,
            "r2r_operators": len(o.logical),
            "subplans": o.subplans,
            "plans_examined": {"pruned": o.plans_examined, "exhaustive": o.exhaustive_examined},
            "exhaustive_agrees": (None if o.exhaustive_placement is None
                                  else o.exhaustive_placement == plan.placement),
            "phase_one_ms": o.phase_one_ms,
            "phase_two_ms": o.phase_two_ms,
            "optimization_ms": o.optimization_ms,
            "duckdb_sql": {f.id: f.sql for f in self.fragments},
            "quality": self.quality.to_json(),
        }


def explain(query: str, *, rate: float | None = None, catalog: str | None = None,
            profile: str | None = None, memory_budget: str | None = None,
            placement: str = "auto", exhaustive: bool = False, feasibility: bool = True,
            decompose: bool = True, pipelined: bool = False,
            file_format: str | None = None, statistics: dict | None = None,
            files_per_batch: int = FILES_PER_BATCH) -> Explanation:
    """``pipelined``: judge feasibility by the busiest operator (C_b, Ji's assumption) even if
    the profile says the operators share the machine's cores. ``file_format``: the streams land
    as files of that format (default: the catalog's), which prices the gateway;
    ``files_per_batch``: the most of them a micro-batch by reference takes.
    ``statistics``: selectivities and distinct counts observed, over the catalog's
    (``Catalog.with_statistics``)."""
    query_file = settings.query_path(query)
    catalog_file = settings.catalog_path(query_file, catalog)
    profile_file = settings.profile_path(profile)
    budget = parse_bytes(memory_budget) if memory_budget else None
    unit_costs = load_profile(profile_file)
    if pipelined:
        unit_costs = replace(unit_costs, time_shared=False)
    streams = load_catalog(catalog_file)
    if file_format:
        streams = streams.with_file_format(file_format)
    if statistics:
        streams = streams.with_statistics(statistics)
    result = optimize(query_file.read_text(), streams, unit_costs,
                      rate, placement=placement, feasibility=feasibility, memory_budget=budget,
                      exhaustive_check=exhaustive, files_per_batch=files_per_batch,
                      **({} if decompose else {"decompose_above": None}))
    return Explanation(query_file, catalog_file, profile_file, result, fragments(result.plan),
                       stated(query_file, catalog_file))

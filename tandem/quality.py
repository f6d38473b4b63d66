"""Data checks on a query's results, run by the ``validate`` operator after a run.

A check is a function from the rows (Arrow) to the problems it finds. The built-in checks need
nothing but the rows; Great Expectations suites (the reliability issue) plug in as checks of the
same shape, so the operators and DAGs do not change when they arrive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from columnar.store import ColumnarStore, schema_name
from optimizer.errors import TandemError

Check = Callable[[pa.Table], list[str]]


class MissingResults(TandemError):
    pass


def window_end_present(rows: pa.Table) -> list[str]:
    if "window_end" not in rows.column_names:
        return ["the rows have no window_end column"]
    nulls = rows.column("window_end").null_count
    return [f"{nulls} rows have no window_end"] if nulls else []


def no_duplicate_rows(rows: pa.Table) -> list[str]:
    """A result row is written once per (query, micro-batch): a duplicate means a replay added
    rows again."""
    frame = pl.from_arrow(rows)
    duplicates = frame.height - frame.unique().height
    return [f"{duplicates} rows appear more than once"] if duplicates else []


BUILT_IN: tuple[Check, ...] = (window_end_present, no_duplicate_rows)


@dataclass(frozen=True)
class Validation:
    table: str
    rows: int
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems


def validate(query: str, store: str | Path, checks: Sequence[Check] = BUILT_IN) -> Validation:
    """Run ``checks`` over the results of ``query`` in the DuckDB file ``store``."""
    name = Path(query).stem
    table = f"{schema_name(name)}.results"
    if not Path(store).is_file():
        raise MissingResults(f"no DuckDB file at {store}: run {name} first")
    columnar = ColumnarStore(store)
    try:
        if not columnar.has_results(name):
            raise MissingResults(f"{table} not found in {store}: run {name} first")
        rows = columnar.results(name)
    finally:
        columnar.close()
    return Validation(table, rows.num_rows,
                      [problem for check in checks for problem in check(rows)])

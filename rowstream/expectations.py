"""What valid data is, written once as Great Expectations expectations: the input suite that
every landed file must meet and the results suite that every result table must meet.

The suites are plain data here, so that the hot path does not import Great Expectations: the
landing source enforces the input suite inside every micro-batch with vectorised polars checks
derived from it (``violations``), and ``runtime.validation`` builds the real suites from the same
list and runs them with Great Expectations in the DAG and in ``tandem validate``. A failing row
goes to the quarantine with the ``rule`` of the first expectation it fails, in suite order: the
expectation's name and column, such as ``expect_column_values_to_be_unique(id)``.

The input suite of a stream is built from its catalog entry (``input_suite``). It runs over one
landed file at a time, as it landed (``rowstream/landing.py``): ``fields`` (how many fields the
line has), ``raw_<field>`` (each field's text, null when empty), the parsed stream columns (null
where the text does not parse) and, for a column that may be missing, ``unparsed_<field>`` (the
text that did not parse). "Within a batch" means
within a file: a micro-batch reads whole files, so the verdict on a row does not depend on how
files are grouped into micro-batches.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from workload.schema import StreamSchema

# A landed frame's columns beside the stream's (rowstream/landing.py): how many fields a line
# has, each field's text, and a nullable column's text where it did not parse.
FIELD_COUNT = "fields"


def raw(field: str) -> str:
    return f"raw_{field}"


def unparsed(field: str) -> str:
    return f"unparsed_{field}"


@dataclass(frozen=True)
class Expectation:
    """One Great Expectations expectation: its snake-case name, its arguments (a value may be
    ``{"$PARAMETER": name}``, resolved per file) and the quarantine's reason for a row that fails
    it: ``{}`` stands for the row's ``shown`` column, ``{name}`` for a suite parameter."""

    type: str
    kwargs: tuple[tuple[str, object], ...]
    reason: str = ""
    shown: str | None = None

    @property
    def arguments(self) -> dict:
        return dict(self.kwargs)

    @property
    def rule(self) -> str:
        args = self.arguments
        return f"{self.type}({args.get('column') or ', '.join(args.get('column_list', ()))})"


def expect(type_: str, reason: str = "", shown: str | None = None, **kwargs) -> Expectation:
    return Expectation(f"expect_{type_}", tuple(kwargs.items()), reason, shown)


def _parameter(name: str) -> dict:
    return {"$PARAMETER": name}


# The largest finite value of each float type: a range's open end (REAL's is a float32's).
FLOAT_MAX = {"DOUBLE": sys.float_info.max, "REAL": float(np.finfo(np.float32).max)}
_KIND = {"BIGINT": "an integer", "INTEGER": "an integer", "SMALLINT": "an integer",
         "DOUBLE": "a number", "REAL": "a number", "BOOLEAN": "true or false",
         "TIMESTAMP": "a Unix time in seconds"}


@functools.cache  # every landed file is judged by it, once per stream in a process
def input_suite(schema: StreamSchema) -> tuple[Expectation, ...]:
    """The input suite of a stream (its catalog entry's ``expect``, ``optimizer/catalog.py``),
    in the order its checks apply: the line's shape; the values that must be there; every value
    parses as its column's type; sets; ranges; the event time near the file's median; and
    uniqueness within the file. A row's time is never optional."""
    types, field = schema.types, schema.field_of
    e = schema.expect
    required = {*e.not_null, schema.time_column}
    suite = [expect("column_values_to_be_in_set",
                    f"expected {len(types)} comma-separated fields, found {{}}", FIELD_COUNT,
                    column=FIELD_COUNT, value_set=[len(types)])]
    suite += [expect("column_values_to_not_be_null", f"{field[c]} is missing", column=raw(field[c]))
              for c in types if c in required]
    # A field that is there but does not parse is null once parsed (NaN counts as null, as in
    # pandas); a column that may be missing keeps the text that did not parse apart.
    suite += [expect("column_values_to_not_be_null", f"{field[c]} {{}} is not {_KIND[t]}",
                     raw(field[c]), column=c) if c in required else
              expect("column_values_to_be_null", f"{field[c]} {{}} is not {_KIND[t]}",
                     unparsed(field[c]), column=unparsed(field[c]))
              for c, t in types.items() if t != "VARCHAR"]
    suite += [expect("column_values_to_be_in_set",
                     f"{field[c]} {{}} is not one of {', '.join(map(str, values))}",
                     raw(field[c]), column=c, value_set=list(values)) for c, values in e.sets]
    for c, low, high in e.ranges:
        if types[c] in FLOAT_MAX:  # a range of numbers holds no infinity
            low = -FLOAT_MAX[types[c]] if low is None else low
            high = FLOAT_MAX[types[c]] if high is None else high
        suite.append(expect("column_values_to_be_between", f"{field[c]} {{}} {_outside(low, high)}",
                            raw(field[c]), column=c, min_value=low, max_value=high))
    time = field[schema.time_column]
    suite.append(expect(
        "column_values_to_be_between",
        f"{time} {{}} lies more than {{distance}} s from the file's median event time {{median}}",
        raw(time), column=schema.time_column, min_value=_parameter("ts_min"),
        max_value=_parameter("ts_max")))
    for columns in e.unique:
        names = " and ".join(field[c] for c in columns)
        suite.append(
            expect("column_values_to_be_unique", f"{names} {{}} appears more than once in the file",
                   raw(field[columns[0]]), column=columns[0]) if len(columns) == 1 else
            expect("compound_columns_to_be_unique",
                   f"{names} repeat those of another row of the file", column_list=list(columns)))
    return tuple(suite)


def _outside(low: float | None, high: float | None) -> str:
    """Why a value fails a range, in words. A float range's open end is its type's largest
    value, which only an infinity passes."""
    big = min(FLOAT_MAX.values())
    finite_low, finite_high = low is not None and low > -big, high is not None and high < big
    if finite_low and finite_high:
        return f"lies outside [{low:g}, {high:g}]"
    if finite_low:
        return f"is below {low:g}" + (" or infinite" if high is not None else "")
    if finite_high:
        return f"is above {high:g}" + (" or infinite" if low is not None else "")
    return "is infinite"


def input_parameters(frame: pl.DataFrame, schema: StreamSchema) -> dict:
    """The suite parameters of one landed file: its event times' median ± the stream's
    ``time_distance``."""
    median = frame.get_column(schema.time_column).drop_nulls().sort()
    return parameters_at(median[(len(median) - 1) // 2] if len(median) else None, schema)


def parameters_at(median: datetime | None, schema: StreamSchema) -> dict:
    """The suite parameters of a file whose lower median event time is ``median`` (None: it has
    no event time)."""
    middle = median or datetime(1970, 1, 1)
    span = timedelta(seconds=schema.time_distance)
    return {"ts_min": middle - span, "ts_max": middle + span, "median": middle,
            "distance": f"{schema.time_distance:g}"}


def results_suite(keys: tuple[str, ...] | None, counts: tuple[str, ...]) -> tuple[Expectation, ...]:
    """The results suite of a query whose rows are unique on ``keys`` (``optimizer.keys``):
    no NULL key, one row per group and window_end, no negative count."""
    keys = keys or ("window_end",)
    return (*(expect("column_values_to_not_be_null", column=k) for k in keys),
            *([expect("compound_columns_to_be_unique", column_list=list(keys))]
              if len(keys) > 1 else [expect("column_values_to_be_unique", column=keys[0])]),
            *(expect("column_values_to_be_between", column=c, min_value=0) for c in counts))


def violations(frame: pl.DataFrame, suite: tuple[Expectation, ...], parameters: dict) -> pl.Expr:
    """Each row's first failed expectation (its ``rule``; null for a row that meets them all),
    as a polars expression over ``frame``: the suite's vectorised twin, which must flag the rows
    Great Expectations flags (``tests/test_expectations.py`` compares them)."""
    rule = pl.lit(None, pl.String)
    for e in reversed(suite):
        rule = pl.when(_failed(e, frame.schema, parameters)).then(pl.lit(e.rule)).otherwise(rule)
    return rule


def verdicts(frame: pl.DataFrame, suite: tuple[Expectation, ...], parameters: dict,
             rule: pl.Series | None = None) -> pl.DataFrame:
    """``frame`` with each row's ``rule`` (by ``violations``, unless Great Expectations gave
    it) and ``reason``. Reasons are formatted for the failing rows only: formatting one per
    row and expectation would cost ten times the checks."""
    frame = frame.with_columns(violations(frame, suite, parameters).alias("rule")
                               if rule is None else rule.alias("rule"))
    failing = frame.select(pl.arg_where(pl.col("rule").is_not_null())).to_series()
    reason = pl.Series("reason", [None] * frame.height, pl.String)
    if len(failing):
        why = frame[failing].select(reasons(suite, parameters, pl.col("rule"))).to_series()
        reason = reason.scatter(failing, why)
    return frame.with_columns(reason)


def reasons(suite: tuple[Expectation, ...], parameters: dict, rule: pl.Expr) -> pl.Expr:
    """The quarantine's reason for each row, given the ``rule`` it failed (null for none)."""
    reason = pl.lit(None, pl.String)
    for e in suite:
        template = e.reason.replace("{}", "\0").format_map(
            {k: str(v) for k, v in parameters.items()}).replace("\0", "{}")
        why = pl.format(template, pl.col(e.shown)) if "{}" in template else pl.lit(template)
        reason = pl.when(rule == e.rule).then(why).otherwise(reason)
    return reason


def _failed(e: Expectation, schema: pl.Schema, parameters: dict) -> pl.Expr:
    """Great Expectations' semantics in polars: column-map expectations skip null values (and
    pandas counts NaN as null)."""
    args = {k: parameters[v["$PARAMETER"]] if isinstance(v, dict) else v
            for k, v in e.arguments.items()}
    if "column_list" in args:
        # Rows whose columns are all null are skipped (``ignore_row_if``'s default).
        present = pl.any_horizontal(pl.col(c).is_not_null() for c in args["column_list"])
        return present & pl.struct(args["column_list"]).is_duplicated()
    column = pl.col(args["column"])
    missing = column.is_null()
    if schema[args["column"]].is_float():
        missing = missing | column.is_nan()
    if e.type == "expect_column_values_to_not_be_null":
        return missing
    if e.type == "expect_column_values_to_be_null":
        return ~missing
    if e.type == "expect_column_values_to_be_in_set":
        return ~missing & ~column.is_in(args["value_set"])
    if e.type == "expect_column_values_to_be_between":
        low, high = args.get("min_value"), args.get("max_value")
        inside = pl.lit(True)
        if low is not None:
            inside = inside & (column >= low)
        if high is not None:
            inside = inside & (column <= high)
        return ~missing & ~inside
    if e.type == "expect_column_values_to_be_unique":
        return ~missing & column.is_duplicated()
    raise NotImplementedError(f"no vectorised check for {e.type}: add one to rowstream/"
                              "expectations.py")

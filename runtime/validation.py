"""Great Expectations over landed files and result tables: the suites of
``rowstream/expectations.py`` run by Great Expectations itself, in the micro-batch DAG and in
``tandem validate``.

* ``validate_landed`` runs the input suite over each landed file not validated yet, before Spark
  reads it. A failing row goes to the landing quarantine (``tandem_log.quarantine``) with the
  name of the first expectation it fails; the runs' own gateway quarantines the same rows with
  the same names, by the suite's vectorised twin.
* ``validate_results`` runs the results suite over a query's result table.

Every expectation's outcome is kept in ``tandem_log.validations`` (the Tandem page shows it).
Great Expectations takes about 0.9 s per 100,000 rows here, too slow for a 1-second micro-batch:
``bench/validation_overhead.py`` measures both paths.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa

from columnar.store import ColumnarStore, schema_name
from optimizer.catalog import Catalog
from optimizer.errors import TandemError
from rowstream.expectations import (
    Expectation,
    input_parameters,
    input_suite,
    results_suite,
    verdicts,
)
from rowstream.gateway import Quarantined, quarantined_rows
from rowstream.landing import EXTRA, landed_files, landed_frame, unreadable
from workload.schema import StreamSchema

INPUT_SUITE, RESULTS_SUITE = "tandem_input", "tandem_results"
VALIDATIONS = "validations"  # a table of the store's tandem_log


class MissingResults(TandemError):
    pass


@dataclass(frozen=True)
class Outcome:
    """One expectation's verdict on one frame."""

    rule: str
    checked: int
    failed: list[int]  # row positions

    @property
    def success(self) -> bool:
        return not self.failed


@dataclass(frozen=True)
class FileValidation:
    file: str
    rows: int
    quarantined: Quarantined


@dataclass(frozen=True)
class ResultsValidation:
    table: str
    rows: int
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems


@functools.cache
def _context():
    """One ephemeral Great Expectations context per process, with a pandas data source whose
    batches are whole DataFrames."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    for name in ("great_expectations", "py.warnings"):
        logging.getLogger(name).setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batches = (context.data_sources.add_pandas("tandem").add_dataframe_asset("frame")
               .add_batch_definition_whole_dataframe("whole"))
    return gx, batches


def gx_suite(name: str, suite: tuple[Expectation, ...]):
    """The Great Expectations suite of ``suite``'s expectations."""
    gx, _ = _context()
    camel = {e.type: "".join(w.title() for w in e.type.split("_")) for e in suite}
    return gx.ExpectationSuite(name=name, expectations=[
        getattr(gx.expectations, camel[e.type])(**e.arguments) for e in suite])


def run_suite(name: str, suite: tuple[Expectation, ...], frame: pl.DataFrame,
              parameters: dict | None = None) -> list[Outcome]:
    """Validate ``frame`` with Great Expectations; one outcome per expectation, in suite order."""
    _, batches = _context()
    batch = batches.get_batch(batch_parameters={"dataframe": _pandas(frame)})
    result = batch.validate(gx_suite(name, suite), expectation_parameters=parameters or {},
                            result_format={"result_format": "COMPLETE"})
    # Great Expectations reports in an order of its own: match results to the suite by rule.
    by_rule = {}
    for r in result.results:
        config = r.expectation_config
        columns = config.kwargs.get("column") or ", ".join(config.kwargs.get("column_list", ()))
        by_rule[f"{config.type}({columns})"] = r
    outcomes = []
    for e in suite:
        r = by_rule[e.rule]
        if r.exception_info.get("raised_exception"):
            raise TandemError(f"Great Expectations could not check {e.rule}: "
                              f"{r.exception_info.get('exception_message')}")
        outcomes.append(Outcome(e.rule, r.result.get("element_count", frame.height),
                                list(r.result.get("unexpected_index_list") or [])))
    return outcomes


def _pandas(frame: pl.DataFrame) -> pd.DataFrame:
    """pandas with nullable integers (a float64 column would round large ids) and microsecond
    timestamps (nanoseconds end in 2262)."""
    nullable = {pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype(),
                pa.int16(): pd.Int16Dtype(), pa.bool_(): pd.BooleanDtype()}
    return frame.to_arrow().to_pandas(types_mapper=nullable.get,
                                      coerce_temporal_nanoseconds=False)


def first_failures(outcomes: list[Outcome], rows: int) -> pl.Series:
    """Each row's first failed expectation, in suite order (null for none)."""
    rule: list[str | None] = [None] * rows
    for outcome in reversed(outcomes):
        for i in outcome.failed:
            rule[i] = outcome.rule
    return pl.Series("rule", rule, pl.String)


def validate_file(path: Path, schema: StreamSchema) -> tuple[pl.DataFrame, list[Outcome]]:
    """The input suite of ``schema``'s stream over one landed file: its rows with ``rule`` and
    ``reason`` (null for a good row), as the gateway gives them, and each expectation's
    outcome."""
    try:
        frame = landed_frame(path, schema)
    except Exception as err:
        rows = unreadable(path, err, schema)
        return rows, [Outcome(rows["rule"][0], 1, [0])]
    parameters = input_parameters(frame, schema)
    suite = input_suite(schema)
    outcomes = run_suite(INPUT_SUITE, suite, frame,
                         {k: parameters[k] for k in ("ts_min", "ts_max")})
    rows = verdicts(frame, suite, parameters, first_failures(outcomes, frame.height))
    return rows.select(*schema.names, *EXTRA), outcomes


def landing_stream(catalog: Catalog, directory: Path, stream: str | None = None) -> StreamSchema:
    """The stream whose files land in ``directory``: the one named, else the catalog's stream
    whose ``landing`` it is, else the one stream that names no landing of its own (it lands in
    the deployment's, ``TANDEM_LANDING``)."""
    if stream is not None:
        if (found := catalog.stream(stream)) is None:
            raise TandemError(f"--stream {stream}: {catalog.source} has no such stream; give one "
                              f"of {', '.join(catalog.streams)}")
        return StreamSchema.of(found)
    streams = list(catalog.streams.values())
    candidates = ([s for s in streams if s.landing and Path(s.landing).resolve() == directory]
                  or [s for s in streams if not s.landing])
    if len(candidates) != 1:
        raise TandemError(f"{directory} is no stream's landing in {catalog.source}: name the "
                          f"stream with --stream (one of {', '.join(catalog.streams)})")
    return StreamSchema.of(candidates[0])


def validate_landed(directory: str | Path, store: str | Path, *, catalog: str | None = None,
                    stream: str | None = None, query: str | None = None, again: bool = False,
                    on_file=None) -> list[FileValidation]:
    """Validate the files in ``directory`` that were not validated yet (all with ``again``) by
    the input suite of their stream: ``stream``, else the stream ``query`` reads, else
    ``landing_stream``'s. Their failing rows go to ``tandem_log.quarantine``, every outcome to
    ``tandem_log.validations``."""
    from optimizer import load_catalog
    from runtime import settings

    directory = Path(directory).resolve()
    if not directory.is_dir():
        raise TandemError(f"--landing {directory}: no such directory")
    if query and stream is None:
        schema = StreamSchema.of(settings.query_stream(query, catalog))
    else:
        schema = landing_stream(load_catalog(settings.catalog_path(given=catalog)), directory,
                                stream)
    with ColumnarStore(store) as columnar:
        done = set() if again else columnar.logged_targets(VALIDATIONS, INPUT_SUITE)
        files = [directory / f for f in landed_files(directory)
                 if str(directory / f) not in done]
        report = []
        for path in files:
            rows, outcomes = validate_file(path, schema)
            bad = rows.filter(pl.col("rule").is_not_null())
            columnar.quarantine(quarantined_rows(schema, bad.to_arrow()), target=str(path))
            _log(columnar, INPUT_SUITE, str(path), outcomes)
            report.append(FileValidation(path.name, rows.height,
                                         Quarantined.of(bad.select("rule").to_arrow())))
            if on_file:
                on_file(report[-1])
        return report


def validate_results(query: str, store: str | Path, *, name: str | None = None,
                     catalog: str | None = None) -> ResultsValidation:
    """The results suite over the result table of ``query`` (of its runs called ``name``, by
    default the query's own name): its keys come from the query's logical plan."""
    from optimizer import load_catalog
    from optimizer.frontend import parse_query
    from optimizer.keys import count_columns, result_keys
    from runtime import settings

    query_file = settings.query_path(query)
    root = parse_query(query_file.read_text(),
                       load_catalog(settings.catalog_path(query_file, catalog)))
    suite = results_suite(result_keys(root), count_columns(root))
    name = name or query_file.stem
    table = f"{schema_name(name)}.results"
    if not Path(store).is_file():
        raise MissingResults(f"no DuckDB file at {store}: run {name} first")
    with ColumnarStore(store) as columnar:
        if not columnar.has_results(name):
            raise MissingResults(f"{table} not found in {store}: run {name} first")
        rows = pl.from_arrow(columnar.results(name))
        outcomes = run_suite(RESULTS_SUITE, suite, rows)
        _log(columnar, RESULTS_SUITE, table, outcomes)
    return ResultsValidation(table, rows.height, [f"{len(o.failed):,} rows fail {o.rule}"
                                                  for o in outcomes if not o.success])


def _log(columnar: ColumnarStore, suite: str, target: str, outcomes: list[Outcome]) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    columnar.replace_logged(VALIDATIONS, target, pa.Table.from_pylist([
        {"validated_at": now, "suite": suite, "target": target, "expectation": o.rule,
         "checked": o.checked, "unexpected": len(o.failed), "success": o.success}
        for o in outcomes]))

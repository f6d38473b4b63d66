"""Airflow operators: thin wrappers that call the library (optimise, run, micro-batch, validate,
clean up) and return what it returns as JSON for XCom. DAG files in dags/ only declare.

The library finds its state through ``runtime.settings`` (``TANDEM_STATE``, ``TANDEM_LANDING``),
and the queries, catalog and profile relative to the working directory, which ``make airflow``
sets to this repository."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from airflow.sdk import BaseOperator

from airflow_tandem.server import DUCKDB_POOL
from runtime import settings


class StoreOperator(BaseOperator):
    """An operator that opens Tandem's DuckDB file. DuckDB lets one process at a time open the
    file for writing (and none read while it does), so such tasks share a pool of one slot."""

    def __init__(self, **kwargs):
        kwargs.setdefault("pool", DUCKDB_POOL)
        super().__init__(**kwargs)


def lateness_param():
    """The DAGs' form field for the allowed lateness (``tandem run --lateness``)."""
    from airflow.sdk import Param

    return Param(None, type=["null", "number"], minimum=0,
                 description="Allowed lateness, seconds: later readings go to the quarantine "
                             "(empty: the catalog's, 5 s).")


def quality_params() -> dict:
    """The DAGs' form fields for the result quality (``tandem run --max-error --confidence
    --min-recall --disorder``): empty keeps what the query states."""
    from airflow.sdk import Param

    from kslack.manager import POLICIES

    return {
        "max_error": Param(None, type=["null", "number"], minimum=0, maximum=1,
                           description="The result quality: a relative error of at most this "
                                       "(0.01: 1 %); K is sized to meet it (empty: the "
                                       "query's)."),
        "confidence": Param(None, type=["null", "number"], minimum=0, maximum=1,
                            description="With max_error: the probability of meeting it "
                                        "(empty: the query's, else 0.95)."),
        "min_recall": Param(None, type=["null", "number"], minimum=0, maximum=1,
                            description="The result quality of a join between streams: a "
                                        "recall of at least this, instead of max_error "
                                        "(empty: the query's)."),
        "disorder": Param(None, type=["null", "string"], enum=[None, *POLICIES],
                          description="How K is sized: fixed, none, max, am or pd (empty: am "
                                      "where a quality is stated, else fixed)."),
    }


def landing_asset(landing: Path):
    """The Asset a producer updates when files have landed in ``landing``: ``tandem_landing``
    for the default landing directory (docs/operations.md), else named by its URI."""
    from airflow.sdk import Asset

    resolved = Path(landing).resolve()
    if resolved == settings.landing_dir().resolve():
        return Asset(name="tandem_landing", uri=f"file://{resolved}")
    return Asset(uri=f"file://{resolved}")


def _number(value) -> float | None:
    """A templated number arrives as text unless the DAG renders native objects."""
    return None if value in (None, "", "None") else float(value)


class OptimizeOperator(BaseOperator):
    """Optimise a query; the plan (``tandem explain --json``) goes to XCom."""

    template_fields = ("query", "placement", "rate", "source")

    def __init__(self, *, query: str, placement: str = "auto", rate: float | str | None = None,
                 source: str = "generator", **kwargs):
        super().__init__(**kwargs)
        self.query, self.placement, self.rate, self.source = query, placement, rate, source

    def execute(self, context) -> dict:
        from runtime.explain import explain
        from runtime.run import landing_format

        return explain(self.query, rate=_number(self.rate), placement=self.placement,
                       file_format=landing_format(self.source or "generator")).to_json()


class RunQueryOperator(StoreOperator):
    """Run a query over ``source``: the generator for a bounded time, its rate stepping as
    ``steps`` says (``SECOND:RATE,...``), or a landing directory up to the files there (``tandem
    run --source``). With ``plan_task_id`` it runs the placement that task chose (the plan the
    UI shows is the plan that runs); ``adaptive`` migrates it live when the observed rate calls
    for another plan (``tandem run --adaptive``, over the generator); ``together`` names more
    queries over the same landing directory, run with this one at ``placement``
    (``tandem run q1 q3 q5``), and it returns their summaries under ``queries``."""

    template_fields = ("query", "placement", "rate", "duration", "batch", "lateness", "adaptive",
                       "steps", "source", "max_error", "confidence", "min_recall", "disorder",
                       "together")

    def __init__(self, *, query: str, placement: str = "auto", rate: float | str = 1000.0,
                 duration: float | str = 60.0, batch: float | str | None = None,
                 lateness: float | str | None = None, plan_task_id: str | None = None,
                 adaptive: bool | str = False, steps: str = "", source: str = "generator",
                 max_error: float | str | None = None, confidence: float | str | None = None,
                 disorder: str | None = None, min_recall: float | str | None = None,
                 together: list[str] | str = (), **kwargs):
        super().__init__(**kwargs)
        self.query, self.placement, self.rate = query, placement, rate
        self.duration, self.batch, self.plan_task_id = duration, batch, plan_task_id
        self.lateness, self.adaptive, self.steps = lateness, adaptive, steps
        self.source = source
        self.max_error, self.confidence, self.disorder = max_error, confidence, disorder
        self.min_recall, self.together = min_recall, together

    def execute(self, context) -> dict:
        from runtime.migration import run_adaptive
        from runtime.run import run, run_together
        from runtime.spec import RunSpec
        from workload.smart_plugs import parse_steps

        together = tuple(self.together.split() if isinstance(self.together, str)
                         else self.together or ())
        placement = self.placement
        if self.plan_task_id and not together:
            plan = context["ti"].xcom_pull(task_ids=self.plan_task_id)
            placement = ",".join(f"{op}={engine}" for op, engine in plan["placement"].items())
        spec = RunSpec(self.query, placement=placement or "auto", rate=_number(self.rate),
                       duration=_number(self.duration), batch=_number(self.batch),
                       lateness=_number(self.lateness), store=settings.store_path(),
                       steps=parse_steps(self.steps or ""), source=self.source or "generator",
                       max_error=_number(self.max_error), confidence=_number(self.confidence),
                       min_recall=_number(self.min_recall),
                       disorder=None if self.disorder in (None, "", "None") else self.disorder,
                       together=together)
        if together:  # the same library function as `tandem run q1 q3 q5`
            return {"queries": [s.to_json() for s in run_together(spec)]}
        if str(self.adaptive).lower() in ("true", "1"):
            adapted = run_adaptive(spec.query, placement=spec.placement, rate=spec.rate,
                                   duration=spec.duration, batch=spec.batch,
                                   lateness=spec.lateness, store=spec.store, steps=spec.steps,
                                   source=spec.source)
            return {**adapted.combined().to_json(),
                    "migrations": [m.to_json() for m in adapted.migrations]}
        return run(spec).to_json()


class SummaryOperator(BaseOperator):
    """Log a run's summary in words and pass it on."""

    def __init__(self, *, run_task_id: str, **kwargs):
        super().__init__(**kwargs)
        self.run_task_id = run_task_id

    def execute(self, context) -> dict:
        from runtime.run import describe

        summary = context["ti"].xcom_pull(task_ids=self.run_task_id)
        for each in summary.get("queries", [summary]):  # several queries run together
            self.log.info("%s", describe(each))
        return summary


class MicroBatchOperator(StoreOperator):
    """Run a query over the files that landed since its last micro-batch run (availableNow)."""

    template_fields = ("query", "lateness", "landing")

    def __init__(self, *, query: str, lateness: float | str | None = None,
                 landing: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.query, self.lateness, self.landing = query, lateness, landing

    def execute(self, context) -> dict:
        from runtime.microbatch import run_microbatch

        summary = run_microbatch(self.query, self.landing or settings.landing_dir(),
                                 checkpoints=settings.checkpoints_dir(),
                                 store=settings.store_path(), lateness=_number(self.lateness))
        self.log.info("%s: %d new files, %d tuples, %d result rows into %s, %d quarantined "
                      "(%d late)", summary.query, len(summary.files), summary.tuples,
                      summary.result_rows, summary.results_table, summary.quarantined.total,
                      summary.quarantined.late)
        return summary.to_json()


class ValidateLandingOperator(StoreOperator):
    """Great Expectations' input suite over the files that landed since the last validation,
    before Spark reads them; failing rows go to the landing quarantine (``runtime.validation``).
    The task succeeds with bad rows quarantined: they are accounted for, not lost. The suite
    is that of the stream ``query`` reads (else ``runtime.validation.landing_stream``'s)."""

    template_fields = ("landing",)

    def __init__(self, *, landing: str | None = None, query: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.landing, self.query = landing, query

    def execute(self, context) -> dict:
        from runtime.validation import validate_landed

        report = validate_landed(self.landing or settings.landing_dir(), settings.store_path(),
                                 query=self.query)
        for f in report:
            self.log.info("%s: %d rows, %d quarantined %s", f.file, f.rows,
                          f.quarantined.total, dict(f.quarantined.rules) or "")
        return {"files": len(report), "rows": sum(f.rows for f in report),
                "quarantined": sum(f.quarantined.total for f in report)}


class ValidateOperator(StoreOperator):
    """Great Expectations' results suite over a query's results; the task fails on a problem."""

    template_fields = ("query",)

    def __init__(self, *, query: str, microbatch: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.query, self.microbatch = query, microbatch

    def execute(self, context) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from optimizer.errors import TandemError
        from runtime.microbatch import microbatch_name
        from runtime.validation import MissingResults, validate_results

        name = microbatch_name(self.query) if self.microbatch else self.query
        try:
            result = validate_results(self.query, settings.store_path(), name=name)
        except MissingResults as missing:
            if self.microbatch:  # no file has landed yet: nothing to check
                raise AirflowSkipException(str(missing)) from None
            raise
        if not result.passed:
            raise TandemError(f"{result.table}: " + "; ".join(result.problems))
        return {"table": result.table, "rows": result.rows}


class CleanupOperator(StoreOperator):
    """The nightly clean-up (``runtime.cleanup``); the report goes to XCom."""

    def __init__(self, *, queries: list[str], retention_days: float = 1.0, keep_batches: int = 10,
                 landing: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.queries, self.retention_days, self.keep_batches = queries, retention_days, keep_batches
        self.landing = landing

    def execute(self, context) -> dict:
        from runtime.cleanup import cleanup

        report = cleanup(self.queries, retention=timedelta(days=self.retention_days),
                         keep_batches=self.keep_batches,
                         landing=Path(self.landing) if self.landing else None)
        self.log.info("reclaimed %d rows and %d bytes; archived %d files; plans: %s",
                      report.rows_reclaimed, report.bytes_reclaimed, len(report.archived),
                      report.plans)
        return report.to_json()

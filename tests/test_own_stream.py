"""A user's own stream, end to end, with no code of Tandem's changed: a catalog and a query in a
folder outside the repository (``TANDEM_QUERIES``) declare air-quality readings that share no
column, type or key with the smart plugs, and their files land in the catalog's landing
directory with bad rows among them. ``explain``, ``run``, ``verify``, ``validate``, the
micro-batch DAG and the page's overview all work; every placement gives the reference's rows;
the bad rows go to the quarantine by the stream's own expectations. The repository's A1 and A2
over the example air stream give the reference's rows too."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarking.verify import landed_truth, verify
from columnar.store import ColumnarStore
from rowstream.landing import landed_files
from runtime.explain import explain
from runtime.run import run, stream_schema
from runtime.spec import RunSpec
from runtime.validation import validate_landed
from tests.test_reference import assert_same_rows
from tests.test_streams import planted_file
from workload.air_quality import AirQuality
from workload.schema import write_files

pytestmark = pytest.mark.integration

CATALOG = """
[streams.sensors]
time_column = "observed_at"
rate = 2
columns = { station = "VARCHAR", observed_at = "TIMESTAMP", pm25 = "REAL", humidity = "SMALLINT", indoor = "BOOLEAN" }
key = ["station"]
landing = "landing"

[streams.sensors.expect]
not_null = ["station", "observed_at", "pm25", "indoor"]
range.pm25 = { min = 0, max = 1000 }
range.humidity = { min = 0, max = 100 }
unique = [["station", "observed_at"]]
"""
QUERY = """-- Outdoor stations over 10 minutes, every minute: particles, the readings above
-- 35 µg/m³ (an integer SUM: a BIGINT in both engines) and humidity where it was measured.
SELECT station, window_end, AVG(pm25) AS mean_pm25, MAX(pm25) AS peak_pm25, COUNT(*) AS n,
       SUM(CASE WHEN pm25 > 35 THEN 1 ELSE 0 END) AS polluted, AVG(humidity) AS humidity
FROM HOP(sensors, observed_at, INTERVAL '1' MINUTE, INTERVAL '10' MINUTES)
WHERE NOT indoor
GROUP BY station, window_end
"""


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """The user's folder (catalog, query, landing directory) and the planted rules by origin."""
    mine = tmp_path_factory.mktemp("mine")
    (mine / "catalog.toml").write_text(CATALOG)
    (mine / "readings.sql").write_text(QUERY)
    landing = mine / "landing"
    landing.mkdir()
    first, rules = planted_file(landing, "parquet")  # the first ten minutes, bad rows in them
    schema = stream_schema(explain(str(mine / "readings.sql")))
    later = AirQuality(rate=2)
    write_files(schema, ((f"air-{n}", later.between(600 * (n - 1), 600 * n)) for n in (2, 3)),
                landing, "parquet")
    # The last file as pandas writes numbers, 64 bits wide: both gateways narrow them.
    third = pq.read_table(landing / "air-3.parquet")
    pq.write_table(third.set_column(2, "pm25", third["pm25"].cast(pa.float64()))
                   .set_column(3, "humidity", third["humidity"].cast(pa.int64())),
                   landing / "air-3.parquet")
    assert landed_files(landing) == [first.name, "air-2.parquet", "air-3.parquet"]
    return mine, {f"{first.name}:row {n}": rule for n, rule in rules.items()}


@pytest.fixture
def configured(own, monkeypatch):
    mine, _ = own
    monkeypatch.setenv("TANDEM_QUERIES", str(mine))
    return mine


def reference(mine) -> pl.DataFrame:
    explanation = explain("readings")
    schema = stream_schema(explanation)
    truth, last_end = landed_truth([(str(mine / "landing"), schema, 5.0)], explanation)
    root = explanation.optimization.logical.root
    return truth.result(root).filter(pl.col("window_end") <= last_end)


def test_a_run_reads_the_catalog_s_landing_and_quarantines_by_the_stream_s_rules(
        own, configured, tmp_path):
    _, rules = own
    summary = run(RunSpec("readings", store=tmp_path / "t.duckdb",
                          checkpoint=tmp_path / "checkpoint"))
    # Spark's own file source plans the batches: DuckDB reads them where the plan runs every
    # operator over the stream in DuckDB, else Spark reads the rows.
    by_reference = explain("readings").optimization.plan.by_reference
    assert summary.gateway == ("reference" if by_reference else "native")
    with ColumnarStore(tmp_path / "t.duckdb") as store:
        got = pl.from_arrow(store.results("readings"))
        quarantined = store.con.sql("SELECT origin, rule, stream, row FROM tandem_log.quarantine "
                                    "WHERE query = 'readings'").fetchall()
    assert {o: r for o, r, _, _ in quarantined} == rules
    assert {s for _, _, s, _ in quarantined} == {"sensors"}
    assert all(set(json.loads(row)) == {"station", "observed_at", "pm25", "humidity", "indoor"}
               for *_, row in quarantined)
    want = reference(configured)
    assert want.height > 0
    assert_same_rows(got.select(want.columns), want)


def test_every_placement_gives_the_reference_s_rows(configured):
    outcomes = verify("readings", "3")
    assert len(outcomes) >= 3 and {o.status for o in outcomes} == {"same"}, \
        [o.detail for o in outcomes if o.status != "same"]


def test_great_expectations_quarantines_the_same_rows(own, configured, tmp_path):
    _, rules = own
    report = validate_landed(configured / "landing", tmp_path / "v.duckdb")
    assert sum(f.quarantined.total for f in report) == len(rules)
    with ColumnarStore(tmp_path / "v.duckdb") as store:
        found = dict(store.con.sql("SELECT origin, rule FROM tandem_log.quarantine").fetchall())
    assert found == rules


def test_the_micro_batch_dag_and_the_page_serve_the_user_s_query(
        own, airflow_state, tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tandem import inspection
    from runtime.microbatch import microbatch_name
    from tests.conftest import ROOT

    mine, rules = own
    landing = tmp_path / "landing"
    shutil.copytree(mine / "landing", landing)
    (tmp_path / "tandem.toml").write_text(
        f'[tandem]\nqueries = "{mine}"\n\n[schedule.readings]\nlanding = "{landing}"\n')
    monkeypatch.chdir(tmp_path)
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["tandem_microbatch_readings"]
    run_ = dag.test()
    assert run_.state == "success"
    checked = run_.get_task_instance("validate_landing").xcom_pull(task_ids="validate_landing")
    assert checked["files"] == 3 and checked["quarantined"] == len(rules)
    want = reference(mine)
    with ColumnarStore(airflow_state / "tandem.duckdb", read_only=True) as store:
        got = pl.from_arrow(store.results(microbatch_name("readings")))
    assert_same_rows(got.select(want.columns), want)
    assert "readings" in inspection.queries()
    page = inspection.overview("readings")
    assert page.db_ops and "sensors" in page.sql


def test_the_repository_s_air_queries_give_the_reference_s_rows(tmp_path):
    """A1 and A2 over the example air stream, each under the optimiser's plan (the user's query
    above runs their constructs under every placement)."""
    AirQuality(rate=2).write_files(tmp_path / "landing", 2700, 900)
    for query in ("a1", "a2"):
        explanation = explain(query)
        truth, last_end = landed_truth(
            [(str(tmp_path / "landing"), stream_schema(explanation), 5.0)], explanation)
        run(RunSpec(query, source=str(tmp_path / "landing"), store=tmp_path / "a.duckdb",
                    checkpoint=tmp_path / query), explanation=explanation)
        want = truth.result(explanation.optimization.logical.root).filter(
            pl.col("window_end") <= last_end)
        with ColumnarStore(tmp_path / "a.duckdb") as store:
            got = pl.from_arrow(store.results(query))
        assert want.height > 0
        assert_same_rows(got.select(want.columns), want)

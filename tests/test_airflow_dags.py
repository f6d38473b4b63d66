"""The DAGs import, and each runs end to end with ``dag.test()`` on the real engines; the
micro-batch DAG's results over two landed files equal the reference evaluator's rows."""

from __future__ import annotations

import shutil
from datetime import timedelta

import polars as pl
import pytest

from benchmarking import reference
from columnar.store import ColumnarStore, schema_name
from optimizer import optimize
from runtime import settings
from runtime.cleanup import cleanup
from runtime.microbatch import microbatch_name, run_microbatch
from runtime.settings import SCHEDULED
from tests.conftest import QUERIES, ROOT, query_sql
from tests.test_reference import assert_same_rows
from workload.smart_plugs import SmartPlugs

pytestmark = pytest.mark.integration

# As in test_run: six plugs at 3 tuples/s; each landed file holds 400 s of event time.
TOPOLOGY = dict(houses=2, households_per_house=2, plugs=6)
RATE, FILE_SECONDS = 3, 400


@pytest.fixture
def state(airflow_state):
    return airflow_state


@pytest.fixture(scope="module")
def landed_files(tmp_path_factory):
    """Four consecutive files of the smart-plug stream, and the stream itself."""
    plugs = SmartPlugs(rate=RATE, **TOPOLOGY)
    files = plugs.write_files(tmp_path_factory.mktemp("staging"), 4 * FILE_SECONDS, FILE_SECONDS)
    return files, pl.from_arrow(plugs.between(0, 4 * FILE_SECONDS))


def reference_rows(stream: pl.DataFrame, query: str, catalog, profile, files: int):
    """The reference's rows for the windows that the first ``files`` files complete: up to their
    watermark, the last event less the catalog's allowed lateness."""
    last = stream.filter(pl.col("ts") < stream["ts"].min() + timedelta(seconds=files * FILE_SECONDS))
    root = optimize(query_sql(query), catalog, profile).logical.root
    want = reference.Evaluator({"plugs": last}).result(root)
    lateness = timedelta(seconds=catalog.streams["plugs"].lateness)
    return root, want.filter(pl.col("window_end") <= last["ts"].max() - lateness)


def results(store, query: str) -> pl.DataFrame:
    with ColumnarStore(store) as columnar:
        return pl.from_arrow(columnar.results(microbatch_name(query)))


def test_the_dags_import_without_errors(dags):
    assert dags.import_errors == {}
    assert {"tandem_query", "tandem_microbatch_q1", "tandem_microbatch_q2",
            "tandem_nightly_cleanup"} <= set(dags.dags)
    form = dags.dags["tandem_query"].params
    assert form["query"] == "q1" and set(form.get_param("query").schema["enum"]) == {
        p.stem for p in QUERIES.glob("*.sql")}


def test_tandem_query_runs_optimise_run_summary(dags, state, catalog, profile):
    run = dags.dags["tandem_query"].test(
        run_conf={"query": "q5", "placement": "auto", "rate": 20, "duration": 330, "batch": 30})
    assert run.state == "success"
    plan = run.get_task_instance("optimise").xcom_pull(task_ids="optimise")
    summary = run.get_task_instance("summary").xcom_pull(task_ids="summary")
    assert summary["placement"] == plan["placement"]  # the plan shown is the plan that ran
    # The generator's default topology, as the DAG runs it.
    stream = pl.from_arrow(SmartPlugs(rate=20).between(0, 330))
    root = optimize(query_sql("q5"), catalog, profile).logical.root
    want = reference.Evaluator({"plugs": stream}).result(root)
    columnar = ColumnarStore(state / "tandem.duckdb")
    got = pl.from_arrow(columnar.results("q5"))
    runs = columnar.recent("runs", "q5")
    columnar.close()
    assert summary["tuples"] == 20 * 330 and summary["result_rows"] == want.height
    assert_same_rows(got.select(root.columns), want)
    assert runs[0]["tuples"] == summary["tuples"]


def test_tandem_query_reads_a_landing_directory_given_as_its_source(
        dags, state, landed_files, catalog, profile):
    files, stream = landed_files
    source = state / "drop"
    source.mkdir()
    for file in files[:2]:
        shutil.copy2(file, source / file.name)
    run = dags.dags["tandem_query"].test(
        run_conf={"query": "q5", "placement": "auto", "source": str(source)})
    assert run.state == "success"
    summary = run.get_task_instance("summary").xcom_pull(task_ids="summary")
    assert summary["tuples"] == sum(len(f.read_text().splitlines()) - 1 for f in files[:2])
    root, want = reference_rows(stream, "q5", catalog, profile, files=2)
    with ColumnarStore(state / "tandem.duckdb", read_only=True) as columnar:
        got = pl.from_arrow(columnar.results("q5"))
    assert want.height > 0
    assert_same_rows(got.select(root.columns), want)
    # Several queries in one run, as `tandem run q5 q1` runs them: one read of the files.
    run = dags.dags["tandem_query"].test(
        run_conf={"query": "q5", "together": ["q1"], "placement": "duckdb",
                  "source": str(source)})
    assert run.state == "success"
    summaries = run.get_task_instance("summary").xcom_pull(task_ids="summary")["queries"]
    assert [s["query"] for s in summaries] == ["q5", "q1"]
    for query in ("q5", "q1"):
        root, want = reference_rows(stream, query, catalog, profile, files=2)
        with ColumnarStore(state / "tandem.duckdb", read_only=True) as columnar:
            got = pl.from_arrow(columnar.results(query))
        assert want.height > 0
        assert_same_rows(got.select(root.columns), want)


def test_the_documented_dag_template_runs_a_query_of_ones_own(
        state, tmp_path, landed_files, catalog, profile, monkeypatch):
    """docs/templates/my_dag.py with its two paths changed, as a user would: a query outside
    the repository, kept up to date over a landing directory, gives the reference's rows."""
    from airflow.dag_processing.dagbag import DagBag

    files, stream = landed_files
    mine, landing, dags_folder = tmp_path / "queries", tmp_path / "landing", tmp_path / "dags"
    for folder in (mine, landing, dags_folder):
        folder.mkdir()
    shutil.copy(QUERIES / "q5.sql", mine / "hourly_load.sql")
    shutil.copy(QUERIES / "catalog.toml", mine)
    for file in files[:2]:
        shutil.copy2(file, landing / file.name)
    template = (ROOT / "docs" / "templates" / "my_dag.py").read_text()
    changed = (template.replace("/data/tandem/queries/hourly_load.sql", str(mine / "hourly_load.sql"))
               .replace("/data/landing/sensors", str(landing)))
    assert changed.count(str(tmp_path)) == 2
    (dags_folder / "my_dag.py").write_text(changed)
    # dag.test() runs a DAG of the configured DAGs folder (its bundle's path, read at
    # Airflow's import): the user's, here.
    monkeypatch.setattr("airflow.settings.DAGS_FOLDER", str(dags_folder))
    bag = DagBag(dag_folder=str(dags_folder))
    assert bag.import_errors == {} and set(bag.dags) == {"my_hourly_load", "my_hourly_load_once"}
    assert bag.dags["my_hourly_load"].test().state == "success"
    root, want = reference_rows(stream, "q5", catalog, profile, files=2)
    with ColumnarStore(state / "tandem.duckdb", read_only=True) as columnar:
        got = pl.from_arrow(columnar.results(microbatch_name("hourly_load")))
    assert want.height > 0
    assert_same_rows(got.select(root.columns), want)


def test_the_configured_queries_and_schedules_make_the_dags(airflow_home, tmp_path,
                                                             monkeypatch):
    """A user's queries folder outside the repository and the schedules of tandem.toml: a DAG
    per scheduled query over its landing directory on its cron, the clean-up of each landing
    directory, and the triggered run's form offers the folder's queries."""
    from airflow.dag_processing.dagbag import DagBag

    mine, elsewhere = tmp_path / "mine", tmp_path / "elsewhere"
    mine.mkdir()
    shutil.copy(QUERIES / "q3.sql", mine / "hourly.sql")
    shutil.copy(QUERIES / "catalog.toml", mine)
    config = (f'[tandem]\nqueries = "{mine}"\n\n[schedule.hourly]\nlanding = "{elsewhere}"\n'
              'cron = "0 * * * *"\n\n[schedule.q5]\n')
    (tmp_path / "tandem.toml").write_text(config)
    monkeypatch.chdir(tmp_path)
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert {d for d in bag.dags if d.startswith("tandem_microbatch")} == {
        "tandem_microbatch_hourly", "tandem_microbatch_q5"}
    hourly, q5 = bag.dags["tandem_microbatch_hourly"], bag.dags["tandem_microbatch_q5"]
    assert hourly.get_task("microbatch").landing == str(elsewhere)
    assert q5.get_task("microbatch").landing == str(settings.landing_dir())
    assert hourly.timetable.timetable.summary == "0 * * * *"
    assert q5.timetable.timetable.summary == "*/5 * * * *"
    assert {t.landing: t.queries for t in bag.dags["tandem_nightly_cleanup"].tasks} == {
        str(elsewhere): ["hourly"], str(settings.landing_dir()): ["q5"]}
    assert bag.dags["tandem_query"].params.get_param("query").schema["enum"] == ["hourly"]

    (tmp_path / "tandem.toml").write_text(config.replace("0 * * * *", "hourly"))
    refused = DagBag(dag_folder=str(ROOT / "dags")).import_errors
    assert any("cron 'hourly' is not a cron expression" in e for e in refused.values())


def test_tandem_microbatch_over_two_landed_files_gives_the_reference_rows(
        dags, state, landed_files, catalog, profile):
    files, stream = landed_files
    landing = state / "landing"
    landing.mkdir(parents=True)
    for n, file in enumerate(files[:2], start=1):
        shutil.copy2(file, landing / file.name)
        for k, query in enumerate(SCHEDULED):
            run = dags.dags[f"tandem_microbatch_{query}"].test()
            assert run.state == "success"
            # Great Expectations validated the file before Spark read it, once: the first
            # query's DAG did, the second's finds it validated. Nothing to quarantine.
            checked = run.get_task_instance("validate_landing").xcom_pull(
                task_ids="validate_landing")
            rows = len(file.read_text().splitlines()) - 1
            assert checked == ({"files": 1, "rows": rows, "quarantined": 0} if k == 0
                               else {"files": 0, "rows": 0, "quarantined": 0})
            read = run.get_task_instance("microbatch").xcom_pull(task_ids="microbatch")
            assert read["files"] == [file.name]
            root, want = reference_rows(stream, query, catalog, profile, files=n)
            assert_same_rows(results(state / "tandem.duckdb", query).select(root.columns), want)
    # No new file: the runs read nothing, and the results stay as they are.
    for query in SCHEDULED:
        run = dags.dags[f"tandem_microbatch_{query}"].test()
        assert run.state == "success"
        assert run.get_task_instance("microbatch").xcom_pull(task_ids="microbatch")["files"] == []
        root, want = reference_rows(stream, query, catalog, profile, files=2)
        assert_same_rows(results(state / "tandem.duckdb", query).select(root.columns), want)
    # ... and the results after each run: every expectation of the results suite held.
    with ColumnarStore(state / "tandem.duckdb", read_only=True) as columnar:
        verdicts = columnar.query("SELECT target, bool_and(success) AS passed, count(*) AS n "
                                  "FROM tandem_log.validations WHERE suite = 'tandem_results' "
                                  "GROUP BY target ORDER BY target")
    assert [(v["target"], v["passed"]) for v in verdicts] == [
        (f"{schema_name(microbatch_name(q))}.results", True) for q in sorted(SCHEDULED)]


def test_overlapping_microbatch_runs_read_each_file_once(state, landed_files, catalog, profile):
    from concurrent.futures import ThreadPoolExecutor

    files, stream = landed_files
    landing = state / "landing"
    landing.mkdir(parents=True)
    for file in files[:2]:
        shutil.copy2(file, landing / file.name)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: run_microbatch(
            "q1", landing, checkpoints=state / "checkpoints", store=state / "tandem.duckdb"),
            range(2)))
    assert sorted(f for r in runs for f in r.files) == [f.name for f in files[:2]]
    root, want = reference_rows(stream, "q1", catalog, profile, files=2)
    assert_same_rows(results(state / "tandem.duckdb", "q1").select(root.columns), want)


def test_nightly_cleanup_reclaims_archives_refreshes_and_keeps_recovery(
        dags, state, landed_files, catalog, profile):
    files, stream = landed_files
    landing, store = state / "landing", state / "tandem.duckdb"
    landing.mkdir(parents=True)
    # Three files, so that the native gateway's checkpoints (a batch per file) have a batch to
    # prune below.
    for file in files[:3]:
        shutil.copy2(file, landing / file.name)
        for query in SCHEDULED:
            run_microbatch(query, landing, checkpoints=state / "checkpoints", store=store)

    run = dags.dags["tandem_nightly_cleanup"].test()
    assert run.state == "success"
    report = run.get_task_instance("cleanup").xcom_pull(task_ids="cleanup")
    # Every run read every file; the last one read stays for a replayed closing batch.
    assert report["archived"] == [f.name for f in files[:2]]
    assert sorted(p.name for p in (landing / "archive").iterdir()) == [f.name for f in files[:2]]
    # Statistics from the archived files: the generator's rate and plugs.
    assert report["statistics"]["rate"] == pytest.approx(RATE, rel=0.02)
    assert report["statistics"]["distinct"]["house_id, household_id, plug_id"] == 6
    assert (state / "catalog.toml").is_file()
    assert [p["query"] for p in report["plans"]] == list(SCHEDULED)
    assert all(p["changed"] and p["reason"] == "first plan logged" for p in report["plans"])

    # A short retention and few batches kept: old results go, and a run still resumes.
    before = {q: results(store, q).height for q in SCHEDULED}
    tight = cleanup(list(SCHEDULED), retention=timedelta(seconds=60), keep_batches=2)
    for query in SCHEDULED:
        kept = results(store, query)
        root, want = reference_rows(stream, query, catalog, profile, files=3)
        cutoff = want["window_end"].max() - timedelta(seconds=60)
        assert_same_rows(kept.select(root.columns), want.filter(pl.col("window_end") >= cutoff))
    assert tight.result_rows == sum(before.values()) - sum(results(store, q).height
                                                           for q in SCHEDULED)
    assert tight.checkpoint_files > 0
    shutil.copy2(files[3], landing / files[3].name)
    for query in SCHEDULED:
        assert run_microbatch(query, landing, checkpoints=state / "checkpoints",
                              store=store).files == [files[3].name]
        root, want = reference_rows(stream, query, catalog, profile, files=4)
        cutoff = reference_rows(stream, query, catalog, profile, files=3)[1]["window_end"].max()
        assert_same_rows(results(store, query).filter(pl.col("window_end") > cutoff)
                         .select(root.columns), want.filter(pl.col("window_end") > cutoff))

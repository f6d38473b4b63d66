"""A real Airflow (API server, scheduler, DAG processor: ``airflow standalone``) on 127.0.0.1:
a run triggered through the REST API with params succeeds, the plugin's endpoints refuse
anonymous callers, and a headless Chromium logs in, opens the Tandem page, reads Q1's plan and
Great Expectations' verdicts, runs a SELECT in the console and is refused a write. Screenshots go to bench/results/ui/."""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.error
import urllib.request

import pytest

from airflow_tandem.server import USER, password, start, stop, token, wait_healthy
from runtime.validation import validate_landed
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

SCREENSHOTS = ROOT / "bench" / "results" / "ui"


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """(base URL, AIRFLOW_HOME) of a standalone Airflow with Tandem's state in a temporary
    directory."""
    home = tmp_path_factory.mktemp("standalone")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = start(home, port, state=home / "state")
    try:
        wait_healthy(port, process)
        yield f"http://127.0.0.1:{port}", home
    finally:
        stop(process)


def call(url: str, bearer: str | None = None, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json",
                 **({"Authorization": f"Bearer {bearer}"} if bearer else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as err:
        return err.code, {"error": err.read().decode(errors="replace")}


@pytest.mark.parametrize("path", ["/tandem/", "/tandem/?query=q1",
                                  "/tandem/console?sql=SELECT%201", "/tandem/api/queries/q1"])
def test_the_plugin_refuses_anonymous_callers(airflow, path):
    base, _ = airflow
    status, _ = call(base + path)
    assert status in (401, 403)


def test_tandem_query_triggered_through_the_rest_api_succeeds(airflow):
    base, home = airflow
    jwt = token(int(base.rsplit(":", 1)[1]), home)
    conf = {"query": "q5", "placement": "duckdb", "rate": 20, "duration": 330, "batch": 30}
    deadline = time.monotonic() + 120
    while call(f"{base}/api/v2/dags/tandem_query/details", jwt)[0] != 200:  # until parsed
        assert time.monotonic() < deadline, "the DAG processor did not parse tandem_query"
        time.sleep(2)
    status, run = call(f"{base}/api/v2/dags/tandem_query/dagRuns", jwt,
                       {"logical_date": None, "conf": conf})
    assert status == 200, run
    run_url = f"{base}/api/v2/dags/tandem_query/dagRuns/{run['dag_run_id']}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state = call(run_url, jwt)[1]["state"]
        if state in ("success", "failed"):
            break
        time.sleep(2)
    assert state == "success"
    status, xcom = call(f"{run_url}/taskInstances/summary/xcomEntries/return_value", jwt)
    summary = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    assert summary["tuples"] == 20 * 330
    assert set(summary["placement"].values()) == {"duckdb"}
    # The plugin shows the run.
    status, shown = call(f"{base}/tandem/api/queries/q5", jwt)
    assert status == 200 and shown["runs"][0]["tuples"] == 20 * 330


def test_a_browser_logs_in_reads_the_plan_and_uses_the_console(airflow):
    from playwright.sync_api import sync_playwright

    base, home = airflow
    chromium = shutil.which("chromium")
    assert chromium, "install Debian's chromium (apt-get install chromium): .ci/run does"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(base + "/")
            page.locator("input[name=username]").fill(USER)
            page.locator("input[name=password]").fill(password(home))
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(base + "/")
            # The navigation's Tandem entry shows the plugin's page in a frame.
            navigation = page.get_by_test_id("nav-sidebar")
            navigation.get_by_role("link", name="Tandem", exact=True).click()
            tandem = page.frame_locator("iframe")
            tandem.locator("#plan").wait_for()
            plan = tandem.locator("#plan")
            assert plan.locator('[data-operator="aggregate_2"] .engine').inner_text().lower() \
                in ("spark", "duckdb")
            engines = {e.lower() for e in plan.locator(".engine").all_inner_texts()}
            # The page draws the plan the plugin explains: every operator's engine, and the
            # stream's windows as the source.
            jwt = token(int(base.rsplit(":", 1)[1]), home)
            explained = call(f"{base}/tandem/api/queries/q1", jwt)[1]["plan"]
            assert engines == {"source", *_placed(explained)}
            page.screenshot(path=SCREENSHOTS / "plan.png", full_page=True)

            # Great Expectations' verdict on a landed file with a bad line, on the page.
            landing = home / "validated"
            landing.mkdir()
            (landing / "plugs-1.csv").write_text("1,1377986401,12.5,2,1,0,0\n"
                                                 "2,1377986401,12.5,1,1,0,0\n")
            validate_landed(landing, home / "state" / "tandem.duckdb")
            # The page itself: each DB-op's DuckDB SQL and its EXPLAIN.
            page.goto(base + "/tandem/?query=q1")
            verdicts = page.locator("#validations")
            assert "plugs-1.csv" in verdicts.inner_text()
            assert "expect_column_values_to_be_in_set(property): 1" in verdicts.inner_text()
            verdicts.screenshot(path=SCREENSHOTS / "validations.png")
            page.locator("details summary").first.click()
            assert "PROJECTION" in page.locator("details pre").first.inner_text().upper()
            page.screenshot(path=SCREENSHOTS / "duckdb-sql.png", full_page=True)
            page.locator("textarea[name=sql]").fill("SELECT 40 + 2 AS answer")
            page.get_by_role("button", name="Run").click()
            assert page.locator("#console table td").first.inner_text() == "42"
            page.screenshot(path=SCREENSHOTS / "console.png", full_page=True)
            page.locator("textarea[name=sql]").fill("DELETE FROM tandem_log.runs")
            page.get_by_role("button", name="Run").click()
            refusal = page.locator("#console .refusal").inner_text()
            assert "read-only" in refusal and "DELETE" in refusal
            page.screenshot(path=SCREENSHOTS / "console-refusal.png", full_page=True)
        finally:
            browser.close()


def _placed(node: dict) -> set[str]:
    """The engines of the operators of an explained plan's tree (the plugin's JSON)."""
    own = set() if node["kind"] == "window" else {node["engine"].lower()}
    return own.union(*(_placed(c) for c in node["inputs"]))

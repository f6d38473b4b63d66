"""Where Tandem finds its queries, catalog and schedules: options, then TANDEM_* variables, then
tandem.toml in the working directory, then the defaults (runtime/settings.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optimizer.errors import TandemError
from runtime import settings
from tests.conftest import QUERIES


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working directory, with no TANDEM_* variable set."""
    for name in ("QUERIES", "CATALOG", "SCHEDULE", "LANDING", "STATE"):
        monkeypatch.delenv(f"TANDEM_{name}", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_queries_folder_comes_from_the_variable_then_tandem_toml_then_queries(here,
                                                                                  monkeypatch):
    assert settings.queries_dir() == settings.REPOSITORY_QUERIES  # no queries/ here
    (here / "queries").mkdir()
    assert settings.queries_dir() == Path("queries")
    (here / "tandem.toml").write_text('[tandem]\nqueries = "from-toml"\n')
    assert settings.queries_dir() == Path("from-toml")
    monkeypatch.setenv("TANDEM_QUERIES", "from-env")
    assert settings.queries_dir() == Path("from-env")


def test_a_query_is_found_in_the_folder_then_in_the_repository(here, monkeypatch):
    mine = here / "mine"
    mine.mkdir()
    shutil.copy(QUERIES / "q3.sql", mine / "hourly.sql")
    shutil.copy(QUERIES / "catalog.toml", mine)
    monkeypatch.setenv("TANDEM_QUERIES", str(mine))
    assert settings.query_names() == ["hourly"]
    assert settings.query_path("hourly") == mine / "hourly.sql"
    assert settings.catalog_path(settings.query_path("hourly")) == mine / "catalog.toml"
    assert settings.query_path("q5") == settings.REPOSITORY_QUERIES / "q5.sql"
    with pytest.raises(TandemError, match=f"'q9' not found: give a .sql file or a name from {mine}"):
        settings.query_path("q9")


def test_schedules_from_the_variable_then_tandem_toml_then_q1_and_q2(here, monkeypatch):
    assert [(s.query, s.landing, s.cron) for s in settings.schedules()] == [
        ("q1", settings.landing_dir(), "*/5 * * * *"), ("q2", settings.landing_dir(), "*/5 * * * *")]
    (here / "tandem.toml").write_text('[schedule.q4]\nlanding = "in"\ncron = "@hourly"\n'
                                      '[schedule.q6]\nlanding = "in"\n')
    assert [(s.query, s.landing, s.cron) for s in settings.schedules()] == [
        ("q4", Path("in"), "@hourly"), ("q6", Path("in"), "*/5 * * * *")]
    assert settings.scheduled_by_landing() == {Path("in"): ["q4", "q6"]}
    # The variable chooses the queries; a query's table still gives its landing and cron.
    monkeypatch.setenv("TANDEM_SCHEDULE", "q4, q5")
    assert [(s.query, s.landing, s.cron) for s in settings.schedules()] == [
        ("q4", Path("in"), "@hourly"), ("q5", settings.landing_dir(), "*/5 * * * *")]


@pytest.mark.parametrize("config, refusal", [
    ('[schedule.q1]\nevery = "5m"\n', r"\[schedule.q1\] takes landing and cron only"),
    ('[schedule.q1]\ncron = "5m"\n', "cron '5m' is not a cron expression"),
    ("[schedule.q9]\n", "'q9' not found"),
    ("[tandem\n", "tandem.toml is not valid TOML"),
])
def test_a_wrong_configuration_is_refused_in_one_line(here, config, refusal):
    (here / "tandem.toml").write_text(config)
    with pytest.raises(TandemError, match=refusal):
        settings.schedules()

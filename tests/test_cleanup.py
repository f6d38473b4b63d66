"""The parts of the micro-batch runs and the nightly clean-up that need no Spark: reading how far
a checkpoint has come, pruning its logs, archiving what every run has read, and the statistics
observed in landed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.tomlfile import read_toml
from rowstream.landing import last_file_read
from runtime import settings
from runtime.cleanup import (
    CleanupReport,
    _changes,
    archive_landed,
    observe,
    prune_checkpoint,
    refreshed_catalog,
)
from runtime.microbatch import pending_files
from tests.conftest import QUERIES
from workload.smart_plugs import SmartPlugs


def checkpoint_at(path, batches: dict[int, str], committed: int):
    """A Spark checkpoint's offset and commit logs: batch → the last landing file it read."""
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    for batch, after in batches.items():
        (path / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n"
            + json.dumps({"after": after, "closed": False}) + "\n")
        (path / "offsets" / f".{batch}.crc").write_bytes(b"crc")
        if batch <= committed:
            (path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return path


def test_a_checkpoint_has_read_up_to_its_last_committed_batch(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in ("plugs-1.csv", "plugs-2.csv", "plugs-3.csv", "notes.txt"):
        (landing / name).write_text("")
    assert last_file_read(tmp_path / "none") == ""
    checkpoint = checkpoint_at(tmp_path / "q1", {0: "plugs-1.csv", 1: "plugs-2.csv"}, committed=0)
    assert last_file_read(checkpoint) == "plugs-1.csv"  # batch 1 is planned, not committed
    assert pending_files(landing, checkpoint) == ["plugs-2.csv", "plugs-3.csv"]


def test_a_native_checkpoint_has_read_the_files_its_source_log_gives_its_last_batch(tmp_path):
    """Spark's own file source (the native gateway) offsets by its log of files per batch."""
    checkpoint = checkpoint_at(tmp_path / "q1", {0: "", 1: ""}, committed=0)
    for batch in (0, 1):
        (checkpoint / "offsets" / str(batch)).write_text(
            'v1\n{"batchWatermarkMs":0}\n' + json.dumps({"logOffset": batch}) + "\n")
    log = checkpoint / "sources" / "0"
    log.mkdir(parents=True)
    for batch, name in ((0, "plugs-1.csv"), (1, "plugs-2.csv")):
        (log / str(batch)).write_text(
            "v1\n" + json.dumps({"path": f"file:///land/{name}", "batchId": batch}) + "\n")
    assert last_file_read(checkpoint) == "plugs-1.csv"  # batch 1 is planned, not committed


def test_pruning_keeps_the_last_batches_and_at_least_two(tmp_path):
    checkpoint = checkpoint_at(tmp_path / "q1", {b: f"plugs-{b}.csv" for b in range(6)},
                               committed=4)
    report = CleanupReport()
    prune_checkpoint(checkpoint, keep=1, report=report)
    assert sorted(p.name for p in (checkpoint / "offsets").iterdir()) == [
        ".3.crc", ".4.crc", ".5.crc", "3", "4", "5"]
    assert sorted(p.name for p in (checkpoint / "commits").iterdir()) == ["3", "4"]
    assert report.checkpoint_files == 3 * 2 + 3  # offsets and their crc, commits of 0-2
    assert last_file_read(checkpoint) == "plugs-4.csv"


def test_archiving_moves_what_every_run_read_but_the_last(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    for n in range(1, 5):
        (landing / f"plugs-{n}.csv").write_text("")
    q1 = checkpoint_at(tmp_path / "q1", {0: "plugs-3.csv"}, committed=0)
    q2 = checkpoint_at(tmp_path / "q2", {0: "plugs-2.csv"}, committed=0)
    report = CleanupReport()
    archived = archive_landed(landing, [q1, q2], report)
    assert report.archived == ["plugs-1.csv"] and [p.name for p in archived] == ["plugs-1.csv"]
    assert sorted(p.name for p in landing.glob("*.csv")) == [
        "plugs-2.csv", "plugs-3.csv", "plugs-4.csv"]
    assert (landing / "archive" / "plugs-1.csv").is_file()


def test_statistics_observed_in_landed_files(tmp_path):
    files = SmartPlugs(rate=40, houses=2, households_per_house=3, plugs=12).write_files(
        tmp_path, 120, file_seconds=60)
    catalog = read_toml(QUERIES / "catalog.toml", "catalog", "")
    observed = observe(files, catalog, "plugs")
    assert observed["rows"] == 40 * 120
    assert observed["rate"] == pytest.approx(40, rel=0.02)
    assert observed["distinct"]["house_id"] == 2
    assert observed["distinct"]["house_id, household_id"] == 6
    assert observed["distinct"]["house_id, household_id, plug_id"] == 12
    assert observed["selectivity"]["property = 1"] == pytest.approx(0.5, abs=0.01)
    assert "value > 0.9 * max_load" not in observed["selectivity"]  # needs the query's MAX
    refreshed = refreshed_catalog(catalog, observed, "plugs", QUERIES / "catalog.toml")
    assert refreshed["streams"]["plugs"]["rate"] == observed["rate"]
    assert refreshed["selectivity"]["value > 0.9 * max_load"] == 0.1  # the estimate stays
    assert catalog["streams"]["plugs"]["rate"] == 4250  # the catalog read is left alone
    reason = _changes({"rate": 4250, "distinct": {"house_id": 40}}, observed)
    assert "rate 4250 → 40" in reason and "distinct(house_id) 40 → 2" in reason


def test_the_observed_catalog_stands_in_only_for_the_catalog_it_refreshes(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_STATE", str(tmp_path / "state"))
    q1 = settings.query_path("q1")
    shipped = settings.catalog_path(q1)
    observed = tmp_path / "state" / settings.OBSERVED_CATALOG
    observed.parent.mkdir()
    observed.write_text(f'{settings.REFRESHED_FROM} = "{shipped.resolve()}"\n')
    assert settings.catalog_path(q1) == observed
    mine = tmp_path / "mine" / "q.sql"
    mine.parent.mkdir()
    mine.write_text(q1.read_text())
    (mine.parent / "catalog.toml").write_text((QUERIES / "catalog.toml").read_text())
    assert settings.catalog_path(mine) == mine.parent / "catalog.toml"
    assert settings.catalog_path(q1, given="other.toml") == Path("other.toml")

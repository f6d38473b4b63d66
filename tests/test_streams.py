"""Streams are data: a catalog entry is all a stream needs (docs/design.md, Gateway). The example
streams' entries match what their generators write; an entry that cannot hold is refused in one
line; and the input suite built from the air-quality entry (a VARCHAR key, a REAL, a SMALLINT
that may be missing, a BOOLEAN, a compound key unique within a file) flags, under Great
Expectations and its vectorised twin alike, the bad rows planted in its files, each by the rule
planted for it."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from optimizer.catalog import parse_catalog
from optimizer.errors import CatalogError
from rowstream.expectations import input_suite
from rowstream.gateway import quarantined_rows
from rowstream.landing import read_landed
from runtime.settings import example_stream
from runtime.validation import landing_stream, validate_file
from workload.air_quality import AIR, AirQuality
from workload.meters import METERS, HouseholdMeters
from workload.schema import StreamSchema
from workload.smart_plugs import PLUGS_STREAM

AIR_ENTRY = example_stream("air")
T = datetime(2024, 3, 1, 0, 5, tzinfo=UTC)


def test_the_example_streams_entries_are_what_their_generators_write():
    for generated, name in ((PLUGS_STREAM, "plugs"), (METERS, "meters"), (AIR, "air")):
        entry = example_stream(name)
        assert (entry.columns, entry.time_column, entry.fields) == (
            generated.columns, generated.time_column, generated.fields)
    assert AirQuality(rate=2).between(0, 60).schema == AIR.arrow
    assert HouseholdMeters(rate=400).between(0, 2).schema == METERS.arrow
    assert StreamSchema.from_json(AIR_ENTRY.to_json()) == AIR_ENTRY


@pytest.mark.parametrize("change, refusal", [
    ({"columns": {"at": "TIMESTAMP", "k": "UUID"}}, "declares k as UUID: give one of"),
    ({"columns": {"at": "DOUBLE"}}, "time column 'at' of type DOUBLE: declare it TIMESTAMP"),
    ({"key": ["nope"]}, "names 'nope' in key, which is not one of its columns"),
    ({"expect": {"range": {"k": {"low": 1}}}}, "gives expect.range.k as"),
    ({"expect": {"range": {"name": {"min": 1}}}}, "a range to name, a VARCHAR column: give a set"),
    ({"expect": {"set": {"k": ["a"]}}}, "values that are not INTEGER values"),
    ({"expect": {"matches": {"k": "x"}}}, r"expectations it cannot check \(matches\)"),
    ({"csv_header": ["a"]}, "has 3 columns and a csv_header of 1 names"),
])
def test_a_stream_entry_that_cannot_hold_is_refused_in_one_line(change, refusal):
    entry = {"rate": 1, "time_column": "at",
             "columns": {"at": "TIMESTAMP", "k": "INT", "name": "STRING"}} | change
    with pytest.raises(CatalogError, match=refusal):
        parse_catalog({"streams": {"s": entry}}, "mine.toml")


def test_aliases_are_the_engines_own_types_and_a_landing_is_relative_to_the_catalog(tmp_path):
    catalog = parse_catalog({"streams": {"s": {
        "rate": 1, "time_column": "at", "landing": "in",
        "columns": {"at": "TIMESTAMP", "k": "INT", "name": "STRING", "f": "FLOAT"}}}},
        str(tmp_path / "catalog.toml"))
    stream = catalog.streams["s"]
    assert stream.columns == {"at": "TIMESTAMP", "k": "INTEGER", "name": "VARCHAR", "f": "REAL"}
    assert stream.landing == str(tmp_path / "in")
    assert landing_stream(catalog, tmp_path / "in").name == "s"


# Planted rows of the air stream: (station, observed_at, pm25, humidity, indoor) -> rule.
NOT_NULL = "expect_column_values_to_not_be_null"
PLANTED = {
    (None, T, 5.0, 50, False): f"{NOT_NULL}(raw_station)",
    ("ST-900", T, 5.0, 50, None): f"{NOT_NULL}(raw_indoor)",
    ("ST-901", T, -3.0, 50, False): "expect_column_values_to_be_between(pm25)",
    ("ST-902", T, 1200.0, 50, True): "expect_column_values_to_be_between(pm25)",
    ("ST-903", T, 5.0, 140, False): "expect_column_values_to_be_between(humidity)",
    ("ST-904", T + timedelta(days=3), 5.0, 50, False): "expect_column_values_to_be_between(observed_at)",
    ("ST-905", T, 5.0, None, False): None,  # humidity may be missing
    ("ST-906", T, float("nan"), 50, False): f"{NOT_NULL}(pm25)",
}


def planted_file(tmp_path, file_format: str):
    """Ten minutes of the air stream with the planted rows and a reading landed twice."""
    good = pl.from_arrow(AirQuality(rate=2).between(0, 600))
    bad = pl.DataFrame(list(PLANTED), schema=good.schema, orient="row")
    rows = pl.concat([good.head(10), bad, good.slice(3, 1), good.slice(10)])
    rules = {i + 1: rule for i, rule in enumerate([None] * 10 + list(PLANTED.values()))
             if rule is not None}
    twice = "expect_compound_columns_to_be_unique(station, observed_at)"
    rules[4] = rules[11 + len(PLANTED)] = twice
    path = tmp_path / f"air-1.{file_format}"
    AIR_ENTRY.write(rows.to_arrow(), path, file_format)
    return path, rules


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_great_expectations_and_the_gateway_flag_an_air_file_s_planted_rows(tmp_path, file_format):
    path, rules = planted_file(tmp_path, file_format)
    by_gx, _ = validate_file(path, AIR_ENTRY)
    by_gateway = read_landed(path, AIR_ENTRY)
    assert by_gx.select("origin", "rule", "reason").equals(
        by_gateway.select("origin", "rule", "reason"))
    row = "row " if file_format == "parquet" else ""
    line = 0 if file_format == "parquet" else 1  # a CSV file's first line is its header
    assert dict(by_gx.filter(pl.col("rule").is_not_null()).select("origin", "rule").iter_rows()) \
        == {f"{path.name}:{row}{n + line}": rule for n, rule in rules.items()}
    assert by_gateway.filter(pl.col("rule").is_null()).height == by_gateway.height - len(rules)


def test_a_csv_field_that_does_not_parse_is_quarantined_by_its_column_s_rule(tmp_path):
    path = tmp_path / "air-2.csv"
    path.write_text("station,observed_at,pm25,humidity,indoor\n"
                    "ST-001,1709251200,4.5,wet,false\n"  # humidity may be missing, not wrong
                    "ST-002,1709251200,4.5,40,maybe\n"
                    "ST-003,1709251200,4.5,,true\n")
    rows = read_landed(path, AIR_ENTRY)
    by_gx, _ = validate_file(path, AIR_ENTRY)
    assert rows.select("origin", "rule", "reason").equals(by_gx.select("origin", "rule", "reason"))
    assert rows.select("rule", "reason").rows() == [
        ("expect_column_values_to_be_null(unparsed_humidity)", "humidity wet is not an integer"),
        (f"{NOT_NULL}(indoor)", "indoor maybe is not true or false"),
        (None, None)]


def test_the_quarantine_keeps_any_stream_s_row_as_json(tmp_path):
    path, _ = planted_file(tmp_path, "parquet")
    rows = read_landed(path, AIR_ENTRY)
    kept = pl.from_arrow(quarantined_rows(AIR_ENTRY, rows.filter(pl.col("rule").is_not_null())
                                          .to_arrow()))
    assert set(kept["stream"]) == {"air"}
    by_origin = {r["origin"]: r for r in kept.iter_rows(named=True)}
    missing, negative = by_origin[f"{path.name}:row 11"], by_origin[f"{path.name}:row 13"]
    assert missing["ts"] == T.replace(tzinfo=None)
    assert json.loads(missing["row"])["station"] is None
    assert json.loads(negative["row"]) | {"observed_at": None} == {
        "station": "ST-901", "observed_at": None, "pm25": -3.0, "humidity": 50, "indoor": False}



def test_the_readme_s_catalog_template_is_a_catalog():
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    template = readme.split("### Your own stream and query", 1)[1].split("```toml\n", 1)[1]
    catalog = parse_catalog(tomllib.loads(template.split("```", 1)[0]))
    sensors = catalog.streams["sensors"]
    assert sensors.time_column == "observed_at" and sensors.key == ("station",)
    assert len(input_suite(StreamSchema.of(sensors))) == 1 + 4 + 4 + 2 + 1 + 1


def test_a_scheduled_query_reads_its_stream_s_landing_unless_told_otherwise(monkeypatch):
    from runtime import settings
    from tests.conftest import ROOT

    monkeypatch.setenv("TANDEM_SCHEDULE", "a1,q1")
    monkeypatch.delenv("TANDEM_LANDING", raising=False)
    air, plugs = settings.schedules()
    assert air.landing.resolve() == ROOT / "landing" / "air"  # queries/catalog.toml's "../landing/air"
    assert plugs.landing == settings.landing_dir()  # plugs name none: the deployment's


def test_an_open_range_of_a_real_column_holds_no_infinity(tmp_path):
    schema = replace(AIR_ENTRY, expect=replace(AIR_ENTRY.expect, ranges=(("pm25", 0.0, None),)))
    path = tmp_path / "air-3.csv"
    path.write_text("ST-001,1709251200,inf,40,false\nST-002,1709251200,3e38,40,false\n")
    rows = read_landed(path, schema)
    by_gx, _ = validate_file(path, schema)
    assert rows.select("rule", "reason").rows() == by_gx.select("rule", "reason").rows() == [
        ("expect_column_values_to_be_between(pm25)", "pm25 inf is below 0 or infinite"),
        (None, None)]

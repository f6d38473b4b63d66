"""The speed probe: a calibration keeps its seconds in the profile, a sweep tells how far the
machine's speed moved from them, and both engines' sides of it do the same work."""

from __future__ import annotations

import pytest

from benchmarking import speed
from benchmarking.calibrate import write_profile
from optimizer.profile import DEFAULT_PROFILE, load_profile

THEN = {"duckdb": [0.040, 0.050], "spark": [0.30, 0.50]}  # a calibration's start and end


@pytest.fixture
def calibrated(tmp_path):
    path = tmp_path / "profile.toml"
    write_profile(path, load_profile(), {}, THEN)
    return path


def test_a_calibrations_probe_is_read_back_from_its_profile_and_the_optimiser_ignores_it(
        calibrated):
    assert speed.calibrated(calibrated) == pytest.approx({"duckdb": 0.045, "spark": 0.40})
    assert load_profile(calibrated).functions == load_profile().functions


def test_a_profile_without_a_probe_says_its_machines_speed_is_not_known():
    record = speed.record(DEFAULT_PROFILE, {"duckdb": 0.05, "spark": 0.4}, None)
    assert record["calibrated"] is None
    assert speed.warning(record, str(DEFAULT_PROFILE)) is None
    assert "not known" in speed.sentence(record)


def test_a_machine_slower_than_its_calibration_beyond_the_spread_is_told(calibrated):
    slower = speed.record(calibrated, {"duckdb": 0.046, "spark": 0.70}, None)  # Spark 1.75x
    warning = speed.warning(slower, str(calibrated))
    assert "1.75× spark's seconds" in warning and "duckdb" not in warning
    told = speed.sentence(slower | {"after": {"duckdb": 0.045, "spark": 0.44}})
    assert "spark 1.75×–1.10×" in told and "beyond 1.5× either way for spark" in told


def test_a_machine_as_fast_as_its_calibration_gives_no_warning(calibrated):
    same = speed.record(calibrated, {"duckdb": 0.050, "spark": 0.56}, None)  # 1.11x, 1.4x
    assert speed.warning(same, str(calibrated)) is None
    assert "within 1.5× either way" in speed.sentence(same)
    assert speed.drifted({"duckdb": 1 / 1.51, "spark": 1.0}) == ["duckdb"]


@pytest.mark.integration
def test_both_engines_sides_of_the_probe_compute_the_same_aggregate():
    from rowstream.session import spark_session

    with speed.sides(spark_session()) as jobs:
        duckdb, spark = jobs["duckdb"](), jobs["spark"]()
    key = lambda row: tuple(row[:3])  # noqa: E731
    assert len(duckdb) == len(spark) > 100
    for ours, theirs in zip(sorted(duckdb, key=key), sorted(spark, key=key), strict=True):
        assert tuple(ours[:3]) == tuple(theirs[:3])
        assert ours[3] == pytest.approx(theirs[3], rel=1e-9)

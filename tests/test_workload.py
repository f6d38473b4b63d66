"""The smart-plug generator (DEBS 2014 shape, any rate, the same events whatever the batches) and
the DEBS 2014 CSV it writes and a landing directory reads."""

from __future__ import annotations

import csv

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from rowstream.landing import read_landed
from runtime.settings import example_stream
from workload.smart_plugs import SCHEMA, SmartPlugs, format_steps, parse_steps

PLUGS = example_stream("plugs")


def test_debs_shape_at_the_original_rate():
    rows = pl.from_arrow(SmartPlugs(rate=4250).between(0, 2))
    assert rows.height == 8500 and pl.from_arrow(SmartPlugs(rate=4250).between(0, 2)).equals(rows)
    assert rows.select(pl.col("house_id").n_unique()).item() == 40
    assert rows.select(pl.struct("house_id", "household_id").n_unique()).item() == 400
    assert rows.select(pl.struct("house_id", "household_id", "plug_id").n_unique()).item() == 2125
    # Every plug reports one load and one work reading per second.
    per_plug = rows.group_by("house_id", "household_id", "plug_id", "property").len()
    assert per_plug["len"].unique().to_list() == [2]
    loads = rows.filter(pl.col("property") == 1)["value"]
    assert loads.min() == 0 and 0.05 < (loads == 0).mean() < 0.3  # plugs that are off
    assert loads.max() > 5 * loads.median()  # bursts


def test_rate_and_order():
    rows = SmartPlugs(rate=12_500).between(0, 4)
    assert rows.num_rows == 50_000
    ts = rows.column("ts").cast(pa.int64()).to_numpy()
    assert (ts[1:] >= ts[:-1]).all()  # non-decreasing ts, the base case of docs/design.md


def test_batches_do_not_change_the_events():
    plugs = SmartPlugs(rate=1000, seed=7)
    whole = plugs.between(0, 10)
    assert pa.concat_tables(plugs.batches(10, span=0.7)).equals(whole)
    assert not SmartPlugs(rate=1000, seed=8).between(0, 10).equals(whole)
    assert whole.schema == SCHEMA


def test_rate_steps():
    plugs = SmartPlugs(rate=2000, plugs=400, steps=((3, 40_000), (5.5, 2000)))
    whole = plugs.between(0, 8)
    seconds = (whole.column("ts").cast(pa.int64()).to_numpy() - plugs.start * 1_000_000) // 1_000_000
    # Tuples per second of event time: 2,000 until 3 s, 40,000 until 5.5 s, 2,000 after.
    assert list(np.bincount(seconds)) == [2000] * 3 + [40_000] * 2 + [21_000] + [2000] * 2
    assert whole.column("id").to_pylist() == list(range(whole.num_rows))
    assert pa.concat_tables(plugs.batches(8, span=0.7)).equals(whole)
    # Before the first step, the stream is the constant rate's.
    assert plugs.between(0, 3).equals(SmartPlugs(rate=2000, plugs=400).between(0, 3))
    assert parse_steps(format_steps(plugs.steps)) == plugs.steps
    with pytest.raises(ValueError, match="increasing"):
        SmartPlugs(rate=2000, steps=((5, 100), (4, 200)))


def test_csv_in_the_debs_format(tmp_path):
    paths = SmartPlugs(rate=3, houses=1, households_per_house=2, plugs=3).write_files(tmp_path, 4, 2)
    assert len(paths) == 2
    with paths[0].open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["id", "timestamp", "value", "property", "plug_id", "household_id",
                       "house_id"]
    assert len(rows) == 1 + 6
    assert rows[1][1] == "1377986400" and rows[2][1] == "1377986400.333333"


def test_csv_reads_back_as_the_stream(tmp_path):
    """The landing directory's reader (an independent parser) gets back every generated row."""
    plugs = SmartPlugs(rate=7, houses=1, households_per_house=2, plugs=3)
    paths = plugs.write_files(tmp_path, 10, file_seconds=3)
    assert [p.name for p in paths] == sorted(p.name for p in paths)
    landed = pl.concat([read_landed(p, PLUGS) for p in paths])
    assert landed["reason"].null_count() == landed.height
    assert landed.select(SCHEMA.names).equals(pl.from_arrow(plugs.between(0, 10)))


def test_a_debs_file_without_header_keeps_its_first_line(tmp_path):
    """The original DEBS 2014 files start with a reading, not a header."""
    path = tmp_path / "sorted.csv"
    path.write_text("0,1377986401,68.451,0,11,0,0\n1,1377986401,19.272,1,11,0,0\n2,x,1,1,1,0,0\n")
    landed = read_landed(path, PLUGS)
    assert landed["id"].to_list() == [0, 1, 2]
    assert landed["reason"].to_list() == [None, None, "timestamp x is not a Unix time in seconds"]
    assert landed["origin"].to_list() == ["sorted.csv:1", "sorted.csv:2", "sorted.csv:3"]

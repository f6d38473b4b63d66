"""The smart-plug generator: DEBS 2014 shape, any rate, and the same events whatever the batches."""

from __future__ import annotations

import csv

import polars as pl
import pyarrow as pa

from tandem.workload import SCHEMA, SmartPlugs


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
    assert (ts[1:] >= ts[:-1]).all()  # non-decreasing ts, the base case of DESIGN.md


def test_batches_do_not_change_the_events():
    plugs = SmartPlugs(rate=1000, seed=7)
    whole = plugs.between(0, 10)
    assert pa.concat_tables(plugs.batches(10, span=0.7)).equals(whole)
    assert not SmartPlugs(rate=1000, seed=8).between(0, 10).equals(whole)
    assert whole.schema == SCHEMA


def test_csv_in_the_debs_format(tmp_path):
    paths = SmartPlugs(rate=3, houses=1, households_per_house=2, plugs=3).write_csv(tmp_path, 4, 2)
    assert len(paths) == 2
    with paths[0].open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["id", "timestamp", "value", "property", "plug_id", "household_id",
                       "house_id"]
    assert len(rows) == 1 + 6
    assert rows[1][1] == "1377986400" and rows[2][1] == "1377986400.333333"

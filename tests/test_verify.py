"""`tandem verify` tells same from different rows and samples the placements it must."""

from __future__ import annotations

import itertools
from datetime import datetime

import polars as pl

from benchmarking.verify import compare, placements

END = datetime(2013, 9, 1)
WANT = pl.DataFrame({"plug_id": [1, 2, 3], "window_end": [END] * 3, "avg": [1.0, 2.0, 3.0]})


def test_compare_finds_changed_missing_and_extra_rows():
    assert compare({}, WANT.reverse(), WANT).status == "same"
    assert compare({}, WANT.with_columns(pl.col("avg") * (1 + 1e-12)), WANT).status == "same"
    changed = compare({}, WANT.with_columns(pl.col("avg") + 0.5), WANT)
    assert changed.status == "different" and "first differences" in changed.detail
    assert compare({}, WANT.head(2), WANT).status == "different"
    extra = pl.concat([WANT, WANT.head(1).with_columns(pl.lit(9, dtype=pl.Int64).alias("plug_id"))])
    assert compare({}, extra, WANT).status == "different"
    counts = WANT.drop("avg").with_columns(pl.lit(3).alias("n"))
    assert compare({}, counts.head(2), counts).status == "different"
    assert compare({}, counts, counts).status == "same"


def test_a_sample_always_holds_the_uniform_plans_and_the_optimisers_choice():
    every = placements("q6", "all")
    ops = list(every[0])
    # Every placement on the two engines, and some with duckdb-partitioned where it can run.
    two = [dict(zip(ops, e, strict=True)) for e in itertools.product(("spark", "duckdb"),
                                                                     repeat=len(ops))]
    assert all(p in every for p in two) and 2 ** 9 < len(every) < 3 ** 9
    sample = placements("q6", "8")
    assert len(sample) == 8 and len({tuple(p.values()) for p in sample}) == 8
    assert [set(p.values()) for p in sample[:3]] == [{"spark"}, {"duckdb"}, {"duckdb-partitioned"}]
    assert sample[3] in every

"""A landing directory with every class of bad input planted in a generated stream, and what
each planted line must become: the input suite's rule it fails (or ``late``, ``unreadable``).
Each planted line has an id of its own, so that the test knows every bad row by construction,
not by asking the code under test."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from workload.smart_plugs import SmartPlugs

NOT_NULL = "expect_column_values_to_not_be_null"


@dataclass(frozen=True)
class Planted:
    """The planted landing directory: the good rows (the generated stream less the rows that
    planted lines spoil), the expected rule per origin, and the lines read."""

    good: pl.DataFrame
    rules: dict[str, str]  # origin -> rule
    rows_read: int  # lines of the files read, and one per unreadable file


def plant(landing: Path, plugs: SmartPlugs, duration: float, file_seconds: float) -> Planted:
    """Generate ``duration`` seconds into ``landing`` and plant the bad lines: the second and
    third files get them (the first sets the stream's high-water mark for the late line)."""
    files = plugs.write_files(landing, duration, file_seconds=file_seconds)
    stream = pl.from_arrow(plugs.between(0, duration))
    second, third = files[1], files[2]
    t = second.read_text().splitlines()[1].split(",")[1]  # a timestamp of the file
    ts = int(float(t))
    late_ts = plugs.start + file_seconds - 30  # 30 s behind the first file's last readings
    day = 86_400
    planted = {  # line -> rule (ids from 9,000,000 on are the planted lines')
        "9000001,2,3": "expect_column_values_to_be_in_set(fields)",
        "9000002,,12.5,1,1,0,0": f"{NOT_NULL}(raw_timestamp)",
        f"9000003,{ts},12.5,1,,0,0": f"{NOT_NULL}(raw_plug_id)",
        f"9000004,{ts},12.5,1,x,0,0": f"{NOT_NULL}(plug_id)",
        f"9000005,{ts},abc,1,1,0,0": f"{NOT_NULL}(value)",
        f"9000006,{ts},nan,1,1,0,0": f"{NOT_NULL}(value)",
        f"\udcff9000007,{ts},12.5,1,1,0,0": f"{NOT_NULL}(id)",
        f"9000008,{ts},12.5,2,1,0,0": "expect_column_values_to_be_in_set(property)",
        f"9000009,{ts},-1.5,1,1,0,0": "expect_column_values_to_be_between(value)",
        f"9000010,{ts},inf,1,1,0,0": "expect_column_values_to_be_between(value)",
        "9000011,1,12.5,1,1,0,0": "expect_column_values_to_be_between(ts)",
        f"9000012,{ts + 10 * day},12.5,1,1,0,0": "expect_column_values_to_be_between(ts)",
        f"9000013,{late_ts},12.5,1,1,0,0": "late",
        f"9000014,{ts}.123456789,12.5,1,1,0,0": None,  # valid: truncated to microseconds
        "": "expect_column_values_to_be_in_set(fields)",  # a blank line
        f" 9000015 , {ts}.5 ,+12.5,1,1,0,0": None,  # valid: fields are stripped, signs read
    }
    lines = second.read_text().splitlines()
    duplicated = lines[5].split(",")[0]  # an id the file already has, landed twice
    planted[f"{duplicated},{ts},1.0,1,1,0,0"] = "expect_column_values_to_be_unique(id)"
    body = [line.encode("utf-8", "surrogateescape") for line in planted]
    # A byte-order mark before the header, and the planted lines ending in CR LF.
    raw = (b"\xef\xbb\xbf" + lines[0].encode() + b"\r\n" + b"\r\n".join(body) + b"\r\n"
           + b"\n".join(x.encode() for x in lines[1:]) + b"\n")
    second.write_bytes(raw)
    rules = {f"{second.name}:{i}": rule for i, rule in enumerate(planted.values(), start=2)
             if rule is not None}
    rules[f"{second.name}:{2 + len(planted) + 4}"] = "expect_column_values_to_be_unique(id)"

    # A file cut short in its last line (a writer that died without the landing protocol).
    text = third.read_text()
    third.write_text(text[:text.rstrip("\n").rfind(",", 0, len(text) - 12)])
    cut = text.splitlines()
    rules[f"{third.name}:{len(cut)}"] = "expect_column_values_to_be_in_set(fields)"
    # A Parquet file whose footer is gone, and a file still being written (never read).
    broken = landing / f"{third.stem}-x.parquet"
    pq.write_table(pa.table({"id": [1]}), broken)
    broken.write_bytes(broken.read_bytes()[:-9])
    rules[broken.name] = "unreadable"
    (landing / f"{files[-1].stem}-z.csv.part").write_text(lines[0] + "\n1,2,3\n")
    _keep_landing_order(files)

    spoiled = {int(duplicated), int(cut[-1].split(",")[0])}
    good = stream.filter(~pl.col("id").is_in(list(spoiled)))
    valid = [_line(planted, id_, stream.schema) for id_ in ("9000014", " 9000015")]
    good = pl.concat([good, *valid])
    read = sum(len(f.read_bytes().splitlines()) - 1 for f in files) + 1
    return Planted(good, rules, read)


def plant_csv(landing: Path, plugs: SmartPlugs, duration: float, file_seconds: float) -> Planted:
    """``plant``'s CSV files alone, without its Parquet file: the native gateway reads one
    format per directory."""
    planted = plant(landing, plugs, duration, file_seconds)
    broken = next(landing.glob("*.parquet"))
    broken.unlink()
    return replace(planted, rules={o: r for o, r in planted.rules.items() if o != broken.name},
                   rows_read=planted.rows_read - 1)


def _keep_landing_order(files: list[Path]) -> None:
    """Rewritten files keep the order they landed in: Spark's file sources read in the order
    of modification times."""
    for n, path in enumerate(files):
        os.utime(path, ns=(1_700_000_000_000_000_000 + n * 1_000_000_000,) * 2)


def _line(planted: dict, id_: str, schema) -> pl.DataFrame:
    """The planted line that is valid, as a row of the stream."""
    fields = [f.strip() for f in next(line for line in planted if line.startswith(id_)).split(",")]
    seconds, fraction = fields[1].split(".")
    micros = int(seconds) * 1_000_000 + int(fraction[:6].ljust(6, "0"))
    row = {"id": int(fields[0]), "ts": micros, "value": float(fields[2]),
           "property": int(fields[3]), "plug_id": int(fields[4]), "household_id": int(fields[5]),
           "house_id": int(fields[6])}
    return pl.DataFrame([row]).with_columns(
        pl.col("ts").cast(pl.Datetime("us"))).cast(dict(schema))


def plant_parquet(landing: Path, plugs: SmartPlugs, duration: float,
                  file_seconds: float) -> Planted:
    """The Parquet classes of bad input: rows planted at the head of the second file (nulls,
    NaN, infinity, negative values, property out of range, wild timestamps, a duplicate id, a
    late row and a valid one), a file written with 64-bit integers (readable), a file without
    its footer and a file still being written."""
    files = plugs.write_files(landing, duration, file_seconds=file_seconds, file_format="parquet")
    stream = pl.from_arrow(plugs.between(0, duration))
    second, third, fourth = files[1], files[2], files[3]
    rows = pl.read_parquet(second)
    ts = rows["ts"][0]
    base = rows.row(0, named=True)
    duplicated = rows["id"][4]
    day = timedelta(days=1)
    planted = [  # (changes to a row of the file, the rule it fails)
        ({"id": None}, f"{NOT_NULL}(raw_id)"),
        ({"ts": None}, f"{NOT_NULL}(raw_timestamp)"),
        ({"plug_id": None}, f"{NOT_NULL}(raw_plug_id)"),
        ({"value": float("nan")}, f"{NOT_NULL}(value)"),
        ({"value": float("inf")}, "expect_column_values_to_be_between(value)"),
        ({"value": -1.5}, "expect_column_values_to_be_between(value)"),
        ({"property": 2}, "expect_column_values_to_be_in_set(property)"),
        ({"ts": datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)}, "expect_column_values_to_be_between(ts)"),
        ({"ts": ts + 10 * day}, "expect_column_values_to_be_between(ts)"),
        ({"ts": ts - timedelta(seconds=file_seconds + 30)}, "late"),
        ({"id": duplicated}, "expect_column_values_to_be_unique(id)"),
        ({}, None),  # valid
    ]
    head = pl.DataFrame([{**base, "id": 9_000_000 + n, **changes}
                         for n, (changes, _) in enumerate(planted, start=1)], schema=rows.schema)
    pq.write_table(pl.concat([head, rows]).to_arrow().cast(pq.read_schema(second)), second)
    rules = {f"{second.name}:row {n}": rule for n, (_, rule) in enumerate(planted, start=1)
             if rule is not None}
    rules[f"{second.name}:row {len(planted) + 5}"] = "expect_column_values_to_be_unique(id)"
    wide = pq.read_table(third)
    pq.write_table(wide.cast(pa.schema([pa.field(f.name, pa.int64()) if pa.types.is_int32(f.type)
                                        else f for f in wide.schema])), third)
    fourth.write_bytes(fourth.read_bytes()[:-9])
    rules[fourth.name] = "unreadable"
    (landing / f"{files[-1].stem}-z.parquet.part").write_bytes(b"PAR1")
    _keep_landing_order(files)

    lost = pl.from_arrow(plugs.between(3 * file_seconds, 4 * file_seconds))  # the footless file
    spoiled = pl.Series([duplicated, *lost["id"]])
    good = stream.filter(~pl.col("id").is_in(spoiled.implode()))
    valid = head.tail(1).with_columns(pl.col("ts").dt.replace_time_zone(None))
    good = pl.concat([good, valid.cast(dict(good.schema))])
    read = sum(pq.ParquetFile(f).metadata.num_rows for f in files if f != fourth) + 1
    return Planted(good, rules, read)

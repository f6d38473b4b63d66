"""Reading the files of a landing directory: DEBS 2014 CSV (``id,timestamp,value,property,
plug_id,household_id,house_id`` with Unix-second timestamps) or Parquet with the stream's
columns. Every line is either a row of the stream or a quarantined row with the ``rule`` it
broke (the class of the problem), its ``reason`` and its ``origin`` (file and line); nothing is
dropped.
Validation is vectorised (polars), never a loop per row.

**Landing protocol.** Only names ending in ``.csv`` or ``.parquet`` are read, in name order,
which must be event-time order. A writer writes under another name (``x.csv.part``, or a name
starting with a dot) and renames the file when it is complete: a rename within a directory is
atomic, so a file is never read in part. A file that cannot be read at all (not UTF-8 text, a
truncated Parquet footer) becomes one quarantined row naming the file and the error.

**Timestamps** are Unix seconds with any number of fractional digits. Both engines keep
microseconds, so digits after the sixth are truncated: window bounds are whole microseconds,
so a reading truncated to microseconds lies in exactly the windows its exact time lies in.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

SUFFIXES = (".csv", ".parquet")
INTEGERS = {"id": pl.Int64, "property": pl.Int32, "plug_id": pl.Int32, "household_id": pl.Int32,
            "house_id": pl.Int32}
CSV_FIELDS = ("id", "timestamp", "value", "property", "plug_id", "household_id", "house_id")
STREAM = {"id": pl.Int64, "ts": pl.Datetime("us"), "value": pl.Float64, "property": pl.Int32,
          "plug_id": pl.Int32, "household_id": pl.Int32, "house_id": pl.Int32}
# Classes of bad input, the quarantine's ``rule`` column.
MALFORMED, TYPE, MISSING, RANGE, UNREADABLE = "malformed", "type", "missing", "range", "unreadable"
EXTRA = ("reason", "rule", "origin")


def landed_files(directory: str | Path) -> list[str]:
    """The complete files in the directory, in the order of their names (which is event-time
    order); files still being written carry another suffix or a leading dot."""
    return sorted(p.name for p in Path(directory).iterdir()
                  if p.suffix in SUFFIXES and not p.name.startswith("."))


def read_landed(path: Path) -> pl.DataFrame:
    """The stream's columns plus ``reason`` and ``rule`` (null for a good row) and
    ``origin``."""
    try:
        frame = _read_parquet(path) if path.suffix == ".parquet" else _read_csv(path)
    except Exception as err:  # the file, not a line of it, is bad: quarantine it whole
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        return pl.DataFrame({**{c: pl.Series([None], dtype=t) for c, t in STREAM.items()},
                             "reason": [f"the file cannot be read: {first}"],
                             "rule": [UNREADABLE], "origin": [path.name]})
    problems = [(pl.col("reason").is_not_null(), pl.col("reason"), pl.col("rule"))]
    for column in STREAM:  # the first problem of a row is its reason
        raw, name = pl.col(f"_{column}"), "timestamp" if column == "ts" else column
        problems.append((raw.is_null() | (raw == ""), pl.lit(f"{name} is missing"), pl.lit(MISSING)))
        problems.append((pl.col(column).is_null(),
                         pl.format(f"{name} {{}} is not {_kind(column)}", raw), pl.lit(TYPE)))
    problems.append((~pl.col("property").is_in([0, 1]),
                     pl.lit("property is neither 0 (work) nor 1 (load)"), pl.lit(RANGE)))
    reason, rule = pl.lit(None, pl.String), pl.lit(None, pl.String)
    for failed, why, what in reversed(problems):
        reason = pl.when(failed).then(why).otherwise(reason)
        rule = pl.when(failed).then(what).otherwise(rule)
    return frame.with_columns(reason.alias("reason"), rule.alias("rule")).select(
        *STREAM, *EXTRA)


def _kind(column: str) -> str:
    return {"ts": "a Unix time in seconds", "value": "a number"}.get(column, "an integer")


def _read_csv(path: Path) -> pl.DataFrame:
    # Bytes that are not UTF-8 spoil their line only, which is then quarantined.
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    # The DEBS 2014 files have no header line; Tandem's generator writes one.
    header = bool(lines) and lines[0].replace(" ", "").lower() == ",".join(CSV_FIELDS)
    lines = pl.Series("line", lines[header:], pl.String)
    frame = pl.DataFrame({"fields": lines.str.split(",")}).with_row_index("n", offset=1 + header)
    count = pl.col("fields").list.len()
    raw = {name: pl.col("fields").list.get(i, null_on_oob=True).str.strip_chars()
           for i, name in enumerate(CSV_FIELDS)}
    text = raw["timestamp"]
    seconds = text.str.extract_groups(r"^([+-]?)(\d+)(?:\.(\d*))?$")
    sign = pl.when(seconds.struct.field("1") == "-").then(-1).otherwise(1)
    whole = seconds.struct.field("2").cast(pl.Int64, strict=False)
    # Microseconds: the first six fractional digits; later ones are truncated (module docstring).
    micros = seconds.struct.field("3").fill_null("").str.slice(0, 6).str.pad_end(6, "0")
    return frame.select(
        *[raw[name].cast(dtype, strict=False).alias(name) for name, dtype in INTEGERS.items()],
        (sign * (whole * 1_000_000 + micros.cast(pl.Int64))).cast(pl.Datetime("us")).alias("ts"),
        raw["value"].cast(pl.Float64, strict=False).alias("value"),
        *[raw[name].alias(f"_{name}") for name in INTEGERS], text.alias("_ts"),
        raw["value"].alias("_value"),
        pl.when(count != len(CSV_FIELDS))
        .then(pl.format("expected 7 comma-separated fields, found {}", count)).alias("reason"),
        pl.when(count != len(CSV_FIELDS)).then(pl.lit(MALFORMED)).alias("rule"),
        pl.format("{}:{}", pl.lit(path.name), pl.col("n")).alias("origin"),
    )


def _read_parquet(path: Path) -> pl.DataFrame:
    frame = pl.from_arrow(pq.read_table(path)).with_row_index("n", offset=1)
    present = {c: pl.col(c) if c in frame.columns else pl.lit(None) for c in STREAM}
    return frame.select(
        *[present[c].cast(dtype, strict=False).alias(c) for c, dtype in STREAM.items()],
        *[present[c].cast(pl.String, strict=False).alias(f"_{c}") for c in STREAM],
        pl.lit(None, pl.String).alias("reason"), pl.lit(None, pl.String).alias("rule"),
        pl.format("{}:row {}", pl.lit(path.name), pl.col("n")).alias("origin"))

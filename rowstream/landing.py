"""Reading the files of a landing directory: DEBS 2014 CSV (``id,timestamp,value,property,
plug_id,household_id,house_id`` with Unix-second timestamps) or Parquet with the stream's
columns. Every line is either a row of the stream or a quarantined row with its reason and
origin; nothing is dropped. Validation is vectorised (polars), never a loop per row."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

SUFFIXES = (".csv", ".parquet")
INTEGERS = {"id": pl.Int64, "property": pl.Int32, "plug_id": pl.Int32, "household_id": pl.Int32,
            "house_id": pl.Int32}
CSV_FIELDS = ("id", "timestamp", "value", "property", "plug_id", "household_id", "house_id")
STREAM = {"id": pl.Int64, "ts": pl.Datetime("us"), "value": pl.Float64, "property": pl.Int32,
          "plug_id": pl.Int32, "household_id": pl.Int32, "house_id": pl.Int32}


def landed_files(directory: str | Path) -> list[str]:
    """The files in the directory, in the order of their names (which is event-time order)."""
    return sorted(p.name for p in Path(directory).iterdir() if p.suffix in SUFFIXES)


def read_landed(path: Path) -> pl.DataFrame:
    """The stream's columns plus ``reason`` (null for a good row) and ``origin``."""
    frame = _read_parquet(path) if path.suffix == ".parquet" else _read_csv(path)
    reason = pl.lit(None, pl.String)
    for column in reversed(STREAM):  # the first problem of a row is its reason
        reason = pl.when(pl.col(column).is_null()).then(pl.lit(_problem(column))).otherwise(reason)
    reason = (pl.when(pl.col("reason").is_not_null()).then(pl.col("reason"))
              .when(~pl.col("property").is_in([0, 1]))
              .then(pl.lit("property is neither 0 (work) nor 1 (load)")).otherwise(reason))
    return frame.with_columns(reason.alias("reason")).select(*STREAM, "reason", "origin")


def _problem(column: str) -> str:
    kind = {"ts": "a Unix time in seconds", "value": "a number"}.get(column, "an integer")
    return f"{'timestamp' if column == 'ts' else column} is missing or not {kind}"


def _read_csv(path: Path) -> pl.DataFrame:
    lines = path.read_text().splitlines()
    # The DEBS 2014 files have no header line; Tandem's generator writes one.
    header = bool(lines) and lines[0].replace(" ", "").lower() == ",".join(CSV_FIELDS)
    lines = pl.Series("line", lines[header:], pl.String)
    fields = lines.str.split(",")
    frame = pl.DataFrame({"line": lines, "fields": fields}).with_row_index("n", offset=1 + header)
    count = pl.col("fields").list.len()
    columns = {name: pl.col("fields").list.get(i, null_on_oob=True).str.strip_chars()
               for i, name in enumerate(CSV_FIELDS)}
    seconds = columns["timestamp"].str.split_exact(".", 1)
    whole = seconds.struct.field("field_0").cast(pl.Int64, strict=False)
    fraction = seconds.struct.field("field_1").fill_null("0")
    micros = pl.when(fraction.str.contains(r"^\d{1,6}$")).then(
        fraction.str.pad_end(6, "0").cast(pl.Int64, strict=False))
    return frame.select(
        *[columns[name].cast(dtype, strict=False).alias(name) for name, dtype in INTEGERS.items()],
        (whole * 1_000_000 + micros).cast(pl.Datetime("us")).alias("ts"),
        columns["value"].cast(pl.Float64, strict=False).alias("value"),
        pl.when(count != len(CSV_FIELDS))
        .then(pl.format("expected 7 comma-separated fields, found {}", count)).alias("reason"),
        pl.format("{}:{}", pl.lit(path.name), pl.col("n")).alias("origin"),
    )


def _read_parquet(path: Path) -> pl.DataFrame:
    table: pa.Table = pq.read_table(path)
    frame = pl.from_arrow(table).with_row_index("n", offset=1)
    return frame.select(
        *[pl.col(c).cast(dtype, strict=False) if c in frame.columns else pl.lit(None, dtype).alias(c)
          for c, dtype in STREAM.items()],
        pl.lit(None, pl.String).alias("reason"),
        pl.format("{}:row {}", pl.lit(path.name), pl.col("n")).alias("origin"))

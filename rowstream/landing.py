"""Reading the files of a landing directory: CSV (the stream's fields in the order of its
columns, a header line optional; ``workload/schema.py`` says how each type is written, DEBS 2014's
plugs with Unix-second timestamps) or Parquet with the stream's columns, as its catalog entry
declares them (``StreamSchema``). Every line is either a row of the stream or a quarantined row with the ``rule`` it
broke (the input suite's expectation, ``rowstream/expectations.py``), its ``reason`` and its
``origin`` (file and line); nothing is dropped. The suite's checks are vectorised (polars), never
a loop per row.

**Landing protocol.** Only names ending in ``.csv`` or ``.parquet`` are read, in name order,
which must be event-time order. A writer writes under another name (``x.csv.part``, or a name
starting with a dot) and renames the file when it is complete: a rename within a directory is
atomic, so a file is never read in part. A file that cannot be read at all (not UTF-8 text, a
truncated Parquet footer) becomes one quarantined row naming the file and the error.

**Timestamps** in CSV files are Unix seconds with any number of fractional digits. Both engines keep
microseconds, so digits after the sixth are truncated: window bounds are whole microseconds,
so a reading truncated to microseconds lies in exactly the windows its exact time lies in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import polars as pl
import pyarrow.parquet as pq

from optimizer.errors import TandemError
from rowstream.expectations import (
    FIELD_COUNT,
    input_parameters,
    input_suite,
    unparsed,
    verdicts,
)
from rowstream.expectations import raw as raw_name
from workload.schema import FLOATS, POLARS, StreamSchema

SUFFIXES = (".csv", ".parquet")
UNREADABLE = "unreadable"  # a whole file that cannot be read: the suites never see its rows
EXTRA = ("reason", "rule", "origin")  # a landed row's verdict and where it came from
ROW = "row"  # a row's number in its file, from 1 (a CSV file's line number)
# The blanks around a CSV field that are not part of it: Java's \s, which the native gateway's
# Spark side strips too (rowstream/native.py).
BLANKS = " \t\n\r\x0b\x0c"
_LINE_END = re.compile(r"\r\n|\r|\n")


def landed_files(directory: str | Path) -> list[str]:
    """The complete files in the directory, in the order of their names (which is event-time
    order); files still being written carry another suffix or a leading dot."""
    return sorted(p.name for p in Path(directory).iterdir()
                  if p.suffix in SUFFIXES and not p.name.startswith("."))


def landed_frame(path: Path, schema: StreamSchema) -> pl.DataFrame:
    """A file as it landed, the frame the input suite validates: ``fields``, ``raw_<field>``
    (text, null when empty), the parsed stream columns (null where the text does not parse),
    ``unparsed_<field>`` of the columns that may be missing, and ``origin``. Raises when the
    file cannot be read at all."""
    if path.suffix == ".parquet":
        return typed_frame(pl.from_arrow(pq.read_table(path)), path.name, schema)
    return _read_csv(path, schema)


def read_landed(path: Path, schema: StreamSchema) -> pl.DataFrame:
    """The stream's columns plus the ``reason`` and ``rule`` of the input suite's first failed
    expectation (null for a good row) and ``origin``."""
    try:
        frame = landed_frame(path, schema)
    except Exception as err:  # the file, not a line of it, is bad: quarantine it whole
        return unreadable(path, err, schema)
    return judged(frame, schema)


def judged(frame: pl.DataFrame, schema: StreamSchema) -> pl.DataFrame:
    """One landed file's rows with the input suite's verdicts: the stream's columns, ``reason``,
    ``rule`` and ``origin``."""
    return verdicts(frame, input_suite(schema), input_parameters(frame, schema)).select(
        *schema.names, *EXTRA)


def unreadable(path: Path, err: Exception, schema: StreamSchema) -> pl.DataFrame:
    """The one quarantined row that stands for a file that cannot be read."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return pl.DataFrame({**{c: pl.Series([None], dtype=t) for c, t in schema.polars.items()},
                         "reason": [f"the file cannot be read: {first}"],
                         "rule": [UNREADABLE], "origin": [path.name]})


def _read_csv(path: Path, schema: StreamSchema) -> pl.DataFrame:
    # Bytes that are not UTF-8 spoil their line only, which is then quarantined. Lines end as
    # Hadoop's line reader (Spark's text source, the native gateway) ends them, at \n, \r\n
    # or \r; a byte-order mark before the first is not text of it.
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    lines = _LINE_END.split(text.removesuffix("\n").removesuffix("\r")) if text else []
    return csv_frame(pl.Series("line", lines, pl.String), path.name, schema)


def is_header(line: str, schema: StreamSchema) -> bool:
    """Whether a CSV line is the header (``schema.fields``; blanks and case aside)."""
    return line.replace(" ", "").lower() == ",".join(schema.fields)


def csv_frame(lines: pl.Series, name: str, schema: StreamSchema,
              numbers: pl.Series | None = None) -> pl.DataFrame:
    """The landed frame of the CSV file ``name`` from its lines, in order (the native gateway
    has them from Spark's text source). A header line, where there is one, is not a row.
    ``numbers``: the lines' numbers in the file, where ``lines`` are some rows of it."""
    lines = lines.str.strip_prefix("\ufeff")  # a byte-order mark is not text of its line
    if numbers is None:
        header = bool(lines.len()) and is_header(lines[0], schema)
        lines = lines.slice(int(header))
        numbers = pl.int_range(1 + header, lines.len() + 1 + header, eager=True)
    frame = pl.DataFrame({"fields": lines.str.split(","), "n": numbers})
    raw = {f: pl.col("fields").list.get(i, null_on_oob=True).str.strip_chars(BLANKS)
           for i, f in enumerate(schema.fields)}
    raw = {f: pl.when(text != "").then(text) for f, text in raw.items()}
    parsed = {c: parse_text(raw[f], t) for (c, t), f in zip(schema.columns, schema.fields,
                                                            strict=True)}
    return frame.select(
        pl.col("fields").list.len().cast(pl.Int32).alias(FIELD_COUNT),
        *[text.alias(raw_name(f)) for f, text in raw.items()],
        *[parsed[c].alias(c) for c in schema.names],
        pl.format("{}:{}", pl.lit(name), pl.col("n")).alias("origin"),
    ).with_columns(_unparsed(schema))


def parse_text(text: pl.Expr, kind: str) -> pl.Expr:
    """A CSV field's value as its column's type, null where it does not parse (workload/schema.py
    says what each type's text is)."""
    if kind == "TIMESTAMP":
        seconds = text.str.extract_groups(r"^([+-]?)(\d+)(?:\.(\d*))?$")
        sign = pl.when(seconds.struct.field("1") == "-").then(-1).otherwise(1)
        whole = seconds.struct.field("2").cast(pl.Int64, strict=False)
        # Microseconds: the first six fractional digits; later ones are truncated (module
        # docstring).
        micros = seconds.struct.field("3").fill_null("").str.slice(0, 6).str.pad_end(6, "0")
        return (sign * (whole * 1_000_000 + micros.cast(pl.Int64))).cast(pl.Datetime("us"))
    if kind == "BOOLEAN":
        word = text.str.to_lowercase()
        return pl.when(word == "true").then(True).when(word == "false").then(False)
    if kind == "VARCHAR":
        return text
    if kind == "REAL":  # as Spark parses it too: a double, rounded once to a float
        return text.cast(pl.Float64, strict=False).cast(pl.Float32)
    return text.cast(POLARS[kind], strict=False)


def _unparsed(schema: StreamSchema) -> list[pl.Expr]:
    """The text of a column that may be missing where it did not parse (the input suite's
    ``unparsed_<field>``)."""
    required = {*schema.expect.not_null, schema.time_column}
    return [pl.when(pl.col(c).is_null() | (pl.col(c).is_nan() if t in FLOATS else False))
            .then(pl.col(raw_name(f))).alias(unparsed(f))
            for (c, t), f in zip(schema.columns, schema.fields, strict=True)
            if c not in required and t != "VARCHAR"]


def typed_frame(rows: pl.DataFrame, name: str, schema: StreamSchema,
                row_label: str = "row ") -> pl.DataFrame:
    """Typed rows of the file ``name`` (Parquet's, or CSV lines Spark parsed) as the landed
    frame, numbered by ``row`` or else in file order: a column missing from the file is null,
    and a value of another type is cast (null where it does not convert). A row's origin is
    ``<name>:<row_label><row>``."""
    frame = rows if ROW in rows.columns else rows.with_row_index(ROW, offset=1)
    types = schema.types
    present = {c: pl.col(c) if c in frame.columns else pl.lit(None) for c in types}

    def typed(c: str) -> pl.Expr:
        if c in frame.columns and frame.schema[c] == pl.String and types[c] != "VARCHAR":
            return parse_text(pl.col(c).str.strip_chars(BLANKS), types[c])  # as CSV's text
        return present[c].cast(schema.polars[c], strict=False)

    return frame.select(
        pl.lit(len(types), pl.Int32).alias(FIELD_COUNT),
        *[present[c].cast(pl.String, strict=False).alias(raw_name(f))
          for c, f in zip(types, schema.fields, strict=True)],
        *[typed(c).alias(c) for c in types],
        pl.format("{}:{}{}", pl.lit(name), pl.lit(row_label), pl.col(ROW)).alias("origin"),
    ).with_columns(_unparsed(schema))


def batch_files(checkpoint: str | Path, batch_id: int, source: int = 0) -> list[Path]:
    """The files Spark's file source ``source`` (its index in the query, from 0) gave
    micro-batch ``batch_id``: those its source log holds after the offset of the batch before,
    up to the batch's own (``FileStreamSource.getBatch``). The log numbers its entries itself.
    A run that dies after Spark logged a batch's files but before it wrote the batch's offsets
    leaves an entry that no batch names: after the restart, the batch Spark plans in its place
    holds that entry and the next, and the log runs one ahead of the batch ids from then on."""
    start = _log_offset(checkpoint, batch_id - 1, source) if batch_id > 0 else -1
    end = _log_offset(checkpoint, batch_id, source)
    return [path for entry in range(start + 1, end + 1)
            for path in logged_files(checkpoint, entry, source)]


def logged_files(checkpoint: str | Path, entry: int, source: int = 0) -> list[Path]:
    """The files of entry ``entry`` of Spark's file source log. Every few entries the log is
    compacted into ``<entry>.compact``, which holds every entry up to it; Spark then deletes
    the entries it holds."""
    log = Path(checkpoint) / "sources" / str(source)
    path = log / str(entry)
    if not path.exists():
        compacted = sorted(n for p in log.glob("*.compact") if (n := int(p.stem)) >= entry)
        if not compacted:
            raise TandemError(f"Spark's checkpoint {checkpoint} has no entry {entry} in its "
                              "file source log: it was changed by hand; start the run afresh")
        path = log / f"{compacted[0]}.compact"
    entries = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
    return [Path(unquote(urlparse(e["path"]).path)) for e in entries if e["batchId"] == entry]


def last_file_read(checkpoint: str | Path) -> str:
    """The last landing file of the checkpoint's last committed micro-batch ("" before any).
    The Python source's offset names the last file; Spark's file source (the native gateway)
    logs the files of each batch apart, the newest in the entry its offset names."""
    offset = last_offset(checkpoint)
    if offset is None:
        return ""
    if "after" in offset:
        return offset["after"]
    return max((path.name for path in logged_files(checkpoint, offset["logOffset"])),
               default="")


def committed_batches(checkpoint: str | Path) -> list[int]:
    """The micro-batches a Spark checkpoint has committed: ``commits/<batch>`` exists once the
    batch committed (beside it, Hadoop's ``.<batch>.crc``)."""
    return [int(p.name) for p in (Path(checkpoint) / "commits").glob("[0-9]*")]


def last_offset(checkpoint: str | Path) -> dict | None:
    """The source's offset after the checkpoint's last committed micro-batch."""
    committed = committed_batches(checkpoint)
    return _offset(checkpoint, max(committed)) if committed else None


def _offset(checkpoint: str | Path, batch_id: int, source: int = 0) -> dict | None:
    """Source ``source``'s offset after micro-batch ``batch_id``. Spark's offset log
    (``offsets/<batch>``) is a version line, the batch's metadata and one line per source:
    its offset as JSON, or "-" for a source that has read nothing yet."""
    lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
    line = lines[2 + source]
    return None if line.strip() == "-" else json.loads(line)


def _log_offset(checkpoint: str | Path, batch_id: int, source: int) -> int:
    """The last entry of file source ``source``'s log that micro-batch ``batch_id`` read up
    to (-1 before any)."""
    offset = _offset(checkpoint, batch_id, source)
    return -1 if offset is None else offset["logOffset"]

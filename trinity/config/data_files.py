"""Read a local taskset or dataset file the cheap way, to say before a run what is wrong with it.

The HF loader that reads these files at run time fails deep inside an actor and says little (an
empty file is "StopIteration", a bad line "DatasetGenerationError"). Here JSON Lines are streamed
line by line and stop at the first line that does not parse, CSV row by row, parquet one column of
one row group at a time: memory stays flat however big the file. A .json file holding one JSON
array (or one JSON document) has no lines to stream, so it is parsed whole, as the loader does too.
"""

import codecs
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

SUFFIXES = (".csv", ".json", ".jsonl", ".parquet")  # what trinity.buffer.hf_data loads from a file
EXCERPT = 80  # characters of a bad line shown
SHOWN_COLUMNS = 50  # column names kept for messages (a file whose rows all differ could have millions)


class DataFileError(Exception):
    """A file the loader would fail on; str() says where and why, e.g. "line 7 is not valid JSON ..."."""

    def __init__(self, message: str, line: Optional[int] = None):
        super().__init__(message)
        self.line = line


@dataclass
class FileSummary:
    """What a readable file holds: rows, columns, and per watched column the rows where it is null
    or absent (with where the first one is: "line 7", "item 3")."""

    rows: int = 0
    columns: Dict[str, None] = field(default_factory=dict)  # first-seen order, at most SHOWN_COLUMNS
    present: Dict[str, bool] = field(default_factory=dict)  # watched column -> some row has the key
    missing: Dict[str, int] = field(default_factory=dict)
    first_missing: Dict[str, str] = field(default_factory=dict)

    def add(self, row: Dict[str, Any], where: str, watch: Sequence[str]) -> None:
        self.rows += 1
        if len(self.columns) < SHOWN_COLUMNS:
            for key in row:
                self.columns.setdefault(str(key), None)
        for column in watch:
            self.present[column] = self.present.get(column, False) or column in row
            if row.get(column) is None:
                self.missing[column] = self.missing.get(column, 0) + 1
                self.first_missing.setdefault(column, where)


def summarize(path: Path, watch: Sequence[str]) -> FileSummary:
    """Summarize `path` (an existing file with one of SUFFIXES); raise DataFileError if it cannot be read."""
    if path.stat().st_size == 0:
        raise DataFileError("is empty (0 bytes)")
    readers = {".jsonl": _jsonl, ".json": _json, ".parquet": _parquet, ".csv": _csv}
    summary = readers[path.suffix.lower()](path, tuple(watch))
    if summary.rows == 0:
        raise DataFileError("has no rows")
    return summary


# ---- JSON Lines and JSON --------------------------------------------------------------------------


def _jsonl(path: Path, watch: Tuple[str, ...]) -> FileSummary:
    summary = FileSummary()
    for line_no, row in _json_lines(path):
        summary.add(row, f"line {line_no}", watch)
    return summary


def _json_lines(path: Path) -> Iterable[Tuple[int, dict]]:
    """(line number, object) of each non-blank line; the first bad line raises DataFileError."""
    with open(path, "rb") as f:
        for line_no, line in enumerate(f, start=1):
            if line_no == 1 and line.startswith(codecs.BOM_UTF8):
                line = line[len(codecs.BOM_UTF8) :]
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                reason = f"line {line_no} is not valid JSON ({_reason(err)}): {_excerpt(line)}"
                raise DataFileError(reason, line_no) from None
            if not isinstance(row, dict):
                reason = f"line {line_no} is a JSON {type(row).__name__}, not an object: {_excerpt(line)}"
                raise DataFileError(reason, line_no)
            yield line_no, row


def _json(path: Path, watch: Tuple[str, ...]) -> FileSummary:
    """A JSON array of objects (or strings: one "text" column), JSON Lines, or one document."""
    if _first_byte(path) == b"[":
        return _json_document(path, watch)
    try:
        return _jsonl(path, watch)
    except DataFileError as err:
        if err.line != 1:
            raise
        try:  # line 1 itself does not parse: perhaps one JSON document spread over several lines
            return _json_document(path, watch)
        except DataFileError:
            raise err from None


def _json_document(path: Path, watch: Tuple[str, ...]) -> FileSummary:
    text = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    try:
        document = json.loads(text)
    except ValueError as err:
        line_no = getattr(err, "lineno", 1)
        line = text.splitlines()[line_no - 1] if text.splitlines() else b""
        raise DataFileError(f"line {line_no} is not valid JSON ({_reason(err)}): {_excerpt(line)}") from None
    summary = FileSummary()
    if isinstance(document, dict):  # one object of columns: {"question": [...], "answer": [...]}
        columns = {
            key: list(values.values()) if isinstance(values, dict) else values for key, values in document.items()
        }
        if not all(isinstance(values, list) for values in columns.values()):
            raise DataFileError("is one JSON object that is not a table of columns; use one object per line")
        rows = max((len(values) for values in columns.values()), default=0)
        document = [{key: values[i] for key, values in columns.items() if i < len(values)} for i in range(rows)]
    if not isinstance(document, list):
        raise DataFileError(f"holds a JSON {type(document).__name__}; use one JSON object per line")
    for index, item in enumerate(document, start=1):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict):
            raise DataFileError(f"item {index} of its JSON array is a {type(item).__name__}, not an object")
        summary.add(item, f"item {index}", watch)
    return summary


def _first_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        head = f.read(4096).removeprefix(codecs.BOM_UTF8).lstrip()
    return head[:1]


def _reason(err: ValueError) -> str:
    if isinstance(err, json.JSONDecodeError):
        return f"{err.msg} at column {err.colno}"
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 text: byte {err.object[err.start : err.start + 1]!r} at column {err.start + 1}"
    return str(err)


def _excerpt(line: bytes) -> str:
    text = line.decode("utf-8", errors="replace").strip()
    return repr(text if len(text) <= EXCERPT else text[:EXCERPT] + "...")


# ---- parquet and CSV ------------------------------------------------------------------------------


def _parquet(path: Path, watch: Tuple[str, ...]) -> FileSummary:
    """Row count and columns from the footer; nulls one watched column and row group at a time."""
    import pyarrow
    import pyarrow.parquet as pq  # only for parquet files: validation stays light otherwise

    try:
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
        summary = FileSummary(rows=parquet.metadata.num_rows, columns=dict.fromkeys(names[:SHOWN_COLUMNS]))
        for column in watch:
            summary.present[column] = column in names
            if column not in names:
                summary.missing[column] = summary.rows
                continue
            groups = range(parquet.num_row_groups)
            summary.missing[column] = sum(
                parquet.read_row_group(i, columns=[column]).column(0).null_count for i in groups
            )
    except (pyarrow.ArrowException, OSError) as err:
        raise DataFileError(f"is not a readable parquet file ({err})") from None
    return summary


def _csv(path: Path, watch: Tuple[str, ...]) -> FileSummary:
    """A header line, then one row per record; an empty cell is null (as the loader reads it)."""
    summary = FileSummary()
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header: Optional[List[str]] = next(reader, None)
            for record in reader:
                if record:
                    row = {key: value or None for key, value in zip(header, record, strict=False)}
                    summary.add(row, f"line {reader.line_num}", watch)
            summary.columns = dict.fromkeys((header or [])[:SHOWN_COLUMNS])
            summary.present = {column: column in (header or []) for column in watch}
    except UnicodeDecodeError as err:
        raise DataFileError(f"is not UTF-8 text ({_reason(err)})") from None
    except csv.Error as err:
        raise DataFileError(f"line {reader.line_num} is not valid CSV ({err})") from None
    return summary

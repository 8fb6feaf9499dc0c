"""The records of one pair file, format by format: `(first_line, last_line, fields or error)`.

CSV/TSV (a record spans several lines when a quoted field does), JSON lines, a JSON array of
objects, Parquet (read a row group at a time, the needed columns only) and a Hugging Face
dataset folder (`save_to_disk`; memory-mapped, read in batches of the needed columns). In a JSON
array, a Parquet file and a dataset a "line" is the record's position, from 1. Every reader
selects the columns the spec names (`PairFileSpec.columns`) and refuses, in one line naming the
file's own names and the `data.*_column` key to set, a file that has none by that name.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from tapefit.errors import TapefitError

Record = tuple[int, int, Any]
ARROW_BATCH = 1024  # rows of a Parquet file or a dataset read at a time (images: a few MB each)
QUOTING = {
    "minimal": csv.QUOTE_MINIMAL,
    "none": csv.QUOTE_NONE,
    "all": csv.QUOTE_ALL,
    "nonnumeric": csv.QUOTE_NONNUMERIC,
}


class PairFileSpec(Protocol):
    """What the readers need of `tapefit.data.pair_files.PairFileSpec`."""

    delimiter: str | None
    quoting: Any  # the Quoting choice: its value is a key of QUOTING
    header: bool
    encoding: str

    @property
    def columns(self) -> list[str]: ...

    @property
    def column_keys(self) -> dict[str, str]: ...


def file_records(path: Path, kind: str, spec: PairFileSpec) -> Iterator[Record]:
    """The records of `path` read as `kind` (csv, tsv, jsonl, json or parquet)."""
    if kind == "parquet":
        return _parquet_records(path, spec)
    if kind == "hf_dataset":
        return _saved_dataset_records(path, spec)
    if kind == "json":
        return _json_records(path, spec)
    if kind == "jsonl":
        return _jsonl_records(path, spec)
    return _delimited_records(path, kind, spec)


def column_names(path: Path, kind: str, spec: PairFileSpec) -> list[str] | None:
    """The column names of a table with a header: its first row (CSV/TSV), its first record's
    keys (JSON), its schema (Parquet, a dataset); None when there is none to read (an empty
    file, a first record that is not an object: the readers then say what is wrong)."""
    if kind == "parquet":
        parquet = _imported("pyarrow.parquet", path, "Parquet needs pyarrow")
        return list(
            _opened(lambda: parquet.ParquetFile(path), path, "Parquet file").schema_arrow.names
        )
    if kind == "hf_dataset":
        datasets = _imported("datasets", path, "a Hugging Face dataset needs the datasets package")
        dataset = _opened(lambda: datasets.load_from_disk(str(path)), path, "Hugging Face dataset")
        return list(dataset.column_names)
    with path.open(newline="", encoding=_text_encoding(spec)) as file:
        if kind in ("csv", "tsv"):
            delimiter = spec.delimiter or ("," if kind == "csv" else "\t")
            return next(csv.reader(file, delimiter=delimiter), None)
        text = file.read() if kind == "json" else ""
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError:
            return None
    else:
        with path.open(encoding=_text_encoding(spec)) as file:
            line = next((line for line in file if line.strip()), None)
        try:
            records = [json.loads(line)] if line is not None else []
        except json.JSONDecodeError:
            return None
    first = records[0] if records else None
    return list(first) if isinstance(first, dict) else None


def _column_index(name: str, header: list[str] | None, path: Path, spec: PairFileSpec) -> int:
    key = spec.column_keys.get(name, "data.text1_column")
    if header is None:
        if not str(name).isdigit():
            raise TapefitError(
                f"{path}: {key}={name!r} must be a 0-based index when data.header=false"
            )
        return int(name)
    if name in header:
        return header.index(name)
    if str(name).isdigit() and int(name) < len(header):
        return int(name)
    raise TapefitError(
        f"{path}: no column {name!r} in the header; it has {header}{closest(name, header, spec)}: "
        + column_fix(key, getattr(spec, "pair_hints", True))
    )


def closest(name: str, names: list[str], spec: PairFileSpec | None = None) -> str:
    """`" (did you mean 'NAME'?)"` for the one of `names` closest to a misspelt `name`, if any
    (not one of the other columns `spec` reads).

    Examples:
        >>> closest("filenme", ["filename", "label"]), closest("image", ["file", "kind"])
        (" (did you mean 'filename'?)", '')
    """
    import difflib

    taken = set(spec.columns) if spec is not None else set()
    candidates = [str(n) for n in names if n not in taken]
    found = difflib.get_close_matches(str(name), candidates, n=1, cutoff=0.75)
    return f" (did you mean {found[0]!r}?)" if found else ""


def column_fix(key: str, pair_hints: bool = True) -> str:
    """How to point `key` (data.text1_column, ...) at the file's own names (with
    `pair_hints`, what the pair files' optional columns can be set to instead).

    Examples:
        >>> column_fix("data.text1_column")
        'set data.text1_column to one of them'
    """
    fix = f"set {key} to one of them"
    if not pair_hints:
        return fix
    if key == "data.label_column":
        fix += " (data.label_column=null: a file without labels, every row a positive pair)"
    elif key == "data.negative_column":
        fix += " (data.negative_column=null: no hard negatives)"
    return fix


def _text_encoding(spec: PairFileSpec) -> str:
    """The codec to open files with: UTF-8 drops a byte-order mark."""
    return "utf-8-sig" if codecs.lookup(spec.encoding).name == "utf-8" else spec.encoding


def _delimited_records(path: Path, kind: str, spec: PairFileSpec) -> Iterator[Record]:
    """Yield `(first_line, last_line, (text1, text2, label) or error)` from a CSV/TSV file;
    a record spans several lines when a quoted field does."""
    delimiter = spec.delimiter or ("," if kind == "csv" else "\t")
    with path.open(newline="", encoding=_text_encoding(spec)) as file:
        quoting = QUOTING[spec.quoting.value]
        reader = csv.reader(file, delimiter=delimiter, quoting=quoting, strict=True)
        header = None
        if spec.header:
            try:
                header = next(reader)
            except StopIteration:
                return
            except UnicodeDecodeError:
                raise  # named with the data.encoding option by read_pair_file
            except (csv.Error, ValueError) as error:  # ValueError: QUOTE_NONNUMERIC
                raise TapefitError(
                    f"{path}:1: unreadable header ({error}); with data.quoting=nonnumeric "
                    "quote the header's names"
                    if isinstance(error, ValueError)
                    else f"{path}:1: unreadable header ({error})"
                ) from error
        columns = [_column_index(name, header, path, spec) for name in spec.columns]
        needed = max(columns) + 1 if header is None else max(len(header), max(columns) + 1)
        while True:
            first = reader.line_num + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                yield (
                    first,
                    reader.line_num,
                    ValueError(
                        f"unterminated quote: the quoted field opened here runs to line "
                        f"{reader.line_num} ({error}); close it, or set data.quoting=none"
                    ),
                )
                continue
            except UnicodeDecodeError:
                raise
            except ValueError as error:  # QUOTE_NONNUMERIC meeting an unquoted text
                yield (
                    first,
                    reader.line_num,
                    ValueError(
                        f"an unquoted field that is not a number ({error}); with "
                        "data.quoting=nonnumeric every text must be quoted"
                    ),
                )
                continue
            if not fields:
                continue
            if max(columns) >= len(fields) or (header is not None and len(fields) < needed):
                spans = reader.line_num > first
                hint = (
                    f" (a quote opened here runs to line {reader.line_num}: is it unterminated?)"
                    if spans
                    else ""
                )
                yield (
                    first,
                    reader.line_num,
                    ValueError(f"{len(fields)} fields where {needed} were expected{hint}"),
                )
                continue
            # Trailing fields beyond the ones selected (source columns of STS files) are kept.
            yield first, reader.line_num, tuple(fields[i] for i in columns)


def _jsonl_records(path: Path, spec: PairFileSpec) -> Iterator[Record]:
    """Yield `(line, line, (text1, text2, label) or error)` from a JSON-lines file."""
    with path.open(encoding=_text_encoding(spec)) as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                yield number, number, ValueError(f"invalid JSON ({error.msg})")
                continue
            yield number, number, _selected(record, spec)


def _json_records(path: Path, spec: PairFileSpec) -> Iterator[Record]:
    """A `.json` file: a JSON array of objects, or JSON lines under another name."""
    with path.open(encoding=_text_encoding(spec)) as file:
        start = file.read(4096).lstrip()
    if not start.startswith("["):
        yield from _jsonl_records(path, spec)
        return
    try:
        with path.open(encoding=_text_encoding(spec)) as file:
            records = json.load(file)
    except json.JSONDecodeError as error:
        raise TapefitError(
            f"{path}:{error.lineno}: invalid JSON ({error.msg}); a .json pair file is a JSON "
            "array of objects, or one object per line"
        ) from None
    for number, record in enumerate(records, start=1):
        yield number, number, _selected(record, spec)


def _parquet_records(path: Path, spec: PairFileSpec) -> Iterator[Record]:
    """A Parquet file, a row group at a time, the needed columns only."""
    parquet = _imported("pyarrow.parquet", path, "Parquet needs pyarrow")
    table = _opened(
        lambda: parquet.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False),  # streamed
        path,
        "Parquet file",
    )
    _check_columns(path, table.schema_arrow.names, spec)
    batches = table.iter_batches(batch_size=ARROW_BATCH, columns=list(dict.fromkeys(spec.columns)))
    yield from _arrow_records(batches, spec)


def _saved_dataset_records(path: Path, spec: PairFileSpec) -> Iterator[Record]:
    """A folder written by `datasets.Dataset.save_to_disk`, in batches of the needed columns."""
    datasets = _imported("datasets", path, "a Hugging Face dataset needs the datasets package")
    dataset = _opened(lambda: datasets.load_from_disk(str(path)), path, "Hugging Face dataset")
    _check_columns(path, dataset.column_names, spec)
    columns = dataset.select_columns(list(dict.fromkeys(spec.columns))).with_format("arrow")
    yield from _arrow_records(columns.iter(batch_size=ARROW_BATCH), spec)


def _arrow_records(batches: Iterator[Any], spec: PairFileSpec) -> Iterator[Record]:
    """The records of Arrow batches (or tables), numbered from 1, `ARROW_BATCH` rows in memory
    at a time."""
    number = 0
    for batch in batches:
        records = batch.to_pylist()
        del batch
        release_arrow_memory()
        for record in records:
            number += 1
            yield number, number, _selected(record, spec)


def release_arrow_memory() -> None:
    """Hand the memory pyarrow's allocator keeps after a read back to the system (mimalloc
    and jemalloc keep freed pages for reuse: without this, reading a file of images leaves
    its size resident)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _imported(module: str, path: Path, needs: str) -> Any:
    """`module`, or a one-line error saying what `path` needs and how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise TapefitError(f"{path}: reading it as {needs}: pip install 'tapefit[data]'") from None


def _opened(open_: Any, path: Path, kind: str) -> Any:
    """`open_()`, or a one-line error: `path` is not a readable `kind`."""
    try:
        return open_()
    except Exception as error:  # the library's own errors (ArrowInvalid, OSError, ...)
        raise TapefitError(f"{path} is not a readable {kind} ({error})") from None


def _check_columns(path: Path, names: list[str], spec: PairFileSpec) -> None:
    for column in spec.columns:
        if column not in names:
            key = spec.column_keys[column]
            fix = column_fix(key, getattr(spec, "pair_hints", True))
            raise TapefitError(
                f"{path}: no column {column!r}; it has {names}{closest(column, names, spec)}: {fix}"
            )


def _selected(record: Any, spec: PairFileSpec) -> Any:
    """The spec's fields of one JSON or Parquet record, or the error that makes it bad."""
    if not isinstance(record, dict):
        return ValueError(f"a JSON {type(record).__name__}, not an object")
    missing = [key for key in spec.columns if key not in record]
    if missing:
        key = spec.column_keys[missing[0]]
        fix = column_fix(key, getattr(spec, "pair_hints", True))
        keys = sorted(record)
        hint = closest(missing[0], keys, spec)
        return ValueError(f"no key {missing[0]!r} in the record; it has {keys}{hint} ({fix})")
    return tuple(record[key] for key in spec.columns)

"""Reading text-pair files (CSV, TSV, JSONL) with errors that name the file and the line."""

from __future__ import annotations

import codecs
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from tapefit.choices import choice_enum, parse_choice
from tapefit.data.pair_paths import checked_file, is_saved_dataset
from tapefit.data.pair_records import QUOTING, file_records
from tapefit.errors import TapefitError


class LabelType(str, Enum):
    """Pair labels: graded similarity scores or binary same/different."""

    graded = "graded"
    binary = "binary"


class FileFormat(str, Enum):
    """Pair-file formats; `auto` picks one from the file's extension."""

    auto = "auto"
    csv = "csv"
    tsv = "tsv"
    jsonl = "jsonl"
    json = "json"  # a JSON array of objects (a .json file of JSON lines is read as such)
    parquet = "parquet"
    hf_dataset = "hf_dataset"  # a folder written by `datasets.Dataset.save_to_disk`


class OnBadLine(str, Enum):
    """What a malformed line does: stop the run, or be skipped and counted."""

    error = "error"
    skip = "skip"


Quoting = choice_enum("Quoting", QUOTING)
DELIMITED = ("csv", "tsv")
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "tsv",
    ".jsonl": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass
class PairFileSpec:
    """How to read one pair file. The `data=pairs_file` schema extends this class, so its keys
    are these fields and are declared nowhere else."""

    format: FileFormat = FileFormat.auto
    text1_column: str = "text1"  # a header name, or a 0-based index when header is false
    text2_column: str = "text2"
    label_column: str | None = "label"  # None: every row is a positive pair
    # a third text per row, a hard negative of text1 (in_batch_negatives, triplet); None: none
    negative_column: str | None = None
    header: bool = True
    delimiter: str | None = None  # default: "," for csv, tab for tsv
    quoting: Quoting = Quoting.minimal  # type: ignore[valid-type]
    label_range: list[float] = field(default_factory=lambda: [0.0, 5.0])
    label_type: LabelType = LabelType.graded  # binary: labels must be 0 or 1
    on_bad_line: OnBadLine = OnBadLine.error
    max_skipped_fraction: float = 0.1  # with skip: refuse a file that loses more of its lines
    encoding: str = "utf-8"  # a UTF-8 byte-order mark is dropped

    def __post_init__(self) -> None:
        self.format = parse_choice(FileFormat, self.format, "data.format")
        self.quoting = parse_choice(Quoting, self.quoting, "data.quoting")
        self.label_type = parse_choice(LabelType, self.label_type, "data.label_type")
        self.on_bad_line = parse_choice(OnBadLine, self.on_bad_line, "data.on_bad_line")
        self.text1_column, self.text2_column = str(self.text1_column), str(self.text2_column)
        self.label_column = None if self.label_column is None else str(self.label_column)
        self.negative_column = None if self.negative_column is None else str(self.negative_column)
        self.label_range = [float(value) for value in self.label_range]
        if self.delimiter is not None:
            if "\\" in self.delimiter:  # typed as users type it: '\t'
                self.delimiter = codecs.decode(self.delimiter, "unicode_escape")
            if len(self.delimiter) != 1:
                raise TapefitError(
                    f"data.delimiter={self.delimiter!r} must be one character (a tab: '\\t')"
                )
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise TapefitError(
                f"data.encoding={self.encoding!r} is not a known text encoding: use e.g. utf-8, "
                "latin-1 or cp1252"
            ) from None

    @property
    def columns(self) -> list[str]:
        """The columns a row is read from, in order: text1, text2, then the label and the
        negative text when configured."""
        optional = (self.label_column, self.negative_column)
        return [self.text1_column, self.text2_column, *(c for c in optional if c is not None)]

    @property
    def column_keys(self) -> dict[str, str]:
        """Each column a row is read from, with the config key that names it."""
        keys = {
            "data.text1_column": self.text1_column,
            "data.text2_column": self.text2_column,
            "data.label_column": self.label_column,
            "data.negative_column": self.negative_column,
        }
        return {column: key for key, column in keys.items() if column is not None}

    @property
    def positive_label(self) -> float:
        """The label of a row in a file without a label column: the most similar."""
        return 1.0 if self.label_type == LabelType.binary else self.label_range[1]


@dataclass
class PairRows:
    """The pairs read from a file, and how many bad lines were skipped."""

    texts_a: np.ndarray
    texts_b: np.ndarray
    labels: np.ndarray
    skipped: int = 0
    skipped_lines: list[int] = field(default_factory=list)
    negatives: np.ndarray | None = None  # each row's hard negative, with data.negative_column


def resolve_format(path: Path, spec: PairFileSpec) -> str:
    """The file's format: as configured, or from its extension when `auto`."""
    if spec.format != FileFormat.auto:
        return spec.format.value
    if is_saved_dataset(path):
        return "hf_dataset"
    if path.suffix.lower() not in FORMATS:
        raise TapefitError(
            f"{path}: cannot tell the format from {path.suffix!r}; "
            "set data.format=csv, tsv, jsonl, json, parquet or hf_dataset"
        )
    return FORMATS[path.suffix.lower()]


def _parse_label(raw: Any, spec: PairFileSpec) -> float:
    """A float label inside `label_range`, or a ValueError saying what is wrong with it."""
    try:
        label = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"label {raw!r} is not a number") from None
    low, high = spec.label_range
    if not math.isfinite(label) or not low <= label <= high:
        raise ValueError(f"label {label} is outside data.label_range=[{low}, {high}]")
    if spec.label_type == LabelType.binary and label not in (0.0, 1.0):
        raise ValueError(f"label {label} is not 0 or 1 (data.label_type=binary)")
    return label


@dataclass
class RowCount:
    """What reading one file found: lines read, usable rows, the lines of skipped records."""

    lines: int = 0
    rows: int = 0
    skipped: list[int] = field(default_factory=list)
    first_reason: str = ""  # why the first skipped record was bad


def pair_rows(
    path: str | Path, spec: PairFileSpec, count: RowCount | None = None
) -> Iterator[tuple]:
    """Yield the `(text1, text2, label)` rows of one file as they are read (with a fourth
    entry, the negative text, under `spec.negative_column`); bad lines raise
    (file:line) or are skipped and counted in `count` (every line a bad record spans); at the
    end, a file that lost more than `spec.max_skipped_fraction` of its lines is refused."""
    path = checked_file(path)
    kind = resolve_format(path, spec)
    count = count if count is not None else RowCount()
    records = file_records(path, kind, spec)
    try:
        for first, last, record in records:
            count.lines += last - first + 1
            try:
                row = _checked_record(record, spec)
            except ValueError as error:
                if spec.on_bad_line == OnBadLine.skip:
                    count.skipped.extend(range(first, last + 1))
                    count.first_reason = count.first_reason or str(error)
                    continue
                raise TapefitError(
                    f"{path}:{first}: {error}; fix the line or set data.on_bad_line=skip"
                ) from None
            count.rows += 1
            yield row
    except UnicodeDecodeError as error:
        raise TapefitError(
            f"{path} is not {spec.encoding} text ({error.reason} at byte {error.start}): set "
            "data.encoding to the file's encoding, e.g. data.encoding=latin-1"
        ) from None
    skipped = count.skipped
    if skipped and len(skipped) > spec.max_skipped_fraction * count.lines:
        raise TapefitError(
            f"{path}: {len(skipped)} of {count.lines} lines are bad (from line {skipped[0]}: "
            f"{count.first_reason}), "
            f"more than data.max_skipped_fraction={spec.max_skipped_fraction}: fix the file"
            + (" (an unterminated quote swallows the lines after it)" if kind in DELIMITED else "")
            + " or raise the fraction"
        )
    if not count.rows:
        detail = f" ({len(skipped)} bad lines skipped)" if skipped else ""
        raise TapefitError(
            f"{path} holds no usable pairs{detail}: it is empty or all lines are bad"
        )


def read_pair_file(path: str | Path, spec: PairFileSpec) -> PairRows:
    """Read every `(text1, text2, label)` row of one file into memory (see `pair_rows`)."""
    count = RowCount()
    rows = list(pair_rows(path, spec, count))
    columns = list(zip(*rows, strict=True))
    return PairRows(
        np.array(columns[0], dtype=object),
        np.array(columns[1], dtype=object),
        np.array(columns[2], dtype="float32"),
        skipped=len(count.skipped),
        skipped_lines=count.skipped[:20],
        negatives=np.array(columns[3], dtype=object) if len(columns) > 3 else None,
    )


def _checked_record(record: Any, spec: PairFileSpec) -> tuple:
    if isinstance(record, Exception):
        raise record
    fields = list(record)
    text_a, text_b = fields.pop(0), fields.pop(0)
    raw_label = fields.pop(0) if spec.label_column is not None else spec.positive_label
    texts = [text_a, text_b, *fields]  # the negative, when configured, is what is left
    if not all(isinstance(text, str) for text in texts):
        raise ValueError("texts must be strings")
    if not all(text.strip() for text in texts):
        raise ValueError("a text is empty")
    return (text_a, text_b, _parse_label(raw_label, spec), *fields)

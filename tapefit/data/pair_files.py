"""Reading text-pair files (CSV, TSV, JSONL) with errors that name the file and the line."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from tapefit.choices import choice_enum, parse_choice
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


class OnBadLine(str, Enum):
    """What a malformed line does: stop the run, or be skipped and counted."""

    error = "error"
    skip = "skip"


QUOTING = {
    "minimal": csv.QUOTE_MINIMAL,
    "none": csv.QUOTE_NONE,
    "all": csv.QUOTE_ALL,
    "nonnumeric": csv.QUOTE_NONNUMERIC,
}
Quoting = choice_enum("Quoting", QUOTING)
FORMATS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}


@dataclass
class PairFileSpec:
    """How to read one pair file. The `data=pairs_file` schema extends this class, so its keys
    are these fields and are declared nowhere else."""

    format: FileFormat = FileFormat.auto
    text1_column: str = "text1"  # a header name, or a 0-based index when header is false
    text2_column: str = "text2"
    label_column: str = "label"
    header: bool = True
    delimiter: str | None = None  # default: "," for csv, tab for tsv
    quoting: Quoting = Quoting.minimal  # type: ignore[valid-type]
    label_range: list[float] = field(default_factory=lambda: [0.0, 5.0])
    label_type: LabelType = LabelType.graded  # binary: labels must be 0 or 1
    on_bad_line: OnBadLine = OnBadLine.error

    def __post_init__(self) -> None:
        self.format = parse_choice(FileFormat, self.format, "data.format")
        self.quoting = parse_choice(Quoting, self.quoting, "data.quoting")
        self.label_type = parse_choice(LabelType, self.label_type, "data.label_type")
        self.on_bad_line = parse_choice(OnBadLine, self.on_bad_line, "data.on_bad_line")
        self.text1_column, self.text2_column, self.label_column = (
            str(self.text1_column),
            str(self.text2_column),
            str(self.label_column),
        )
        self.label_range = [float(value) for value in self.label_range]

    @classmethod
    def from_config(cls, options: Any) -> PairFileSpec:
        """The spec held by a config node that has (at least) these fields."""
        return cls(**{spec_field.name: options[spec_field.name] for spec_field in fields(cls)})


@dataclass
class PairRows:
    """The pairs read from a file, and how many bad lines were skipped."""

    texts_a: np.ndarray
    texts_b: np.ndarray
    labels: np.ndarray
    skipped: int = 0
    skipped_lines: list[int] = field(default_factory=list)


def resolve_format(path: Path, spec: PairFileSpec) -> str:
    """The file's format: as configured, or from its extension when `auto`."""
    if spec.format != FileFormat.auto:
        return spec.format.value
    if path.suffix.lower() not in FORMATS:
        raise TapefitError(
            f"{path}: cannot tell the format from {path.suffix!r}; "
            "set data.format=csv, tsv or jsonl"
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


def _column_index(name: str, header: list[str] | None, path: Path) -> int:
    if header is None:
        if not str(name).isdigit():
            raise TapefitError(
                f"{path}: column {name!r} must be a 0-based index when data.header=false"
            )
        return int(name)
    if name in header:
        return header.index(name)
    if str(name).isdigit() and int(name) < len(header):
        return int(name)
    raise TapefitError(f"{path}: no column {name!r} in the header; it has {header}")


def _delimited_records(path: Path, kind: str, spec: PairFileSpec):
    """Yield `(line_number, (text1, text2, label) or error)` from a CSV/TSV file."""
    delimiter = spec.delimiter or ("," if kind == "csv" else "\t")
    with path.open(newline="", encoding="utf-8") as file:
        quoting = QUOTING[spec.quoting.value]
        reader = csv.reader(file, delimiter=delimiter, quoting=quoting, strict=True)
        header = None
        if spec.header:
            try:
                header = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                raise TapefitError(f"{path}:1: unreadable header ({error})") from error
        columns = [
            _column_index(name, header, path)
            for name in (spec.text1_column, spec.text2_column, spec.label_column)
        ]
        width = len(header) if header is not None else None
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                yield reader.line_num, ValueError(f"malformed line ({error})")
                continue
            if not fields:
                continue
            if width is None:
                width = len(fields)
            if len(fields) != width or max(columns) >= len(fields):
                yield (
                    reader.line_num,
                    ValueError(
                        f"{len(fields)} fields where {max(width, max(columns) + 1)} were expected"
                    ),
                )
                continue
            yield reader.line_num, tuple(fields[i] for i in columns)


def _jsonl_records(path: Path, spec: PairFileSpec):
    """Yield `(line_number, (text1, text2, label) or error)` from a JSON-lines file."""
    keys = (spec.text1_column, spec.text2_column, spec.label_column)
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                yield number, ValueError(f"invalid JSON ({error.msg})")
                continue
            missing = [key for key in keys if not isinstance(record, dict) or key not in record]
            if missing:
                yield number, ValueError(f"missing key(s) {missing}")
                continue
            yield number, tuple(record[key] for key in keys)


def read_pair_file(path: str | Path, spec: PairFileSpec) -> PairRows:
    """Read `(text1, text2, label)` rows; bad lines raise (file:line) or are skipped and counted."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise TapefitError(f"pair file {path} does not exist: check data.train_path/test_path")
    kind = resolve_format(path, spec)
    records = (
        _jsonl_records(path, spec) if kind == "jsonl" else _delimited_records(path, kind, spec)
    )
    texts_a, texts_b, labels, skipped = [], [], [], []
    for number, record in records:
        try:
            if isinstance(record, Exception):
                raise record
            text_a, text_b, raw_label = record
            if not isinstance(text_a, str) or not isinstance(text_b, str):
                raise ValueError("texts must be strings")
            label = _parse_label(raw_label, spec)
        except ValueError as error:
            if spec.on_bad_line == OnBadLine.skip:
                skipped.append(number)
                continue
            raise TapefitError(
                f"{path}:{number}: {error}; fix the line or set data.on_bad_line=skip"
            ) from None
        texts_a.append(text_a)
        texts_b.append(text_b)
        labels.append(label)
    if not labels:
        detail = f" ({len(skipped)} bad lines skipped)" if skipped else ""
        raise TapefitError(
            f"{path} holds no usable pairs{detail}: it is empty or all lines are bad"
        )
    return PairRows(
        np.array(texts_a, dtype=object),
        np.array(texts_b, dtype=object),
        np.array(labels, dtype="float32"),
        skipped=len(skipped),
        skipped_lines=skipped[:20],
    )

"""Labelled images listed in a table: one row per image, its file or its encoded bytes and its
label, in a CSV/TSV, JSON lines, JSON array or Parquet file or a Hugging Face dataset folder.

The tables people have: a `train.csv` of `filename,label` beside the photos, a Parquet file or
a `save_to_disk` folder of a Hugging Face image dataset (an `Image` column stores
`{"bytes": ..., "path": ...}` per row, a `ClassLabel` column class indices whose names the
dataset's metadata keeps). Files are read and decoded in the pipeline, as for image folders;
images a dataset folder or a Parquet file holds as bytes are read there one at a time,
memory-mapped (`tapefit.data.mapped_images`), not held in memory. A test table without the
label column holds new images to predict on (`tapefit.data.unlabelled`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tapefit.data.image_folders import (
    BYTES_TAG,
    CHANNELS,
    FILE_TAG,
    FileSplit,
    FolderImageData,
    ImageSources,
    check_image_files_options,
    folder_data,
    split_off,
)
from tapefit.data.images import check_fraction
from tapefit.data.loader_checks import checked_by, with_defaults
from tapefit.data.mapped_images import MappedImages
from tapefit.data.pair_files import FileFormat, Quoting, resolve_format
from tapefit.data.pair_paths import checked_file, is_saved_dataset
from tapefit.data.pair_records import column_names, file_records, release_arrow_memory
from tapefit.errors import TapefitError
from tapefit.files import read_json

log = logging.getLogger("tapefit")
MAPPABLE = ("hf_dataset", "parquet")  # tables whose image bytes are read memory-mapped


@dataclass
class ImageTableSpec:
    """How to read an image table: its format and the two columns a row is read from."""

    format: FileFormat = FileFormat.auto
    image_column: str = "image"
    label_column: str | None = "label"  # None: a table without labels (images to predict on)
    header: bool = True
    delimiter: str | None = None
    quoting: Any = Quoting.minimal
    encoding: str = "utf-8"
    pair_hints = False  # the pair files' optional-column hints do not apply

    @property
    def columns(self) -> list[str]:
        """The image column, then the label column (if the table has labels)."""
        return [self.image_column, *([self.label_column] if self.label_column else [])]

    @property
    def column_keys(self) -> dict[str, str]:
        """Each column with the config key that names it."""
        keys = {self.image_column: "data.image_column"}
        return {**keys, **({self.label_column: "data.label_column"} if self.label_column else {})}


@dataclass
class TableRows:
    """The tagged image sources and raw labels of one table, and the class names its
    metadata declares (a Hugging Face `ClassLabel`), if any."""

    sources: np.ndarray
    labels: list[int | str] | None  # None: the table has no labels
    declared_names: list[str] | None
    lines: list[int]  # each row's line in the file (CSV/TSV, JSON lines) or its position
    names: list[str]  # each row's image as the table names it: its path, else its row


def image_source(value: Any, folder: Path) -> bytes:
    """A table cell as a tagged source: `file:<path>` (a relative path is the table's
    folder's) or `data:<encoded image>`; a ValueError says what is wrong with it.

    Examples:
        >>> image_source({"bytes": b"PNG...", "path": None}, Path("."))
        b'data:PNG...'
        >>> image_source("missing.png", Path("photos"))
        Traceback (most recent call last):
        ...
        ValueError: image file photos/missing.png does not exist (a relative path is the ...
    """
    if isinstance(value, dict):  # a Hugging Face Image: the bytes, else the path
        value = value.get("bytes") or value.get("path")
    if isinstance(value, bytes | bytearray) and value:
        return BYTES_TAG + bytes(value)
    if isinstance(value, str) and value.strip():
        path = Path(value).expanduser()
        path = path if path.is_absolute() else folder / path
        if not path.is_file():
            raise ValueError(
                f"image file {path} does not exist (a relative path is the table's folder's)"
            )
        return FILE_TAG + str(path).encode("utf-8")
    raise ValueError(
        f"the image is {type(value).__name__} {value!r:.40}: give a file path or the encoded "
        "image's bytes (a Hugging Face Image column)"
    )


def class_label(value: Any) -> int | str:
    """A label cell: a class index (an integer, or digits) or a class name.

    Examples:
        >>> class_label("3"), class_label(2.0), class_label("cat")
        (3, 2, 'cat')
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"the label is {value!r}: give a class name or a class index")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"the label {value!r} is neither a class name nor a class index (0, 1, ...)")


def read_image_table(
    path: str | Path,
    spec: ImageTableSpec,
    key: str = "train_path",
    mapped: MappedImages | None = None,
) -> TableRows:
    """Every row of one table, each bad row a one-line error naming the file and the row
    (`file:line`, the line a CSV/TSV or JSON-lines row is on, else the row's position). With
    `mapped`, an image a dataset folder or a Parquet file holds as bytes is read memory-mapped
    (`tapefit.data.mapped_images`; the row's source names it); without, the image bytes are
    held in memory, and the log says how many megabytes.

    Raises:
        TapefitError: the table is missing or unreadable, a column is missing (naming the
            table's own columns and the key to set), a row's image or label is unusable, or
            the table holds no rows.
    """
    path = checked_file(path, "image table", key)
    kind = resolve_format(path, spec)
    folder = path if is_saved_dataset(path) else path.parent
    table = None  # the mapped table this table's image bytes are read from, once added
    sources, labels, lines, names = [], [], [], []
    try:
        for first, _, record in file_records(path, kind, spec):
            try:
                if isinstance(record, Exception):
                    raise record
                image, *label = record
                source = image_source(image, folder)
                if mapped and kind in MAPPABLE and source.startswith(BYTES_TAG):
                    if table is None:
                        table = mapped.add(path, spec.image_column, kind)
                    source = mapped.source(table, first - 1)  # the row's position, from 0
                sources.append(source)
                labels += [class_label(value) for value in label]
                lines.append(first)
                names.append(row_name(image, first))
            except ValueError as error:
                raise TapefitError(f"{path}:{first}: {error}; fix or remove the row") from None
    except UnicodeDecodeError as error:
        raise TapefitError(
            f"{path} is not {spec.encoding} text ({error.reason}): set data.encoding"
        ) from None
    if not sources:
        raise TapefitError(f"image table {path} holds no rows: it is empty")
    if kind in MAPPABLE:
        release_arrow_memory()  # what the allocator kept of the rows read
    held = sum(len(source) for source in sources if source.startswith(BYTES_TAG))
    if held:
        log.info(
            "image table %s: %.1f MB of encoded images held in memory (a Parquet file or a "
            "Hugging Face dataset folder, save_to_disk, is read memory-mapped instead)",
            path,
            held / 1e6,
        )
    declared = declared_names(path, kind, spec) if spec.label_column else None
    labelled = labels if spec.label_column else None
    return TableRows(np.array(sources, dtype=object), labelled, declared, lines, names)


def row_name(value: Any, row: int) -> str:
    """How a prediction file names a row's image: the path the table gives, else the row.

    Examples:
        >>> row_name("photos/1.png", 2), row_name({"bytes": b"...", "path": None}, 3)
        ('photos/1.png', 'row 3')
    """
    if isinstance(value, dict):
        value = value.get("path")
    return value if isinstance(value, str) and value.strip() else f"row {row}"


def declared_names(path: Path, kind: str, spec: ImageTableSpec) -> list[str] | None:
    """The class names a Hugging Face dataset's metadata gives its label column, if any."""
    features = None
    if kind == "hf_dataset":
        features = (read_json(path / "dataset_info.json", {}) or {}).get("features")
    elif kind == "parquet":
        import pyarrow.parquet as parquet

        metadata = parquet.ParquetFile(path).schema_arrow.metadata or {}
        if b"huggingface" in metadata:
            info = json.loads(metadata[b"huggingface"]).get("info", {})
            features = info.get("features")
    label = (features or {}).get(spec.label_column) or {}
    names = label.get("names") if label.get("_type") == "ClassLabel" else None
    return [str(name) for name in names] if names else None


def labelled_split(rows: TableRows, classes: list[str] | None, path: Any) -> FileSplit:
    """`rows` with class indices: names looked up in `classes`, indices checked against it
    (a table without labels stays unlabelled)."""
    if rows.labels is None:
        return FileSplit(rows.sources, None, np.array(rows.names))
    indices = []
    for line, label in zip(rows.lines, rows.labels, strict=True):
        if isinstance(label, str):
            if classes is None or label not in classes:
                known = classes if classes is not None else "class indices"
                raise TapefitError(
                    f"{path}:{line}: class {label!r} is not one of the training classes "
                    f"{known}: fix the label or add the class to the training table"
                )
            label = classes.index(label)
        elif classes is not None and label >= len(classes):
            raise TapefitError(
                f"{path}:{line}: class index {label} is not below the {len(classes)} "
                f"training classes: fix the label"
            )
        indices.append(label)
    return FileSplit(rows.sources, np.array(indices, dtype="int64"), np.array(rows.names))


def training_classes(rows: TableRows, path: Any) -> list[str]:
    """The classes of the training table: its metadata's names, else its class names sorted,
    else its class indices `0 ... max` as names."""
    if rows.declared_names:
        return rows.declared_names
    names = sorted({label for label in rows.labels if isinstance(label, str)})
    indices = [label for label in rows.labels if isinstance(label, int)]
    if names and indices:
        kinds = [isinstance(label, str) for label in rows.labels]
        other = kinds.index(not kinds[0])
        raise TapefitError(
            f"{path}:{rows.lines[other]}: label {rows.labels[other]!r} mixes class names and "
            f"class indices (line {rows.lines[0]}: {rows.labels[0]!r}): use one or the other"
        )
    return names or [str(index) for index in range(max(indices) + 1)]


def held_out_table_spec(path: str, spec: ImageTableSpec) -> tuple[ImageTableSpec, dict[str, str]]:
    """How to read the test table: as `spec`, or, when it has no label column at all, as a
    table of images without labels (for `python -m tapefit.predict`), with why."""
    table = checked_file(path, "image table", "test_path")
    names = column_names(table, resolve_format(table, spec), spec)
    if names is None or spec.label_column in names or spec.image_column not in names:
        return spec, {}
    why = (
        f"data.test_path={path} has no column {spec.label_column!r}, so its images have no "
        f"labels (its columns: {names}; labels in another column: set data.label_column)"
    )
    return dataclasses.replace(spec, label_column=None), {"test": why}


def _check_image_table(given: dict[str, Any]) -> None:
    check_image_files_options(with_defaults(image_table, given))


@checked_by(_check_image_table)
def image_table(
    train_path: str,
    validation_path: str | None = None,
    test_path: str | None = None,
    image_column: str = "image",
    label_column: str = "label",
    format: Literal["auto", "csv", "tsv", "jsonl", "json", "parquet", "hf_dataset"] = "auto",
    image_size: Sequence[int] = (64, 64),
    color_mode: Literal["grayscale", "rgb", "rgba"] = "rgb",
    batch_size: int = 32,
    val_fraction: float = 0.15,
    cache: bool = False,
    seed: int = 0,
) -> FolderImageData:
    """Labelled images listed in tables (CSV/TSV, JSON, Parquet, a Hugging Face dataset).

    Args:
        train_path: The training table.
        validation_path: The validation table; None holds out `val_fraction` of training.
        test_path: The test table; None: no test split (no `test_*` metrics). A table with
            no label column is unlabelled: new images for `python -m tapefit.predict`, which
            training and `tapefit.evaluate` refuse.
        image_column: The column holding each image's file (relative to the table's folder)
            or its encoded bytes (a Hugging Face `Image` column).
        label_column: The column holding each image's class name or class index.
        format: The tables' format; `auto`: from each file's extension (a dataset folder is
            recognised by its files).
        image_size: `[height, width]` every image is resized to.
        color_mode: Channels images are decoded to: grayscale, rgb or rgba.
        batch_size: Images per batch.
        val_fraction: Share of training images held out when there is no validation table.
        cache: Keep decoded images in memory after the first epoch.
        seed: The run's seed: the held-out split and the per-epoch shuffle.

    Returns:
        `FolderImageData`; `model_arguments()` add the class names (the training table's
        names sorted, a dataset's `ClassLabel` names, or the indices).

    Raises:
        TapefitError: a table missing or unreadable, a column missing, a row whose image file
            does not exist or whose label is unusable, or a validation/test class that is not
            a training class.

    Examples:
        Four 8x8 PNG images listed in a CSV file beside them:

        >>> from pathlib import Path
        >>> import numpy as np, tensorflow as tf
        >>> rows = ["file,label"]
        >>> for i, label in enumerate(["cat", "dog", "cat", "dog"]):
        ...     png = tf.io.encode_png(np.full((8, 8, 3), 60 * i, "uint8")).numpy()
        ...     _ = Path(f"{i}.png").write_bytes(png)
        ...     rows.append(f"{i}.png,{label}")
        >>> _ = Path("train.csv").write_text("\\n".join(rows))
        >>> data = image_table("train.csv", image_column="file", image_size=(8, 8),
        ...                    val_fraction=0.5)
        >>> data.class_names, data.sizes
        (['cat', 'dog'], {'train': 2, 'val': 2})
    """
    spec = ImageTableSpec(
        format=FileFormat(format), image_column=str(image_column), label_column=str(label_column)
    )
    mapped = MappedImages()  # the dataset folders' image bytes stay in their files
    train_rows = read_image_table(train_path, spec, "train_path", mapped)
    classes = training_classes(train_rows, train_path)
    train = labelled_split(train_rows, classes, train_path)
    if validation_path is None:
        train, val = split_off(train, check_fraction("val_fraction", val_fraction), seed)
    else:
        val_rows = read_image_table(validation_path, spec, "validation_path", mapped)
        val = labelled_split(val_rows, classes, validation_path)
    splits = {"train": train, "val": val}
    unlabelled = {}
    if test_path is not None:
        test_spec, unlabelled = held_out_table_spec(test_path, spec)
        test_rows = read_image_table(test_path, test_spec, "test_path", mapped)
        splits["test"] = labelled_split(test_rows, classes, test_path)
    return folder_data(
        splits,
        classes,
        batch_size=batch_size,
        seed=seed,
        size=list(image_size),
        channels=CHANNELS[color_mode],
        cache=cache,
        sources=ImageSources(tagged=True, mapped=mapped if mapped.tables else None),
        unlabelled=unlabelled,
        name_column=spec.image_column,
    )

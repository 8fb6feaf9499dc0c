"""Encoded images read one at a time from Hugging Face dataset folders (`save_to_disk`), whose
Arrow files the `datasets` library memory-maps: a table of photos larger than memory trains
without holding its bytes, and the pipeline still shuffles every row, as for image files.

An image table's row whose image a dataset folder holds as bytes becomes the tagged source
`mmap:<table>:<row>`; `decode` reads it through `MappedImages.read`, a `tf.numpy_function` that
copies that one image out of the memory-mapped file.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import tensorflow as tf

MMAP_TAG = b"mmap:"


class MappedImages:
    """The dataset folders an image table's rows point into, opened on first read.

    Examples:
        >>> images = MappedImages()
        >>> images.source(images.add("photos_dataset", "image"), 7)
        b'mmap:0:7'
    """

    def __init__(self) -> None:
        self.tables: list[tuple[str, str]] = []  # (dataset folder, image column)
        self.columns_opened: dict[int, Any] = {}
        self.opening = threading.Lock()

    def add(self, folder: str | Path, column: str) -> int:
        """The number of the table `folder`'s `column` (added once)."""
        table = (str(folder), column)
        if table not in self.tables:
            self.tables.append(table)
        return self.tables.index(table)

    def source(self, table: int, row: int) -> bytes:
        """The tagged source of row `row` (from 0) of table `table`."""
        return MMAP_TAG + f"{table}:{row}".encode()

    def encoded(self, body: bytes) -> bytes:
        """The encoded image a source's body (`<table>:<row>`) names, copied out of the map."""
        body = body.item() if isinstance(body, np.ndarray) else body  # a 0-d array, eagerly
        table, row = (int(part) for part in bytes(body).decode().split(":"))
        value = self._column(table)[row]
        return (value["bytes"] if isinstance(value, pa.StructScalar) else value).as_py()

    def read(self, body: tf.Tensor) -> tf.Tensor:
        """`encoded` inside a `tf.data` pipeline."""
        encoded = tf.numpy_function(self.encoded, [body], tf.string, stateful=False)
        return tf.ensure_shape(encoded, [])

    def _column(self, table: int) -> Any:
        with self.opening:
            if table not in self.columns_opened:
                import datasets

                folder, column = self.tables[table]
                # save_to_disk writes the rows in order (an indices mapping flattened), so
                # row N of the dataset is row N of its memory-mapped Arrow table
                self.columns_opened[table] = datasets.load_from_disk(folder).data.column(column)
            return self.columns_opened[table]

    def __getstate__(self) -> dict[str, Any]:  # copies (deepcopy, pickling) reopen the folders
        return {"tables": list(self.tables)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()
        self.tables = state["tables"]

"""Encoded images read one at a time from memory-mapped Arrow files, so that a table of photos
larger than memory trains without holding its bytes, and the pipeline still shuffles every
row each epoch, as for image files.

- A Hugging Face dataset folder (`save_to_disk`): its own Arrow files, which `datasets`
  memory-maps.
- A Parquet file: Parquet compresses its pages, so it cannot be mapped; its image column is
  copied once, a row group at a time, into an uncompressed Arrow file in tapefit's cache
  folder (`TAPEFIT_CACHE_DIR`, else `$XDG_CACHE_HOME/tapefit`, else `~/.cache/tapefit`),
  as `datasets.load_dataset("parquet", ...)` copies it into its own cache. The copy is named
  by the file's path, size and modification time, and reused while they stay the same.

An image table's row whose image such a table holds as bytes becomes the tagged source
`mmap:<table>:<row>`; `decode` reads it through `MappedImages.read`, a `tf.numpy_function` that
copies that one image out of the map.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from tapefit.data.pair_records import ARROW_BATCH, release_arrow_memory
from tapefit.errors import TapefitError
from tapefit.files import atomic_write

MMAP_TAG = b"mmap:"
log = logging.getLogger("tapefit")


def cache_folder() -> Path:
    """Where tapefit keeps its Arrow copies of Parquet image tables."""
    if os.environ.get("TAPEFIT_CACHE_DIR"):
        return Path(os.environ["TAPEFIT_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tapefit"


def arrow_copy(parquet_file: str | Path, column: str) -> Path:
    """The uncompressed Arrow file holding `column` of `parquet_file`, written on first use."""
    import pyarrow as pa
    import pyarrow.parquet as parquet

    source = Path(parquet_file).resolve()
    stat = source.stat()
    key = f"{source}\0{stat.st_size}\0{stat.st_mtime_ns}\0{column}".encode()
    target = cache_folder() / "image_tables" / f"{hashlib.sha256(key).hexdigest()[:24]}.arrow"
    if target.is_file():
        log.info("image table %s: its images read memory-mapped from %s", source, target)
        return target
    # a buffered stream, not whole column chunks: a row group of photos is hundreds of MB
    table = parquet.ParquetFile(source, buffer_size=1 << 20, pre_buffer=False)
    schema = pa.schema([table.schema_arrow.field(column)])

    def write(file: Any) -> None:
        with pa.ipc.new_file(file, schema) as writer:
            for batch in table.iter_batches(batch_size=ARROW_BATCH, columns=[column]):
                writer.write_batch(batch)
                del batch
                release_arrow_memory()

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, write, mode="wb")
    except OSError as error:  # not a folder, not writable, the disk full
        raise TapefitError(
            f"image table {source}: cannot write its images' Arrow copy into {target.parent} "
            f"({error.strerror or error}): set TAPEFIT_CACHE_DIR to a writable folder with room "
            "for the images"
        ) from None
    log.info(
        "image table %s: its images copied once into %s (%.1f MB), read memory-mapped from "
        "there (TAPEFIT_CACHE_DIR sets the folder)",
        source,
        target,
        target.stat().st_size / 1e6,
    )
    return target


class MappedImages:
    """The tables an image table's rows point into, opened on first read.

    Examples:
        >>> images = MappedImages()
        >>> images.source(images.add("photos_dataset", "image", "hf_dataset"), 7)
        b'mmap:0:7'
    """

    def __init__(self) -> None:
        self.tables: list[tuple[str, str, str]] = []  # (path, image column, kind)
        self.columns_opened: dict[int, Any] = {}
        self.opening = threading.Lock()

    def add(self, path: str | Path, column: str, kind: str) -> int:
        """The number of table `path`'s `column` (added once); `kind` is `hf_dataset` (a
        dataset folder) or `parquet` (copied into the cache now, if not there yet)."""
        if kind == "parquet":
            path = arrow_copy(path, column)
        table = (str(path), column, kind)
        if table not in self.tables:
            self.tables.append(table)
        return self.tables.index(table)

    def source(self, table: int, row: int) -> bytes:
        """The tagged source of row `row` (from 0) of table `table`."""
        return MMAP_TAG + f"{table}:{row}".encode()

    def encoded(self, body: bytes) -> bytes:
        """The encoded image a source's body (`<table>:<row>`) names, copied out of the map."""
        import pyarrow as pa

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
                path, column, kind = self.tables[table]
                self.columns_opened[table] = _mapped_column(path, column, kind)
            return self.columns_opened[table]

    def __getstate__(self) -> dict[str, Any]:  # copies (deepcopy, pickling) reopen the files
        return {"tables": list(self.tables)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()
        self.tables = state["tables"]


def _mapped_column(path: str, column: str, kind: str) -> Any:
    """The memory-mapped `column` of a dataset folder or of an Arrow copy, as a ChunkedArray."""
    if kind == "hf_dataset":
        import datasets

        # save_to_disk writes the rows in order (an indices mapping flattened), so row N of
        # the dataset is row N of its memory-mapped Arrow table
        return datasets.load_from_disk(path).data.column(column)
    import pyarrow as pa

    # the table's buffers point into the map, which stays open while they are referenced
    return pa.ipc.open_file(pa.memory_map(path)).read_all().column(column)

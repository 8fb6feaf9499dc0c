"""Labelled image folders (one subfolder per class), as `keras.utils.image_dataset_from_directory`
reads them: only the file list is held in memory; images are read, decoded and resized inside
the `tf.data` pipeline, a few batches ahead of the step."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from sklearn.model_selection import train_test_split

from tapefit.data.images import ImageData, ImageSplit, check_fraction
from tapefit.data.loader_checks import at_least_or_null
from tapefit.data.mapped_images import MMAP_TAG, MappedImages
from tapefit.data.pipeline import PREFETCH_BATCHES, pipeline_options
from tapefit.errors import TapefitError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")  # what tf.io.decode_image reads
CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}
DECODERS = min(8, os.cpu_count() or 1)  # images decoded in parallel


@dataclass
class FileSplit:
    """One split's image files and their class indices (None: an unlabelled split, images to
    predict on)."""

    paths: np.ndarray
    labels: np.ndarray | None
    names: np.ndarray | None = None  # how the input names each image (a table's cells)


def class_folder(
    root: str, key: str, classes: Sequence[str] | None = None
) -> tuple[FileSplit, list[str]]:
    """The images under `root` (one subfolder per class, searched recursively) and the class
    names, sorted; with `classes` (the training split's), a subfolder must be one of them."""
    folder = Path(root).expanduser()
    if not folder.is_dir():
        raise TapefitError(
            f"data.{key}={root} is not a directory: point it at a folder with one subfolder of "
            "images per class"
        )
    subfolders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subfolders:
        raise TapefitError(
            f"{folder} has no class subfolders: put each class's images in a subfolder named "
            f"after the class ({folder}/cat/1.png, {folder}/dog/2.png, ...)"
        )
    names = [p.name for p in subfolders]
    if classes is not None:
        unknown = [name for name in names if name not in classes]
        if unknown:
            raise TapefitError(
                f"{folder / unknown[0]}: class {unknown[0]!r} is not one of the training "
                f"classes {list(classes)}: rename or remove the folder"
            )
    classes = list(classes) if classes is not None else names
    paths: list[str] = []
    labels: list[int] = []
    for subfolder in subfolders:
        files = sorted(
            str(p)
            for p in subfolder.rglob("*")
            if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
        )
        if not files:
            raise TapefitError(
                f"class folder {subfolder} holds no images ({', '.join(IMAGE_EXTENSIONS)}): add "
                "images or remove the folder"
            )
        paths += files
        labels += [classes.index(subfolder.name)] * len(files)
    return FileSplit(np.array(paths), np.array(labels, dtype="int64")), classes


def unlabelled_folder(root: str, key: str) -> FileSplit:
    """The images directly inside `root` (no class subfolders), unlabelled: new images for
    `python -m tapefit.predict`, which a run refuses to train or test on."""
    folder = Path(root).expanduser()
    files = sorted(
        str(p) for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
    )
    if not files:
        raise TapefitError(
            f"data.{key}={root} holds no images ({', '.join(IMAGE_EXTENSIONS)}) and no class "
            "subfolders: point it at a folder of images"
        )
    return FileSplit(np.array(files), None)


def held_out_folder(root: str, classes: Sequence[str]) -> FileSplit:
    """The test folder: one subfolder per training class, or images with no class subfolders
    at all, unlabelled."""
    folder = Path(root).expanduser()
    if folder.is_dir() and not any(
        p.is_dir() and not p.name.startswith(".") for p in folder.iterdir()
    ):
        return unlabelled_folder(root, "test_path")
    return class_folder(root, "test_path", classes)[0]


def check_image_files_options(options: Mapping[str, Any]) -> None:
    """The checks of `image_folder`'s and `image_table`'s shared options (given with their
    defaults): the image size, the held-out fraction without a validation path, the batch.

    Examples:
        >>> check_image_files_options(
        ...     {"image_size": [8], "validation_path": "val", "batch_size": 4})
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: data.image_size=[8] must be [height, width], both ...
    """
    size = list(options["image_size"])
    if len(size) != 2 or min(size) < 1:
        raise TapefitError(
            f"data.image_size={size} must be [height, width], both at least 1, e.g. [64, 64]"
        )
    if options.get("validation_path") is None:
        check_fraction("val_fraction", options["val_fraction"])
    at_least_or_null(options["batch_size"], 1, "batch_size", null=False)


def split_off(files: FileSplit, fraction: float, seed: int) -> tuple[FileSplit, FileSplit]:
    """A seeded split of `files` into (rest, `fraction`), stratified when every class can be
    in both parts."""
    counts = np.bincount(files.labels)
    classes = int((counts > 0).sum())
    n_part = int(np.ceil(fraction * len(files.labels)))
    stratify = (
        files.labels
        if counts[counts > 0].min() >= 2 and min(n_part, len(files.labels) - n_part) >= classes
        else None
    )
    if len(files.labels) < 2:
        raise TapefitError(
            f"{files.paths[0]} is the only training image: a validation split needs more; add "
            "images or give data.validation_path"
        )
    rest, part = train_test_split(
        np.arange(len(files.labels)), test_size=fraction, stratify=stratify, random_state=seed
    )
    rest_files, part_files = (
        FileSplit(
            files.paths[rows],
            files.labels[rows],
            None if files.names is None else np.asarray(files.names)[rows],
        )
        for rows in (rest, part)
    )
    return rest_files, part_files


# A tagged source (image tables): `file:<path>` is read from disk, `data:<bytes>` holds the
# encoded image itself (a Hugging Face Image column's bytes), `mmap:<table>:<row>` names a row
# of a memory-mapped dataset folder (`tapefit.data.mapped_images`). Every tag is 5 bytes.
FILE_TAG, BYTES_TAG = b"file:", b"data:"


def read_source(source: tf.Tensor, mapped: MappedImages | None = None) -> tf.Tensor:
    """The encoded image a tagged source names: the file's bytes, the bytes it holds, or
    (with `mapped`) the dataset row's."""
    tag = tf.strings.substr(source, 0, len(FILE_TAG))
    body = tf.strings.substr(source, len(FILE_TAG), -1)
    if mapped is None:
        return tf.cond(tf.equal(tag, FILE_TAG), lambda: tf.io.read_file(body), lambda: body)
    return tf.case(
        [
            (tf.equal(tag, FILE_TAG), lambda: tf.io.read_file(body)),
            (tf.equal(tag, MMAP_TAG), lambda: mapped.read(body)),
        ],
        default=lambda: body,
        exclusive=True,
    )


@dataclass
class ImageSources:
    """What a split's image sources are: file names (the default), or tagged sources (an image
    table's: `file:`, `data:`, and `mmap:` rows that `mapped` reads).

    Examples:
        >>> ImageSources(tagged=True).encoded(tf.constant(b"data:PNG")).numpy()
        b'PNG'
        >>> ImageSources().name("photos/cat/1.png", 0, "test")
        'photos/cat/1.png'
    """

    tagged: bool = False
    mapped: MappedImages | None = None

    def encoded(self, source: tf.Tensor) -> tf.Tensor:
        """The encoded image `source` names."""
        return read_source(source, self.mapped) if self.tagged else tf.io.read_file(source)

    def name(self, source: Any, index: int, split: str) -> str:
        """How an error or a prediction file names the image `source` (row `index` of `split`)."""
        return source_name(source, index, split, self.tagged)


def decode(
    path: tf.Tensor, size: Sequence[int], channels: int, sources: ImageSources | None = None
) -> tf.Tensor:
    """One image (a file, or what `sources` says the source is) as float32 in [0, 1], `size`
    (height, width) and `channels` channels."""
    encoded = (sources or ImageSources()).encoded(path)
    image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
    image = tf.image.resize(image, size)  # bilinear; float32
    return tf.ensure_shape(image / 255.0, (*size, channels))


def folder_pipeline(
    files: FileSplit,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int,
    size: Sequence[int],
    channels: int,
    cache: bool = False,
    sources: ImageSources | None = None,
) -> tf.data.Dataset:
    """Image sources (file names, or as `sources` says) -> decoded, resized, batched images.
    Training shuffles the sources (seeded, each epoch) before decoding, so memory holds names,
    not images; `cache` keeps the decoded images in memory after the first epoch (for data
    that fit)."""
    unlabelled = files.labels is None  # batches of images alone
    dataset = tf.data.Dataset.from_tensor_slices(
        files.paths if unlabelled else (files.paths, files.labels)
    )

    def read(path: tf.Tensor, *label: tf.Tensor) -> Any:
        image = decode(path, size, channels, sources)
        return (image, *label) if label else image

    if shuffle and not cache:
        dataset = dataset.shuffle(len(files.paths), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(read, num_parallel_calls=DECODERS, deterministic=True)
    if cache:
        dataset = dataset.cache()
        if shuffle:
            dataset = dataset.shuffle(len(files.paths), seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(PREFETCH_BATCHES).with_options(pipeline_options())


def first_unreadable(
    paths: Sequence[Any], channels: int, sources: ImageSources | None = None
) -> tuple[int, str] | None:
    """The position of the first image (a file, or what `sources` says) that does not decode,
    and why; None if all do."""
    for index, path in enumerate(paths):
        try:
            encoded = (sources or ImageSources()).encoded(path)
            tf.io.decode_image(encoded, channels=channels, expand_animations=False)
        except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as error:
            return index, decoder_reason(error.message)
    return None


def decoder_reason(message: str) -> str:
    """TensorFlow's decoding error without its graph and op names.

    Examples:
        >>> decoder_reason("{{function_node __wrapped__DecodeImage_device_/job:localhost/"
        ...     "replica:0/task:0/device:CPU:0}} Unknown image file format. One of JPEG, PNG "
        ...     "required. [Op:DecodeImage] name: ")
        'Unknown image file format. One of JPEG, PNG required.'
    """
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", first)
    return re.sub(r"\s*\[Op:\w+\].*$", "", first).strip() or first


def source_name(source: Any, index: int, split: str, tagged: bool) -> str:
    """How an error names an image: its file, or its row in the split's table."""
    if not tagged:
        return str(source)
    if bytes(source).startswith(FILE_TAG):
        return bytes(source)[len(FILE_TAG) :].decode("utf-8", "replace")
    return f"row {index + 1} of the {split} table"


@dataclass
class FolderImageData(ImageData):
    """`ImageData` over image folders: `splits` hold file names, not pixels."""

    size: tuple[int, int] = (64, 64)
    channels: int = 3
    sources: ImageSources = field(default_factory=ImageSources)  # what `splits` hold
    # Splits without labels (images to predict on), each with why: `tapefit.data.unlabelled`.
    unlabelled: dict[str, str] = field(default_factory=dict)
    # Each split's images as the input names them (a table's cell, a folder's file), under
    # `name_column`: the first column of `python -m tapefit.predict`'s file.
    row_names: dict[str, list[str]] = field(default_factory=dict)
    name_column: str = "file"

    def rebuilt(self, batch_size: int) -> FolderImageData:
        """New pipelines over the same files: a first epoch's shuffle again, another batch."""
        return folder_data(
            {
                name: FileSplit(*arrays, names=self.row_names.get(name))
                for name, arrays in self.splits.items()
            },
            self.class_names or [],
            batch_size=batch_size,
            seed=self.seed,
            size=self.size,
            channels=self.channels,
            cache=self.cache,
            sources=self.sources,
            unlabelled=self.unlabelled,
            name_column=self.name_column,
        )

    def input_columns(self, split: str) -> dict[str, list[str]]:
        """The columns that name a split's images in a prediction file, in the split's order:
        `{name_column: [...]}` (a folder's file paths, a table's own cells)."""
        names = self.row_names.get(split)
        if names is None:
            names = [
                self.sources.name(path, i, split) for i, path in enumerate(self.splits[split][0])
            ]
        return {self.name_column: list(names)}

    def diagnose(self, error: Exception) -> TapefitError | None:
        """After the pipeline failed: the one-line error naming the file that does not decode,
        if a file is the cause."""
        if not isinstance(error, tf.errors.InvalidArgumentError | tf.errors.NotFoundError):
            return None
        for split, (paths, _) in self.splits.items():
            found = first_unreadable(paths, self.channels, self.sources)
            if found is not None:
                index, reason = found
                where = self.sources.name(paths[index], index, split)
                return TapefitError(
                    f"{where}: not a readable image ({reason}): replace or remove it"
                )
        return None


def folder_data(
    splits: dict[str, FileSplit],
    class_names: list[str],
    *,
    batch_size: int,
    seed: int,
    size: Sequence[int],
    channels: int,
    cache: bool = False,
    sources: ImageSources | None = None,
    unlabelled: Mapping[str, str] | None = None,
    name_column: str = "file",
) -> FolderImageData:
    """Pipelines over `splits` (train, val, optional test) of one set of classes (`sources`:
    what their `paths` are, file names by default; `unlabelled` and `name_column`: as
    `FolderImageData` keeps them)."""
    sources = sources or ImageSources()
    size = (int(size[0]), int(size[1]))
    pipelines = {
        name: None
        if files is None
        else folder_pipeline(
            files,
            batch_size=batch_size,
            shuffle=name == "train",
            seed=seed,
            size=size,
            channels=channels,
            cache=cache,
            sources=sources,
        )
        for name, files in {**{"test": None}, **splits}.items()
    }
    return FolderImageData(
        **pipelines,
        image_shape=(*size, channels),
        num_classes=len(class_names),
        sizes={name: len(files.paths) for name, files in splits.items()},
        splits={name: ImageSplit(files.paths, files.labels) for name, files in splits.items()},
        seed=seed,
        cache=cache,
        class_names=list(class_names),
        size=size,
        channels=channels,
        sources=sources,
        unlabelled=dict(unlabelled or {}),
        row_names={
            name: [str(n) for n in files.names]
            for name, files in splits.items()
            if files.names is not None
        },
        name_column=name_column,
    )

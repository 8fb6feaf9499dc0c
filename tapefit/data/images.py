"""Image classification data: scikit-learn's bundled digits (offline) and MNIST."""

from __future__ import annotations

import functools
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf
from sklearn.model_selection import train_test_split

from tapefit.data.pipeline import make_pipeline
from tapefit.errors import TapefitError

MNIST_KEYS = ("x_train", "y_train", "x_test", "y_test")
MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"


class ImageSplit(NamedTuple):
    """One split of images and their class labels, by name (it unpacks as `images, labels`;
    for folder data, `images` are file names).

    Example:
        >>> split = ImageSplit(np.zeros((2, 8, 8, 1)), np.array([0, 1]))
        >>> split.images.shape, split.labels.tolist()
        ((2, 8, 8, 1), [0, 1])
    """

    images: np.ndarray
    labels: np.ndarray


Split = ImageSplit


@dataclass
class ImageData:
    """Train/validation/test pipelines plus what the model needs to know about them.

    What the image loaders return. The arrays the pipelines were made from are kept, so a
    sweep can make fresh pipelines (another batch size) without loading again.

    Attributes:
        train: Batches of `(images, labels)`, reshuffled each epoch from `seed`.
        val: Validation batches, in order.
        test: Test batches, in order; None when the data have no test split.
        image_shape: `(height, width, channels)`.
        num_classes: The number of classes (the largest label + 1).
        sizes: Samples per split, by split name.
        splits: `(images, labels)` arrays by split name (for folder data: file names).
        seed: The seed of the training shuffle.
        cache: Whether the pipelines keep their elements after the first epoch.
        class_names: For folder data, the subfolders' names by label; else None.
    """

    train: tf.data.Dataset
    val: tf.data.Dataset
    test: tf.data.Dataset | None
    image_shape: tuple[int, ...]
    num_classes: int
    sizes: dict[str, int]
    splits: dict[str, Split]
    seed: int
    cache: bool
    class_names: list[str] | None = None  # folder data: the subfolders' names, by index

    def rebuilt(self, batch_size: int) -> ImageData:
        """The same arrays in new pipelines: a first epoch's shuffle again, another batch size.

        Args:
            batch_size: Samples per batch of the new pipelines.

        Returns:
            New data over the same arrays.
        """
        return image_data(self.splits, batch_size=batch_size, seed=self.seed, cache=self.cache)

    def model_arguments(self) -> dict[str, Any]:
        """What a classifier built for these images is told about them.

        Their shape, the number of classes and, for folder data, the class names by output
        index: a run passes them to the model's constructor, so the config need not repeat
        them.

        Returns:
            Keyword arguments for `Classifier` (a subclass takes them too).
        """
        return {
            "image_shape": list(self.image_shape),
            "num_classes": self.num_classes,
            "class_names": self.class_names,
        }


@functools.lru_cache(maxsize=1)
def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8x8 digits as read-only arrays: images scaled to [0, 1] with a
    channel axis, labels as int64.

    Read from scikit-learn's bundled CSV once per process (about 0.1 s), so the trials of a
    search and the runs of a notebook do not read it again; the arrays are read-only, and
    every split is a copy.

    Examples:
        >>> images, labels = digits_arrays()
        >>> images.shape, images.dtype, labels[:5].tolist(), images.flags.writeable
        ((1797, 8, 8, 1), dtype('float32'), [0, 1, 2, 3, 4], False)
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype("float32")[..., None]
    labels = digits.target.astype("int64")
    images.flags.writeable = labels.flags.writeable = False
    return images, labels


def load_digits_splits(val_fraction: float, test_fraction: float, seed: int) -> dict[str, Split]:
    """scikit-learn's 1,797 8x8 digits, scaled to [0, 1], split with stratification."""
    check_fraction("val_fraction", val_fraction)
    check_fraction("test_fraction", test_fraction)
    images, labels = digits_arrays()
    x_rest, x_test, y_rest, y_test = train_test_split(
        images, labels, test_size=test_fraction, stratify=labels, random_state=seed
    )
    x_train, x_val, y_train, y_val = _split_validation(x_rest, y_rest, val_fraction, seed)
    return {
        "train": ImageSplit(x_train, y_train),
        "val": ImageSplit(x_val, y_val),
        "test": ImageSplit(x_test, y_test),
    }


def load_mnist_arrays(path: str | None) -> dict[str, np.ndarray]:
    """MNIST as `keras.datasets.mnist.load_data()` gives it, or from a local `mnist.npz`."""
    if path is None:
        import keras

        try:
            (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
        except Exception as error:
            raise TapefitError(
                f"MNIST could not be downloaded ({type(error).__name__}): on an offline machine "
                f"fetch {MNIST_URL} elsewhere and pass data.path=/path/to/mnist.npz"
            ) from error
        return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    file = Path(path).expanduser()
    if file.is_dir():
        raise TapefitError(f"data.path={path} is a directory: point it at the mnist.npz file")
    if not file.is_file():
        raise TapefitError(
            f"data.path={path} does not exist: point it at mnist.npz (from {MNIST_URL})"
        )
    try:
        with np.load(file, allow_pickle=False) as archive:
            missing = [key for key in MNIST_KEYS if key not in archive.files]
            if missing:
                raise TapefitError(
                    f"{file} is not an MNIST archive: it lacks {', '.join(missing)}; expected "
                    f"arrays {', '.join(MNIST_KEYS)} as in {MNIST_URL}"
                )
            return {key: archive[key] for key in MNIST_KEYS}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        # numpy's own message may suggest allow_pickle=True: never load untrusted pickles.
        raise TapefitError(
            f"{file} is not a readable .npz archive ({type(error).__name__}: truncated, "
            f"corrupt or another format): download mnist.npz again from {MNIST_URL}"
        ) from None


def load_mnist_splits(path: str | None, val_fraction: float, seed: int) -> dict[str, Split]:
    """MNIST scaled to [0, 1] with a channel axis; validation is a stratified part of train."""
    check_fraction("val_fraction", val_fraction)
    arrays = load_mnist_arrays(path)
    for prefix in ("train", "test"):
        images, labels = arrays[f"x_{prefix}"], arrays[f"y_{prefix}"]
        if images.ndim != 3 or len(images) != len(labels) or len(images) == 0:
            raise TapefitError(
                f"MNIST x_{prefix} must be (n, height, width) with one label each; got images "
                f"{images.shape} and labels {labels.shape}"
            )
        if labels.min() < 0 or labels.max() > 9:
            raise TapefitError(
                f"MNIST y_{prefix} labels must lie in 0..9; they range from {labels.min()} to "
                f"{labels.max()}"
            )
        check_finite(images, f"MNIST x_{prefix}")
    if arrays["x_train"].shape[1:] != arrays["x_test"].shape[1:]:
        raise TapefitError(
            f"MNIST test images are {arrays['x_test'].shape[1:]} but training images "
            f"{arrays['x_train'].shape[1:]}: both splits must have one image size"
        )
    scale = 255.0 if arrays["x_train"].dtype == np.uint8 else 1.0
    x_all = (arrays["x_train"] / scale).astype("float32")[..., None]
    y_all = arrays["y_train"].astype("int64")
    x_test = (arrays["x_test"] / scale).astype("float32")[..., None]
    x_train, x_val, y_train, y_val = _split_validation(x_all, y_all, val_fraction, seed)
    return {
        "train": ImageSplit(x_train, y_train),
        "val": ImageSplit(x_val, y_val),
        "test": ImageSplit(x_test, arrays["y_test"].astype("int64")),
    }


def _split_validation(
    images: np.ndarray, labels: np.ndarray, val_fraction: float, seed: int
) -> tuple[np.ndarray, ...]:
    counts = np.bincount(labels)
    classes = int((counts > 0).sum())
    n_val = int(np.ceil(val_fraction * len(labels)))
    # Stratify whenever both parts can hold every class; tiny datasets fall back to random.
    can_stratify = counts[counts > 0].min() >= 2 and min(n_val, len(labels) - n_val) >= classes
    stratify = labels if can_stratify else None
    return tuple(
        train_test_split(
            images, labels, test_size=val_fraction, stratify=stratify, random_state=seed
        )
    )


def check_finite(images: np.ndarray, name: str) -> None:
    """A one-line error naming the first image that holds NaN or inf."""
    if np.issubdtype(images.dtype, np.floating):
        bad = np.flatnonzero(~np.isfinite(images.reshape(len(images), -1)).all(axis=1))
        if bad.size:
            raise TapefitError(
                f"{name} holds NaN or inf in {bad.size} images (the first at index {bad[0]}): "
                "clean the data"
            )


def check_fraction(key: str, value: float) -> float:
    """A split fraction strictly between 0 and 1, or a one-line error naming `data.<key>`."""
    if not 0.0 < value < 1.0:
        raise TapefitError(f"data.{key}={value} must lie strictly between 0 and 1")
    return value


def image_data(
    splits: dict[str, Split],
    *,
    batch_size: int,
    seed: int,
    cache: bool = True,
    train_limit: int | None = None,
) -> ImageData:
    """Batched pipelines over `splits` (training reshuffled each epoch from `seed`), optionally
    keeping only the first `train_limit` training samples."""
    if train_limit is not None:
        train = splits["train"]
        splits = {**splits, "train": ImageSplit(*(part[:train_limit] for part in train))}
    x_train = splits["train"].images
    pipelines = {
        name: make_pipeline(arrays, batch_size, shuffle=name == "train", seed=seed, cache=cache)
        for name, arrays in splits.items()
    }
    return ImageData(
        **pipelines,
        image_shape=tuple(int(d) for d in x_train.shape[1:]),
        num_classes=int(max(y.max() for _, y in splits.values())) + 1,
        sizes={name: len(split.labels) for name, split in splits.items()},
        splits=splits,
        seed=seed,
        cache=cache,
    )

"""The image-classifier family: digits, MNIST and image folders -> `Classifier` (CNN or MLP),
cross-entropy, accuracy."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

import keras
from omegaconf import MISSING

from tapefit.choices import parse_choice
from tapefit.data.image_folders import (
    CHANNELS,
    FolderImageData,
    class_folder,
    folder_data,
    split_off,
)
from tapefit.data.images import (
    ImageData,
    check_fraction,
    image_data,
    load_digits_splits,
    load_mnist_splits,
)
from tapefit.errors import TapefitError
from tapefit.families.base import Dataset, Family, register
from tapefit.models.classifier import Architecture, Classifier
from tapefit.training.export import ENDPOINT, write_endpoints
from tapefit.training.outputs import write_json


class ColorMode(str, Enum):
    """Channels images are decoded to (as `image_dataset_from_directory` names them)."""

    grayscale = "grayscale"
    rgb = "rgb"
    rgba = "rgba"


@dataclass
class ImageDataConfig:
    """`data=digits` / `data=mnist`."""

    name: str = MISSING  # set by each conf/data/<name>.yaml
    path: str | None = None  # mnist: a local mnist.npz; null downloads through keras.datasets
    batch_size: int = 32
    val_fraction: float = 0.15
    test_fraction: float = 0.2  # digits only: MNIST ships its own test split
    train_limit: int | None = None  # keep only the first N training samples (quick runs)
    cache: bool = True


@dataclass
class ImageFolderConfig:
    """`data=image_folder`: class-per-subfolder image folders, decoded in the pipeline."""

    name: str = "image_folder"
    train_path: str = MISSING  # a folder with one subfolder of images per class
    validation_path: str | None = None  # null: val_fraction of the training images
    test_path: str | None = None  # null: no test split (no test_* metrics)
    image_size: list[int] = field(default_factory=lambda: [64, 64])  # height, width
    color_mode: ColorMode = ColorMode.rgb
    batch_size: int = 32
    val_fraction: float = 0.15
    cache: bool = False  # true: keep decoded images in memory after the first epoch


@dataclass
class ClassifierConfig:
    """`model=classifier`."""

    name: str = "classifier"
    architecture: Architecture = Architecture.cnn
    dropout: float = 0.5
    # 0.9 rather than Keras' 0.99: small datasets give a few hundred steps, too few for 0.99.
    bn_momentum: float = 0.9
    hidden_units: list[int] = field(default_factory=lambda: [64, 64])


def _pipelines(splits: dict, options: Any, seed: int) -> ImageData:
    return image_data(
        splits,
        batch_size=options.batch_size,
        seed=seed,
        cache=options.cache,
        train_limit=options.train_limit,
    )


def load_digits(options: Any, seed: int) -> ImageData:
    """scikit-learn's bundled digits, split as `options` says."""
    splits = load_digits_splits(options.val_fraction, options.test_fraction, seed)
    return _pipelines(splits, options, seed)


def load_mnist(options: Any, seed: int) -> ImageData:
    """MNIST from keras.datasets or `options.path`."""
    return _pipelines(load_mnist_splits(options.path, options.val_fraction, seed), options, seed)


def load_image_folder(options: Any, seed: int) -> FolderImageData:
    """The training folder's classes and files, validation (a folder or a seeded fraction) and
    an optional test folder; images are decoded by the pipeline."""
    train, classes = class_folder(options.train_path, "train_path")
    if options.validation_path is None:
        train, val = split_off(train, check_fraction("val_fraction", options.val_fraction), seed)
    else:
        val, _ = class_folder(options.validation_path, "validation_path", classes)
    splits = {"train": train, "val": val}
    if options.test_path is not None:
        splits["test"], _ = class_folder(options.test_path, "test_path", classes)
    return folder_data(
        splits,
        classes,
        batch_size=options.batch_size,
        seed=seed,
        size=options.image_size,
        channels=CHANNELS[parse_choice(ColorMode, options.color_mode, "data.color_mode").value],
        cache=options.cache,
    )


def check_image_folder(data: Any) -> None:
    """Image size and, without a validation folder, the split fraction."""
    size = list(data.image_size)
    if len(size) != 2 or min(size) < 1:
        raise TapefitError(
            f"data.image_size={size} must be [height, width], both at least 1, e.g. [64, 64]"
        )
    if data.validation_path is None:
        check_fraction("val_fraction", data.val_fraction)


def check_image_data(data: Any) -> None:
    """Split fractions and the training limit of `data=digits` / `data=mnist`."""
    check_fraction("val_fraction", data.val_fraction)
    check_fraction("test_fraction", data.test_fraction)
    if data.train_limit is not None and data.train_limit < 1:
        raise TapefitError(f"data.train_limit={data.train_limit} must be at least 1 or null")


@register
class ClassifierFamily(Family):
    """Images -> class probabilities, sparse categorical cross-entropy, accuracy."""

    name = "classifier"
    model_schema = ClassifierConfig
    datasets: ClassVar[dict[str, Dataset]] = {
        "digits": Dataset(ImageDataConfig, load_digits, check_image_data),
        "mnist": Dataset(ImageDataConfig, load_mnist, check_image_data),
        "image_folder": Dataset(ImageFolderConfig, load_image_folder, check_image_folder),
    }

    def model(self, cfg: Any, data: ImageData) -> keras.Model:
        return Classifier(
            image_shape=data.image_shape,
            num_classes=data.num_classes,
            architecture=cfg.model.architecture,
            dropout=cfg.model.dropout,
            bn_momentum=cfg.model.bn_momentum,
            hidden_units=list(cfg.model.hidden_units),
            class_names=data.class_names,
        )

    def compile_arguments(self, cfg: Any, data: ImageData) -> dict[str, Any]:
        return {"loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]}

    def check(self, cfg: Any) -> None:
        for key in ("dropout", "bn_momentum"):
            if not 0.0 <= cfg.model[key] < 1.0:
                raise TapefitError(f"model.{key}={cfg.model[key]} must lie in [0, 1)")
        if not cfg.model.hidden_units or min(cfg.model.hidden_units) < 1:
            raise TapefitError(
                f"model.hidden_units={list(cfg.model.hidden_units)} must be positive sizes"
            )

    def logged_metrics(self, cfg: Any, model: keras.Model | None = None) -> list[str]:
        return ["loss", "accuracy"]

    def report(self, model: keras.Model, data: ImageData, run_dir: Path) -> dict[str, Any]:
        """`classes.json`: the class names by output index, when the data have names."""
        if data.class_names is not None:
            write_json(run_dir / "classes.json", data.class_names)
        return {}

    def default_objective(self, cfg: Any) -> str:
        return "val_accuracy"

    def export(self, model: keras.Model, data: ImageData, path: Path) -> None:
        """`serve(images)`: float32 images `(batch, height, width, channels)` in [0, 1], the
        shape the model trained on -> float32 class probabilities `(batch, classes)`."""
        spec = keras.InputSpec(shape=(None, *model.image_shape), dtype="float32")

        def serve(images: Any) -> Any:
            return model(images, training=False)

        write_endpoints(model, path, {ENDPOINT: (serve, [spec])})
